/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target: pmqos-oci-hook's parsing of the OCI state, of
 * config.json and of the annotations (CRI-O's and containerd's shapes). What
 * it accepts has a valid id, a plan within range, a reason that poststop
 * finds again by the id; a sandbox never acts; a plan let through without
 * MachineWide=allow stays within the container's cpuset. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "oci-state.h"
#include "util/cpu-list.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool in_list(uint32_t cpu, const char *list) {
        uint32_t *set = NULL;
        size_t n = 0;
        bool found = false;
        if (cpu_list_parse(list, &set, &n) == 0)
                for (size_t i = 0; i < n; i++)
                        found |= set[i] == cpu;
        free(set);
        return found;
}

static void check_confined(const OciPlan *plan, const char *config_cpus) {
        char err[OCI_ERR_MAX] = "";
        if (oci_plan_confine(plan, config_cpus, "0-3", true, "x.conf", err, sizeof(err)) < 0 &&
            (!config_cpus || !err[0] || strchr(err, '\n')))
                abort(); /* with MachineWide=allow only a broken cpuset is refused */
        if (oci_plan_confine(plan, config_cpus, "0-3", false, "x.conf", err, sizeof(err)) < 0) {
                if (!err[0] || strchr(err, '\n'))
                        abort();
                return;
        }
        if (!plan->act)
                return;
        if (!config_cpus || (!plan->cpus && !plan->want_container))
                abort(); /* the whole machine let through under MachineWide=deny */
        for (size_t i = 0; plan->cpus && i < plan->n_cpus; i++)
                if (!in_list(plan->cpus[i], config_cpus))
                        abort();
        size_t covered = 0; /* nor every online CPU ("0-3"): the whole machine in all but name */
        for (uint32_t c = 0; c < 4; c++)
                for (size_t i = 0; i < (plan->cpus ? plan->n_cpus : 1); i++)
                        if (plan->cpus ? plan->cpus[i] == c : in_list(c, config_cpus)) {
                                covered++;
                                break;
                        }
        if (covered == 4)
                abort();
}

static void check_plan(const OciState *s, const char *config_cpus) {
        OciPlan plan;
        char err[OCI_ERR_MAX];
        if (oci_plan_make(s, &plan, err, sizeof(err)) == 0) {
                if (plan.sandbox && plan.act)
                        abort();
                check_confined(&plan, config_cpus);
                if (!oci_reason_matches(plan.reason, s->id) || strlen(plan.reason) > 256)
                        abort();
                if (plan.act && !plan.cstate && (plan.usec < 0 || plan.usec > 2000000000))
                        abort();
                if (plan.cpus && plan.n_cpus == 0)
                        abort();
        } else if (!err[0] || strchr(err, '\n'))
                abort(); /* every refusal says why, on one line */
        oci_plan_done(&plan);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > 65536)
                return 0;
        const char *text = (const char *) data;
        OciState s;
        char err[OCI_ERR_MAX];
        if (oci_state_parse(text, size, &s, err, sizeof(err)) < 0) {
                if (!err[0])
                        abort();
                return 0;
        }
        if (!s.id || !s.id[0] || strlen(s.id) > OCI_ID_MAX)
                abort();
        check_plan(&s, NULL);
        /* The same text as the bundle's config.json, filling what is missing. */
        char *cpus;
        if (oci_config_parse(text, size, &s, &cpus, err, sizeof(err)) == 0) {
                check_plan(&s, cpus);
                free(cpus);
        }
        oci_state_done(&s);
        return 0;
}
