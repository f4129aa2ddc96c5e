/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the ledger on a fake cpuidle tree and a clock the test
 * moves: charged while a state is blocked and only then, to the CPU and its
 * holder's row; no counter read when neither the holder nor the blocked set
 * changes; blocked entries counted (one spared at the start of a newly
 * blocked state); an offline CPU, a state that appears and a counter that
 * begins again lose nothing; rows bounded, the oldest inactive folded;
 * counters kept open once blocked and opened anew when a state or the
 * whole device goes or comes, or a counter stops parsing; no more kept than
 * half the soft descriptor limit allows. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "sys/ledger.h"
#include "unit.h"

static int64_t now;

static int64_t fake_clock(void) {
        return now;
}

static const char *dir;

/* cpuN/cpuidle/stateK/name: what sets its counters. */
static void set_state(unsigned cpu, unsigned k, uint32_t latency, uint64_t usage, uint64_t time) {
        char path[128], text[32];
        snprintf(path, sizeof(path), "devices/system/cpu/cpu%u/cpuidle/state%u/latency", cpu, k);
        snprintf(text, sizeof(text), "%u\n", latency);
        unit_write_file(dir, path, text);
        snprintf(path, sizeof(path), "devices/system/cpu/cpu%u/cpuidle/state%u/usage", cpu, k);
        snprintf(text, sizeof(text), "%llu\n", (unsigned long long) usage);
        unit_write_file(dir, path, text);
        snprintf(path, sizeof(path), "devices/system/cpu/cpu%u/cpuidle/state%u/time", cpu, k);
        snprintf(text, sizeof(text), "%llu\n", (unsigned long long) time);
        unit_write_file(dir, path, text);
}

/* Two CPUs: POLL 0 µs, C1 2 µs, C6 100 µs, counters at 0. */
static void make_tree(Ledger *l) {
        dir = unit_make_memory_dir("ledger");
        for (unsigned cpu = 0; cpu < 2; cpu++) {
                set_state(cpu, 0, 0, 0, 0);
                set_state(cpu, 1, 2, 0, 0);
                set_state(cpu, 2, 100, 0, 0);
        }
        now = 1000;
        ck_assert_int_eq(ledger_init(l, dir, 2, fake_clock), 0);
}

static void done(Ledger *l) {
        ledger_done(l);
        unit_remove_dir(dir);
}

static LedgerHolder holder(LedgerKind kind, uint32_t uid, uint32_t cookie) {
        return (LedgerHolder){ .kind = kind, .uid = uid, .cookie = cookie };
}

static void name_it(LedgerHolder *who, void *userdata) {
        snprintf(who->comm, sizeof(who->comm), "%s", (const char *) userdata);
}

START_TEST(test_charged_while_blocked) {
        Ledger l;
        make_tree(&l);
        LedgerHolder a = holder(LEDGER_REQUEST, 1000, 7);
        ledger_set(&l, 0, 0, &a, name_it, "game"); /* POLL only: C1 and C6 blocked */
        ck_assert_uint_eq(l.cpus[0].blocked, 6);
        ck_assert_uint_eq(l.n_rows, 1);
        ck_assert_str_eq(l.rows[0].who.comm, "game");

        set_state(0, 0, 0, 40, 500); /* 500 µs polled */
        set_state(1, 1, 2, 9, 900);  /* cpu1 is not bound: nothing */
        now += 1000;
        ledger_sample(&l);
        LedgerCost want = { .held = 1000, .shallow_idle = 500, .blocked_entries = 0 };
        ck_assert_mem_eq(&l.cpus[0].cost, &want, sizeof(want));
        ck_assert_mem_eq(&l.rows[0].cost, &want, sizeof(want));
        ck_assert(ledger_verified(&l, 0));
        ck_assert(!ledger_verified(&l, 1));
        ck_assert_uint_eq(l.cpus[1].cost.shallow_idle, 0);
        ck_assert_uint_eq(l.rows[0].n_cpus, 1);

        /* Released: the interval is settled to it, then nothing more. */
        set_state(0, 0, 0, 50, 800);
        now += 500;
        ledger_set(&l, 0, -1, &(LedgerHolder){ .kind = LEDGER_NONE }, NULL, NULL);
        ck_assert_uint_eq(l.rows[0].cost.shallow_idle, 800);
        ck_assert_uint_eq(l.rows[0].cost.held, 1500);
        ck_assert_uint_eq(l.rows[0].n_cpus, 0);
        set_state(0, 0, 0, 60, 2000);
        now += 500;
        ledger_sample(&l);
        ck_assert_uint_eq(l.cpus[0].cost.shallow_idle, 800);
        ck_assert(!ledger_verified(&l, 0));
        done(&l);
}
END_TEST

