/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target: pmqosctl route's unit name grammar. Checked against a
 * second, plainer reading of systemd's rules (one character at a time), and
 * a name taken never makes a path: no "/", never "." or "..", at most 255
 * bytes. */

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pmqosctl-unit-name.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool allowed(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' || c == '-' ||
               c == '_' || c == '.' || c == '\\' || c == '@';
}

static bool reference(const char *s, size_t n) {
        static const char *const types[] = { "service", "socket", "target", "device", "mount", "automount",
                                             "swap",    "timer",  "path",   "slice",  "scope" };
        size_t last_dot = 0, ats = 0, at = 0;
        bool dot = false;
        if (n == 0 || n > 255)
                return false;
        for (size_t i = 0; i < n; i++) {
                if (!allowed(s[i]))
                        return false;
                if (s[i] == '.')
                        last_dot = i, dot = true;
                if (s[i] == '@')
                        ats++, at = i;
        }
        if (!dot || last_dot == 0 || ats > 1 || (ats == 1 && (at == 0 || at > last_dot)))
                return false;
        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
                if (strcmp(s + last_dot + 1, types[i]) == 0)
                        return true;
        return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > 1024)
                return 0;
        char *s = malloc(size + 1);
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = '\0';
        size_t n = strlen(s); /* the name ends at a NUL, as argv's do */
        bool ok = unit_name_valid(s);
        if (ok != reference(s, n))
                abort();
        if (ok && (strchr(s, '/') || strcmp(s, ".") == 0 || strcmp(s, "..") == 0 || n > UNIT_NAME_MAX))
                abort();
        free(s);
        return 0;
}
