/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The holder scan helper's answer, as pmqosd reads it: any bytes are taken
 * or refused whole; what is taken re-encodes to the same bytes. The cpuidle
 * number parser takes the rest of the input. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/cpuidle.h"
#include "sys/holders.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        HolderScan scan;
        if (holders_decode(data, size, &scan) == 0) {
                uint8_t buf[HOLDERS_WIRE_MAX];
                size_t len = holders_encode(&scan, buf);
                if (len != size || memcmp(buf, data, size) != 0 || scan.n > HOLDERS_MAX)
                        abort();
        }
        char text[64];
        size_t n = size < sizeof(text) - 1 ? size : sizeof(text) - 1;
        memcpy(text, data, n);
        text[n] = 0;
        uint64_t v;
        if (cpuidle_parse_u64(text, &v) == 0 && (text[0] < '0' || text[0] > '9'))
                abort();
        return 0;
}