START_TEST(test_no_reading_unless_something_changes) {
        Ledger l;
        make_tree(&l);
        LedgerHolder a = holder(LEDGER_REQUEST, 0, 1), b = holder(LEDGER_REQUEST, 0, 2);

        /* No bound on a CPU never read: nothing to read. */
        ledger_set(&l, 1, -1, &(LedgerHolder){ .kind = LEDGER_NONE }, NULL, NULL);
        ck_assert_uint_eq(l.n_reads, 0);
        ledger_set(&l, 0, 0, &a, NULL, NULL);
        uint64_t reads = l.n_reads;
        ck_assert_uint_gt(reads, 0);
        ledger_set(&l, 0, 0, &a, NULL, NULL);
        ledger_set(&l, 0, 1, &a, NULL, NULL); /* blocks the same states */
        ck_assert_uint_eq(l.n_reads, reads);
        ledger_set(&l, 0, 1, &b, NULL, NULL); /* another holder */
        ck_assert_uint_eq(l.n_reads, reads + 1);
        ledger_set(&l, 0, 2, &b, NULL, NULL); /* C1 allowed now */
        ck_assert_uint_eq(l.n_reads, reads + 2);
        ck_assert_uint_eq(l.cpus[0].blocked, 4);
        /* A bound with nothing blocked charges nobody, whoever sets it. */
        ledger_set(&l, 0, 100, &a, NULL, NULL);
        ck_assert_uint_eq(l.cpus[0].blocked, 0);
        ck_assert_int_eq(l.cpus[0].row, -1);
        reads = l.n_reads;
        ledger_set(&l, 0, 500, &b, NULL, NULL);
        ck_assert_uint_eq(l.n_reads, reads);
        done(&l);
}
END_TEST

START_TEST(test_blocked_entries) {
        Ledger l;
        make_tree(&l);
        set_state(0, 1, 2, 10, 100);
        LedgerHolder a = holder(LEDGER_REQUEST, 0, 1);
        ledger_set(&l, 0, 0, &a, NULL, NULL);
        /* 3 exits from C1: one of an entry made before the bound came. */
        set_state(0, 1, 2, 13, 130);
        ledger_sample(&l);
        ck_assert_uint_eq(l.cpus[0].cost.blocked_entries, 2);
        ck_assert(!ledger_verified(&l, 0));
        set_state(0, 2, 100, 1, 1000);
        ledger_sample(&l);
        ck_assert_uint_eq(l.cpus[0].cost.blocked_entries, 3);
        ck_assert_uint_eq(l.cpus[0].cost.shallow_idle, 30 + 1000);
        ck_assert_uint_eq(l.rows[0].cost.blocked_entries, 3);
        /* A new blocked set starts verified again. */
        ledger_set(&l, 0, 50, &a, NULL, NULL);
        ck_assert(ledger_verified(&l, 0));
        done(&l);
}
END_TEST

START_TEST(test_nothing_lost) {
        Ledger l;
        make_tree(&l);
        LedgerHolder a = holder(LEDGER_EXTERNAL, LEDGER_UID_UNKNOWN, 0);
        set_state(1, 0, 0, 5, 1000);
        ledger_set(&l, 1, 0, &a, NULL, NULL);

        /* Offline: its cpuidle directory is gone; nothing read, nothing lost. */
        char from[512], to[512];
        snprintf(from, sizeof(from), "%s/devices/system/cpu/cpu1/cpuidle", dir);
        snprintf(to, sizeof(to), "%s/devices/system/cpu/cpu1/gone", dir);
        ck_assert_int_eq(rename(from, to), 0);
        now += 100;
        ledger_sample(&l);
        ck_assert_uint_eq(l.cpus[1].cost.held, 0);
        ck_assert_int_eq(rename(to, from), 0);
        set_state(1, 0, 0, 6, 1400);
        now += 100;
        ledger_sample(&l);
        ck_assert_uint_eq(l.cpus[1].cost.shallow_idle, 400);
        ck_assert_uint_eq(l.cpus[1].cost.held, 200);

        /* A state appearing counts whole; a counter lower than before began again at 0. */
        set_state(1, 3, 300, 2, 70);
        ledger_sample(&l);
        ck_assert_uint_eq(l.cpus[1].cost.shallow_idle, 470);
        ck_assert_uint_eq(l.cpus[1].cost.blocked_entries, 2);
        set_state(1, 0, 0, 1, 30);
        ledger_sample(&l);
        ck_assert_uint_eq(l.cpus[1].cost.shallow_idle, 500);
        /* A CPU out of range is no CPU. */
        ledger_set(&l, 99, 0, &a, NULL, NULL);
        done(&l);
}
END_TEST

