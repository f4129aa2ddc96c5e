/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target: the names of held requests' descriptors as the service
 * manager's store hands them back. An accepted name formats back to itself,
 * or (an old name, read after an upgrade) to today's name of the same
 * request, which parses back to it. */

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "record/fd-name.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > 512) /* FDNAME= is at most 255 characters */
                return 0;
        char *s = malloc(size + 1);
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = 0;

        FdNameKind kind;
        uint32_t cookie;
        if (fd_name_parse(s, &kind, &cookie) == 0) {
                char buf[FD_NAME_MAX];
                FdNameKind kind2;
                uint32_t cookie2;
                if (cookie == 0 || (kind != FD_NAME_HOLD && kind != FD_NAME_PROCESS && kind != FD_NAME_CGROUP))
                        abort();
                fd_name_format(buf, kind, cookie);
                bool old = strchr(s, '-') != NULL;
                if ((!old && strcmp(buf, s) != 0) || fd_name_parse(buf, &kind2, &cookie2) != 0 || kind2 != kind ||
                    cookie2 != cookie)
                        abort();
        }
        free(s);
        return 0;
}
