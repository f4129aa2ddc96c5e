/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* C-state names as latencies, as pmqosd reads them in its configuration:
 * "C1E" means the largest exit latency any online CPU gives a state of that
 * name (util/cpuidle.c's cpuidle_latency_of(), the one rule), so that the
 * state stays allowed on every CPU, whatever its model's table says. Read
 * from sysfs here, on this machine, at the moment of the call. */

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "pmqosctl-cli.h"
#include "util/cpuidle.h"

#define NAMES_SIZE 2048

/* The machine's spelling of want in names (", " between them), or want. */
static const char *spelling(const char *names, const char *want, char *buf, size_t size) {
        size_t len = strlen(want);
        for (const char *p = names; *p;) {
                size_t n = strcspn(p, ",");
                if (n == len && strncasecmp(p, want, len) == 0) {
                        snprintf(buf, size, "%.*s", (int) n, p);
                        return buf;
                }
                p += n;
                p += strspn(p, ", ");
        }
        return want;
}

int parse_usec_or_cstate(const char *verb, const char *arg, int32_t *ret, const char **ret_name) {
        static char names[NAMES_SIZE], name[64];
        uint32_t v;

        *ret_name = NULL;
        if (parse_usec(arg, ret) == 0)
                return 0;
        if ((arg[0] >= '0' && arg[0] <= '9') || arg[0] == '-' || arg[0] == 0)
                return usage_error(verb, "invalid latency \"%s\"; give microseconds, 0 … 2000000000, or a C-state name",
                                   arg);
        int r = cpuidle_latency_of(arg_sysfs_root, arg, PMQOS_LATENCY_MAX, &v, names, sizeof(names));
        if (r == 0) {
                *ret = (int32_t) v;
                *ret_name = spelling(names, arg, name, sizeof(name));
                return 0;
        }
        if (r == -ENOENT)
                return usage_error(verb, "unknown C-state \"%s\"; this machine has: %s", arg, names);
        if (r == -ENODEV)
                return usage_error(verb,
                                   "\"%s\" is neither microseconds nor a C-state: this machine shows no C-states "
                                   "(no cpuidle under %s/devices/system/cpu)",
                                   arg, arg_sysfs_root);
        return usage_error(verb, "cannot read the C-states under %s: %s", arg_sysfs_root, strerror(-r));
}
