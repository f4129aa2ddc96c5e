/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a writer controls of what pmqosd reads about it: its cgroup's path
 * (a delegated subtree names its own cgroups) in /proc/PID/cgroup, and a
 * path that a link under /proc/self/fd may show. The unit is valid UTF-8,
 * fits its buffer and ends in .service or .scope (or is empty); a knob is
 * one of the three kinds with a CPU and state in range, or refused. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sys/foreign-writes.h"
#include "util/text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool ends_with(const char *s, const char *suffix) {
        size_t n = strlen(s), m = strlen(suffix);
        return n >= m && strcmp(s + n - m, suffix) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = '\0';

        char unit[FOREIGN_UNIT_MAX];
        foreign_unit_of_cgroup(text, unit, sizeof(unit));
        size_t len = strlen(unit);
        if (len >= sizeof(unit) || !utf8_is_valid(unit, len))
                abort();
        if (len > 0 && !ends_with(unit, ".service") && !ends_with(unit, ".scope") && !strstr(unit, "\xe2\x80\xa6"))
                abort();

        KnobKind kind;
        uint32_t cpu;
        unsigned state;
        if (foreign_knob_of_path(text, &kind, &cpu, &state) == 0 &&
            (cpu >= FOREIGN_CPUS_MAX || state >= CPUIDLE_STATES_MAX ||
             (kind != KNOB_RESUME_LATENCY && kind != KNOB_DISABLE && kind != KNOB_ONLINE)))
                abort();
        free(text);
        return 0;
}
