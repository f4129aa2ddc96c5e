/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ledger.h: intervals per CPU settled from two readings of its counters,
 * charged to the CPU and to its holder's row. */

#include "sys/ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/clock.h"

static const char *const kind_names[_LEDGER_KIND_MAX] = {
        [LEDGER_NONE] = "none",   [LEDGER_REQUEST] = "request",
        [LEDGER_FLOOR] = "floor", [LEDGER_BATTERY_FLOOR] = "battery-floor",
        [LEDGER_RULE] = "rule",   [LEDGER_EXTERNAL] = "external",
        [LEDGER_OTHER] = "other",
};

const char *ledger_kind_name(LedgerKind k) {
        return k < _LEDGER_KIND_MAX ? kind_names[k] : "none";
}

int ledger_init(Ledger *l, const char *sysfs_root, uint32_t n, int64_t (*clock)(void)) {
        *l = (Ledger){ .clock = clock ? clock : now_monotonic_usec, .n = n };
        l->sysfs_root = strdup(sysfs_root);
        l->cpus = calloc(n > 0 ? n : 1, sizeof(LedgerCpu));
        if (!l->sysfs_root || !l->cpus) {
                ledger_done(l);
                return -ENOMEM;
        }
        for (uint32_t cpu = 0; cpu < n; cpu++)
                l->cpus[cpu] = (LedgerCpu){ .row = -1, .bound = -1, .file_bound = -1, .fds.dir = -1 };
        return 0;
}

static void close_fds(LedgerFds *f);

void ledger_done(Ledger *l) {
        for (uint32_t cpu = 0; l->cpus && cpu < l->n; cpu++)
                close_fds(&l->cpus[cpu].fds);
        free(l->sysfs_root);
        free(l->cpus);
        *l = (Ledger){};
}

/* ---- reading ---- */

static int read_u64_at(int dir, const char *name, uint64_t *ret) {
        char buf[32];
        int r = sysfs_read_at(dir, name, buf, sizeof(buf));
        return r < 0 ? r : cpuidle_parse_u64(buf, ret);
}

static int read_u64_fd(int fd, uint64_t *ret) {
        char buf[32];
        int r = sysfs_read_fd(fd, buf, sizeof(buf));
        return r < 0 ? r : cpuidle_parse_u64(buf, ret);
}

/* What moves when a state directory comes or goes, or the directory itself
 * is removed or renamed (tmpfs and sysfs alike: a directory's link count is
 * 2 + its subdirectories). */
static int stamp_of(int dir, uint64_t ret[5]) {
        struct stat st;
        if (fstat(dir, &st) < 0)
                return -errno;
        ret[0] = (uint64_t) st.st_nlink;
        ret[1] = (uint64_t) st.st_mtim.tv_sec;
        ret[2] = (uint64_t) st.st_mtim.tv_nsec;
        ret[3] = (uint64_t) st.st_ctim.tv_sec;
        ret[4] = (uint64_t) st.st_ctim.tv_nsec;
        return 0;
}

static void close_fds(LedgerFds *f) {
        for (unsigned k = 0; k < f->n; k++) {
                close(f->usage[k]);
                close(f->time[k]);
        }
        if (f->dir >= 0)
                close(f->dir);
        *f = (LedgerFds){ .dir = -1 };
}

/* O_NOATIME where we may (the file's owner, or root): a fake tree in
 * tmpfs would else write its access time at every reading. */
static int open_counter(int dir, const char *name) {
        int fd = openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOATIME);
        return fd < 0 && errno == EPERM ? openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOCTTY) : fd;
}

/* State k's counters under idle into ret, its usage and time left open in
 * f: 0, or negative when it is missing or unreadable (the list ends). */
