/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* explain-cpus.h: each CPU's bound, file and C-states from the cached tables
 * (sys/cpu-tables.h), listed one by one or folded by sorting on them. */

#include "bus/explain-cpus.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/text.h"

int explain_open_entry(sd_bus_message *reply, const char *key, const char *signature) {
        int r = sd_bus_message_open_container(reply, 'e', "sv");
        if (r >= 0)
                r = sd_bus_message_append(reply, "s", key);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'v', signature);
        return r;
}

int explain_close_entry(sd_bus_message *reply) {
        int r = sd_bus_message_close_container(reply);
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

int explain_append_writer(sd_bus_message *reply, const char *key, const ForeignWriter *w) {
        int r = explain_open_entry(reply, key, "a{sv}");
        if (r >= 0 && w)
                r = sd_bus_message_append(reply, "a{sv}", 5, "pid", "u", w->pid, "comm", "s", w->comm, "unit", "s",
                                          w->unit, "value", "s", w->value, "when", "x", w->when);
        else if (r >= 0)
                r = sd_bus_message_append(reply, "a{sv}", 0);
        return r < 0 ? r : explain_close_entry(reply);
}

/* The bound a CPU lives under: the kernel's global value and its own file's, the lower. */
static int32_t cpu_bound(int32_t kernel, const CpuFileView *view) {
        int32_t g = kernel >= 0 && kernel < PMQOS_CONTRACT_LATENCY_MAX ? kernel : PMQOS_LATENCY_NONE;
        int32_t own = view->bound >= 0 ? view->bound : PMQOS_LATENCY_NONE;
        if (g < 0)
                return own;
        return own >= 0 && own < g ? own : g;
}

static bool state_allowed(int32_t bound, uint32_t latency) {
        return bound < 0 || (int64_t) latency <= bound;
}

/* What one CPU shows: the facts that decide whether two CPUs fold. */
typedef struct CpuFacts {
        uint32_t cpu;
        int32_t bound;
        bool foreign;
        char *text; /* resume_latency, cleaned */
        const CpuIdle *idle;
        bool listed;                       /* Explain()'s cpus, not a folded group: with its writers */
        const ForeignWatch *foreign_watch; /* those writers; NULL: not watched (then empty) */
} CpuFacts;

static int cpu_facts(const Core *c, int32_t kernel, uint32_t cpu, const CpuTable *table, CpuFacts *ret) {
        CpuFileView view;
        cpu_sink_view_text(&c->cpus, cpu, table->text, &view);
        char *text = text_clean(view.text, strlen(view.text), sizeof(view.text));
        if (!text)
                return -ENOMEM;
        *ret = (CpuFacts){ .cpu = cpu,
                           .bound = cpu_bound(kernel, &view),
                           .foreign = view.foreign,
                           .text = text,
                           .idle = &table->idle };
        return 0;
}

/* "cstates" of n CPUs of one group (one CPU: its own figures). */
static int append_cstates(sd_bus_message *reply, const CpuFacts *f, size_t n) {
        int r = explain_open_entry(reply, "cstates", "aa{sv}");
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        for (unsigned k = 0; r >= 0 && k < f->idle->n; k++) {
                const CpuIdleState *st = &f->idle->states[k];
                uint64_t usage = 0, time = 0;
                for (size_t i = 0; i < n; i++) {
                        usage += f[i].idle->states[k].usage;
                        time += f[i].idle->states[k].time;
                }
                r = sd_bus_message_open_container(reply, 'a', "{sv}");
                if (r >= 0)
                        r = sd_bus_message_append(reply, "{sv}{sv}{sv}{sv}{sv}{sv}", "name", "s", st->name, "latency",
                                                  "u", st->latency, "allowed", "b",
                                                  (int) state_allowed(f->bound, st->latency), "disabled", "b",
                                                  (int) st->disabled, "usage", "t", usage, "time", "t", time);
                if (r >= 0 && f->listed)
                        r = explain_append_writer(reply, "disabled_by",
                                                  foreign_watch_writer(f->foreign_watch, f->cpu, (int) k));
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r < 0 ? r : explain_close_entry(reply);
}

/* What the ledger (sys/ledger.h) charged this CPU, sampled by the round. */
static int append_cost(sd_bus_message *reply, const Ledger *l, uint32_t cpu) {
        LedgerCost cost = cpu < l->n ? l->cpus[cpu].cost : (LedgerCost){};
        return sd_bus_message_append(reply, "{sv}{sv}{sv}", "shallow_idle", "t", cost.shallow_idle, "blocked_entries",
                                     "t", cost.blocked_entries, "verified", "b", (int) ledger_verified(l, cpu));
}

static int append_cpu(sd_bus_message *reply, const Core *c, const CpuFacts *f) {
        int r = sd_bus_message_open_container(reply, 'a', "{sv}");
        if (r >= 0)
                r = sd_bus_message_append(reply, "{sv}{sv}{sv}{sv}", "cpu", "u", f->cpu, "bound", "i", f->bound,
                                          "resume_latency", "s", f->text, "foreign", "b", (int) f->foreign);
        if (r >= 0 && f->listed)
                r = explain_append_writer(reply, "foreign_writer", foreign_watch_writer(f->foreign_watch, f->cpu, -1));
        if (r >= 0)
                r = append_cost(reply, &c->ledger, f->cpu);
        if (r >= 0)
                r = append_cstates(reply, f, 1);
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

int explain_append_cpus(sd_bus_message *reply, const Core *c, int32_t kernel, const CpuTable *tables, uint32_t n) {
        int r = explain_open_entry(reply, "cpus", "aa{sv}");
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        for (uint32_t cpu = 0; r >= 0 && cpu < n; cpu++) {
                CpuFacts f;
                if (!tables[cpu].present)
                        continue;
                r = cpu_facts(c, kernel, cpu, &tables[cpu], &f);
                f.listed = true;
                f.foreign_watch = c->foreign;
                if (r >= 0) {
                        r = append_cpu(reply, c, &f);
                        free(f.text);
                }
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r < 0 ? r : explain_close_entry(reply);
}

/* ---- folded ---- */

static int cmp_int(int64_t a, int64_t b) {
        return (a > b) - (a < b);
}

/* Orders by what must be equal to fold, then by CPU. */
static int facts_cmp(const void *pa, const void *pb) {
        const CpuFacts *a = pa, *b = pb;
        int d = cmp_int(a->bound, b->bound);
        if (d == 0)
                d = cmp_int(a->foreign, b->foreign);
        if (d == 0)
                d = strcmp(a->text, b->text);
        if (d == 0)
                d = cmp_int(a->idle->n, b->idle->n);
        for (unsigned k = 0; d == 0 && k < a->idle->n; k++) {
                const CpuIdleState *x = &a->idle->states[k], *y = &b->idle->states[k];
                d = strcmp(x->name, y->name);
                if (d == 0)
                        d = cmp_int(x->latency, y->latency);
                if (d == 0)
                        d = cmp_int(x->disabled, y->disabled); /* allowed: equal with bound and latency */
        }
        return d != 0 ? d : cmp_int(a->cpu, b->cpu);
}

static bool facts_fold(const CpuFacts *a, const CpuFacts *b) {
        CpuFacts t = *b;
        t.cpu = a->cpu;
        return facts_cmp(a, &t) == 0;
}

typedef struct Group {
        size_t first, n; /* a run of the sorted facts */
        uint32_t cpu;    /* its lowest CPU */
} Group;

static int group_cmp(const void *pa, const void *pb) {
        const Group *a = pa, *b = pb;
        return cmp_int(a->cpu, b->cpu);
}

static int append_group(sd_bus_message *reply, const CpuFacts *f, size_t n) {
        int r = sd_bus_message_open_container(reply, 'a', "{sv}");
        if (r >= 0)
                r = explain_open_entry(reply, "cpus", "au");
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "u");
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = sd_bus_message_append(reply, "u", f[i].cpu);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = explain_close_entry(reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "{sv}{sv}{sv}", "bound", "i", f->bound, "resume_latency", "s", f->text,
                                          "foreign", "b", (int) f->foreign);
        if (r >= 0)
                r = append_cstates(reply, f, n);
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

/* The facts of every present CPU, sorted for folding, and their runs in CPU order. */
static int fold(const Core *c, int32_t kernel, const CpuTable *tables, uint32_t n, CpuFacts *facts, size_t *ret_n,
                Group *groups, size_t *ret_groups) {
        size_t k = 0, g = 0;
        for (uint32_t cpu = 0; cpu < n; cpu++) {
                if (!tables[cpu].present)
                        continue;
                int r = cpu_facts(c, kernel, cpu, &tables[cpu], &facts[k]);
                if (r < 0)
                        return r;
                k++;
                *ret_n = k;
        }
        qsort(facts, k, sizeof(CpuFacts), facts_cmp);
        for (size_t i = 0; i < k; i++)
                if (g > 0 && facts_fold(&facts[groups[g - 1].first], &facts[i]))
                        groups[g - 1].n++;
                else
                        groups[g++] = (Group){ .first = i, .n = 1, .cpu = facts[i].cpu };
        qsort(groups, g, sizeof(Group), group_cmp);
        *ret_groups = g;
        return 0;
}

int explain_append_cpu_groups(sd_bus_message *reply, const Core *c, int32_t kernel, const CpuTable *tables,
                              uint32_t n) {
        CpuFacts *facts = calloc(n + 1, sizeof(CpuFacts));
        Group *groups = calloc(n + 1, sizeof(Group));
        size_t n_facts = 0, n_groups = 0;
        int r = facts && groups ? 0 : -ENOMEM;

        if (r >= 0)
                r = fold(c, kernel, tables, n, facts, &n_facts, groups, &n_groups);
        if (r >= 0)
                r = explain_open_entry(reply, "cpu_groups", "aa{sv}");
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        for (size_t i = 0; r >= 0 && i < n_groups; i++)
                r = append_group(reply, &facts[groups[i].first], groups[i].n);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = explain_close_entry(reply);
        for (size_t i = 0; i < n_facts; i++)
                free(facts[i].text);
        free(facts);
        free(groups);
        return r;
}
