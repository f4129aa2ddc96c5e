/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What status says of the per-CPU bounds (the Bound: line counts them: a
 * per-CPU-only bound is not "none"), and status --check: does the kernel
 * apply what pmqosd asks, as tuned-adm verify asks of a profile — exit 0,
 * or 1 with one line per mismatch. */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmqosctl-cli.h"

/* The rows status shows: ExplainFolded()'s groups, or each CPU of Explain(). */
typedef struct cpu_row {
        const uint32_t *cpus;
        size_t n_cpus;
        int32_t bound;
        bool foreign;
        const char *resume_latency;
} cpu_row;

static size_t n_rows(const pmqos_explanation *e) {
        return e->cpu_groups ? e->n_cpu_groups : e->n_cpus;
}

static cpu_row row_at(const pmqos_explanation *e, size_t i) {
        if (e->cpu_groups) {
                const pmqos_cpu_group_info *g = &e->cpu_groups[i];
                return (cpu_row){ g->cpus, g->n_cpus, g->bound, g->foreign, g->resume_latency };
        }
        const pmqos_cpu_info *c = &e->cpus[i];
        return (cpu_row){ &c->cpu, 1, c->bound, c->foreign, c->resume_latency };
}

/* "cpu0–3,6": the CPUs of one row (ascending), runs as ranges. */
void print_cpu_numbers(const uint32_t *cpus, size_t n) {
        printf("cpu");
        for (size_t i = 0; i < n; i++) {
                size_t j = i;
                while (j + 1 < n && cpus[j + 1] == cpus[j] + 1)
                        j++;
                printf("%s%" PRIu32, i ? "," : "", cpus[i]);
                if (j > i)
                        printf("\u2013%" PRIu32, cpus[j]);
                i = j;
        }
}

/* The kernel's machine-wide value: PMQOS_LATENCY_MAX when nothing constrains. */
static int32_t machine_wide(int32_t v) {
        return v < 0 || v > PMQOS_LATENCY_MAX ? PMQOS_LATENCY_MAX : v;
}

void print_request_who(const pmqos_request_info *q) {
        char *exec = term_text(q->exec[0] ? q->exec : "?");
        printf("request %" PRIu32 " of uid %" PRIu32 " pid %" PRIu32 " `%s`", q->cookie, q->uid, q->pid, exec ?: "?");
        free(exec);
        if (q->reason[0]) {
                char *t = term_text(q->reason);
                printf(" (%s)", t ?: "?");
                free(t);
        }
}

/* The per-CPU request (cpu_dma, naming cpu) whose value is the bound. */
static const pmqos_request_info *binding_on(const pmqos_request_info *reqs, size_t n, uint32_t cpu, int32_t bound) {
        for (size_t i = 0; i < n; i++) {
                if (strcmp(reqs[i].type, "cpu_dma") != 0 || reqs[i].value != bound)
                        continue;
                for (size_t k = 0; k < reqs[i].n_cpus; k++)
                        if (reqs[i].cpus[k] == cpu)
                                return &reqs[i];
        }
        return NULL;
}

bool has_cpu_bounds(const pmqos_explanation *e, bool of_requests) {
        for (size_t i = 0; i < n_rows(e); i++) {
                cpu_row row = row_at(e, i);
                if (row.bound >= 0 && row.bound < machine_wide(e->kernel) && !(of_requests && row.foreign))
                        return true;
        }
        return false;
}

void print_cpu_bounds(const pmqos_explanation *e, const pmqos_request_info *reqs, size_t n_reqs) {
        for (size_t i = 0; i < n_rows(e); i++) {
                cpu_row row = row_at(e, i);
                if (row.bound < 0 || row.bound >= machine_wide(e->kernel) || row.n_cpus == 0)
                        continue;
                char v[32];
                format_usec(row.bound, v, sizeof(v));
                printf("; ");
                print_cpu_numbers(row.cpus, row.n_cpus);
                printf(" %s", v);
                /* A file someone else wrote holds their value, not a request's. */
                const pmqos_request_info *q = row.foreign ? NULL : binding_on(reqs, n_reqs, row.cpus[0], row.bound);
                if (q) {
                        printf(" by ");
                        print_request_who(q);
                } else if (row.foreign)
                        printf(" written to its pm_qos_resume_latency_us by someone else");
        }
}

