/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The sorter: a small child process that takes the descriptors in flight
 * on a socket, so that they are never installed in pmqosd (whose close of
 * a file on FUSE, NFS, 9p... may wait forever, and whose exit closes
 * whatever it holds). It peeks them (MSG_PEEK with a control buffer, the
 * bytes stay for pmqosd to read), hands back those whose close can never
 * wait (pidfds, files of cgroup2) and keeps the others for good: their
 * last close happens at the sorter's exit, which may then wait for their
 * file system, pinning the sorter only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* At most this many descriptors come with one write (the kernel's SCM_MAX_FD). */
#define FD_SORTER_BATCH 253
/* How long fd_sorter_take() waits for the sorter's answer. */
#define FD_SORTER_TIMEOUT_MSEC 2000
/* The most bytes one peek reads. */
#define FD_SORTER_CHUNK 65536

typedef struct FdSorter {
        pid_t pid; /* 0: none */
        int ctl;   /* SOCK_SEQPACKET to the sorter */
        unsigned kept;
} FdSorter;

/* Forks the sorter; it ends with pmqosd (PR_SET_PDEATHSIG). */
int fd_sorter_start(FdSorter *s);

/* Has the sorter peek up to want bytes of sock (a copy sent to it) and take
 * the descriptors there. *ret_peeked: how many bytes the peek read (it ends
 * after the descriptors' write); fds[0..*ret_count): each descriptor in
 * order, a copy in pmqosd of those safe to close, -1 for those kept, whose
 * kinds[] says what they are (target_close_kind()). -ETIMEDOUT: no answer
 * in FD_SORTER_TIMEOUT_MSEC; the sorter is not to be asked again. */
int fd_sorter_take(FdSorter *s, int sock, size_t want, size_t *ret_peeked, int fds[static FD_SORTER_BATCH],
                   char kinds[static FD_SORTER_BATCH], size_t *ret_count);

/* Kills the sorter; returns its pid, to be reaped with fd_sorter_reaped()
 * (at once, or only once the file systems of what it kept answer). */
pid_t fd_sorter_retire(FdSorter *s);
/* Whether the sorter pid is gone (reaped now, or by someone else). */
bool fd_sorter_reaped(pid_t pid);