START_TEST(test_rows_bounded) {
        Ledger l;
        make_tree(&l);
        uint64_t idle = 0;
        for (uint32_t i = 0; i < 2 * LEDGER_ROWS_MAX; i++) {
                LedgerHolder h = holder(LEDGER_REQUEST, i, i + 1);
                ledger_set(&l, 0, 0, &h, NULL, NULL);
                idle += 10;
                set_state(0, 0, 0, i + 1, idle); /* the kernel adds to usage and time together */
                now += 10;
        }
        ledger_set(&l, 0, -1, &(LedgerHolder){ .kind = LEDGER_NONE }, NULL, NULL);
        ck_assert_uint_eq(l.n_rows, LEDGER_ROWS_MAX);
        uint64_t sum = 0, held = 0;
        unsigned others = 0, active = 0;
        for (unsigned i = 0; i < l.n_rows; i++) {
                sum += l.rows[i].cost.shallow_idle;
                held += l.rows[i].cost.held;
                others += l.rows[i].who.kind == LEDGER_OTHER;
                active += l.rows[i].n_cpus > 0;
        }
        ck_assert_uint_eq(others, 1);
        ck_assert_uint_eq(active, 0);
        ck_assert_uint_eq(sum, l.cpus[0].cost.shallow_idle);
        ck_assert_uint_eq(sum, idle);
        ck_assert_uint_eq(held, l.cpus[0].cost.held);
        ck_assert_str_eq(ledger_kind_name(LEDGER_OTHER), "other");
        ck_assert_str_eq(ledger_kind_name(LEDGER_BATTERY_FLOOR), "battery-floor");
        done(&l);
}
END_TEST

/* cpuN/cpuidle/stateK removed (files and directory), or the whole cpuidle
 * directory with k = -1: what the kernel's removal of a device looks like
 * in a fake tree, where a kept descriptor still reads the old file. */
static void remove_state(unsigned cpu, int k) {
        char path[512];
        if (k < 0)
                snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%u/cpuidle", dir, cpu);
        else
                snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%u/cpuidle/state%d", dir, cpu, k);
        unit_remove_dir(path);
}

START_TEST(test_kept_descriptors) {
        Ledger l;
        make_tree(&l);
        LedgerHolder a = holder(LEDGER_REQUEST, 0, 1);
        ledger_set(&l, 0, 0, &a, NULL, NULL);
        ck_assert_uint_eq(l.n_fds, 1 + 2 * 3); /* the directory, usage and time of 3 states */
        set_state(0, 0, 0, 3, 300);
        ledger_sample(&l);
        ck_assert_uint_eq(l.cpus[0].cost.shallow_idle, 300);
        /* Nothing blocked any more: nothing to sample, but the counters stay
         * open for the next bound (the reviewer's Request(0)/Cancel loop
         * reopened 3,072 files each time on 512 CPUs). */
        ledger_set(&l, 0, 100, &a, NULL, NULL);
        ck_assert_uint_eq(l.n_fds, 1 + 2 * 3);
        /* The next bound is read through them: a file changed in place is
         * seen, and a file replaced (a new inode) is not, which proves it. */
        set_state(0, 0, 0, 4, 350);
        int kept = l.cpus[0].fds.usage[0];
        ledger_set(&l, 0, 0, &a, NULL, NULL);
        ck_assert_int_eq(l.cpus[0].fds.usage[0], kept);
        ck_assert_uint_eq(l.cpus[0].last.time[0], 350);
        ck_assert_uint_eq(l.cpus[0].cost.shallow_idle, 300); /* the unbound 50 µs are nobody's */
        /* A CPU read only for its latencies (nothing ever blocked) keeps none. */
        ledger_set(&l, 1, 500, &a, NULL, NULL);
        ck_assert(l.cpus[1].known);
        ck_assert_uint_eq(l.n_fds, 1 + 2 * 3);
        ledger_set(&l, 1, 400, &a, NULL, NULL);
        ck_assert_uint_eq(l.n_fds, 1 + 2 * 3);
        /* Nothing blocked for LEDGER_KEEP_USEC: closed at the next bound
         * change that reaches the CPU (a quiet machine gives them back). */
        ledger_set(&l, 0, 100, &a, NULL, NULL);
        now += LEDGER_KEEP_USEC / 2;
        ledger_set(&l, 0, 100, &a, NULL, NULL);
        ck_assert_uint_eq(l.n_fds, 1 + 2 * 3);
        now += LEDGER_KEEP_USEC;
        ledger_set(&l, 0, 100, &a, NULL, NULL);
        ck_assert_uint_eq(l.n_fds, 0);
        done(&l);
}
END_TEST