static int open_state(int idle, unsigned k, LedgerCounters *ret, LedgerFds *f) {
        char name[16];
        uint64_t latency;
        snprintf(name, sizeof(name), "state%u", k);
        int dir = openat(idle, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0)
                return -errno;
        int r = read_u64_at(dir, "latency", &latency);
        int usage = open_counter(dir, "usage"), time = open_counter(dir, "time");
        close(dir);
        if (r >= 0)
                r = usage < 0 || time < 0 ? -ENOENT : read_u64_fd(usage, &ret->usage[k]);
        if (r >= 0)
                r = read_u64_fd(time, &ret->time[k]);
        if (r < 0) {
                if (usage >= 0)
                        close(usage);
                if (time >= 0)
                        close(time);
                return r;
        }
        ret->latency[k] = latency > UINT32_MAX ? UINT32_MAX : (uint32_t) latency;
        f->usage[k] = usage;
        f->time[k] = time;
        f->n = ret->n = k + 1;
        return 0;
}

/* Reads cpu's counters by path; their descriptors go to keep when it is
 * given and room enough (else they are closed). The descriptors kept. */
static unsigned read_by_path(const char *sysfs_root, uint32_t cpu, LedgerCounters *ret, LedgerFds *keep,
                             unsigned room) {
        char path[512];
        LedgerFds f = { .dir = -1 };
        ret->n = 0;
        snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%u/cpuidle", sysfs_root, (unsigned) cpu);
        f.dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (f.dir < 0)
                return 0;
        /* Stamped before the states are listed: one that comes after moves it. */
        bool stamped = keep && stamp_of(f.dir, f.stamp) >= 0;
        for (unsigned k = 0; k < CPUIDLE_STATES_MAX; k++)
                if (open_state(f.dir, k, ret, &f) < 0)
                        break;
        unsigned used = 1 + 2 * f.n;
        if (!stamped || f.n == 0 || used > room) {
                close_fds(&f);
                return 0;
        }
        *keep = f;
        return used;
}

int ledger_read_counters(const char *sysfs_root, uint32_t cpu, LedgerCounters *ret) {
        (void) read_by_path(sysfs_root, cpu, ret, NULL, 0);
        return 0;
}

/* Reads through f's descriptors the states last had: false when none are
 * kept, the states may have changed or a read failed. */
static bool read_kept(const LedgerFds *f, const LedgerCounters *last, LedgerCounters *ret) {
        uint64_t stamp[5];
        if (f->dir < 0 || f->n != last->n || stamp_of(f->dir, stamp) < 0 || memcmp(stamp, f->stamp, sizeof(stamp)) != 0)
                return false;
        /* The kernel adds to a state's time and usage together, at each exit
         * from it (cpuidle_enter_state()): a usage that did not move is a
         * time that did not either, and that file is not read. A time the
         * kernel adds just before its usage is read at the next reading. */
        for (unsigned k = 0; k < f->n; k++) {
                if (read_u64_fd(f->usage[k], &ret->usage[k]) < 0)
                        return false;
                ret->time[k] = last->time[k];
                if (ret->usage[k] != last->usage[k] && read_u64_fd(f->time[k], &ret->time[k]) < 0)
                        return false;
        }
        memcpy(ret->latency, last->latency, sizeof(ret->latency));
        ret->n = f->n;
        return true;
}

/* Descriptors the ledger may still keep. */
static unsigned fds_room(const Ledger *l) {
        struct rlimit rl;
        uint64_t max = LEDGER_FDS_MAX;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / 2 < max)
                max = rl.rlim_cur / 2;
        return max > l->n_fds ? (unsigned) (max - l->n_fds) : 0;
}

static void drop_fds(Ledger *l, LedgerCpu *e) {
        if (e->fds.dir >= 0)
                l->n_fds -= 1 + 2 * e->fds.n;
        close_fds(&e->fds);
}

/* cpu's cpuidle directory's stamp by path (a lookup, no counter read): 0s
 * when it is absent. */
static void stamp_by_path(const Ledger *l, uint32_t cpu, uint64_t ret[5]) {
        char path[512];
        snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%u/cpuidle", l->sysfs_root, (unsigned) cpu);
        memset(ret, 0, 5 * sizeof(uint64_t));
        int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir >= 0) {
                (void) stamp_of(dir, ret);
                close(dir);
        }
}

/* cpu's counters now: through its kept descriptors, else by path (kept
 * from then on if there is room), its directory stamped before. */
