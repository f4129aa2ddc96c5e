/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Who else writes the per-CPU idle knobs: every cpuN/power/
 * pm_qos_resume_latency_us and cpuN/cpuidle/stateK/disable watched with
 * fanotify, which names the writing process of each write. The descriptor
 * needs CAP_SYS_ADMIN when it is made, nothing after: marks on files anyone
 * may read need no privilege, so CPUs that come back online are marked
 * again without root. One event costs one event: the file is known from the
 * event's descriptor, the writer from /proc/PID; nothing is scanned. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sys/cpu-sink.h"
#include "util/cpuidle.h"
#include "util/burst.h"

#define FOREIGN_COMM_MAX 64u
#define FOREIGN_UNIT_MAX 256u
#define FOREIGN_VALUE_MAX 32u
/* CPUs watched at most (the kernel's own NR_CPUS bound). */
#define FOREIGN_CPUS_MAX 8192u
/* The value of a write followed by another event for the same file in the
 * same batch: the file holds the later one's by the time it is read. */
#define FOREIGN_VALUE_UNKNOWN "unknown"
/* Events decoded per read of the descriptor; the rest wait for the next turn of the loop. */
#define FOREIGN_BATCH 64u
/* The contest: a file written by other processes (whichever: a fighter may
 * spawn one per write) more than BURST_LIMIT times in this window is left
 * alone (restore writes nothing back, adopt changes no request). */
#define FOREIGN_CONTEST_WINDOW_USEC (10 * 1000000LL)

typedef enum KnobKind {
        KNOB_RESUME_LATENCY, /* cpuN/power/pm_qos_resume_latency_us */
        KNOB_DISABLE,        /* cpuN/cpuidle/stateK/disable */
        KNOB_ONLINE,         /* cpuN/online: a CPU came or went; its files are marked again */
} KnobKind;

/* The last foreign writer of one file since pmqosd started. */
typedef struct ForeignWriter {
        uint32_t pid;                  /* 0: pmqosd or nobody wrote it last */
        uint32_t uid;                  /* its real uid, (uint32_t) -1 if it was gone */
        char comm[FOREIGN_COMM_MAX];   /* cleaned UTF-8; "" if the process was gone before it was read */
        char unit[FOREIGN_UNIT_MAX];   /* its systemd unit from /proc/PID/cgroup, cleaned; "" if none */
        char value[FOREIGN_VALUE_MAX]; /* the file read back at the event, cleaned; FOREIGN_VALUE_UNKNOWN */
        int64_t when;                  /* µs since the epoch */
        bool contested;                /* this write was contested (see FOREIGN_CONTEST_WINDOW_USEC) */
        /* Kept across pmqosd's own writes: */
        Burst burst;            /* the recent foreign writes to this file (the contest) */
        int64_t contest_logged; /* CLOCK_MONOTONIC µs of the last Contested line about this file; 0 */
} ForeignWriter;

typedef struct CpuKnobs {
        ForeignWriter resume;
        ForeignWriter states[CPUIDLE_STATES_MAX];
        char baseline[CPUIDLE_STATES_MAX][4]; /* each disable file as first marked: what restore writes back */
        char resume_baseline[FOREIGN_VALUE_MAX];
        unsigned n_states; /* states marked */
        bool marked;
} CpuKnobs;

/* One write the event loop reads. */
typedef struct ForeignWrite {
        KnobKind kind;
        uint32_t cpu;
        unsigned state;       /* KNOB_DISABLE */
        bool own;             /* pmqosd wrote it */
        bool contested;       /* other processes wrote this file more than BURST_LIMIT times in the window */
        bool contest_news;    /* contested, and no Contested line about this file yet in this window */
        ForeignWriter writer; /* a copy (the table's pid is 0 after an own write) */
        int pidfd;            /* the writer's, come with the event (FAN_REPORT_PIDFD): no pid reuse; -1 */
} ForeignWrite;

typedef struct ForeignWatch {
        int fd; /* fanotify; -1: not watching */
        char *sysfs_root;
        pid_t self;
        bool pidfds;    /* events come with the writer's pidfd (FAN_REPORT_PIDFD, Linux 5.15) */
        CpuKnobs *cpus; /* by CPU number */
        uint32_t n_cpus;
        uint64_t n_events, n_own, n_foreign, n_overflows;
} ForeignWatch;

/* Makes the fanotify descriptor (needs CAP_SYS_ADMIN: -EPERM without) and
 * marks every CPU's files under sysfs_root. */
int foreign_watch_init(ForeignWatch *w, const char *sysfs_root);
void foreign_watch_done(ForeignWatch *w);
/* Marks cpu's files (again: a CPU that came online has new cpuidle files). */
int foreign_watch_mark_cpu(ForeignWatch *w, uint32_t cpu);

/* One read() of the descriptor: up to max (at most FOREIGN_BATCH) writes
 * into out, the table updated (an own write clears the file's writer). The
 * file is read once an event is read, not when it was written: of several
 * events for one file in the batch only the last gets the file's value, the
 * others' is FOREIGN_VALUE_UNKNOWN. Where the kernel gives them, foreign
 * writes carry the writer's pidfd: close them with foreign_writes_close().
 * Returns how many, 0 when nothing waits, or a negative errno. */
int foreign_watch_read(ForeignWatch *w, int64_t now_realtime, int64_t now_monotonic, ForeignWrite *out, size_t max);

/* Closes the pidfds that came with n writes of foreign_watch_read(). */
void foreign_writes_close(ForeignWrite *fw, size_t n);

/* The last foreign writer of cpu's resume latency file (state < 0) or of
 * its state's disable file: NULL when none (or pmqosd wrote it last). */
const ForeignWriter *foreign_watch_writer(const ForeignWatch *w, uint32_t cpu, int state);

/* The unit of a /proc/PID/cgroup text: the last path component of its
 * "0::" line ending in .service or .scope (into unit, cleaned); "" if none. */
void foreign_unit_of_cgroup(const char *text, char *unit, size_t size);
/* The knob a path names: 0, or -EINVAL for a file that is none of them. */
int foreign_knob_of_path(const char *path, KnobKind *ret_kind, uint32_t *ret_cpu, unsigned *ret_state);

/* restore: what pmqosd holds for the file of fw — for a resume latency file
 * what s last wrote there where it constrains that CPU, else the file's text
 * when first marked; for a disable file its text when first marked — into
 * ret, and written back unless the file holds it already. Returns 1 if
 * written, 0 if not needed, or a negative errno (-EPERM: cpuidle checks
 * CAP_SYS_ADMIN at each write of a disable file, which pmqosd gave up
 * with --user). */
int foreign_watch_restore(ForeignWatch *w, CpuSink *s, const ForeignWrite *fw, char *ret, size_t size);