START_TEST(test_state_removed_mid_interval) {
        Ledger l;
        make_tree(&l);
        LedgerHolder a = holder(LEDGER_REQUEST, 0, 1);
        ledger_set(&l, 0, 0, &a, NULL, NULL); /* C1 and C6 blocked */
        set_state(0, 0, 0, 1, 100);
        remove_state(0, 2); /* C6 goes, its descriptors still open */
        now += 100;
        ledger_sample(&l);
        ck_assert_uint_eq(l.cpus[0].last.n, 2);
        ck_assert_uint_eq(l.cpus[0].blocked, 2);
        ck_assert_uint_eq(l.cpus[0].cost.shallow_idle, 100);
        ck_assert_uint_eq(l.n_fds, 1 + 2 * 2);
        /* Read through the descriptors opened anew. */
        set_state(0, 1, 2, 4, 150);
        ledger_sample(&l);
        ck_assert_uint_eq(l.cpus[0].cost.blocked_entries, 4);
        ck_assert_uint_eq(l.cpus[0].cost.shallow_idle, 250);
        /* It comes back: counted whole, blocked as its latency says. */
        set_state(0, 2, 100, 2, 50);
        ledger_sample(&l);
        ck_assert_uint_eq(l.cpus[0].cost.shallow_idle, 300);
        ck_assert_uint_eq(l.cpus[0].cost.blocked_entries, 6);
        ck_assert_uint_eq(l.cpus[0].blocked, 6);
        ck_assert_uint_eq(l.n_fds, 1 + 2 * 3);
        done(&l);
}
END_TEST

START_TEST(test_device_removed_and_back) {
        Ledger l;
        make_tree(&l);
        LedgerHolder a = holder(LEDGER_REQUEST, 0, 1);
        set_state(1, 0, 0, 9, 900);
        ledger_set(&l, 1, 0, &a, NULL, NULL);
        /* Offline, its cpuidle device removed: nothing read through the old descriptors. */
        set_state(1, 0, 0, 10, 1000);
        remove_state(1, -1);
        now += 100;
        ledger_sample(&l);
        ck_assert_uint_eq(l.cpus[1].cost.held, 0);
        ck_assert_uint_eq(l.cpus[1].cost.shallow_idle, 0);
        ck_assert_uint_eq(l.n_fds, 0);
        /* Online with a new device: its counters began again at 0. */
        set_state(1, 0, 0, 2, 40);
        set_state(1, 1, 2, 0, 0);
        set_state(1, 2, 100, 0, 0);
        now += 100;
        ledger_sample(&l);
        ck_assert_uint_eq(l.cpus[1].cost.held, 200);
        ck_assert_uint_eq(l.cpus[1].cost.shallow_idle, 40);
        ck_assert_uint_eq(l.n_fds, 1 + 2 * 3);
        /* A counter that no longer parses ends the list there, as by path. */
        unit_write_file(dir, "devices/system/cpu/cpu1/cpuidle/state1/usage", "junk\n");
        ledger_sample(&l);
        ck_assert_uint_eq(l.cpus[1].last.n, 1);
        ck_assert_uint_eq(l.n_fds, 1 + 2 * 1);
        done(&l);
}
END_TEST

