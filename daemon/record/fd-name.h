/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The names of held requests' descriptors in the service manager's store:
 * a kind letter and the cookie in 8 lowercase hex digits: "hXXXXXXXX" (a
 * Hold() pipe's read end), "pXXXXXXXX" (a pidfd), "cXXXXXXXX" (a cgroup v2
 * directory). Short because systemd hands every name back in one
 * LISTEN_FDNAMES= string, which execve() takes only up to 128 KiB: 10 bytes
 * a name (with its ':') keep PMQOS_MAX_MAX_HELD names in it. The names of
 * 0.1.0 ("hold-COOKIE", "pid-COOKIE", "cg-COOKIE", decimal) are still read,
 * for the first start after an upgrade. */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef enum FdNameKind {
        FD_NAME_HOLD = 1,
        FD_NAME_PROCESS,
        FD_NAME_CGROUP,
} FdNameKind;

/* "cg-4294967295" (the longest old name) and its NUL, with room to spare. */
#define FD_NAME_MAX 16

/* Parses name (NUL-terminated): 0 with *ret_kind and *ret_cookie, or
 * -EINVAL for anything else (another letter or prefix, not exactly 8 lowercase
 * hex digits, cookie 0; for an old name: no digits, a leading zero, above
 * UINT32_MAX, anything after the digits). */
int fd_name_parse(const char *name, FdNameKind *ret_kind, uint32_t *ret_cookie);
/* Writes the name of (kind, cookie) into buf[FD_NAME_MAX]; returns buf. */
char *fd_name_format(char buf[static FD_NAME_MAX], FdNameKind kind, uint32_t cookie);
