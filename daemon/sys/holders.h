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

/* At most this many holders are reported, and this many descriptors looked
 * at per scan (about a millisecond per 10,000 here): beyond, the scan says it
 * is incomplete. */
#define HOLDERS_MAX 64u
#define HOLDERS_SCAN_FDS_MAX 262144u

typedef struct HolderScan {
        uint32_t pids[HOLDERS_MAX];
        uint32_t n;
        bool complete; /* every process's descriptors were seen, and within the bounds */
} HolderScan;

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
 * of target, leaving out the pids in skip[0..n_skip). */
void holders_scan(int proc_fd, const HolderTarget *target, const pid_t *skip, size_t n_skip, HolderScan *ret);

/* The helper's answer on the wire: u32 n, u32 complete, n × u32 pid (host order:
 * one machine). decode checks it fully; -EBADMSG if it is not one. */
#define HOLDERS_WIRE_MAX (8u + 4u * HOLDERS_MAX)
size_t holders_encode(const HolderScan *scan, uint8_t buf[HOLDERS_WIRE_MAX]);
int holders_decode(const uint8_t *buf, size_t len, HolderScan *ret);

/* Forks the helper (before pmqosd gives up root): it keeps CAP_SYS_PTRACE and
 * CAP_DAC_READ_SEARCH only, as user uid (if not (uid_t) -1), and nothing else
 * open but *ret_fd's peer and stderr; it ends when pmqosd closes *ret_fd or
 * dies. Without root it runs with what it has and reports what it can see. */
int holders_helper_start(const HolderTarget *target, uid_t uid, gid_t gid, pid_t *ret_pid, int *ret_fd);
