/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Strict: digits, commas and dashes only, no empty items, no spaces. */

#include "util/cpu-list.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static int parse_number(const char **p, uint32_t *ret) {
        uint64_t v = 0;
        const char *s = *p;

        if (*s < '0' || *s > '9')
                return -EINVAL;
        while (*s >= '0' && *s <= '9') {
                v = v * 10 + (uint64_t) (*s - '0');
                if (v > CPU_LIST_MAX_CPU)
                        return -EINVAL;
                s++;
        }
        *p = s;
        *ret = (uint32_t) v;
        return 0;
}

int cpu_list_parse(const char *s, uint32_t **ret, size_t *ret_n) {
        bool seen[CPU_LIST_MAX_CPU + 1] = {};
        size_t n = 0;

        if (!s || !*s)
                return -EINVAL;
        for (const char *p = s;;) {
                uint32_t lo, hi;
                if (parse_number(&p, &lo) < 0)
                        return -EINVAL;
                hi = lo;
                if (*p == '-') {
                        p++;
                        if (parse_number(&p, &hi) < 0 || hi < lo)
                                return -EINVAL;
                }
                for (uint32_t c = lo; c <= hi; c++)
                        if (!seen[c]) {
                                if (++n > CPU_LIST_MAX_ENTRIES)
                                        return -EINVAL;
                                seen[c] = true;
                        }
                if (*p == 0)
                        break;
                if (*p != ',')
                        return -EINVAL;
                p++;
        }

        if (n == 0)
                return -EINVAL;
        uint32_t *cpus = malloc(n * sizeof(uint32_t));
        if (!cpus)
                return -ENOMEM;
        size_t k = 0;
        for (uint32_t c = 0; c <= CPU_LIST_MAX_CPU; c++)
                if (seen[c])
                        cpus[k++] = c;
        *ret = cpus;
        *ret_n = n;
        return 0;
}