static void read_counters(Ledger *l, uint32_t cpu, LedgerCounters *ret) {
        LedgerCpu *e = &l->cpus[cpu];
        if (read_kept(&e->fds, &e->last, ret))
                return;
        stamp_by_path(l, cpu, e->dir_stamp);
        drop_fds(l, e);
        l->n_fds += read_by_path(l->sysfs_root, cpu, ret, &e->fds, fds_room(l));
        l->n_by_path++;
}

/* ---- accounting ---- */

uint32_t ledger_blocked(const LedgerCounters *c, int32_t bound) {
        uint32_t mask = 0;
        if (bound < 0)
                return 0;
        for (unsigned k = 0; k < c->n && k < CPUIDLE_STATES_MAX; k++)
                if (c->latency[k] > (uint32_t) bound)
                        mask |= 1u << k;
        return mask;
}

/* A counter's growth; lower than before means it began again from 0. */
static uint64_t growth(uint64_t before, uint64_t now) {
        return now >= before ? now - before : now;
}

static void add(uint64_t *to, uint64_t v) {
        *to = *to > UINT64_MAX - v ? UINT64_MAX : *to + v;
}

void ledger_account(const LedgerCounters *a, const LedgerCounters *b, uint32_t blocked, uint32_t grace,
                    LedgerCost *cost, uint64_t *entries) {
        if (blocked == 0)
                return;
        for (unsigned k = 0; k < b->n && k < CPUIDLE_STATES_MAX; k++) {
                /* A state that appeared since a counts whole: its counters began at 0. */
                bool had = k < a->n;
                uint64_t dt = had ? growth(a->time[k], b->time[k]) : b->time[k];
                uint64_t du = had ? growth(a->usage[k], b->usage[k]) : b->usage[k];
                add(&cost->shallow_idle, dt);
                if (blocked & (1u << k)) {
                        if ((grace & (1u << k)) && du > 0)
                                du--; /* the exit of an entry made before the bound */
                        add(&cost->blocked_entries, du);
                        add(entries, du);
                }
        }
}

static void charge(LedgerCost *to, const LedgerCost *d) {
        add(&to->held, d->held);
        add(&to->shallow_idle, d->shallow_idle);
        add(&to->blocked_entries, d->blocked_entries);
}

/* cpu's holder binds it no more: its row counts one CPU fewer. */
static void leave_row(Ledger *l, LedgerCpu *e, int64_t now) {
        if (e->row >= 0 && e->blocked && l->rows[e->row].n_cpus > 0 && --l->rows[e->row].n_cpus == 0)
                l->rows[e->row].last_usec = (uint64_t) now;
}

/* Ends cpu's interval now: reads its counters, charges the growth. An
 * offline CPU (no counters) keeps its interval and its last reading. */
static void settle(Ledger *l, uint32_t cpu, int64_t now) {
        LedgerCpu *e = &l->cpus[cpu];
        LedgerCounters c;
        read_counters(l, cpu, &c);
        l->n_reads++;
        if (c.n > e->max_n)
                e->max_n = c.n;
        if (c.n > l->max_n)
                l->max_n = c.n; /* what ledger_states_short() compares with */
        if (c.n == 0)
                return;
        /* States that appeared are blocked as their latency says, from the start. */
        uint32_t appeared = e->known && c.n > e->last.n ? ledger_blocked(&c, e->bound) & ~((1u << e->last.n) - 1u) : 0;
        if (e->known && e->blocked) {
                LedgerCost d = { .held = now > e->since ? (uint64_t) (now - e->since) : 0 };
                ledger_account(&e->last, &c, e->blocked | appeared, e->grace, &d, &e->entries_since_bound);
                charge(&e->cost, &d);
                if (e->row >= 0)
                        charge(&l->rows[e->row].cost, &d);
        }
        if (e->known && c.n != e->last.n && e->blocked) {
                uint32_t blocked = ledger_blocked(&c, e->bound); /* the same bound over the states there are now */
                if (blocked == 0) {
                        leave_row(l, e, now); /* nothing blocked: its holder binds this CPU no more */
                        e->row = -1;
                        e->cookie = 0;
                }
                e->blocked = blocked;
        }
        e->last = c;
        e->grace = 0;
        e->known = true;
        e->since = now;
}

