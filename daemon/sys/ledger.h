/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a bound does and costs, per CPU and per holder, from the kernel's own
 * cpuidle counters (cpuN/cpuidle/stateK/{usage,time}).
 *
 * A CPU's interval runs from one settlement to the next. While at least one
 * of its states is blocked (its exit latency above the bound the kernel
 * applies there), the interval's growth of the summed `time` of every state
 * is shallow idle, its wall time is held, and the growth of the blocked
 * states' `usage` is blocked entries (0 when the kernel obeys): all of it
 * counted for the CPU and for the holder that bound it.
 *
 * Counters are read only when a CPU's holder or its set of blocked states
 * changes (ledger_set()) and when someone asks (ledger_sample()): never on
 * a timer. Exit latencies are read once per CPU and again only when its
 * number of states changes. A CPU that goes offline keeps its interval
 * open (nothing read, nothing lost); a counter found lower than before (the
 * CPU's cpuidle device registered anew) counts from 0; a state that
 * appeared counts whole. Holder rows are bounded: a uid with
 * LEDGER_ROWS_PER_UID rows folds its own oldest inactive one into its own
 * row of kind "other" (its uid kept) before it gets another, so that one
 * user cannot push out another's; past LEDGER_ROWS_MAX in all, the oldest
 * inactive row is folded into one row of kind "other" of uid unknown. When
 * no row can be folded (all bind a CPU), the newcomer is charged to that
 * "other" row, one row becoming it whole if there is none: the rows always
 * add up to the CPUs' sums.
 *
 * Once a CPU had a state blocked its counters stay open (LedgerFds),
 * blocked or not, so that a bound that comes or goes reads them without a
 * path (a CPU read only for its exit latencies keeps none; nothing
 * blocked for LEDGER_KEEP_USEC, they close at its next bound change); a
 * reading is one fstat() and a pread() per counter: 512 CPUs × 6 states
 * cost about 2-4 ms instead of 43 (tests/bench/bench-ledger.c). Whatever may
 * mean the states changed (the cpuidle directory's link count or times
 * moved: a state came or went, the directory went; a read failed: ENODEV
 * when the kernel removed the device, ESTALE, ENOENT, a counter that does
 * not parse) makes it read by path again, as the first time. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "util/cpuidle.h"

#define LEDGER_ROWS_MAX 64u
#define LEDGER_ROWS_PER_UID 16u /* a quarter: four users fill the table */
#define LEDGER_COMM_MAX 16u     /* the kernel's TASK_COMM_LEN, with the terminator */
#define LEDGER_UNIT_MAX 128u    /* a systemd unit name, cut */
#define LEDGER_UID_UNKNOWN UINT32_MAX
/* Descriptors kept on counters at most, whatever the CPUs (1 + 2 per state
 * each: 512 CPUs of 6 states take 6656), and never more than half of
 * the soft RLIMIT_NOFILE. A CPU that finds no room is read by path. */
#define LEDGER_FDS_MAX 8192u
/* Nothing blocked on a CPU this long, its descriptors close at the next
 * bound change that reaches it (no timer): a bound that comes and goes
 * keeps them, a quiet machine gives back the kernel's buffer of each. */
#define LEDGER_KEEP_USEC (10 * 1000000)

typedef enum LedgerKind {
        LEDGER_NONE, /* nothing blocked: nobody is charged */
        LEDGER_REQUEST,
        LEDGER_FLOOR,
        LEDGER_BATTERY_FLOOR,
        LEDGER_RULE,
        LEDGER_EXTERNAL,
        LEDGER_OTHER, /* the folded row */
        _LEDGER_KIND_MAX,
} LedgerKind;

const char *ledger_kind_name(LedgerKind k);

/* Who binds a CPU. kind, uid and cookie are what ledger_set() compares;
 * comm and unit are filled by the caller's describe() only when the holder
 * is new to the CPU. */
typedef struct LedgerHolder {
        LedgerKind kind;
        uint32_t uid;
        uint32_t cookie;
        char comm[LEDGER_COMM_MAX];
        char unit[LEDGER_UNIT_MAX];
} LedgerHolder;

typedef struct LedgerCost {
        uint64_t held;            /* µs of wall time with a state blocked */
        uint64_t shallow_idle;    /* µs of idle time meanwhile */
        uint64_t blocked_entries; /* entries into blocked states meanwhile */
} LedgerCost;

typedef struct LedgerRow {
        LedgerHolder who;
        LedgerCost cost;
        uint32_t n_cpus;    /* CPUs it binds now with a state blocked: active while > 0 */
        uint64_t last_usec; /* when it last stopped binding (monotonic), for folding */
} LedgerRow;

/* One CPU's counters as last read. */
typedef struct LedgerCounters {
        unsigned n;
        uint32_t latency[CPUIDLE_STATES_MAX];
        uint64_t usage[CPUIDLE_STATES_MAX];
        uint64_t time[CPUIDLE_STATES_MAX];
} LedgerCounters;

/* A CPU's counters kept open once one of its states was blocked, until it
 * is found with nothing blocked for LEDGER_KEEP_USEC: its cpuidle
 * directory, with what says whether its states changed, and each state's
 * usage and time. */
typedef struct LedgerFds {
        int dir; /* -1: none kept */
        unsigned n;
        int usage[CPUIDLE_STATES_MAX];
        int time[CPUIDLE_STATES_MAX];
        uint64_t stamp[5]; /* the directory's link count, mtime and ctime (s, ns) when it was read */
} LedgerFds;

typedef struct LedgerCpu {
        LedgerCounters last;
        bool known;       /* last was read once: there is something to compare with */
        uint32_t blocked; /* bit k: state k blocked in this interval */
        bool was_blocked; /* some interval had a state blocked: its counters stay open */
        int32_t bound;    /* the bound that blocks them, negative: none */
        uint32_t grace;   /* states blocked anew when it began, until its first reading (ledger_account()) */
        int row;          /* the row charged in this interval, -1 none */
        LedgerKind kind;  /* the holder charged (its row may be an "other" row) */
        uint32_t uid;
        uint32_t cookie;              /* the holder's, to tell two requests of one row apart */
        unsigned max_n;               /* the most states a reading of it found */
        uint64_t dir_stamp[5];        /* its cpuidle directory's, before its last reading by path; 0s: absent */
        int64_t since;                /* when this interval began (monotonic µs) */
        uint64_t entries_since_bound; /* blocked entries since the blocked set took effect */
        int32_t file_bound;           /* its pm_qos_resume_latency_us as a bound, as last seen; -1 none */
        bool file_ours;               /* pmqosd wrote it (core/ledger-holders.c) */
        LedgerCost cost;
        LedgerFds fds;
} LedgerCpu;

typedef struct Ledger {
        char *sysfs_root;
        int64_t (*clock)(void); /* monotonic µs */
        LedgerCpu *cpus;
        uint32_t n;
        LedgerRow rows[LEDGER_ROWS_MAX];
        unsigned n_rows;
        uint64_t n_reads;   /* CPUs whose counters were read: what a test and the bench count */
        uint64_t n_by_path; /* of them, read by path (files opened), not through kept descriptors */
        unsigned n_fds;     /* descriptors kept on counters, LEDGER_FDS_MAX at most */
        unsigned max_n;     /* the most states any CPU's reading found */
} Ledger;

/* n CPUs (by number) under sysfs_root; clock NULL for now_monotonic_usec.
 * Nothing is read yet. 0 or -ENOMEM. */
int ledger_init(Ledger *l, const char *sysfs_root, uint32_t n, int64_t (*clock)(void));
void ledger_done(Ledger *l);

/* cpu now lives under bound (µs, or negative: none) set by who (kind
 * LEDGER_NONE: nobody). When neither the holder (kind, uid, cookie) nor
 * the set of blocked states changes, nothing is read and nothing is done.
 * Else the interval so far is settled (counters read) and a new one begins;
 * describe(who, userdata) fills comm and unit first if the row is new. */
void ledger_set(Ledger *l, uint32_t cpu, int32_t bound, const LedgerHolder *who,
                void (*describe)(LedgerHolder *who, void *userdata), void *userdata);

/* Settles every CPU's interval now (reads their counters), keeping holders. */
void ledger_sample(Ledger *l);

/* cpu's last reading found fewer states than it, or another CPU, had
 * (its own may have gone before its first reading): a bound change looks
 * at its cpuidle directory (no counter read) and reads it once it moved. */
bool ledger_states_short(const Ledger *l, uint32_t cpu);

/* A bound blocks a state on cpu and no blocked state was entered since it took effect. */
bool ledger_verified(const Ledger *l, uint32_t cpu);

/* Reads cpu's states' latency, usage and time under sysfs_root: 0 (n = 0
 * when it has no cpuidle directory: offline, or none). Stops at the first
 * state whose files are missing or unreadable. */
int ledger_read_counters(const char *sysfs_root, uint32_t cpu, LedgerCounters *ret);

/* The growth from a to b charged to cost (and, for blocked entries, to
 * *entries) with blocked states blocked: what ledger_set() and
 * ledger_sample() do with two readings. grace: states blocked anew at a,
 * whose first counted entry is not one (the kernel counts an entry at its
 * exit: a CPU idle in a state when the bound came counts it after). Pure:
 * the fuzz target's. */
void ledger_account(const LedgerCounters *a, const LedgerCounters *b, uint32_t blocked, uint32_t grace,
                    LedgerCost *cost, uint64_t *entries);
/* The states of c blocked under bound (negative: none). */
uint32_t ledger_blocked(const LedgerCounters *c, int32_t bound);
