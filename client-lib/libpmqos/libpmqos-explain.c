/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqos_explain(), pmqos_explain_folded(): Explain() and ExplainFolded() read into plain structs, with the same rule as
 * the listing: what pmqosd never sends (a key twice, more entries than any
 * machine has) is refused whole, so a hostile name owner cannot make the
 * caller leak or grow without bound. Unknown keys are skipped: a newer
 * broker may say more. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libpmqos-thread.h"

#define EXPLAIN_CPUS_MAX 8192u
#define EXPLAIN_HOLDERS_MAX 4096u
#define EXPLAIN_RULES_MAX 1024u

/* An "au" of CPU numbers, at most EXPLAIN_CPUS_MAX. */
static int read_cpu_list(sd_bus_message *m, uint32_t **ret, size_t *ret_n) {
        const void *data = NULL;
        size_t size = 0;
        int r = sd_bus_message_enter_container(m, 'v', "au");
        if (r >= 0)
                r = sd_bus_message_read_array(m, 'u', &data, &size);
        if (r >= 0 && (size / sizeof(uint32_t) > EXPLAIN_CPUS_MAX || *ret))
                r = -EBADMSG;
        if (r >= 0 && size > 0) {
                if (!(*ret = malloc(size)))
                        return -ENOMEM;
                memcpy(*ret, data, size);
                *ret_n = size / sizeof(uint32_t);
        }
        return r < 0 ? r : sd_bus_message_exit_container(m);
}

/* ---- groups of identical CPUs (ExplainFolded) ---- */

static const char *const group_keys[] = { "cpus", "bound", "resume_latency", "foreign", "cstates" };

static void group_done(void *entry) {
        pmqos_cpu_group_info *g = entry;
        for (size_t k = 0; k < g->n_cstates; k++)
                cstate_done(&g->cstates[k]);
        free(g->cstates);
        free(g->resume_latency);
        free(g->cpus);
}

static int group_field(sd_bus_message *m, unsigned key, void *userdata) {
        pmqos_cpu_group_info *g = userdata;
        switch (key) {
        case 0:
                return read_cpu_list(m, &g->cpus, &g->n_cpus);
        case 1:
                return sd_bus_message_read(m, "v", "i", &g->bound);
        case 2:
                return read_string(m, &g->resume_latency);
        case 3:
                return read_bool(m, &g->foreign);
        default:
                return read_array(m, sizeof(pmqos_cstate_info), EXPLAIN_CSTATES_MAX, cstate_item, cstate_done,
                                  (void **) &g->cstates, &g->n_cstates);
        }
}

static int group_item(sd_bus_message *m, void *entry) {
        pmqos_cpu_group_info *g = entry;
        g->bound = -1;
        int r = read_dict(m, group_keys, 5, group_field, g);
        if (r >= 0 && !g->resume_latency && !(g->resume_latency = strdup("")))
                r = -ENOMEM;
        return r;
}

/* ---- holders ---- */

static const char *const holder_keys[] = { "pid", "uid", "exec" };

static void holder_done(void *entry) {
        free(((pmqos_holder_info *) entry)->exec);
}

static int holder_field(sd_bus_message *m, unsigned key, void *userdata) {
        pmqos_holder_info *h = userdata;
        if (key == 2)
                return read_string(m, &h->exec);
        return sd_bus_message_read(m, "v", "u", key == 0 ? &h->pid : &h->uid);
}

static int holder_item(sd_bus_message *m, void *entry) {
        pmqos_holder_info *h = entry;
        int r = read_dict(m, holder_keys, 3, holder_field, h);
        if (r >= 0 && !h->exec && !(h->exec = strdup("")))
                r = -ENOMEM;
        return r;
}

static const char *const unscanned_keys[] = { "uid", "processes" };

static void unscanned_done(void *entry) {
        (void) entry;
}

