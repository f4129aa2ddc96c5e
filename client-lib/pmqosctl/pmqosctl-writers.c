/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What pmqosctl status says of the custody of the per-CPU idle knobs: who
 * last wrote each CPU's pm_qos_resume_latency_us and each C-state's disable
 * file, when it was not pmqosd (Explain()'s foreign_writer and disabled_by,
 * through pmqos_explanation_custody()). One line per file and writer, the
 * CPUs of the same write folded. */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmqosctl-cli.h"

#define LINE_CPUS_MAX 8192u

/* One line being gathered: a file of state k (-1: pm_qos_resume_latency_us), a writer, its CPUs. */
typedef struct WriterLine {
        const char *state; /* the C-state's name, NULL for the resume file */
        const pmqos_writer_info *w;
        uint32_t cpus[LINE_CPUS_MAX];
        size_t n;
} WriterLine;

static bool same_write(const pmqos_writer_info *a, const pmqos_writer_info *b) {
        return a->pid == b->pid && strcmp(a->comm, b->comm) == 0 && strcmp(a->unit, b->unit) == 0 &&
               strcmp(a->value, b->value) == 0;
}

static void flush_line(WriterLine *l, bool *first) {
        if (l->n == 0)
                return;
        char *value = term_text(l->w->value);
        char *state = l->state ? term_text(l->state) : NULL;
        printf(*first ? "\nWriters:  " : "          ");
        *first = false;
        print_cpu_numbers(l->cpus, l->n);
        if (l->state)
                printf(" %s disable", state ?: "?");
        else
                printf(" pm_qos_resume_latency_us");
        printf(" \"%s\" written by ", value ?: "?");
        print_writer_who(l->w);
        printf("\n");
        free(value);
        free(state);
        l->n = 0;
}

/* Adds cpu's write w of state (NULL: the resume file) to the line, or starts another. */
static void add_write(WriterLine *l, const char *state, const pmqos_writer_info *w, uint32_t cpu, bool *first) {
        if (w->pid == 0)
                return;
        bool same_state = (!state && !l->state) || (state && l->state && strcmp(state, l->state) == 0);
        if (l->n > 0 && (!same_state || !same_write(w, l->w) || l->n == LINE_CPUS_MAX))
                flush_line(l, first);
        l->state = state;
        l->w = w;
        l->cpus[l->n++] = cpu;
}

static void print_writers_of(const pmqos_explanation *e) {
        WriterLine *l = calloc(1, sizeof(*l));
        bool first = true;
        size_t states = 0;
        if (!l)
                return;
        for (size_t i = 0; i < e->n_cpus; i++)
                states = e->cpus[i].n_cstates > states ? e->cpus[i].n_cstates : states;
        for (size_t k = 0; k <= states; k++) /* 0: the resume files; then state k - 1 */
                for (size_t i = 0; i < e->n_cpus; i++) {
                        const pmqos_cpu_custody_info *c = pmqos_explanation_custody(e, i);
                        if (!c)
                                continue;
                        if (k == 0)
                                add_write(l, NULL, &c->foreign_writer, c->cpu, &first);
                        else if (k - 1 < c->n_disabled_by && k - 1 < e->cpus[i].n_cstates)
                                add_write(l, e->cpus[i].cstates[k - 1].name, &c->disabled_by[k - 1], c->cpu, &first);
                }
        flush_line(l, &first);
        free(l);
}

/* A file a foreign process may have written: the resume file holds another
 * value, or a state is switched off. Without either, a folded answer needs
 * no second call. */
static bool may_have_writers(const pmqos_explanation *e) {
        for (size_t g = 0; g < e->n_cpu_groups; g++) {
                if (e->cpu_groups[g].foreign)
                        return true;
                for (size_t k = 0; k < e->cpu_groups[g].n_cstates; k++)
                        if (e->cpu_groups[g].cstates[k].disabled)
                                return true;
        }
        return false;
}

void print_writers(pmqos_client *c, const pmqos_explanation *e) {
        if (e->n_cpus > 0) {
                print_writers_of(e);
                return;
        }
        pmqos_explanation *full;
        if (!may_have_writers(e) || pmqos_explain(c, &full) < 0)
                return; /* nothing to name, or no answer: the rows above said what holds */
        print_writers_of(full);
        pmqos_explanation_free(full);
}