/* ---- rows ---- */

static bool same_row(const LedgerHolder *a, const LedgerHolder *b) {
        return a->kind == b->kind && a->uid == b->uid && strcmp(a->comm, b->comm) == 0 && strcmp(a->unit, b->unit) == 0;
}

static int find_other(const Ledger *l, uint32_t uid) {
        for (unsigned i = 0; i < l->n_rows; i++)
                if (l->rows[i].who.kind == LEDGER_OTHER && l->rows[i].who.uid == uid)
                        return (int) i;
        return -1;
}

/* Folds the oldest inactive row into an "other" row (made from it if there
 * is none) and returns the freed index, or -1. of_uid: only uid's rows
 * other than its "other", into uid's "other"; else any row but the
 * common "other" (uid unknown), into that. */
static int fold_oldest(Ledger *l, bool of_uid, uint32_t uid) {
        uint32_t into = of_uid ? uid : LEDGER_UID_UNKNOWN;
        int oldest = -1, other = find_other(l, into);
        for (unsigned i = 0; i < l->n_rows; i++) {
                const LedgerRow *w = &l->rows[i];
                bool candidate = of_uid ? w->who.uid == uid && w->who.kind != LEDGER_OTHER : (int) i != other;
                if (w->n_cpus == 0 && candidate && (oldest < 0 || w->last_usec < l->rows[oldest].last_usec))
                        oldest = (int) i;
        }
        if (oldest < 0)
                return -1;
        if (other < 0) {
                LedgerRow *o = &l->rows[oldest];
                o->who = (LedgerHolder){ .kind = LEDGER_OTHER, .uid = into };
                return -1; /* it became "other": no index freed, the caller tries again */
        }
        charge(&l->rows[other].cost, &l->rows[oldest].cost);
        l->rows[oldest] = (LedgerRow){};
        return oldest;
}

/* Row i becomes the "other" row of uid into, and keeps what it was charged
 * and the CPUs that charge it: the rows still add up to the CPUs' sums.
 * Of the candidates (uid's rows, or any with of_uid false) the one that
 * binds the fewest CPUs, the first of those. */
static int become_other(Ledger *l, bool of_uid, uint32_t into) {
        int pick = -1;
        for (unsigned i = 0; i < l->n_rows; i++) {
                const LedgerRow *w = &l->rows[i];
                if ((!of_uid || w->who.uid == into) && (pick < 0 || w->n_cpus < l->rows[pick].n_cpus))
                        pick = (int) i;
        }
        if (pick >= 0)
                l->rows[pick].who = (LedgerHolder){ .kind = LEDGER_OTHER, .uid = into };
        return pick;
}

/* A uid past its share of rows folds its own: another's stay. When every
 * row of it binds a CPU, the newest is charged to its "other" row (one of
 * its rows becomes that, if it has none). -1: within its share. */
static int row_within_share(Ledger *l, uint32_t uid) {
        unsigned mine = 0;
        for (unsigned i = 0; i < l->n_rows; i++)
                mine += l->rows[i].who.uid == uid;
        if (mine < LEDGER_ROWS_PER_UID)
                return -1;
        int i = fold_oldest(l, true, uid);
        if (i < 0)
                i = fold_oldest(l, true, uid); /* the first made its "other" */
        if (i < 0)
                i = find_other(l, uid);
        return i >= 0 ? i : become_other(l, true, uid);
}

static int row_of(Ledger *l, const LedgerHolder *who) {
        for (unsigned i = 0; i < l->n_rows; i++)
                if (same_row(&l->rows[i].who, who))
                        return (int) i;
        int i = who->uid != LEDGER_UID_UNKNOWN ? row_within_share(l, who->uid) : -1;
        if (i < 0 && l->n_rows < LEDGER_ROWS_MAX) {
                l->rows[l->n_rows] = (LedgerRow){ .who = *who };
                return (int) l->n_rows++;
        }
        if (i < 0)
                i = fold_oldest(l, false, 0);
        if (i < 0)
                i = fold_oldest(l, false, 0); /* the first made "other" */
        if (i < 0)
                i = find_other(l, LEDGER_UID_UNKNOWN); /* every row binds a CPU: the newest is charged to "other" */
        if (i < 0)
                i = become_other(l, false, LEDGER_UID_UNKNOWN); /* and there was none: one row becomes it */
        if (l->rows[i].who.kind != LEDGER_OTHER)
                l->rows[i] = (LedgerRow){ .who = *who };
        return i;
}