START_TEST(test_descriptors_bounded) {
        Ledger l;
        make_tree(&l);
        struct rlimit was, low;
        ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &was), 0);
        /* Half of 24 is room for one CPU's 7, not two. */
        low = (struct rlimit){ .rlim_cur = 24, .rlim_max = was.rlim_max };
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
        LedgerHolder a = holder(LEDGER_REQUEST, 0, 1);
        ledger_set(&l, 0, 0, &a, NULL, NULL);
        ledger_set(&l, 1, 0, &a, NULL, NULL);
        ck_assert_uint_eq(l.n_fds, 7);
        ck_assert_int_lt(l.cpus[1].fds.dir, 0);
        /* The CPU without room is read by path, as well. */
        set_state(0, 0, 0, 1, 100);
        set_state(1, 0, 0, 1, 200);
        ledger_sample(&l);
        ck_assert_uint_eq(l.cpus[0].cost.shallow_idle, 100);
        ck_assert_uint_eq(l.cpus[1].cost.shallow_idle, 200);
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &was), 0);
        done(&l);
}

/* The reviewer's 70 short holds of one uid, each its own program: they
 * fold into that uid's own "other" row (uid kept) and root's earlier row
 * stays, with its cost (before, the common fold took root's row first). */
START_TEST(test_one_uid_cannot_evict_another) {
        Ledger l;
        make_tree(&l);
        uint64_t idle = 0;
        for (uint32_t i = 0; i <= 70; i++) {
                char comm[16];
                snprintf(comm, sizeof(comm), i == 0 ? "root-prog" : "c%02u", (unsigned) i - 1);
                LedgerHolder h = holder(LEDGER_REQUEST, i == 0 ? 0 : 995, i + 1);
                ledger_set(&l, 0, 0, &h, name_it, comm);
                idle += 10;
                set_state(0, 0, 0, i + 1, idle); /* the kernel adds to usage and time together */
                now += 10;
        }
        ledger_set(&l, 0, -1, &(LedgerHolder){ .kind = LEDGER_NONE }, NULL, NULL);
        unsigned roots = 0, mine = 0, my_others = 0;
        uint64_t sum = 0;
        for (unsigned i = 0; i < l.n_rows; i++) {
                const LedgerRow *w = &l.rows[i];
                sum += w->cost.shallow_idle;
                if (w->who.uid == 0 && w->who.kind == LEDGER_REQUEST && strcmp(w->who.comm, "root-prog") == 0) {
                        roots++;
                        ck_assert_uint_eq(w->cost.shallow_idle, 10);
                }
                mine += w->who.uid == 995;
                my_others += w->who.uid == 995 && w->who.kind == LEDGER_OTHER;
        }
        ck_assert_uint_eq(roots, 1);
        ck_assert_uint_eq(mine, LEDGER_ROWS_PER_UID);
        ck_assert_uint_eq(my_others, 1);
        ck_assert_uint_le(l.n_rows, LEDGER_ROWS_MAX);
        ck_assert_uint_eq(sum, idle);
        done(&l);
}
END_TEST

/* n CPUs of one state each (C1, 2 µs), counters at 0: enough CPUs for
 * every row to bind one at once. */
static void make_wide_tree(Ledger *l, unsigned n) {
        dir = unit_make_memory_dir("ledger-wide");
        for (unsigned cpu = 0; cpu < n; cpu++)
                set_state(cpu, 0, 2, 0, 0);
        now = 1000;
        ck_assert_int_eq(ledger_init(l, dir, n, fake_clock), 0);
}

/* Rows' sums against the CPUs' (shallow idle), and how many rows uid has. */
static void check_rows(const Ledger *l, uint32_t uid, unsigned *of_uid) {
        uint64_t rows = 0, cpus = 0;
        unsigned mine = 0, bound = 0;
        for (unsigned i = 0; i < l->n_rows; i++) {
                rows += l->rows[i].cost.shallow_idle;
                mine += l->rows[i].who.uid == uid;
                bound += l->rows[i].n_cpus;
        }
        for (uint32_t cpu = 0; cpu < l->n; cpu++) {
                cpus += l->cpus[cpu].cost.shallow_idle;
                bound -= l->cpus[cpu].row >= 0;
        }
        ck_assert_uint_eq(rows, cpus);
        ck_assert_uint_eq(bound, 0); /* each row counts exactly the CPUs that charge it */
        *of_uid = mine;
}

