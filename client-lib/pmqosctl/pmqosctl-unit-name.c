/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* systemd's grammar of a unit name (pmqosctl-unit-name.h). */

#include "pmqosctl-unit-name.h"

#include <string.h>

static const char *const unit_types[] = { ".service", ".socket", ".target", ".device", ".mount", ".automount",
                                          ".swap",    ".timer",  ".path",   ".slice",  ".scope" };

bool unit_name_has_type(const char *name) {
        size_t n = strlen(name);
        for (size_t i = 0; i < sizeof(unit_types) / sizeof(unit_types[0]); i++) {
                size_t m = strlen(unit_types[i]);
                if (n >= m && strcmp(name + n - m, unit_types[i]) == 0)
                        return true;
        }
        return false;
}

bool unit_name_valid(const char *name) {
        size_t n = strlen(name);
        if (n == 0 || n > UNIT_NAME_MAX)
                return false;
        if (strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:-_.\\@") != n)
                return false;
        const char *dot = strrchr(name, '.');
        if (!dot || dot == name)
                return false;
        const char *at = strchr(name, '@');
        if (at && (at == name || at > dot || strchr(at + 1, '@')))
                return false;
        return unit_name_has_type(name);
}
