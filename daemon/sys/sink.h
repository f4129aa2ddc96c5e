/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The kernel side: the one /dev/cpu_dma_latency descriptor, written with
 * 4-byte binary values only when the value it should hold changes. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct Sink {
        int fd;
        char *path;
        int32_t written; /* what our descriptor currently asks of the kernel */
        uint64_t n_writes;
        bool ignores_writes;      /* a write was read back as having had no effect */
        int32_t ignored_reported; /* what the kernel reported then, for the caller's audit entry */
        bool honours_writes;      /* one was read back as in effect: no more read-backs */
} Sink;

#define SINK_INIT \
        { .fd = -1, .written = PMQOS_CONTRACT_LATENCY_MAX }

/* A value no write can have produced: the next sink_apply() writes. */
#define SINK_WRITTEN_UNKNOWN INT32_MIN

/* Opens path O_RDWR|O_CLOEXEC. Returns 0 or a negative errno. */
int sink_open(Sink *s, const char *path);
/* Takes fd (from the service manager's store) as the descriptor of path,
 * leaving the kernel's value as it is until the next sink_apply(). -EBADF
 * when fd is not path opened for writing (fd is then left to the caller). */
int sink_adopt(Sink *s, const char *path, int fd);
void sink_close(Sink *s);

/* Makes our request on the device equal to usec (PMQOS_LATENCY_NONE lifts it).
 * Writes nothing when it already is. Returns 0 or a negative errno.
 * Constraining writes are read back until one is seen in effect: the kernel
 * reports the minimum over all holders, so a value above ours means the
 * write had no effect (vendor kernels that make it a no-op); ignores_writes
 * is then set, once, for the caller to report (the sink knows no journal). */
int sink_apply(Sink *s, int32_t usec);

/* The aggregate over every holder of the device. */
int sink_read(Sink *s, int32_t *ret);
