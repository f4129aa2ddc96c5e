/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target: pmqos-oci-hook's parsing of the OCI state, of
 * config.json and of the annotations. What it accepts has a valid id, a
 * plan within range, and a reason that poststop finds again by the id. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "oci-state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_plan(const OciState *s) {
        OciPlan plan;
        char err[OCI_ERR_MAX];
        if (oci_plan_make(s, &plan, err, sizeof(err)) == 0) {
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
        check_plan(&s);
        /* The same text as the bundle's config.json, filling what is missing. */
        char *cpus;
        if (oci_config_parse(text, size, &s, &cpus, err, sizeof(err)) == 0) {
                check_plan(&s);
                free(cpus);
        }
        oci_state_done(&s);
        return 0;
}
