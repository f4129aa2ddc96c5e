/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target: pmqosctl's --cpus parser. Accepted lists are sorted,
 * unique, in range, and print back to a list that parses the same. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cpu-list.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > 4096)
                return 0;
        char *s = malloc(size + 1);
        memcpy(s, data, size);
        s[size] = 0;

        uint32_t *cpus;
        size_t n;
        if (cpu_list_parse(s, &cpus, &n) == 0) {
                if (n == 0 || n > CPU_LIST_MAX_ENTRIES)
                        abort();
                char *again = malloc(n * 6 + 1);
                size_t len = 0;
                for (size_t i = 0; i < n; i++) {
                        if (cpus[i] > CPU_LIST_MAX_CPU || (i > 0 && cpus[i] <= cpus[i - 1]))
                                abort();
                        len += (size_t) sprintf(again + len, "%s%u", i ? "," : "", cpus[i]);
                }
                uint32_t *cpus2;
                size_t n2;
                if (cpu_list_parse(again, &cpus2, &n2) != 0 || n2 != n || memcmp(cpus, cpus2, n * sizeof(uint32_t)))
                        abort();
                free(cpus2);
                free(again);
                free(cpus);
        }
        free(s);
        return 0;
}
