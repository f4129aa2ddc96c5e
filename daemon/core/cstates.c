/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one lookup (util/cpuidle.c: the largest exit latency of the state on
 * any online CPU, pmqosctl's rule) and the one message for every key. */

#include "core/cstates.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "dbus/contract.h"
#include "util/cpuidle.h"

/* What name stands for, or why it stands for nothing here (in err). */
static int resolve(const char *sysfs_root, const char *path, unsigned line, const char *key, const char *name,
                   int32_t *ret, char *err, size_t err_size) {
        char names[256];
        uint32_t v;
        int r = cpuidle_latency_of(sysfs_root, name, PMQOS_CONTRACT_LATENCY_MAX, &v, names, sizeof(names));
        if (r >= 0) {
                *ret = (int32_t) v;
                return 0;
        }
        if (r == -ENOENT)
                snprintf(err, err_size, "%s:%u: %s: invalid value \"%s\", expected a C-state this machine has (%s)",
                         path, line, key, name, names);
        else if (r == -ENODEV)
                snprintf(err, err_size,
                         "%s:%u: %s: invalid value \"%s\", expected microseconds: this machine shows no C-states (no "
                         "cpuidle under %s/devices/system/cpu)",
                         path, line, key, name, sysfs_root);
        else {
                snprintf(err, err_size, "out of memory");
                return r;
        }
        return -EINVAL;
}

int core_resolve_config_cstates(Config *c, const char *path, const char *sysfs_root, char *err, size_t err_size) {
        int32_t def = c->default_floor, battery = c->battery_floor;
        int r = 0;
        if (c->default_floor_cstate.name)
                r = resolve(sysfs_root, path, c->default_floor_cstate.line, "DefaultMinimumLatency",
                            c->default_floor_cstate.name, &def, err, err_size);
        if (r >= 0 && c->battery_floor_cstate.name)
                r = resolve(sysfs_root, path, c->battery_floor_cstate.line, "OnBatteryMinimumLatency",
                            c->battery_floor_cstate.name, &battery, err, err_size);
        if (r < 0)
                return r;
        c->default_floor = def;
        c->battery_floor = battery;
        free(c->default_floor_cstate.name);
        free(c->battery_floor_cstate.name);
        c->default_floor_cstate = c->battery_floor_cstate = (ConfigCState){};
        return 0;
}

int core_resolve_rule_cstates(RuleSet *s, const char *sysfs_root, char *err, size_t err_size) {
        int32_t *values = calloc(s->n + 1, sizeof(int32_t));
        int r = values ? 0 : -ENOMEM;
        for (size_t i = 0; r >= 0 && i < s->n; i++) {
                const Rule *rule = &s->rules[i];
                values[i] = rule->latency;
                if (rule->latency_cstate)
                        r = resolve(sysfs_root, rule->file, rule->latency_line, "Latency", rule->latency_cstate,
                                    &values[i], err, err_size);
        }
        for (size_t i = 0; r >= 0 && i < s->n; i++)
                s->rules[i].latency = values[i];
        if (r == -ENOMEM)
                snprintf(err, err_size, "out of memory");
        free(values);
        return r;
}