/* ---- status --check ---- */

static void print_holders_of(const pmqos_explanation *e) {
        if (e->n_holders == 0) {
                printf("a holder pmqosd cannot see asks for less");
                return;
        }
        for (size_t i = 0; i < e->n_holders; i++) {
                char *exec = term_text(e->holders[i].exec[0] ? e->holders[i].exec : "?");
                printf("%s`%s` (pid %" PRIu32 ")", i ? ", " : "", exec ?: "?", e->holders[i].pid);
                free(exec);
        }
        printf(" hold%s /dev/cpu_dma_latency itself", e->n_holders == 1 ? "s" : "");
}

/* One device: what pmqosd asks against what the kernel reads back. */
static unsigned check_device(const pmqos_explanation *e, const char *device, int32_t asked, int32_t kernel) {
        char a[32], k[32];
        asked = machine_wide(asked);
        kernel = machine_wide(kernel);
        if (asked == kernel)
                return 0;
        format_usec(asked == PMQOS_LATENCY_MAX ? -1 : asked, a, sizeof(a));
        format_usec(kernel == PMQOS_LATENCY_MAX ? -1 : kernel, k, sizeof(k));
        printf("%s: the kernel is at %s, pmqosd asks for %s: ", device, k, a);
        if (kernel < asked && strcmp(device, "/dev/cpu_dma_latency") == 0)
                print_holders_of(e);
        else if (kernel < asked)
                printf("another holder of the device asks for less");
        else
                printf("the kernel does not apply it");
        printf("\n");
        return 1;
}

/* The ledger's verdict where pmqosd has one (Explain(), not folded): a CPU
 * whose bound blocks a state that was entered since it took effect. */
static unsigned check_obeyed(const pmqos_explanation *e) {
        unsigned mismatches = 0;
        for (size_t i = 0; e->cpus && i < e->n_cpus && i < e->n_cpu_costs; i++) {
                const pmqos_cpu_info *cpu = &e->cpus[i];
                bool blocked = false;
                for (size_t k = 0; k < cpu->n_cstates; k++)
                        blocked |= !cpu->cstates[k].allowed && !cpu->cstates[k].disabled;
                if (!blocked || e->cpu_costs[i].verified)
                        continue;
                printf("cpu%" PRIu32 ": a C-state its bound blocks was entered since the bound took effect (%" PRIu64
                       " entries into blocked states since pmqosd started): the kernel does not obey it\n",
                       cpu->cpu, e->cpu_costs[i].blocked_entries);
                mismatches++;
        }
        return mismatches;
}

int status_check(const pmqos_explanation *e) {
        unsigned mismatches = check_device(e, "/dev/cpu_dma_latency", e->effective, e->kernel);
        if (e->kernel_ignores_writes) {
                printf("/dev/cpu_dma_latency: the kernel ignores writes to it: no bound has any effect\n");
                mismatches++;
        }
        if (e->wakeup_kernel >= 0) /* the kernel has /dev/cpu_wakeup_latency */
                mismatches += check_device(e, "/dev/cpu_wakeup_latency", e->wakeup_effective, e->wakeup_kernel);
        for (size_t i = 0; i < n_rows(e); i++) {
                cpu_row row = row_at(e, i);
                if (!row.foreign)
                        continue;
                char *t = term_text(row.resume_latency);
                print_cpu_numbers(row.cpus, row.n_cpus);
                printf(": pm_qos_resume_latency_us holds \"%s\", not what pmqosd wrote: written by ", t ?: "?");
                free(t);
                /* The writer pmqosd named (Explain()'s foreign_writer), if it saw the write. */
                const pmqos_cpu_custody_info *c = e->n_cpus > 0 ? pmqos_explanation_custody(e, i) : NULL;
                if (c && c->foreign_writer.pid != 0)
                        print_writer_who(&c->foreign_writer);
                else
                        printf("someone else");
                printf("\n");
                mismatches++;
        }
        mismatches += check_obeyed(e);
        if (mismatches)
                return EXIT_REFUSED;
        printf("The kernel applies what pmqosd asks: the device and every per-CPU bound read back.\n");
        return 0;
}
