/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Explain()'s cpus, with what the bounds cost on each (the ledger's
 * figures, LIBPMQOS_1.5: e->cpu_costs) and who last wrote its idle knobs
 * (the custody's foreign_writer and disabled_by, LIBPMQOS_1.6: kept beside
 * the public struct, read with pmqos_explanation_custody()). Each is a
 * parallel array, cpu_costs[i] and custody[i] for cpus[i]: a
 * pmqos_cpu_info never grows, so old programs index cpus as they always did. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libpmqos-thread.h"

#define EXPLAIN_CPUS_MAX 8192u

/* ---- C-states ---- */

static const char *const cstate_keys[] = { "name", "latency", "allowed", "disabled", "usage", "time" };

static int cstate_field(sd_bus_message *m, unsigned key, void *userdata) {
        pmqos_cstate_info *st = userdata;
        switch (key) {
        case 0:
                return read_string(m, &st->name);
        case 1:
                return sd_bus_message_read(m, "v", "u", &st->latency_usec);
        case 2:
                return read_bool(m, &st->allowed);
        case 3:
                return read_bool(m, &st->disabled);
        case 4:
                return sd_bus_message_read(m, "v", "t", &st->usage);
        default:
                return sd_bus_message_read(m, "v", "t", &st->time_usec);
        }
}

void cstate_done(void *entry) {
        free(((pmqos_cstate_info *) entry)->name);
}

int cstate_item(sd_bus_message *m, void *entry) {
        pmqos_cstate_info *st = entry;
        int r = read_dict(m, cstate_keys, 6, cstate_field, st);
        if (r >= 0 && !st->name && !(st->name = strdup("")))
                r = -ENOMEM;
        return r;
}

void cpu_done(void *entry) {
        pmqos_cpu_info *cpu = entry;
        for (size_t k = 0; k < cpu->n_cstates; k++)
                cstate_done(&cpu->cstates[k]);
        free(cpu->cstates);
        free(cpu->resume_latency);
}

/* "cpu", "bound", "resume_latency", "foreign"; "cstates" is cpu_read_cstates()'s. */
static int cpu_field(sd_bus_message *m, unsigned key, void *userdata) {
        pmqos_cpu_info *cpu = userdata;
        switch (key) {
        case 0:
                return sd_bus_message_read(m, "v", "u", &cpu->cpu);
        case 1:
                return sd_bus_message_read(m, "v", "i", &cpu->bound);
        case 2:
                return read_string(m, &cpu->resume_latency);
        default:
                return read_bool(m, &cpu->foreign);
        }
}

/* ---- a writer (foreign_writer, disabled_by) ---- */

static const char *const writer_keys[] = { "pid", "comm", "unit", "value", "when" };

static void writer_done(pmqos_writer_info *w) {
        free(w->comm);
        free(w->unit);
        free(w->value);
}

static int writer_field(sd_bus_message *m, unsigned key, void *userdata) {
        pmqos_writer_info *w = userdata;
        switch (key) {
        case 0:
                return sd_bus_message_read(m, "v", "u", &w->pid);
        case 1:
                return read_string(m, &w->comm);
        case 2:
                return read_string(m, &w->unit);
        case 3:
                return read_string(m, &w->value);
        default:
                return sd_bus_message_read(m, "v", "x", &w->when_usec);
        }
}

/* "" for each text the broker did not send: a writer's are never NULL. */
static int writer_texts(pmqos_writer_info *w) {
        char **texts[] = { &w->comm, &w->unit, &w->value };
        for (size_t i = 0; i < 3; i++)
                if (!*texts[i] && !(*texts[i] = strdup("")))
                        return -ENOMEM;
        return 0;
}

/* An a{sv} variant: empty (pid 0, "" texts) or a writer, whose pid is never 0
 * (pmqosd sends all keys or none: a pid 0 with others would look empty). */
static int read_writer(sd_bus_message *m, pmqos_writer_info *w) {
        int r = sd_bus_message_enter_container(m, 'v', "a{sv}");
        if (r >= 0)
                r = read_dict(m, writer_keys, 5, writer_field, w);
        if (r >= 0 && w->pid == 0 && (w->comm || w->unit || w->value || w->when_usec != 0))
                r = -EBADMSG;
        if (r >= 0)
                r = writer_texts(w);
        return r < 0 ? r : sd_bus_message_exit_container(m);
}

/* ---- a C-state with its disabled_by ---- */

typedef struct CStateRead {
        pmqos_cstate_info info;
        pmqos_writer_info writer;
} CStateRead;

static const char *const cstate_read_keys[] = {
        "name", "latency", "allowed", "disabled", "usage", "time", "disabled_by"
};

static int cstate_read_field(sd_bus_message *m, unsigned key, void *userdata) {
        CStateRead *p = userdata;
        if (key < 6)
                return cstate_field(m, key, &p->info);
        return read_writer(m, &p->writer);
}

static int cstate_read_item(sd_bus_message *m, void *entry) {
        CStateRead *p = entry;
        int r = read_dict(m, cstate_read_keys, 7, cstate_read_field, p);
        if (r >= 0 && !p->info.name && !(p->info.name = strdup("")))
                r = -ENOMEM;
        return r < 0 ? r : writer_texts(&p->writer); /* none sent: nobody */
}

static void cstate_read_done(void *entry) {
        CStateRead *p = entry;
        cstate_done(&p->info);
        writer_done(&p->writer);
}

/* ---- a CPU ---- */

