/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Per-CPU bounds through sysfs pm_qos_resume_latency_us: one value per CPU
 * shared by all of user space, so we remember what was there before our
 * first write and put it back when we no longer constrain that CPU. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A CPU we constrain: what its file held before our first write (kept in the
 * state file, so that a crash still restores it). */
typedef struct CpuOriginal {
        uint32_t cpu;
        char *value;     /* the sysfs text found before our first write */
        int32_t written; /* what we wrote since (in memory only) */
} CpuOriginal;

/* A value no write can have produced: the next write happens whatever it is. */
#define CPU_WRITTEN_UNKNOWN INT32_MIN

typedef struct CpuSink {
        char *sysfs_root;
        int *fds; /* per CPU number: its pm_qos_resume_latency_us, opened at start, or -1 */
        uint32_t n_fds;
        CpuOriginal *originals; /* CPUs we currently constrain, with what to restore */
        size_t n_originals;
        uint64_t n_writes;
        uint64_t changes; /* every write tried, done or not: what was read of the files before may be stale */
} CpuSink;

/* Opens every CPU's file now, so that writing them later needs no privilege. */
int cpu_sink_init(CpuSink *s, const char *sysfs_root);
void cpu_sink_done(CpuSink *s);

/* 0 if cpu can take a bound; -ENOENT if absent, -EHOSTDOWN if offline. */
int cpu_sink_check_cpu(const CpuSink *s, uint32_t cpu);
/* The file of cpu that cpu_sink_write() writes, for messages. */
void cpu_sink_path(const CpuSink *s, uint32_t cpu, char *buf, size_t size);

/* Whether we hold an original for cpu (i.e. we constrain it). */
bool cpu_sink_constrains(const CpuSink *s, uint32_t cpu);

/* Reads and remembers cpu's current value before our first write. The caller
 * persists the originals before calling cpu_sink_write(). */
int cpu_sink_remember(CpuSink *s, uint32_t cpu);

/* The same with text as the original: what the file held before another
 * process wrote it (ForeignWrites=adopt), not what it holds now. */
int cpu_sink_remember_text(CpuSink *s, uint32_t cpu, const char *text);

/* Writes a bound (0 … max; PMQOS_LATENCY_NONE restores the original and forgets it). */
int cpu_sink_write(CpuSink *s, uint32_t cpu, int32_t usec);

/* Writes text to cpu's file as it is, remembering nothing (restore's write-back). */
int cpu_sink_write_text(CpuSink *s, uint32_t cpu, const char *text);

/* The bound we last wrote, or PMQOS_LATENCY_NONE. */
int32_t cpu_sink_written(const CpuSink *s, uint32_t cpu);

/* Takes over originals left by a previous run (a crash, or a restart whose
 * requests are re-adopted) without writing anything: the CPUs count as
 * constrained, with what their files hold now as the last value written,
 * so that the next commit writes only the CPUs whose bound differs and
 * gives back the others. CPUs that are gone are skipped. */
int cpu_sink_adopt_originals(CpuSink *s, const CpuOriginal *originals, size_t n);
/* What cpu's file holds now: its text as read (at most 31 bytes, cleaned by
 * the caller before it leaves pmqosd), as a bound (PMQOS_LATENCY_NONE for
 * "0", CPU_WRITTEN_UNKNOWN for text no writer of a bound produces), and
 * whether it differs from what we last wrote, or, where we constrain
 * nothing, from "0": someone else writes the file. */
typedef struct CpuFileView {
        char text[32];
        int32_t bound;
        bool foreign;
} CpuFileView;
int cpu_sink_view(const CpuSink *s, uint32_t cpu, CpuFileView *ret);
/* The same for text read before (by cpu_sink_read()), against what we wrote now. */
void cpu_sink_view_text(const CpuSink *s, uint32_t cpu, const char *text, CpuFileView *ret);
/* cpu's file's text, without its trailing newline; -ENOENT if it has none. */
int cpu_sink_read(const CpuSink *s, uint32_t cpu, char *buf, size_t size);

/* Restores every CPU we constrain. Returns the first error, having tried all. */
int cpu_sink_restore_all(CpuSink *s);
