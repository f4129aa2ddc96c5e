/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Any bytes as a unit rule file: refused with a message, or taken as a rule
 * whose unit name is valid, whose value is in range and whose CPU list is
 * sorted and unique; never a crash, leak or read past the input. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dbus/contract.h"
#include "conf/rule-format.h"
#include "util/parse-value.h"
#include "util/text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Rule r;
        char err[512];
        if (rule_parse("/etc/pmqos/rules.d/f.conf", (const char *) data, size, &r, err, sizeof(err)) < 0) {
                if (!err[0] || !utf8_is_valid(err, strlen(err)))
                        abort();
                return 0;
        }
        if (!rule_unit_name_valid(r.unit) || r.latency < 0 || r.latency > PMQOS_CONTRACT_LATENCY_MAX)
                abort();
        if (r.latency_cstate && (!latency_is_cstate_name(r.latency_cstate) || r.latency_line == 0))
                abort();
        for (size_t i = 1; i < r.n_cpus; i++)
                if (r.cpus[i - 1] >= r.cpus[i])
                        abort();
        if (r.reason && (strlen(r.reason) > PMQOS_REASON_MAX || !utf8_is_valid(r.reason, strlen(r.reason))))
                abort();
        rule_done(&r);
        return 0;
}