/* The reviewer's finding: 70 programs of one uid, each holding its own
 * CPU at once (no row inactive), got 47 rows and pushed out everyone
 * else's. Now it keeps to its share; root's row stays, with its cost. */
START_TEST(test_share_holds_when_every_row_binds) {
        Ledger l;
        make_wide_tree(&l, 80);
        LedgerHolder r = holder(LEDGER_REQUEST, 0, 1);
        ledger_set(&l, 79, 0, &r, name_it, "root-prog");
        for (uint32_t i = 0; i < 70; i++) {
                char comm[16];
                snprintf(comm, sizeof(comm), "g%02u", (unsigned) i);
                LedgerHolder h = holder(LEDGER_REQUEST, 6, 100 + i);
                ledger_set(&l, i, 0, &h, name_it, comm);
        }
        for (uint32_t cpu = 0; cpu < 80; cpu++)
                set_state(cpu, 0, 2, 1, 10 + cpu);
        now += 100;
        ledger_sample(&l);
        unsigned mine = 0;
        check_rows(&l, 6, &mine);
        ck_assert_uint_le(mine, LEDGER_ROWS_PER_UID);
        int root = -1;
        for (unsigned i = 0; i < l.n_rows; i++)
                if (l.rows[i].who.uid == 0 && strcmp(l.rows[i].who.comm, "root-prog") == 0)
                        root = (int) i;
        ck_assert_int_ge(root, 0);
        ck_assert_uint_eq(l.rows[root].cost.shallow_idle, 10 + 79);
        done(&l);
}
END_TEST

/* The reviewer's other finding: with all 64 rows binding a CPU, a new
 * holder took row 0 over and its cost was lost (rows 12 against CPUs'
 * 1012). Now a row becomes "other" whole, and the sums add up. */
START_TEST(test_full_table_keeps_the_sums) {
        Ledger l;
        make_wide_tree(&l, LEDGER_ROWS_MAX + 1);
        for (uint32_t i = 0; i < LEDGER_ROWS_MAX; i++) {
                char comm[16];
                snprintf(comm, sizeof(comm), "p%02u", (unsigned) i);
                LedgerHolder h = holder(LEDGER_REQUEST, 1000 + i / LEDGER_ROWS_PER_UID, 100 + i);
                ledger_set(&l, i, 0, &h, name_it, comm);
        }
        ck_assert_uint_eq(l.n_rows, LEDGER_ROWS_MAX);
        set_state(0, 0, 2, 1, 1000);
        now += 100;
        ledger_sample(&l);
        LedgerHolder late = holder(LEDGER_REQUEST, 0, 9);
        ledger_set(&l, LEDGER_ROWS_MAX, 0, &late, name_it, "late");
        set_state(LEDGER_ROWS_MAX, 0, 2, 1, 7);
        now += 100;
        ledger_sample(&l);
        unsigned mine = 0, others = 0;
        check_rows(&l, 0, &mine);
        for (unsigned i = 0; i < l.n_rows; i++)
                others += l.rows[i].who.kind == LEDGER_OTHER;
        ck_assert_uint_eq(others, 1);
        ck_assert_uint_eq(l.n_rows, LEDGER_ROWS_MAX);
        done(&l);
}
END_TEST

/* The reviewer's: a CPU whose blocked states all went (moved away) kept
 * its row active for ever, and status said its holder "binds now". */
START_TEST(test_states_gone_leave_the_row) {
        Ledger l;
        make_tree(&l);
        LedgerHolder a = holder(LEDGER_REQUEST, 1000, 7);
        ledger_set(&l, 0, 0, &a, name_it, "gamma"); /* C1 and C6 blocked */
        ck_assert_uint_eq(l.rows[0].n_cpus, 1);
        remove_state(0, 2);
        remove_state(0, 1);
        now += 100;
        ledger_sample(&l);
        ck_assert_uint_eq(l.cpus[0].blocked, 0);
        ck_assert_int_eq(l.cpus[0].row, -1);
        ck_assert_uint_eq(l.rows[0].n_cpus, 0);
        ck_assert_uint_eq(l.rows[0].last_usec, (uint64_t) now);
        /* Released afterwards: nothing counted twice. */
        ledger_set(&l, 0, -1, &(LedgerHolder){ .kind = LEDGER_NONE }, NULL, NULL);
        ck_assert_uint_eq(l.rows[0].n_cpus, 0);
        done(&l);
}
END_TEST

