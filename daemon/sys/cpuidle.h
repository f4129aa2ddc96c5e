/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A CPU's idle states as cpuidle shows them in sysfs (name, exit latency,
 * disable flag, usage and residency), read when asked: pmqosd never polls. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The kernel has at most 10 (CPUIDLE_STATE_MAX); more is not a cpuidle tree. */
#define CPUIDLE_STATES_MAX 16u

typedef struct CpuIdleState {
        char *name;       /* cleaned: valid UTF-8, no control characters, at most 64 bytes */
        uint32_t latency; /* exit latency, µs */
        bool disabled;
        uint64_t usage;
        uint64_t time; /* µs spent in it */
} CpuIdleState;

typedef struct CpuIdle {
        CpuIdleState states[CPUIDLE_STATES_MAX];
        unsigned n;
} CpuIdle;

/* Reads cpu's states under sysfs_root (state0, state1, … up to the first
 * missing one). A CPU without cpuidle has none: 0 with ret->n == 0. A state
 * whose files cannot be parsed ends the list there. -ENOMEM only. */
int cpuidle_read(const char *sysfs_root, uint32_t cpu, CpuIdle *ret);
void cpuidle_done(CpuIdle *idle);

/* A sysfs file's text (name relative to dir, or AT_FDCWD), without its
 * trailing newline and blanks: its length, or a negative errno. */
int sysfs_read_at(int dir, const char *name, char *buf, size_t size);

/* "123\n" → 123; anything else (sign, junk, overflow) → -EINVAL. For the files above. */
int cpuidle_parse_u64(const char *text, uint64_t *ret);
