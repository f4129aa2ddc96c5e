/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Whatever bytes a process puts in its command line (or a state file holds),
 * the cleaned text is valid UTF-8, has no control character, is no longer
 * than asked, and cleans to itself. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        size_t max = size > 0 ? 8 + data[0] * 8u : 8;
        char *out = text_clean((const char *) data, size, max);
        if (!out)
                return 0;
        size_t len = strlen(out);
        if (len > max || !utf8_is_valid(out, len))
                abort();
        for (const unsigned char *p = (const unsigned char *) out; *p; p++)
                if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0))
                        abort();
        /* Clean text stays as it is, when it is not cut. */
        if (!strstr(out, "\xe2\x80\xa6")) {
                char *again = text_clean(out, len, max);
                if (!again || strcmp(again, out) != 0)
                        abort();
                free(again);
        }
        free(out);
        return 0;
}