/* The second review's: a CPU whose blocked states went and came back (an
 * ACPI _CST change) was never read again while its bound stayed; now the
 * directory's change is seen at the next bound change, without a counter
 * read while it has not moved. */
START_TEST(test_states_back_charged_again) {
        Ledger l;
        make_tree(&l);
        LedgerHolder a = holder(LEDGER_REQUEST, 1000, 7);
        ledger_set(&l, 0, 50, &a, name_it, "x"); /* C6 only: blocked 4 */
        ck_assert_uint_eq(l.cpus[0].blocked, 4);
        remove_state(0, 2);
        now += 100;
        ledger_sample(&l);
        ck_assert_uint_eq(l.cpus[0].blocked, 0);
        uint64_t reads = l.n_reads;
        ledger_set(&l, 0, 50, &a, name_it, "x"); /* nothing moved: nothing read */
        ck_assert_uint_eq(l.n_reads, reads);
        set_state(0, 2, 100, 0, 0); /* back */
        ledger_set(&l, 0, 50, &a, name_it, "x");
        ck_assert_uint_eq(l.cpus[0].blocked, 4);
        ck_assert_int_ge(l.cpus[0].row, 0);
        ck_assert_uint_eq(l.rows[l.cpus[0].row].n_cpus, 1);
        set_state(0, 0, 0, 10, 700);
        now += 100;
        ledger_sample(&l);
        ck_assert_uint_eq(l.cpus[0].cost.shallow_idle, 700);
        done(&l);
}
END_TEST

/* The second review's: a CPU charged to an "other" row was read at every
 * bound change (its row named no holder to compare with). */
START_TEST(test_other_row_not_read_again) {
        Ledger l;
        make_wide_tree(&l, LEDGER_ROWS_MAX + 1);
        static char names[LEDGER_ROWS_MAX][LEDGER_COMM_MAX];
        for (uint32_t i = 0; i < LEDGER_ROWS_MAX; i++) {
                snprintf(names[i], sizeof(names[i]), "p%02u", (unsigned) i);
                LedgerHolder h = holder(LEDGER_REQUEST, 1000 + i / LEDGER_ROWS_PER_UID, 100 + i);
                ledger_set(&l, i, 0, &h, name_it, names[i]);
        }
        LedgerHolder late = holder(LEDGER_REQUEST, 0, 9);
        ledger_set(&l, LEDGER_ROWS_MAX, 0, &late, name_it, "late");
        uint64_t reads = l.n_reads;
        ledger_set(&l, LEDGER_ROWS_MAX, 0, &late, name_it, "late");
        for (uint32_t i = 0; i < LEDGER_ROWS_MAX; i++) {
                LedgerHolder h = holder(LEDGER_REQUEST, 1000 + i / LEDGER_ROWS_PER_UID, 100 + i);
                ledger_set(&l, i, 0, &h, name_it, names[i]);
        }
        ck_assert_uint_eq(l.n_reads, reads);
        /* The same states blocked by another bound: the bound is kept, and a
         * state that appears is judged by it (C1 at 2 µs is not blocked by 5). */
        ledger_set(&l, LEDGER_ROWS_MAX, 1, &late, name_it, "late");
        ck_assert_int_eq(l.cpus[LEDGER_ROWS_MAX].bound, 1);
        done(&l);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("ledger");
        TCase *tc = tcase_create("ledger");
        tcase_add_test(tc, test_charged_while_blocked);
        tcase_add_test(tc, test_no_reading_unless_something_changes);
        tcase_add_test(tc, test_blocked_entries);
        tcase_add_test(tc, test_nothing_lost);
        tcase_add_test(tc, test_rows_bounded);
        tcase_add_test(tc, test_kept_descriptors);
        tcase_add_test(tc, test_state_removed_mid_interval);
        tcase_add_test(tc, test_device_removed_and_back);
        tcase_add_test(tc, test_descriptors_bounded);
        tcase_add_test(tc, test_one_uid_cannot_evict_another);
        tcase_add_test(tc, test_share_holds_when_every_row_binds);
        tcase_add_test(tc, test_full_table_keeps_the_sums);
        tcase_add_test(tc, test_states_gone_leave_the_row);
        tcase_add_test(tc, test_states_back_charged_again);
        tcase_add_test(tc, test_other_row_not_read_again);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        return unit_run(suite(), CK_FORK_GETENV);
}