static int unscanned_field(sd_bus_message *m, unsigned key, void *userdata) {
        pmqos_unscanned_info *u = userdata;
        return sd_bus_message_read(m, "v", "u", key == 0 ? &u->uid : &u->processes);
}

static int unscanned_item(sd_bus_message *m, void *entry) {
        return read_dict(m, unscanned_keys, 2, unscanned_field, entry);
}

/* ---- unit rules ---- */

static const char *const rule_keys[] = { "file", "unit", "latency", "cpus", "state", "holds" };

static void rule_info_done(void *entry) {
        pmqos_rule_info *rule = entry;
        free(rule->file);
        free(rule->unit);
        free(rule->cpus);
        free(rule->state);
}

static int rule_field(sd_bus_message *m, unsigned key, void *userdata) {
        pmqos_rule_info *rule = userdata;
        switch (key) {
        case 0:
                return read_string(m, &rule->file);
        case 1:
                return read_string(m, &rule->unit);
        case 2:
                return sd_bus_message_read(m, "v", "i", &rule->latency);
        case 3:
                return read_cpu_list(m, &rule->cpus, &rule->n_cpus);
        case 4:
                return read_string(m, &rule->state);
        default:
                return read_bool(m, &rule->holds);
        }
}

static int rule_item(sd_bus_message *m, void *entry) {
        pmqos_rule_info *rule = entry;
        int r = read_dict(m, rule_keys, 6, rule_field, rule);
        if (r >= 0 && ((!rule->file && !(rule->file = strdup(""))) || (!rule->unit && !(rule->unit = strdup(""))) ||
                       (!rule->state && !(rule->state = strdup("")))))
                r = -ENOMEM;
        return r;
}

/* ---- the explanation ---- */

static const char *const explanation_keys[] = { "effective",
                                                "kernel",
                                                "floor",
                                                "bound_by",
                                                "binding",
                                                "external_holders",
                                                "cpus",
                                                "kernel_ignores_writes",
                                                "external_holders_complete",
                                                "rules",
                                                "rules_followed",
                                                "wakeup_effective",
                                                "wakeup_kernel",
                                                "external_holders_left_out",
                                                "external_holders_unscanned",
                                                "cpu_groups" };

static int binding_field(sd_bus_message *m, pmqos_explanation *e) {
        bool empty = false;
        pmqos_request_info *info = calloc(1, sizeof(*info));
        if (!info)
                return -ENOMEM;
        int r = sd_bus_message_enter_container(m, 'v', "a{sv}");
        if (r >= 0)
                r = client_read_request_info(m, info, &empty);
        if (r >= 0)
                r = sd_bus_message_exit_container(m);
        if (r < 0 || empty) {
                pmqos_request_info_free(info, 1);
                return r < 0 ? r : 0;
        }
        e->binding = info;
        return 0;
}

static int explanation_field(sd_bus_message *m, unsigned key, void *userdata) {
        pmqos_explanation *e = userdata;
        switch (key) {
        case 0:
                return sd_bus_message_read(m, "v", "i", &e->effective);
        case 1:
                return sd_bus_message_read(m, "v", "i", &e->kernel);
        case 2:
                return sd_bus_message_read(m, "v", "i", &e->floor);
        case 3:
                return read_string(m, &e->bound_by);
        case 4:
                return binding_field(m, e);
        case 5:
                return read_array(m, sizeof(pmqos_holder_info), EXPLAIN_HOLDERS_MAX, holder_item, holder_done,
                                  (void **) &e->holders, &e->n_holders);
        case 6:
                return explain_read_cpus(m, e); /* libpmqos-cpus.c: with their cost and custody */
        case 7:
                return read_bool(m, &e->kernel_ignores_writes);
        case 8:
                return read_bool(m, &e->holders_complete);
        case 9:
                return read_array(m, sizeof(pmqos_rule_info), EXPLAIN_RULES_MAX, rule_item, rule_info_done,
                                  (void **) &e->rules, &e->n_rules);
        case 10:
                return read_bool(m, &e->rules_followed);
        case 11:
                return sd_bus_message_read(m, "v", "i", &e->wakeup_effective);
        case 12:
                return sd_bus_message_read(m, "v", "i", &e->wakeup_kernel);
        case 13:
                return sd_bus_message_read(m, "v", "u", &e->holders_left_out);
        case 14:
                return read_array(m, sizeof(pmqos_unscanned_info), EXPLAIN_HOLDERS_MAX, unscanned_item, unscanned_done,
                                  (void **) &e->holders_unscanned, &e->n_holders_unscanned);
        default:
                return read_array(m, sizeof(pmqos_cpu_group_info), EXPLAIN_CPUS_MAX, group_item, group_done,
                                  (void **) &e->cpu_groups, &e->n_cpu_groups);
        }
}

