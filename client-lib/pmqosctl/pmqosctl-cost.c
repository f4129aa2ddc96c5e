/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What pmqosctl status says of the cost of the bounds in force: the
 * holders binding now and their totals (Ledger(): per holder, since pmqosd
 * started), the C-states kept out now, and whether the kernel obeyed; and
 * in --json those figures and Explain()'s per-CPU ones. */

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

/* A duration rounded to the nearest ms, tenth of a second or tenth of a
 * minute (a value that rounds up to the next unit is said in it: 999.6 ms
 * is "1.0 s"); "< 1 ms" for less than a millisecond but some. */
static void print_seconds(uint64_t usec) {
        if (usec == 0)
                printf("0 ms");
        else if (usec < 1000u)
                printf("< 1 ms");
        else if (usec < 999500u)
                printf("%" PRIu64 " ms", (usec + 500u) / 1000u);
        else if (usec < 59950000u) {
                uint64_t tenths = (usec + 50000u) / 100000u;
                printf("%" PRIu64 ".%" PRIu64 " s", tenths / 10u, tenths % 10u);
        } else {
                uint64_t tenths = usec / 6000000u + (usec % 6000000u >= 3000000u);
                printf("%" PRIu64 ".%" PRIu64 " min", tenths / 10u, tenths % 10u);
        }
}

/* The C-states some CPU may not enter now, by name, once each: at most
 * max of them in seen (pointers into e). */
static size_t blocked_names(const pmqos_explanation *e, const char **seen, size_t max) {
        size_t n = 0;
        for (size_t g = 0; g < e->n_cpu_groups + e->n_cpus; g++) {
                const pmqos_cstate_info *st =
                        g < e->n_cpu_groups ? e->cpu_groups[g].cstates : e->cpus[g - e->n_cpu_groups].cstates;
                size_t n_st = g < e->n_cpu_groups ? e->cpu_groups[g].n_cstates : e->cpus[g - e->n_cpu_groups].n_cstates;
                for (size_t k = 0; k < n_st; k++) {
                        bool known = st[k].allowed;
                        for (size_t i = 0; i < n && !known; i++)
                                known = strcmp(seen[i], st[k].name) == 0;
                        if (!known && n < max)
                                seen[n++] = st[k].name;
                }
        }
        return n;
}

/* Who a row is; true when it is several holders (a folded row). */
static bool print_holder(const pmqos_ledger_row *row) {
        char *comm = term_text(row->comm), *unit = term_text(row->unit);
        bool several = strcmp(row->kind, "other") == 0;
        if (strcmp(row->kind, "request") == 0 || strcmp(row->kind, "rule") == 0) {
                printf("%s %" PRIu32 " of uid %" PRIu32, row->kind, row->cookie, row->uid);
                if (comm && comm[0])
                        printf(" (%s%s%s)", comm, unit && unit[0] ? ", " : "", unit && unit[0] ? unit : "");
        } else if (strcmp(row->kind, "external") == 0)
                printf("another program (holding the device, or writing a CPU's file)");
        else if (several && row->uid != UINT32_MAX)
                printf("other holders of uid %" PRIu32 " (folded, kind other)", row->uid);
        else if (several)
                printf("other holders (folded, kind other)");
        else
                printf("the %s", row->kind);
        free(comm);
        free(unit);
        return several;
}

/* What Ledger() has: one row per holder (kind, uid, comm, unit), its
 * figures summed over every request of it and every CPU since pmqosd
 * started; said as such, not as the binding request's own. */
void print_cost(pmqos_client *c, const pmqos_explanation *e) {
        pmqos_ledger_row *rows;
        size_t n, active = 0;
        if (pmqos_ledger(c, &rows, &n) < 0)
                return; /* a pmqosd without the ledger: nothing to say */
        for (size_t i = 0; i < n; i++) {
                if (!rows[i].active)
                        continue;
                printf(active++ ? "          " : "\nCost:     ");
                if (print_holder(&rows[i]))
                        printf(" bind now; their total since pmqosd started (every request folded into that "
                               "row, summed over CPUs): ");
                else
                        printf(" binds now; its holder's total since pmqosd started (every request of that uid, "
                               "program and unit, summed over CPUs): ");
                print_seconds(rows[i].shallow_idle_usec);
                printf(" of idle time spent shallow over ");
                print_seconds(rows[i].held_usec);
                printf(" held; ");
                if (rows[i].blocked_entries == 0)
                        printf("the kernel entered no blocked state in all that time\n");
                else
                        printf("NOT obeyed: the kernel entered blocked states %" PRIu64 " times in all that time\n",
                               rows[i].blocked_entries);
        }
        const char *names[64];
        size_t n_names = blocked_names(e, names, 64);
        if (active == 0)
                printf("\nCost:     no bound keeps a CPU out of a C-state now\n");
        else if (n_names > 0) {
                printf("          kept out now, on some CPU: ");
                for (size_t i = 0; i < n_names; i++) {
                        char *t = term_text(names[i]);
                        printf("%s%s", i ? ", " : "", t ?: "?");
                        free(t);
                }
                printf("\n");
        }
        pmqos_ledger_free(rows, n);
}

/* The Cost line's figures in status --json: ", \"cost\": {…}" (nothing
 * from a pmqosd without the ledger). */
void json_cost(pmqos_client *c, const pmqos_explanation *e) {
        pmqos_ledger_row *rows;
        size_t n;
        if (pmqos_ledger(c, &rows, &n) < 0)
                return;
        const char *names[64];
        size_t n_names = blocked_names(e, names, 64);
        printf(", \"cost\": {\"blocked_cstates\": [");
        for (size_t i = 0; i < n_names; i++) {
                printf("%s", i ? ", " : "");
                json_string(names[i]);
        }
        printf("], \"holders\": [");
        for (size_t i = 0, k = 0; i < n; i++) {
                const pmqos_ledger_row *r = &rows[i];
                if (!r->active)
                        continue;
                printf("%s{\"kind\": ", k++ ? ", " : "");
                json_string(r->kind);
                printf(", \"uid\": %" PRIu32 ", \"comm\": ", r->uid);
                json_string(r->comm);
                printf(", \"unit\": ");
                json_string(r->unit);
                printf(", \"cookie\": %" PRIu32 ", \"held\": %" PRIu64 ", \"shallow_idle\": %" PRIu64
                       ", \"blocked_entries\": %" PRIu64 "}",
                       r->cookie, r->held_usec, r->shallow_idle_usec, r->blocked_entries);
        }
        printf("]}");
        pmqos_ledger_free(rows, n);
}
