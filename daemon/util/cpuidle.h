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

/* The latency a C-state name stands for on this machine: the largest exit
 * latency (up to max) that a state of that name, compared without case, has
 * on any online CPU under sysfs_root, so that the state stays allowed on
 * every CPU whatever its model's table says (pmqosctl's rule too). Returns 0
 * with *ret; -ENOENT when no online CPU has it, with the names of the states
 * they have in names (", " between them, in the order of the CPUs and their
 * tables, cut short if need be); -ENODEV when no online CPU shows cpuidle
 * states; -ENOMEM. */
int cpuidle_latency_of(const char *sysfs_root, const char *name, uint32_t max, uint32_t *ret, char *names,
                       size_t names_size);

/* A sysfs file's text (name relative to dir, or AT_FDCWD), without its
 * trailing newline and blanks: its length, or a negative errno. */
int sysfs_read_at(int dir, const char *name, char *buf, size_t size);
/* The same from a descriptor kept open (read_small_fd()). */
int sysfs_read_fd(int fd, char *buf, size_t size);

/* "123\n" → 123; anything else (sign, junk, overflow) → -EINVAL. For the files above. */
int cpuidle_parse_u64(const char *text, uint64_t *ret);
