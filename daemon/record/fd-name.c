/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Names of held requests' descriptors in the service manager's store: a
 * name comes from outside (whatever the store hands back), so it is parsed
 * strictly and formatted back the same way. */

#include "record/fd-name.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const struct {
        const char *prefix;
        FdNameKind kind;
} prefixes[] = {
        { "hold-", FD_NAME_HOLD },
        { "pid-", FD_NAME_PROCESS },
        { "cg-", FD_NAME_CGROUP },
};

static const char *prefix_of(FdNameKind kind) {
        for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
                if (prefixes[i].kind == kind)
                        return prefixes[i].prefix;
        return NULL;
}

int fd_name_parse(const char *name, FdNameKind *ret_kind, uint32_t *ret_cookie) {
        if (!name)
                return -EINVAL;
        for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
                size_t n = strlen(prefixes[i].prefix);
                if (strncmp(name, prefixes[i].prefix, n) != 0)
                        continue;
                const char *p = name + n;
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
                *ret_kind = prefixes[i].kind;
                *ret_cookie = (uint32_t) v;
                return 0;
        }
        return -EINVAL;
}

char *fd_name_format(char buf[static FD_NAME_MAX], FdNameKind kind, uint32_t cookie) {
        const char *prefix = prefix_of(kind);
        (void) snprintf(buf, FD_NAME_MAX, "%s%u", prefix ? prefix : "?-", (unsigned) cookie);
        return buf;
}
