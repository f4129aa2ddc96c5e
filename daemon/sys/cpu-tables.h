/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Explain()'s per-CPU figures — whether a CPU is online, its
 * pm_qos_resume_latency_us text, its cpuidle states — kept from one sweep of
 * sysfs to the next. A sweep reads every file of every CPU (on 512 CPUs × 6
 * states some 20,000 system calls, tens of ms); its result is reused while
 * younger than CPU_TABLES_AGE_FACTOR times the sweep's own duration, so
 * that however often the figures are asked for, sweeps take at most
 * 1 / (CPU_TABLES_AGE_FACTOR + 1) of the loop's time, while on a small
 * machine (a sweep of ~100 µs) they are never more than ~1 ms old.
 *
 * Names and exit latencies are swept with the counters: they cost two of a
 * state's five reads, and one age for everything needs no rule for when a
 * driver or a hotplugged CPU changes them.
 *
 * pmqosd's own writes to the per-CPU files (CpuSink.changes) make the next
 * look re-read those files — one pread() per CPU, not a sweep — so that an
 * answer after a per-CPU request shows it. No timer: the age is looked at
 * when the figures are asked for. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "sys/cpu-sink.h"
#include "util/cpuidle.h"

#define CPU_TABLES_AGE_FACTOR 9

typedef struct CpuTable {
        bool present;  /* its file opened at start, the CPU online */
        char text[32]; /* pm_qos_resume_latency_us as read: cpu_sink_view_text() */
        CpuIdle idle;
} CpuTable;

typedef struct CpuTables {
        int64_t (*clock)(void); /* monotonic, µs */
        CpuTable *cpus;         /* one per CPU number of the sink; NULL before the first sweep */
        uint32_t n;
        int64_t swept_usec; /* when the last sweep ended */
        int64_t sweep_usec; /* how long it took */
        uint64_t changes;   /* the sink's changes when its files were last read */
        uint64_t n_sweeps;
} CpuTables;

/* clock: NULL for now_monotonic_usec (a test passes its own). */
void cpu_tables_init(CpuTables *t, int64_t (*clock)(void));
void cpu_tables_done(CpuTables *t);

/* How long a sweep's figures serve: CPU_TABLES_AGE_FACTOR × its duration. */
int64_t cpu_tables_lifetime(const CpuTables *t);

/* The figures of every CPU of s (*ret_n of them, indexed by CPU number),
 * swept anew if none are young enough, the resume latencies re-read if
 * pmqosd wrote any since. 0, or -ENOMEM (the figures are then dropped). */
int cpu_tables_get(CpuTables *t, const CpuSink *s, const CpuTable **ret, uint32_t *ret_n);
