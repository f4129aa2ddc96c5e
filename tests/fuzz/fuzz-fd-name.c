/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target: the names of held requests' descriptors as the service
 * manager's store hands them back. An accepted name formats back to itself. */

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
                if (cookie == 0 || (kind != FD_NAME_HOLD && kind != FD_NAME_PROCESS && kind != FD_NAME_CGROUP) ||
                    strcmp(fd_name_format(buf, kind, cookie), s) != 0)
                        abort();
        }
        free(s);
        return 0;
}
