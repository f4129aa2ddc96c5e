/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ledger-holders.h: the holder of each CPU's bound, told from the store,
 * the floors and the kernel's values; a request's comm and systemd unit are
 * those read when it was made (Request.origin), never read again. */

#include "core/ledger-holders.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static int32_t as_bound(int32_t v) {
        return v >= 0 && v < PMQOS_CONTRACT_LATENCY_MAX ? v : PMQOS_LATENCY_NONE;
}

static const Request *request_of_global_top(const Store *s) {
        const HeapNode *top = heap_top(&s->values);
        return top ? (const Request *) (const void *) ((const char *) top - offsetof(Request, value_node)) : NULL;
}

static const Request *request_of_cpu_top(const Store *s, uint32_t cpu) {
        const HeapNode *top = cpu < s->n_cpu_heaps ? heap_top(&s->cpu_heaps[cpu]) : NULL;
        return top ? ((const CpuNode *) (const void *) top)->request : NULL;
}

static LedgerHolder of_request(const Request *r) {
        if (!r)
                return (LedgerHolder){ .kind = LEDGER_NONE };
        return (LedgerHolder){ .kind = r->rule ? LEDGER_RULE : LEDGER_REQUEST,
                               .uid = (uint32_t) r->uid,
                               .cookie = r->cookie };
}

static LedgerHolder of_floor(const LedgerFacts *f) {
        return (LedgerHolder){ .kind = f->battery_floor ? LEDGER_BATTERY_FLOOR : LEDGER_FLOOR, .uid = 0 };
}

static LedgerHolder external(void) {
        return (LedgerHolder){ .kind = LEDGER_EXTERNAL, .uid = LEDGER_UID_UNKNOWN };
}

/* The holder of the device's value kernel. */
static LedgerHolder global_holder(const LedgerFacts *f, int32_t kernel) {
        int32_t min = store_min(f->store), floor = f->floor;
        int32_t effective = effective_latency(min, floor);
        if (kernel >= 0 && (effective < 0 || kernel < effective))
                return external();
        if (effective < 0)
                return (LedgerHolder){ .kind = LEDGER_NONE };
        if (floor > min)
                return of_floor(f);
        return of_request(request_of_global_top(f->store));
}

/* The holder of cpu's own file's value file_bound, written by pmqosd or not. */
static LedgerHolder cpu_holder(const LedgerFacts *f, uint32_t cpu, int32_t file_bound) {
        if (!cpu_sink_constrains(f->cpus, cpu) || cpu_sink_written(f->cpus, cpu) != file_bound)
                return external();
        if (f->floor > store_cpu_min(f->store, cpu))
                return of_floor(f);
        return of_request(request_of_cpu_top(f->store, cpu));
}

/* ---- describing a request ---- */

/* Its comm and unit as read when it was made or bound (Origin), never
 * from /proc now: its pid may be another process's by the time it binds a
 * CPU. A request without one (recorded by an older pmqosd) is named
 * after the first word of its command line, without its directory. */
static void describe(LedgerHolder *who, void *userdata) {
        const Store *store = userdata;
        const Request *r =
                who->kind == LEDGER_REQUEST || who->kind == LEDGER_RULE ? store_get(store, who->cookie) : NULL;
        if (!r)
                return;
        if (r->rule) {
                snprintf(who->comm, sizeof(who->comm), "pmqosd");
                return;
        }
        if (r->origin && r->origin->comm[0]) {
                snprintf(who->comm, sizeof(who->comm), "%s", r->origin->comm);
                snprintf(who->unit, sizeof(who->unit), "%s", r->origin->unit);
                return;
        }
        const char *exec = request_exec(r), *base = exec;
        size_t len = strcspn(exec, " ");
        for (size_t i = 0; i < len; i++)
                if (exec[i] == '/')
                        base = exec + i + 1;
        snprintf(who->comm, sizeof(who->comm), "%.*s", (int) (len - (size_t) (base - exec)), base);
        for (char *c = who->comm; *c; c++) /* exec is cleaned, but not to ASCII */
                if ((unsigned char) *c < 0x20 || (unsigned char) *c >= 0x7f)
                        *c = '?';
        if (r->origin)
                snprintf(who->unit, sizeof(who->unit), "%s", r->origin->unit);
}

/* ---- settling ---- */

void ledger_holders_settle(Ledger *l, const LedgerFacts *f, bool read_files) {
        int32_t kernel;
        if (sink_read(f->sink, &kernel) < 0)
                kernel = f->effective;
        kernel = as_bound(kernel);
        LedgerHolder global = global_holder(f, kernel);

        for (uint32_t cpu = 0; cpu < l->n; cpu++) {
                LedgerCpu *e = &l->cpus[cpu];
                bool ours = cpu_sink_constrains(f->cpus, cpu);
                if (read_files) {
                        CpuFileView view;
                        if (cpu_sink_view(f->cpus, cpu, &view) >= 0)
                                e->file_bound = as_bound(view.bound);
                } else if (ours)
                        e->file_bound = as_bound(cpu_sink_written(f->cpus, cpu));
                else if (e->file_ours)
                        e->file_bound = PMQOS_LATENCY_NONE; /* its original is back: "0" the most likely */
                e->file_ours = ours;

                int32_t bound = kernel;
                LedgerHolder who = global;
                if (e->file_bound >= 0 && (kernel < 0 || e->file_bound < kernel)) {
                        bound = e->file_bound;
                        who = cpu_holder(f, cpu, e->file_bound);
                }
                ledger_set(l, cpu, bound, &who, describe, (void *) f->store);
        }
}
