/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target: what pmqosctl run's stand-in makes of a write to
 * /dev/cpu_dma_latency. Checked against a second, plainer reading of the
 * kernel's rules (kstrtos32_from_user in base 16), and the value asked of the
 * broker is always one the broker takes. */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "standin-parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The kernel's rules, spelled differently: sign, "0x", hex digits (more than
 * 16 significant ones overflow 64 bits: -ERANGE before anything else is
 * looked at), one newline, the end; then the range of an int. */
static int reference(const char *t, int32_t *ret) {
        const char *p = t;
        bool neg = *p == '-';
        if (*p == '-' || *p == '+')
                p++;
        if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
                p += 2;
        size_t n = strspn(p, "0123456789abcdefABCDEF");
        const char *rest = p + n;
        while (n > 1 && *p == '0')
                p++, n--;
        if (n > 16)
                return -ERANGE;
        if (n == 0)
                return -EINVAL;
        if (*rest == '\n')
                rest++;
        if (*rest)
                return -EINVAL;
        char digits[17];
        memcpy(digits, p, n);
        digits[n] = '\0';
        unsigned long long u = strtoull(digits, NULL, 16);
        if (neg ? u > 2147483648ULL : u > 2147483647ULL)
                return -ERANGE;
        *ret = neg ? (int32_t) (-(long long) u) : (int32_t) u;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > 4096)
                return 0;
        int32_t v = 0, w = 0;
        int r = standin_parse_write(data, size, &v);
        if (size == 4) {
                int32_t raw;
                memcpy(&raw, data, 4);
                if (r != 0 || v != raw)
                        abort();
        } else {
                char t[35];
                size_t n = size < 34 ? size : 34;
                memcpy(t, data, n);
                t[n] = '\0';
                int e = reference(t, &w);
                if (e != r || (r == 0 && v != w))
                        abort();
        }
        if (r == 0) {
                int32_t b = standin_broker_value(v);
                if (b < -1 || b > 2000000000 || (b != -1 && b != v))
                        abort();
        }
        return 0;
}