/* A CPU as read, split afterwards into e->cpus, e->cpu_costs and the custody. */
typedef struct CpuRead {
        pmqos_cpu_info info;
        pmqos_cpu_cost_info cost;
        bool has_cost;
        pmqos_cpu_custody_info custody;
        bool has_custody;
} CpuRead;

static const char *const cpu_read_keys[] = { "cpu",           "bound",        "resume_latency",  "foreign",
                                             "cstates",       "shallow_idle", "blocked_entries", "verified",
                                             "foreign_writer" };

/* cstates, each with its disabled_by, split into info.cstates and custody.disabled_by. */
static int cpu_read_cstates(sd_bus_message *m, CpuRead *p) {
        CStateRead *read = NULL;
        size_t n = 0;
        int r = read_array(m, sizeof(CStateRead), EXPLAIN_CSTATES_MAX, cstate_read_item, cstate_read_done,
                           (void **) &read, &n);
        if (r < 0)
                return r;
        p->info.cstates = calloc(n ? n : 1, sizeof(pmqos_cstate_info));
        p->custody.disabled_by = calloc(n ? n : 1, sizeof(pmqos_writer_info));
        if (!p->info.cstates || !p->custody.disabled_by) {
                for (size_t k = 0; k < n; k++)
                        cstate_read_done(&read[k]);
                free(read);
                return -ENOMEM;
        }
        for (size_t k = 0; k < n; k++) {
                p->info.cstates[k] = read[k].info;
                p->custody.disabled_by[k] = read[k].writer;
        }
        p->info.n_cstates = p->custody.n_disabled_by = n;
        free(read);
        return 0;
}

static int cpu_read_field(sd_bus_message *m, unsigned key, void *userdata) {
        CpuRead *p = userdata;
        if (key == 4)
                return cpu_read_cstates(m, p);
        if (key < 4)
                return cpu_field(m, key, &p->info);
        if (key == 8) {
                p->has_custody = true;
                return read_writer(m, &p->custody.foreign_writer);
        }
        p->has_cost = true;
        if (key == 5)
                return sd_bus_message_read(m, "v", "t", &p->cost.shallow_idle_usec);
        if (key == 6)
                return sd_bus_message_read(m, "v", "t", &p->cost.blocked_entries);
        return read_bool(m, &p->cost.verified);
}

static int cpu_read_item(sd_bus_message *m, void *entry) {
        CpuRead *p = entry;
        p->info.bound = -1;
        int r = read_dict(m, cpu_read_keys, 9, cpu_read_field, p);
        if (r >= 0 && !p->info.resume_latency && !(p->info.resume_latency = strdup("")))
                r = -ENOMEM;
        p->cost.cpu = p->custody.cpu = p->info.cpu;
        return r;
}

void custody_done(pmqos_cpu_custody_info *custody) {
        writer_done(&custody->foreign_writer);
        for (size_t k = 0; k < custody->n_disabled_by; k++)
                writer_done(&custody->disabled_by[k]);
        free(custody->disabled_by);
}

static void cpu_read_done(void *entry) {
        CpuRead *p = entry;
        cpu_done(&p->info);
        custody_done(&p->custody);
}

/* Whether every CPU said what the first said: the parallel arrays are all or nothing. */
static int cpu_read_same(const CpuRead *read, size_t n, bool *ret_costs, bool *ret_custody) {
        *ret_costs = n > 0 && read[0].has_cost;
        *ret_custody = n > 0 && read[0].has_custody;
        for (size_t i = 1; i < n; i++)
                if (read[i].has_cost != *ret_costs || read[i].has_custody != *ret_custody)
                        return -EBADMSG;
        return 0;
}

int explain_read_cpus(sd_bus_message *m, pmqos_explanation *e) {
        Explanation *x = (Explanation *) e;
        CpuRead *read = NULL;
        size_t n = 0;
        bool costs, custody;
        int r = read_array(m, sizeof(CpuRead), EXPLAIN_CPUS_MAX, cpu_read_item, cpu_read_done, (void **) &read, &n);
        if (r >= 0)
                r = cpu_read_same(read, n, &costs, &custody);
        if (r >= 0) {
                e->cpus = calloc(n ? n : 1, sizeof(pmqos_cpu_info));
                e->cpu_costs = costs ? calloc(n ? n : 1, sizeof(pmqos_cpu_cost_info)) : NULL;
                x->custody = custody ? calloc(n ? n : 1, sizeof(pmqos_cpu_custody_info)) : NULL;
                if (!e->cpus || (costs && !e->cpu_costs) || (custody && !x->custody))
                        r = -ENOMEM;
        }
        if (r < 0) {
                for (size_t i = 0; i < n; i++)
                        cpu_read_done(&read[i]);
                free(read);
                return r;
        }
        for (size_t i = 0; i < n; i++) {
                e->cpus[i] = read[i].info;
                if (costs)
                        e->cpu_costs[i] = read[i].cost;
                if (custody)
                        x->custody[i] = read[i].custody;
                else
                        custody_done(&read[i].custody);
        }
        e->n_cpus = n;
        e->n_cpu_costs = costs ? n : 0;
        x->n_custody = custody ? n : 0;
        free(read);
        return 0;
}

_public_ const pmqos_cpu_custody_info *pmqos_explanation_custody(const pmqos_explanation *e, size_t i) {
        const Explanation *x = (const Explanation *) e;
        return x && i < x->n_custody ? &x->custody[i] : NULL;
}
