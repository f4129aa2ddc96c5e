/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a descriptor handed to RequestFor() is: a pidfd or a cgroup v2
 * directory, whose owner, and how to recognise it again after a restart —
 * read from the descriptor itself, never from a pid number alone. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#define TARGET_ANON_INODE_MAGIC 0x09041934 /* pidfds before Linux 6.9 */
#define TARGET_PIDFS_MAGIC 0x50494446      /* pidfds since */

typedef enum TargetKind {
        TARGET_PROCESS,
        TARGET_CGROUP,
} TargetKind;

typedef struct Target {
        TargetKind kind;
        uid_t uid;           /* the process's real uid, or the cgroup directory's owner */
        pid_t pid;           /* TARGET_PROCESS, in pmqosd's pid namespace */
        uint64_t start_time; /* TARGET_PROCESS: /proc/PID/stat's starttime (clock ticks since boot) */
        uint64_t cgroup_id;  /* TARGET_CGROUP: the directory's inode, the kernel's cgroup id */
        char *path;          /* TARGET_CGROUP: the directory's path in pmqosd's own mount namespace */
        int fd;              /* TARGET_CGROUP: the directory, opened through pmqosd's own cgroup2 mount; else -1 */
} Target;

void target_done(Target *t);

/* What fd is. -EINVAL: neither a pidfd nor a cgroup v2 directory; -ESRCH:
 * the process exited already, or the cgroup has none in it; -EREMOTE: not
 * in pmqosd's pid namespace, or a cgroup pmqosd's cgroup2 mount does not
 * show; other errors: /proc could not be read. The caller's sentence goes to
 * err. A cgroup is named and opened as pmqosd's own mount shows it (Target.fd,
 * Target.path), never through the caller's descriptor's mount. */
int target_identify(int fd, Target *ret, char *err, size_t err_size);

/* 0 when closing fd, the last copy of its file included, can never wait on
 * anyone: a pidfd, or a file of cgroup2 (kernfs). Else what it is, for the
 * refusal: 'f' a regular file, 's' a socket, 'd' a directory, 'o' other.
 * Asks nothing of the descriptor's own file system. */
char target_close_kind(int fd);

/* Whether the process of pidfd has not exited: checked after reading
 * anything by its pid, so that what was read was that process's. */
bool target_alive(int pidfd);

/* A pidfd of pid, only if pid still is the process that started at
 * start_time (after a restart without the fd store); -ESRCH otherwise. */
int target_reopen_process(pid_t pid, uint64_t start_time);
/* The cgroup directory at path, only if it still is cgroup id. */
int target_reopen_cgroup(const char *path, uint64_t id);