/* Whether cpu's cpuidle directory changed since it was last read by path
 * (a lookup and an fstat(), no counter read). */
static bool states_moved(const Ledger *l, uint32_t cpu) {
        uint64_t stamp[5];
        stamp_by_path(l, cpu, stamp);
        return memcmp(stamp, l->cpus[cpu].dir_stamp, sizeof(stamp)) != 0;
}

void ledger_set(Ledger *l, uint32_t cpu, int32_t bound, const LedgerHolder *who,
                void (*describe)(LedgerHolder *who, void *userdata), void *userdata) {
        if (cpu >= l->n)
                return;
        LedgerCpu *e = &l->cpus[cpu];
        int64_t now = l->clock();
        if (!e->known && bound >= 0)
                settle(l, cpu, now); /* the exit latencies, once */
        uint32_t blocked = e->known ? ledger_blocked(&e->last, bound) : 0;
        bool charged = blocked != 0 && who && who->kind != LEDGER_NONE;
        /* The holder itself, not its row's (an "other" row names no holder). */
        bool same_holder = e->row >= 0
                                   ? charged && e->kind == who->kind && e->uid == who->uid && e->cookie == who->cookie
                                   : !charged;
        /* Bound, with states gone: whether they came back, from the directory. */
        bool recheck =
                ledger_states_short(l, cpu) && bound >= 0 && who && who->kind != LEDGER_NONE && states_moved(l, cpu);
        /* Once a state was blocked its counters stay open when nothing is,
         * too: the next bound reads them through the descriptors, not by path
         * (at 512 CPUs, 4 ms instead of 30 a bound gone and back). Read only
         * for its exit latencies, a CPU keeps none (6,656 descriptors on 512
         * CPUs, and the kernel's buffer of each, for a bound that blocks nothing). */
        if (blocked == e->blocked && same_holder && !recheck) {
                e->bound = bound; /* the same states blocked by another bound: states that appear are judged by it */
                if (!e->was_blocked || (blocked == 0 && now - e->since > LEDGER_KEEP_USEC))
                        drop_fds(l, e);
                return;
        }

        settle(l, cpu, now);
        blocked = ledger_blocked(&e->last, bound); /* the states may have changed */
        leave_row(l, e, now);
        e->row = -1;
        e->cookie = 0;
        if (blocked != e->blocked)
                e->entries_since_bound = 0;
        e->grace = blocked & ~e->blocked;
        e->blocked = blocked;
        e->bound = bound;
        if (blocked != 0 && who && who->kind != LEDGER_NONE) {
                LedgerHolder h = *who;
                if (describe)
                        describe(&h, userdata);
                e->row = row_of(l, &h);
                e->kind = who->kind;
                e->uid = who->uid;
                e->cookie = who->cookie;
                LedgerRow *row = &l->rows[e->row];
                if (row->who.kind != LEDGER_OTHER)
                        row->who.cookie = who->cookie;
                row->n_cpus++;
        }
        e->was_blocked |= blocked != 0;
        if (!e->was_blocked)
                drop_fds(l, e);
}

void ledger_sample(Ledger *l) {
        int64_t now = l->clock();
        for (uint32_t cpu = 0; cpu < l->n; cpu++)
                if (l->cpus[cpu].known && l->cpus[cpu].blocked)
                        settle(l, cpu, now);
}

bool ledger_states_short(const Ledger *l, uint32_t cpu) {
        if (cpu >= l->n)
                return false;
        const LedgerCpu *e = &l->cpus[cpu];
        return e->known && (e->last.n < e->max_n || e->last.n < l->max_n);
}

bool ledger_verified(const Ledger *l, uint32_t cpu) {
        return cpu < l->n && l->cpus[cpu].blocked != 0 && l->cpus[cpu].entries_since_bound == 0;
}
