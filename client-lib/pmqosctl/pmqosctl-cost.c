/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What pmqosctl status says of the cost of the bounds in force: the
 * holders binding now (Ledger()), the C-states they keep CPUs out of, the
 * idle time spent shallow meanwhile, and whether the kernel obeyed; and
 * Explain()'s per-CPU figures of it in --json. */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmqosctl-cli.h"

void json_cpu_cost(const pmqos_explanation *e, size_t i) {
        if (i >= e->n_cpu_costs)
                return;
        const pmqos_cpu_cost_info *cost = &e->cpu_costs[i];
        printf(", \"shallow_idle\": %" PRIu64 ", \"blocked_entries\": %" PRIu64 ", \"verified\": %s",
               cost->shallow_idle_usec, cost->blocked_entries, cost->verified ? "true" : "false");
}

static void print_seconds(uint64_t usec) {
        if (usec >= 60000000u)
                printf("%.1f min", (double) usec / 60e6);
        else if (usec >= 1000000u)
                printf("%.1f s", (double) usec / 1e6);
        else
                printf("%" PRIu64 " ms", usec / 1000u);
}

/* The C-states no CPU may enter now, by name, once each. */
static void print_blocked(const pmqos_explanation *e) {
        const char *seen[64];
        size_t n = 0;
        for (size_t g = 0; g < e->n_cpu_groups + e->n_cpus; g++) {
                const pmqos_cstate_info *st =
                        g < e->n_cpu_groups ? e->cpu_groups[g].cstates : e->cpus[g - e->n_cpu_groups].cstates;
                size_t n_st = g < e->n_cpu_groups ? e->cpu_groups[g].n_cstates : e->cpus[g - e->n_cpu_groups].n_cstates;
                for (size_t k = 0; k < n_st; k++) {
                        bool known = st[k].allowed;
                        for (size_t i = 0; i < n && !known; i++)
                                known = strcmp(seen[i], st[k].name) == 0;
                        if (!known && n < 64)
                                seen[n++] = st[k].name;
                }
        }
        for (size_t i = 0; i < n; i++) {
                char *t = term_text(seen[i]);
                printf("%s%s", i ? ", " : "", t ?: "?");
                free(t);
        }
}

static void print_holder(const pmqos_ledger_row *row) {
        char *comm = term_text(row->comm), *unit = term_text(row->unit);
        if (strcmp(row->kind, "request") == 0 || strcmp(row->kind, "rule") == 0) {
                printf("%s %" PRIu32 " of uid %" PRIu32, row->kind, row->cookie, row->uid);
                if (comm && comm[0])
                        printf(" (%s%s%s)", comm, unit && unit[0] ? ", " : "", unit && unit[0] ? unit : "");
        } else if (strcmp(row->kind, "external") == 0)
                printf("another holder of the device");
        else
                printf("the %s", row->kind);
        free(comm);
        free(unit);
}

void print_cost(pmqos_client *c, const pmqos_explanation *e) {
        pmqos_ledger_row *rows;
        size_t n, active = 0;
        if (pmqos_ledger(c, &rows, &n) < 0)
                return; /* a pmqosd without the ledger: nothing to say */
        for (size_t i = 0; i < n; i++) {
                if (!rows[i].active)
                        continue;
                printf(active++ ? "          " : "\nCost:     ");
                print_holder(&rows[i]);
                printf(" keeps CPUs out of ");
                print_blocked(e);
                printf(": ");
                print_seconds(rows[i].shallow_idle_usec);
                printf(" of idle time spent shallow over ");
                print_seconds(rows[i].held_usec);
                printf(" held (summed over CPUs, since pmqosd started); ");
                if (rows[i].blocked_entries == 0)
                        printf("verified: the kernel entered no blocked state\n");
                else
                        printf("NOT obeyed: the kernel entered blocked states %" PRIu64 " times\n",
                               rows[i].blocked_entries);
        }
        if (active == 0)
                printf("\nCost:     no bound keeps a CPU out of a C-state now\n");
        pmqos_ledger_free(rows, n);
}
