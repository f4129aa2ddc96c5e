/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Names of held requests' descriptors in the service manager's store: a
 * name comes from outside (whatever the store hands back), so it is parsed
 * strictly and formatted back the same way. */

#include "record/fd-name.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const struct {
        char letter;
        const char *old_prefix; /* 0.1.0's names, read after an upgrade */
        FdNameKind kind;
} kinds[] = {
        { 'h', "hold-", FD_NAME_HOLD },
        { 'p', "pid-", FD_NAME_PROCESS },
        { 'c', "cg-", FD_NAME_CGROUP },
};

#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))
#define HEX_DIGITS 8

static int parse_hex(const char *p, uint32_t *ret) {
        uint32_t v = 0;
        for (int i = 0; i < HEX_DIGITS; i++, p++) {
                if (*p >= '0' && *p <= '9')
                        v = v << 4 | (uint32_t) (*p - '0');
                else if (*p >= 'a' && *p <= 'f')
                        v = v << 4 | (uint32_t) (*p - 'a' + 10);
                else
                        return -EINVAL;
        }
        if (*p || v == 0)
                return -EINVAL;
        *ret = v;
        return 0;
}

static int parse_decimal(const char *p, uint32_t *ret) {
        if (*p < '1' || *p > '9') /* no digits, a sign, or a leading zero */
                return -EINVAL;
        uint64_t v = 0;
        for (; *p >= '0' && *p <= '9'; p++) {
                v = v * 10 + (uint64_t) (*p - '0');
                if (v > UINT32_MAX)
                        return -EINVAL;
        }
        if (*p)
                return -EINVAL;
        *ret = (uint32_t) v;
        return 0;
}

int fd_name_parse(const char *name, FdNameKind *ret_kind, uint32_t *ret_cookie) {
        if (!name)
                return -EINVAL;
        for (size_t i = 0; i < N_KINDS; i++) {
                size_t n = strlen(kinds[i].old_prefix);
                int r;
                /* Unambiguous: no old prefix is a letter and hex digits. */
                if (strncmp(name, kinds[i].old_prefix, n) == 0)
                        r = parse_decimal(name + n, ret_cookie);
                else if (name[0] == kinds[i].letter && strlen(name) == 1 + HEX_DIGITS)
                        r = parse_hex(name + 1, ret_cookie);
                else
                        continue;
                if (r < 0)
                        return r;
                *ret_kind = kinds[i].kind;
                return 0;
        }
        return -EINVAL;
}

char *fd_name_format(char buf[static FD_NAME_MAX], FdNameKind kind, uint32_t cookie) {
        char letter = '?';
        for (size_t i = 0; i < N_KINDS; i++)
                if (kinds[i].kind == kind)
                        letter = kinds[i].letter;
        (void) snprintf(buf, FD_NAME_MAX, "%c%08x", letter, (unsigned) cookie);
        return buf;
}
