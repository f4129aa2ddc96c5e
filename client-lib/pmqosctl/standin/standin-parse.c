// SPDX-License-Identifier: LGPL-2.1-or-later
/* The kernel's parsing of a write to /dev/cpu_dma_latency, reproduced:
 * cpu_latency_qos_write() takes 4 bytes as binary, anything else through
 * kstrtos32_from_user(buf, count, 16, &value), which copies at most 34
 * bytes (sign, 32 binary digits, newline), ends them with a NUL and runs
 * kstrtoint(): kstrtoll() then a range check. */

#include "standin-parse.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "dbus/contract.h"

#define KERNEL_TEXT_MAX 34 /* sizeof(char[1 + 32 + 1 + 1]) - 1 */

/* _parse_integer() in base 16 after _parse_integer_fixup_radix(): digits
 * until the first non-digit; overflow of 64 bits is remembered. Returns the
 * number of digits taken. */
static size_t parse_hex(const char *s, unsigned long long *ret, bool *overflow) {
        unsigned long long v = 0;
        size_t n = 0;
        *overflow = false;
        for (;; n++) {
                unsigned c = (unsigned char) s[n], lc = c | 0x20, d;
                if (c >= '0' && c <= '9')
                        d = c - '0';
                else if (lc >= 'a' && lc <= 'f')
                        d = lc - 'a' + 10;
                else
                        break;
                if (v > (~0ULL - d) / 16)
                        *overflow = true;
                v = v * 16 + d;
        }
        *ret = v;
        return n;
}

/* _kstrtoull(s, 16): "0x" skipped, digits, one newline, then the end. */
static int kstrtoull16(const char *s, unsigned long long *ret) {
        if (s[0] == '0' && (s[1] | 0x20) == 'x')
                s += 2;
        bool overflow;
        size_t n = parse_hex(s, ret, &overflow);
        if (overflow)
                return -ERANGE;
        if (n == 0)
                return -EINVAL;
        s += n;
        if (*s == '\n')
                s++;
        return *s ? -EINVAL : 0;
}

/* kstrtoint(s, 16): kstrtoll() ("-" then digits, or an optional "+"),
 * then the value must fit an int. */
static int kstrtoint16(const char *s, int32_t *ret) {
        unsigned long long u;
        long long v;
        int r;
        if (s[0] == '-') {
                r = kstrtoull16(s + 1, &u);
                if (r < 0)
                        return r;
                if ((long long) -u > 0)
                        return -ERANGE;
                v = (long long) -u;
        } else {
                r = kstrtoull16(s[0] == '+' ? s + 1 : s, &u);
                if (r < 0)
                        return r;
                if ((long long) u < 0)
                        return -ERANGE;
                v = (long long) u;
        }
        if (v != (int32_t) v)
                return -ERANGE;
        *ret = (int32_t) v;
        return 0;
}

int standin_parse_write(const void *buf, size_t size, int32_t *ret) {
        if (size == sizeof(int32_t)) {
                memcpy(ret, buf, sizeof(int32_t));
                return 0;
        }
        char text[KERNEL_TEXT_MAX + 1];
        if (size > KERNEL_TEXT_MAX)
                size = KERNEL_TEXT_MAX;
        if (size)
                memcpy(text, buf, size);
        text[size] = '\0';
        return kstrtoint16(text, ret);
}

int32_t standin_broker_value(int32_t v) {
        return v < 0 || v > PMQOS_CONTRACT_LATENCY_MAX ? -1 : v;
}
