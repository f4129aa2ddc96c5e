/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The names of held requests' descriptors in the service manager's store:
 * "hold-COOKIE" (a Hold() pipe's read end), "pid-COOKIE" (a pidfd),
 * "cg-COOKIE" (a cgroup v2 directory); COOKIE in decimal, 1..4294967295,
 * no sign, no leading zero. All valid FDNAME= characters, at most 15. */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef enum FdNameKind {
        FD_NAME_HOLD = 1,
        FD_NAME_PROCESS,
        FD_NAME_CGROUP,
} FdNameKind;

/* "cg-4294967295" and its NUL, with room to spare. */
#define FD_NAME_MAX 16

/* Parses name (NUL-terminated): 0 with *ret_kind and *ret_cookie, or
 * -EINVAL for anything else (another prefix, no digits, a leading zero,
 * cookie 0 or above UINT32_MAX, anything after the digits). */
int fd_name_parse(const char *name, FdNameKind *ret_kind, uint32_t *ret_cookie);
/* Writes the name of (kind, cookie) into buf[FD_NAME_MAX]; returns buf. */
char *fd_name_format(char buf[static FD_NAME_MAX], FdNameKind kind, uint32_t cookie);
