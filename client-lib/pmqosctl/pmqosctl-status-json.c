/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqosctl status --json: the Explain() dictionary, key for key (the
 * custody's foreign_writer and disabled_by included), but one convention
 * for "no constraint" in every field: -1. */

#include <inttypes.h>
#include <stdio.h>

#include "pmqosctl-cli.h"

static const char *json_bool(bool b) {
        return b ? "true" : "false";
}

/* One convention for "no constraint" in every field: -1, as effective has
 * it (the kernel reads PMQOS_LATENCY_MAX then). */
static int32_t json_usec(int32_t v) {
        return v >= PMQOS_LATENCY_MAX ? -1 : v;
}

/* A writer of a CPU's file (foreign_writer, disabled_by): {} when nobody but pmqosd. */
static void json_writer(const char *key, const pmqos_writer_info *w) {
        printf(", \"%s\": {", key);
        if (w->pid != 0) {
                printf("\"pid\": %" PRIu32 ", \"comm\": ", w->pid);
                json_string(w->comm);
                printf(", \"unit\": ");
                json_string(w->unit);
                printf(", \"value\": ");
                json_string(w->value);
                printf(", \"when\": %" PRIi64, w->when_usec);
        }
        printf("}");
}

void print_explanation_json(const pmqos_explanation *e, pmqos_client *c) {
        printf("{\"effective\": %" PRIi32 ", \"kernel\": %" PRIi32 ", \"floor\": %" PRIi32
               ", \"wakeup_effective\": %" PRIi32 ", \"wakeup_kernel\": %" PRIi32 ", \"bound_by\": ",
               json_usec(e->effective), json_usec(e->kernel), json_usec(e->floor), json_usec(e->wakeup_effective),
               json_usec(e->wakeup_kernel));
        json_string(e->bound_by);
        printf(", \"binding\": ");
        if (e->binding)
                json_request(e->binding);
        else
                printf("{}");
        printf(", \"external_holders\": [");
        for (size_t i = 0; i < e->n_holders; i++) {
                printf("%s{\"pid\": %" PRIu32 ", \"uid\": %" PRIu32 ", \"exec\": ", i ? ", " : "", e->holders[i].pid,
                       e->holders[i].uid);
                json_string(e->holders[i].exec);
                printf("}");
        }
        printf("], \"external_holders_complete\": %s, \"external_holders_left_out\": %" PRIu32
               ", \"external_holders_unscanned\": [",
               json_bool(e->holders_complete), e->holders_left_out);
        for (size_t i = 0; i < e->n_holders_unscanned; i++)
                printf("%s{\"uid\": %" PRIu32 ", \"processes\": %" PRIu32 "}", i ? ", " : "",
                       e->holders_unscanned[i].uid, e->holders_unscanned[i].processes);
        printf("], \"cpus\": [");
        for (size_t i = 0; i < e->n_cpus; i++) {
                const pmqos_cpu_info *cpu = &e->cpus[i];
                printf("%s\n  {\"cpu\": %" PRIu32 ", \"bound\": %" PRIi32 ", \"resume_latency\": ", i ? "," : "",
                       cpu->cpu, json_usec(cpu->bound));
                json_string(cpu->resume_latency);
                printf(", \"foreign\": %s", json_bool(cpu->foreign));
                const pmqos_cpu_custody_info *custody = pmqos_explanation_custody(e, i);
                if (custody)
                        json_writer("foreign_writer", &custody->foreign_writer);
                json_cpu_cost(e, i);
                printf(", \"cstates\": [");
                for (size_t k = 0; k < cpu->n_cstates; k++) {
                        const pmqos_cstate_info *st = &cpu->cstates[k];
                        printf("%s{\"name\": ", k ? ", " : "");
                        json_string(st->name);
                        printf(", \"latency\": %" PRIu32 ", \"allowed\": %s, \"disabled\": %s, \"usage\": %" PRIu64
                               ", \"time\": %" PRIu64,
                               st->latency_usec, json_bool(st->allowed), json_bool(st->disabled), st->usage,
                               st->time_usec);
                        if (custody && k < custody->n_disabled_by)
                                json_writer("disabled_by", &custody->disabled_by[k]);
                        printf("}");
                }
                printf("]}");
        }
        printf("%s], \"kernel_ignores_writes\": %s, \"rules\": [", e->n_cpus ? "\n" : "",
               json_bool(e->kernel_ignores_writes));
        for (size_t i = 0; i < e->n_rules; i++) {
                const pmqos_rule_info *rule = &e->rules[i];
                printf("%s{\"file\": ", i ? ", " : "");
                json_string(rule->file);
                printf(", \"unit\": ");
                json_string(rule->unit);
                printf(", \"latency\": %" PRIi32 ", \"state\": ", json_usec(rule->latency));
                json_string(rule->state);
                printf(", \"holds\": %s, \"cpus\": [", json_bool(rule->holds));
                for (size_t k = 0; k < rule->n_cpus; k++)
                        printf("%s%" PRIu32, k ? ", " : "", rule->cpus[k]);
                printf("]}");
        }
        printf("], \"rules_followed\": %s", json_bool(e->rules_followed));
        if (c)
                json_cost(c, e);
        printf("}\n");
}
