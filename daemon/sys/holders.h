/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Who else holds the latency device: a scan of /proc/PID/fd, run by a helper
 * process that alone keeps the two capabilities reading other users'
 * descriptors needs; pmqosd asks it with one byte and reads back pids. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* At most this many holders are reported, root's first: a user's holder
 * never takes a root holder's place; the others are counted, not listed. */
#define HOLDERS_MAX 64u
/* What a scan may cost, in entries looked at (a process's descriptor list
 * opened, one descriptor read; about 4 µs each here): each uid's processes
 * at most HOLDERS_SCAN_PER_UID, all uids but root's and the scanner's own
 * together at most HOLDERS_SCAN_FDS_MAX, and root's and the scanner's own
 * each HOLDERS_SCAN_FDS_MAX of their own, so no user's descriptors cut
 * theirs. A process beyond its uid's bound is not looked at (or not to its
 * end), and counted. */
#define HOLDERS_SCAN_PER_UID 32768u
#define HOLDERS_SCAN_FDS_MAX 262144u
/* The uids whose processes were not looked at: at most this many reported,
 * those with the most. */
#define HOLDERS_UNSCANNED_MAX 16u

typedef struct HolderUnscanned {
        uint32_t uid;
        uint32_t processes; /* not looked at, or not to their end, for the bound */
} HolderUnscanned;

typedef struct HolderScan {
        uint32_t pids[HOLDERS_MAX];
        uint32_t uids[HOLDERS_MAX]; /* each holder's real uid (root only if its effective uid is 0 too) */
        uint32_t n;
        bool complete;     /* every process's descriptors were seen, and within the bounds */
        uint32_t left_out; /* holders found beyond HOLDERS_MAX, not listed */
        HolderUnscanned unscanned[HOLDERS_UNSCANNED_MAX];
        uint32_t n_unscanned;
} HolderScan;

/* What one scan may cost (the HOLDERS_SCAN_ constants; tests pass smaller). */
typedef struct HolderBounds {
        uint32_t per_uid; /* each uid but the trusted ones */
        uint32_t others;  /* all of them together */
        uint32_t trusted; /* root's, and own's, each */
        uid_t own;        /* the scanner's uid: trusted as root is */
} HolderBounds;

/* The identity a descriptor must lead to: the character device, or for a
 * stand-in file its inode. basename filters descriptors by their link text
 * first; candidates are looked at with statx(AT_STATX_DONT_SYNC), which
 * never waits for a file system's server (a readlink() of /proc does not
 * either). */
typedef struct HolderTarget {
        struct stat st;
        char basename[256];
        /* pmqosd's own descriptor: the same open file held by another process
         * (the service manager's descriptor store, kept across restarts) is
         * pmqosd's request, not another holder's; kcmp() tells. */
        pid_t owner;
        int owner_fd;
} HolderTarget;

/* Fills target from fd, the descriptor this process holds for path. */
int holder_target_init(HolderTarget *target, int fd, const char *path);

/* Scans the processes under proc_fd (a descriptor of /proc) for descriptors
 * of target, leaving out the pids in skip[0..n_skip), within bounds. A
 * process's uid is read from its status file (its directory's owner is root
 * for any process that makes itself non-dumpable). */
void holders_scan(int proc_fd, const HolderTarget *target, const pid_t *skip, size_t n_skip, const HolderBounds *bounds,
                  HolderScan *ret);

/* The helper's answer on the wire (host order: one machine): u32 n, u32
 * complete, u32 left_out, u32 n_unscanned, n × (u32 pid, u32 uid), then
 * n_unscanned × (u32 uid, u32 processes). decode checks it fully (root's
 * holders first, complete only if nothing was left out); -EBADMSG if it is
 * not one. */
#define HOLDERS_WIRE_MAX (16u + 8u * HOLDERS_MAX + 8u * HOLDERS_UNSCANNED_MAX)
size_t holders_encode(const HolderScan *scan, uint8_t buf[HOLDERS_WIRE_MAX]);
int holders_decode(const uint8_t *buf, size_t len, HolderScan *ret);

/* Forks the helper (before pmqosd gives up root): it keeps CAP_SYS_PTRACE and
 * CAP_DAC_READ_SEARCH only, as user uid (if not (uid_t) -1), and nothing else
 * open but *ret_fd's peer and stderr; it ends when pmqosd closes *ret_fd or
 * dies. Without root it runs with what it has and reports what it can see. */
int holders_helper_start(const HolderTarget *target, uid_t uid, gid_t gid, pid_t *ret_pid, int *ret_fd);
