/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The ledger driven at random (a review's harness, kept): bounds and
 * holders set on CPUs (four uids, an external holder, nobody), counters
 * growing, states and whole cpuidle directories removed and restored, the
 * clock moving (past LEDGER_KEEP_USEC at times), samples. After every step:
 * each row counts exactly the CPUs charged to it, a charged CPU has a state
 * blocked, the rows add up to what the CPUs were charged while charged to a
 * row, no known uid has more than its share of rows, the descriptors kept
 * are what the ledger counts and none for a CPU never blocked, a bound
 * change that changes neither holder nor blocked set reads no counter
 * (unless the CPU's states were short and its directory moved), and a CPU
 * whose states came back is bound again at the next bound change.
 * LEDGER_RANDOM_SEEDS and LEDGER_RANDOM_STEPS make it longer. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sys/ledger.h"
#include "unit.h"

#define CPUS 48u
#define STATES 3u

static int64_t now;
static const char *dir;
static uint64_t rng;

static int64_t fake_clock(void) {
        return now;
}

static uint32_t rnd(uint32_t n) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return (uint32_t) (rng % n);
}

/* What the test knows of each CPU's tree. */
static struct {
        bool present[STATES], dir_present, ever_blocked, moved;
        uint32_t latency[STATES];
        uint64_t usage[STATES], time[STATES];
} m[CPUS];

static void write_state(unsigned cpu, unsigned k) {
        static const char *const names[] = { "latency", "usage", "time" };
        uint64_t v[] = { m[cpu].latency[k], m[cpu].usage[k], m[cpu].time[k] };
        char path[128], text[32];
        for (unsigned f = 0; f < 3; f++) {
                snprintf(path, sizeof(path), "devices/system/cpu/cpu%u/cpuidle/state%u/%s", cpu, k, names[f]);
                snprintf(text, sizeof(text), "%llu\n", (unsigned long long) v[f]);
                unit_write_file(dir, path, text);
        }
        m[cpu].present[k] = m[cpu].dir_present = m[cpu].moved = true;
}

static void remove_state(unsigned cpu, int k) {
        char path[512];
        if (k < 0)
                snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%u/cpuidle", dir, cpu);
        else
                snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%u/cpuidle/state%d", dir, cpu, k);
        unit_remove_dir(path);
        for (unsigned j = 0; j < STATES; j++)
                if (k < 0 || (unsigned) k == j)
                        m[cpu].present[j] = false;
        m[cpu].dir_present = k >= 0;
        m[cpu].moved = true;
}

static char comms[6][16][LEDGER_COMM_MAX];
static const uint32_t uids[6] = { 0, 1000, 1001, 1002, 65534, LEDGER_UID_UNKNOWN };

static void name_it(LedgerHolder *who, void *userdata) {
        snprintf(who->comm, sizeof(who->comm), "%s", (const char *) userdata);
}

static void set_bound(Ledger *l, uint32_t cpu) {
        static const int32_t bounds[] = { -1, 0, 1, 2, 50, 100, 500 };
        static int32_t last_bound[CPUS];
        static LedgerHolder last_who[CPUS];
        LedgerCpu *e = &l->cpus[cpu];
        int32_t bound = last_bound[cpu];
        LedgerHolder h = last_who[cpu];
        unsigned u = rnd(6), c = rnd(16);
        if (rnd(2) == 0 || (h.kind == LEDGER_NONE && bound == 0)) {
                bound = bounds[rnd(7)];
                h = (LedgerHolder){ .kind = uids[u] == LEDGER_UID_UNKNOWN ? LEDGER_EXTERNAL : LEDGER_REQUEST,
                                    .uid = uids[u],
                                    .cookie = 100 + c };
                if (rnd(10) == 0)
                        h = (LedgerHolder){ .kind = LEDGER_NONE };
        }
        bool known = e->known, short_moved = ledger_states_short(l, cpu) && m[cpu].moved;
        uint32_t blocked = known ? ledger_blocked(&e->last, bound) : 0;
        bool charged = blocked && h.kind != LEDGER_NONE;
        bool same = e->row >= 0 ? charged && e->kind == h.kind && e->uid == h.uid && e->cookie == h.cookie : !charged;
        uint64_t reads = l->n_reads;
        uint32_t was_blocked = e->blocked;
        ledger_set(l, cpu, bound, &h, name_it, comms[u][c]);
        if (known && same && blocked == was_blocked && !short_moved)
                ck_assert_uint_eq(l->n_reads, reads);
        if (l->n_reads != reads)
                m[cpu].moved = false;
        bool whole = m[cpu].dir_present;
        for (unsigned k = 0; k < STATES; k++)
                whole = whole && m[cpu].present[k];
        if (whole && bound >= 0 && m[cpu].latency[STATES - 1] > (uint32_t) bound && h.kind != LEDGER_NONE) {
                ck_assert_uint_ne(e->blocked, 0); /* states back: bound again */
                ck_assert_int_ge(e->row, 0);
        }
        last_bound[cpu] = bound;
        last_who[cpu] = h;
}

static void step(Ledger *l) {
        uint32_t op = rnd(100), cpu = rnd(CPUS), k = rnd(STATES);
        if (op < 50)
                set_bound(l, cpu);
        else if (op < 75 && m[cpu].present[k]) {
                uint64_t du = 1 + rnd(5);
                bool moved = m[cpu].moved;
                m[cpu].usage[k] += du;
                m[cpu].time[k] += du * (1 + rnd(300)); /* the kernel adds to both together */
                write_state(cpu, k);
                m[cpu].moved = moved; /* a counter written in place moves no directory */
        } else if (op < 82 && m[cpu].dir_present)
                remove_state(cpu, rnd(8) == 0 ? -1 : (int) k);
        else if (op < 88) {
                bool reset = rnd(2) == 0 || !m[cpu].dir_present;
                for (unsigned j = 0; j < STATES; j++)
                        if (!m[cpu].present[j]) {
                                if (reset)
                                        m[cpu].usage[j] = m[cpu].time[j] = 0;
                                write_state(cpu, j);
                        }
        } else if (op < 97)
                now += rnd(10) == 0 ? 5000000 + rnd(10000000) : 1 + rnd(1000);
        else {
                ledger_sample(l);
                for (unsigned c = 0; c < CPUS; c++)
                        if (l->cpus[c].known && l->cpus[c].blocked)
                                m[c].moved = false;
        }
}

static void check(const Ledger *l, LedgerCost *attributed, const LedgerCost before[], const int rows_before[]) {
        LedgerCost rows = {};
        unsigned kept = 0;
        for (unsigned c = 0; c < CPUS; c++) {
                const LedgerCpu *e = &l->cpus[c];
                if (rows_before[c] >= 0) {
                        attributed->held += e->cost.held - before[c].held;
                        attributed->shallow_idle += e->cost.shallow_idle - before[c].shallow_idle;
                        attributed->blocked_entries += e->cost.blocked_entries - before[c].blocked_entries;
                }
                if (e->row >= 0)
                        ck_assert_uint_ne(e->blocked, 0);
                m[c].ever_blocked |= e->blocked != 0;
                if (!m[c].ever_blocked)
                        ck_assert_int_lt(e->fds.dir, 0);
                kept += e->fds.dir >= 0 ? 1 + 2 * e->fds.n : 0;
        }
        ck_assert_uint_eq(kept, l->n_fds);
        ck_assert_uint_le(l->n_rows, LEDGER_ROWS_MAX);
        for (unsigned i = 0; i < l->n_rows; i++) {
                unsigned charged = 0, of_uid = 0;
                for (unsigned c = 0; c < CPUS; c++)
                        charged += l->cpus[c].row == (int) i;
                ck_assert_uint_eq(charged, l->rows[i].n_cpus);
                for (unsigned j = 0; j < l->n_rows; j++)
                        of_uid += l->rows[j].who.uid == l->rows[i].who.uid;
                if (l->rows[i].who.uid != LEDGER_UID_UNKNOWN)
                        ck_assert_uint_le(of_uid, LEDGER_ROWS_PER_UID);
                rows.held += l->rows[i].cost.held;
                rows.shallow_idle += l->rows[i].cost.shallow_idle;
                rows.blocked_entries += l->rows[i].cost.blocked_entries;
        }
        ck_assert_uint_eq(rows.held, attributed->held);
        ck_assert_uint_eq(rows.shallow_idle, attributed->shallow_idle);
        ck_assert_uint_eq(rows.blocked_entries, attributed->blocked_entries);
}

static void run_seed(unsigned seed, unsigned steps) {
        static const uint32_t shallow[] = { 1, 2, 10 }, deep[] = { 100, 200, 600 };
        rng = 0x9E3779B97F4A7C15ull * seed + 1;
        dir = unit_make_memory_dir("ledger-random");
        memset(m, 0, sizeof(m));
        for (unsigned cpu = 0; cpu < CPUS; cpu++) {
                m[cpu].latency[1] = shallow[rnd(3)];
                m[cpu].latency[2] = deep[rnd(3)];
                for (unsigned k = 0; k < STATES; k++)
                        write_state(cpu, k);
        }
        Ledger l;
        now = 1000;
        ck_assert_int_eq(ledger_init(&l, dir, CPUS, fake_clock), 0);
        LedgerCost attributed = {}, before[CPUS];
        int rows_before[CPUS];
        for (unsigned i = 0; i < steps; i++) {
                for (unsigned c = 0; c < CPUS; c++) {
                        before[c] = l.cpus[c].cost;
                        rows_before[c] = l.cpus[c].row;
                }
                step(&l);
                check(&l, &attributed, before, rows_before);
        }
        ledger_done(&l);
        unit_remove_dir(dir);
}

START_TEST(test_random_invariants) {
        const char *seeds = getenv("LEDGER_RANDOM_SEEDS"), *steps = getenv("LEDGER_RANDOM_STEPS");
        for (unsigned u = 0; u < 6; u++)
                for (unsigned c = 0; c < 16; c++)
                        snprintf(comms[u][c], LEDGER_COMM_MAX, "u%uc%u", u, c);
        unsigned n = seeds ? (unsigned) atoi(seeds) : 5;
        for (unsigned seed = 1; seed <= n; seed++)
                run_seed(seed, steps ? (unsigned) atoi(steps) : 1000);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("ledger-random");
        TCase *tc = tcase_create("ledger-random");
        tcase_set_timeout(tc, 600);
        tcase_add_test(tc, test_random_invariants);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        return unit_run(suite(), CK_FORK_GETENV);
}