_public_ pmqos_explanation *pmqos_explanation_free(pmqos_explanation *e) {
        if (!e)
                return NULL;
        free(e->bound_by);
        pmqos_request_info_free(e->binding, e->binding ? 1 : 0);
        for (size_t i = 0; i < e->n_holders; i++)
                holder_done(&e->holders[i]);
        free(e->holders);
        free(e->holders_unscanned);
        for (size_t i = 0; i < e->n_cpus; i++)
                cpu_done(&e->cpus[i]);
        free(e->cpus);
        free(e->cpu_costs);
        Explanation *x = (Explanation *) e;
        for (size_t i = 0; i < x->n_custody; i++)
                custody_done(&x->custody[i]);
        free(x->custody);
        for (size_t i = 0; i < e->n_rules; i++)
                rule_info_done(&e->rules[i]);
        free(e->rules);
        for (size_t i = 0; i < e->n_cpu_groups; i++)
                group_done(&e->cpu_groups[i]);
        free(e->cpu_groups);
        free(e);
        return NULL;
}

int explain_read(sd_bus_message *reply, pmqos_explanation **ret) {
        *ret = NULL;
        Explanation *x = calloc(1, sizeof(*x)); /* the public struct and what LIBPMQOS_1.6 reads beside it */
        if (!x)
                return -ENOMEM;
        pmqos_explanation *e = &x->pub;
        e->effective = e->kernel = e->floor = e->wakeup_effective = e->wakeup_kernel = -1;
        int r = read_dict(reply, explanation_keys, sizeof(explanation_keys) / sizeof(explanation_keys[0]),
                          explanation_field, e);
        if (r >= 0 && !e->bound_by && !(e->bound_by = strdup("")))
                r = -ENOMEM;
        size_t grouped = 0; /* a machine's CPUs, however they are grouped */
        for (size_t i = 0; r >= 0 && i < e->n_cpu_groups; i++)
                if ((grouped += e->cpu_groups[i].n_cpus) > EXPLAIN_CPUS_MAX)
                        r = -EBADMSG;
        if (r < 0) {
                pmqos_explanation_free(e);
                /* A wrong type (sd-bus says -ENXIO) is as malformed as a key twice. */
                return r == -ENOMEM ? r : -EBADMSG;
        }
        *ret = e;
        return 0;
}

/* Explain() or ExplainFolded(): the same dictionary but for cpus / cpu_groups. */
static int explain_call(pmqos_client *c, const char *member, pmqos_explanation **ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        if (ret)
                *ret = NULL; /* on every failure */
        CLIENT_ENTER(c, !ret);
        int r = client_call(c, NATIVE_IFACE, member, &reply, NULL, NULL);
        if (r < 0)
                return r;
        r = explain_read(reply, ret);
        return r < 0 ? client_map_error(c, NULL, r) : 0;
}

_public_ int pmqos_explain(pmqos_client *c, pmqos_explanation **ret) {
        return explain_call(c, "Explain", ret);
}

_public_ int pmqos_explain_folded(pmqos_client *c, pmqos_explanation **ret) {
        return explain_call(c, "ExplainFolded", ret);
}
