/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Numbers, time spans and latencies as people type them (parse-value.h). */

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "util/parse-value.h"

/* Reads the digits at *p (at least one) into *ret; -ERANGE past max. */
static int read_digits(const char **p, uint64_t max, uint64_t *ret) {
        const char *s = *p;
        uint64_t v = 0;
        if (*s < '0' || *s > '9')
                return -EINVAL;
        for (; *s >= '0' && *s <= '9'; s++) {
                unsigned d = (unsigned) (*s - '0');
                if (v > (max - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        *p = s;
        *ret = v;
        return 0;
}

int parse_decimal(const char *s, uint64_t max, uint64_t *ret) {
        uint64_t v;
        int r = read_digits(&s, max, &v);
        if (r < 0)
                return r;
        if (*s)
                return -EINVAL;
        *ret = v;
        return 0;
}

static const struct {
        const char *name;
        uint64_t usec;
} units[] = {
        /* Longer names first where one is a prefix of another ("ms" before "m"). */
        { "usec", 1 },
        { "us", 1 },
        { "\xc2\xb5s", 1 }, /* µs */
        { "msec", 1000 },
        { "ms", 1000 },
        { "seconds", USEC_PER_SEC },
        { "second", USEC_PER_SEC },
        { "sec", USEC_PER_SEC },
        { "s", USEC_PER_SEC },
        { "minutes", 60 * USEC_PER_SEC },
        { "minute", 60 * USEC_PER_SEC },
        { "min", 60 * USEC_PER_SEC },
        { "m", 60 * USEC_PER_SEC },
        { "hours", 3600 * USEC_PER_SEC },
        { "hour", 3600 * USEC_PER_SEC },
        { "hr", 3600 * USEC_PER_SEC },
        { "h", 3600 * USEC_PER_SEC },
        { "days", 86400 * USEC_PER_SEC },
        { "day", 86400 * USEC_PER_SEC },
        { "d", 86400 * USEC_PER_SEC },
        { "weeks", 7 * 86400 * USEC_PER_SEC },
        { "week", 7 * 86400 * USEC_PER_SEC },
        { "w", 7 * 86400 * USEC_PER_SEC },
};

/* The unit at *p, if any (a unit ends at a space, a digit or the end). */
static bool read_unit(const char **p, uint64_t *ret) {
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
                size_t n = strlen(units[i].name);
                if (strncmp(*p, units[i].name, n) != 0)
                        continue;
                char next = (*p)[n]; /* within the string: its first n bytes matched */
                if (next == 0 || next == ' ' || (next >= '0' && next <= '9')) {
                        *p += n;
                        *ret = units[i].usec;
                        return true;
                }
        }
        return false;
}

int parse_timespan(const char *s, uint64_t default_unit, uint64_t *ret_usec) {
        uint64_t total = 0;
        bool any = false;

        for (;;) {
                while (*s == ' ')
                        s++;
                if (!*s)
                        break;
                uint64_t v, unit = default_unit;
                int r = read_digits(&s, UINT64_MAX, &v);
                if (r < 0)
                        return r;
                /* A decimal fraction ("1.5s", "0.1"): up to 9 digits, the
                 * rest of a µs dropped. */
                uint64_t frac = 0, scale = 1;
                if (*s == '.') {
                        s++;
                        if (*s < '0' || *s > '9')
                                return -EINVAL;
                        for (; *s >= '0' && *s <= '9'; s++)
                                if (scale < 1000000000) {
                                        frac = frac * 10 + (uint64_t) (*s - '0');
                                        scale *= 10;
                                }
                }
                while (*s == ' ')
                        s++;
                if (*s && !(*s >= '0' && *s <= '9') && !read_unit(&s, &unit))
                        return -EINVAL;
                if (unit > 0 && v > (UINT64_MAX - total) / unit)
                        return -ERANGE;
                total += v * unit;
                /* frac * unit / scale, in two halves that stay within 64 bits
                 * (frac < scale <= 1e9). */
                uint64_t part = frac * (unit / scale) + frac * (unit % scale) / scale;
                if (part > UINT64_MAX - total)
                        return -ERANGE;
                total += part;
                any = true;
        }
        if (!any)
                return -EINVAL;
        *ret_usec = total;
        return 0;
}

int parse_latency(const char *s, int32_t max, int32_t *ret) {
        uint64_t v;
        int r = parse_timespan(s, 1, &v);
        if (r < 0)
                return r;
        if (v > (uint64_t) max)
                return -ERANGE;
        *ret = (int32_t) v;
        return 0;
}

bool latency_is_cstate_name(const char *s) {
        size_t n = strlen(s);
        if (n == 0 || n > 31 || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')) || s[n - 1] == ' ' ||
            strcasecmp(s, "none") == 0)
                return false;
        return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-. ") == n;
}
