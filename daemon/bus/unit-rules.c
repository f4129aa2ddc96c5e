/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit rules on the bus: each rule's unit followed through
 * org.freedesktop.systemd1 — Subscribe, LoadUnit, the unit's
 * PropertiesChanged, UnitNew and systemd's name owner — never polled. While
 * the unit is active, reloading or activating, pmqosd holds the rule's
 * request itself (uid 0, exec "rule FILE", no owner, never recorded). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus/unit-rules.h"

#include <assert.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/macro.h"

#define SYSTEMD_NAME "org.freedesktop.systemd1"
#define SYSTEMD_PATH "/org/freedesktop/systemd1"
#define SYSTEMD_MANAGER "org.freedesktop.systemd1.Manager"
#define SYSTEMD_UNIT "org.freedesktop.systemd1.Unit"

struct RuleWatch {
        UnitRules *rules;
        Rule rule;
        char *path;            /* the unit's object path, from LoadUnit or UnitNew */
        sd_bus_slot *match;    /* its PropertiesChanged */
        sd_bus_slot *unit_new; /* UnitNew of this unit only (arg0): no wake-up for other units */
        sd_bus_slot *call;     /* LoadUnit or Get in flight */
        Request *req;          /* held while the unit is active */
        char state[32];        /* ActiveState as last seen; "" unknown */
};

static bool from_systemd(const UnitRules *u, sd_bus_message *message) {
        return peer_watch_from_owner(&u->systemd, message);
}

/* ---- the rule's request ---- */

/* The rule's request, not yet in the store; NULL if its CPUs are not all
 * there (said so) or out of memory. */
static Request *rule_request(RuleWatch *w) {
        UnitRules *u = w->rules;
        const Rule *rule = &w->rule;
        char exec[PMQOS_EXEC_MAX];

        for (size_t i = 0; i < rule->n_cpus; i++)
                if (cpu_sink_check_cpu(&u->core->cpus, rule->cpus[i]) < 0) {
                        log_warning("%s names CPU %u, which is offline or absent: its rule holds nothing.", rule->file,
                                    (unsigned) rule->cpus[i]);
                        return NULL;
                }
        Request *req = request_new(&u->core->store);
        if (!req)
                return NULL;
        snprintf(exec, sizeof(exec), "rule %s", rule->file);
        req->value = rule->latency;
        req->type = QOS_TYPE_CPU_DMA;
        req->rule = true;
        req->created_usec = now_realtime_usec();
        req->exec = shared_string_new(exec);
        if (!req->exec || (rule->reason && !(req->reason = strdup(rule->reason))) ||
            request_set_cpus(req, rule->cpus, rule->n_cpus) < 0)
                return request_free(req);
        return req;
}

static bool active_state(const char *state) {
        return strcmp(state, "active") == 0 || strcmp(state, "reloading") == 0 || strcmp(state, "activating") == 0;
}

static void hold(RuleWatch *w) {
        UnitRules *u = w->rules;
        ChangeSet changes;
        Request *req = rule_request(w);
        if (!req)
                return;
        const Rule *rule = &w->rule;
        int r = core_add(u->core, req, NULL, &changes);
        if (r < 0) {
                log_error_errno(r, "Cannot hold the bound of %s: %m", rule->file);
                return;
        }
        w->req = req;
        publish(u->pub, &changes);
}

static void release(RuleWatch *w, AuditEnd how) {
        ChangeSet changes;
        if (!w->req)
                return;
        Request *req = w->req;
        w->req = NULL;
        int r = core_end(w->rules->core, req, how, 0, &changes);
        if (r < 0) {
                w->req = req; /* still there: the kernel refused */
                log_error_errno(r, "Cannot lift the bound of %s: %m", w->rule.file);
                return;
        }
        publish(w->rules->pub, &changes);
}

static void apply(RuleWatch *w, const char *state) {
        snprintf(w->state, sizeof(w->state), "%s", state);
        bool active = active_state(state);
        if (active && !w->req)
                hold(w);
        else if (!active)
                release(w, AUDIT_END_UNIT_INACTIVE);
}

/* ---- following one unit ---- */

static int on_get(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        RuleWatch *w = userdata;
        const char *state;

        (void) error;
        w->call = sd_bus_slot_unref(w->call);
        if (sd_bus_message_is_method_error(reply, NULL) || !from_systemd(w->rules, reply) ||
            sd_bus_message_read(reply, "v", "s", &state) < 0)
                return 0; /* systemd went away meanwhile: its arrival starts over */
        apply(w, state);
        return 0;
}

static void ask_state(RuleWatch *w) {
        UnitRules *u = w->rules;
        w->call = sd_bus_slot_unref(w->call);
        int r = sd_bus_call_method_async(u->bus, &w->call, SYSTEMD_NAME, w->path, "org.freedesktop.DBus.Properties",
                                         "Get", on_get, w, "ss", SYSTEMD_UNIT, "ActiveState");
        if (r < 0)
                log_warning_errno(r, "Cannot ask systemd about %s: %m", w->rule.unit);
}

static int on_properties_changed(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        RuleWatch *w = userdata;
        int r;

        (void) error;
        /* From systemd's own connection only: any peer may send us a look-alike. */
        if (!from_systemd(w->rules, message))
                return 0;
        const char *state;
        r = properties_changed_read(message, SYSTEMD_UNIT, "ActiveState", "s", &state);
        if (r == PROPERTY_CHANGED)
                apply(w, state);
        else if (r == PROPERTY_INVALIDATED)
                ask_state(w);
        return 0;
}

static int on_match_installed(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        RuleWatch *w = userdata;
        (void) error;
        if (sd_bus_message_is_method_error(reply, NULL))
                log_warning("Cannot follow %s for %s: %s", w->rule.unit, w->rule.file,
                            sd_bus_message_get_error(reply)->message);
        return 0;
}

/* The unit's object is known: follow it, then ask (the match is in place
 * before the answer, so no change falls between). */
static void follow(RuleWatch *w, const char *path) {
        UnitRules *u = w->rules;
        if (w->path && strcmp(w->path, path) == 0 && w->match) {
                ask_state(w);
                return;
        }
        free(w->path);
        w->path = strdup(path);
        w->match = sd_bus_slot_unref(w->match);
        if (!w->path)
                return;
        int r = sd_bus_match_signal_async(u->bus, &w->match, SYSTEMD_NAME, w->path, "org.freedesktop.DBus.Properties",
                                          "PropertiesChanged", on_properties_changed, on_match_installed, w);
        if (r < 0) {
                log_warning_errno(r, "Cannot follow %s for %s: %m", w->rule.unit, w->rule.file);
                return;
        }
        ask_state(w);
}

static int on_load_unit(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        RuleWatch *w = userdata;
        const char *path;

        (void) error;
        w->call = sd_bus_slot_unref(w->call);
        if (sd_bus_message_is_method_error(reply, NULL)) {
                log_warning("systemd cannot load %s for %s: %s", w->rule.unit, w->rule.file,
                            sd_bus_message_get_error(reply)->message);
                return 0;
        }
        if (from_systemd(w->rules, reply) && sd_bus_message_read(reply, "o", &path) >= 0)
                follow(w, path);
        return 0;
}

static int on_unit_new(sd_bus_message *message, void *userdata, sd_bus_error *error);

static void load(RuleWatch *w) {
        UnitRules *u = w->rules;
        char match[512];
        if (!w->unit_new) {
                /* Unit names have no quote: the name goes into the match as it is. */
                snprintf(match, sizeof(match),
                         "type='signal',sender='" SYSTEMD_NAME "',path='" SYSTEMD_PATH "',interface='" SYSTEMD_MANAGER
                         "',member='UnitNew',arg0='%s'",
                         w->rule.unit);
                int k = sd_bus_add_match_async(u->bus, &w->unit_new, match, on_unit_new, NULL, w);
                if (k < 0)
                        log_warning_errno(k, "Cannot follow %s being loaded: %m", w->rule.unit);
        }
        w->call = sd_bus_slot_unref(w->call);
        int r = sd_bus_call_method_async(u->bus, &w->call, SYSTEMD_NAME, SYSTEMD_PATH, SYSTEMD_MANAGER, "LoadUnit",
                                         on_load_unit, w, "s", w->rule.unit);
        if (r < 0)
                log_warning_errno(r, "Cannot ask systemd for %s: %m", w->rule.unit);
}

/* systemd left (or a rule went): nothing of it holds. */
static void unfollow(RuleWatch *w, AuditEnd how) {
        w->call = sd_bus_slot_unref(w->call);
        w->match = sd_bus_slot_unref(w->match);
        w->unit_new = sd_bus_slot_unref(w->unit_new);
        w->path = mfree(w->path);
        w->state[0] = 0;
        release(w, how);
}

/* ---- systemd itself ---- */

static int on_subscribed(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        UnitRules *u = userdata;
        (void) error;
        u->subscribe = sd_bus_slot_unref(u->subscribe);
        if (sd_bus_message_is_method_error(reply, NULL)) {
                if (u->n_watches > 0)
                        log_info("systemd is not on the bus (%s): unit rules are inactive.",
                                 sd_bus_message_get_error(reply)->name);
                return 0;
        }
        /* The connection that answered for systemd's name: only its word counts. */
        peer_watch_answered(&u->systemd, reply);
        for (size_t i = 0; i < u->n_watches; i++)
                load(u->watches[i]);
        return 0;
}

static void subscribe(UnitRules *u) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = NULL;
        u->subscribe = sd_bus_slot_unref(u->subscribe);
        int r = sd_bus_message_new_method_call(u->bus, &call, SYSTEMD_NAME, SYSTEMD_PATH, SYSTEMD_MANAGER, "Subscribe");
        if (r >= 0)
                r = sd_bus_message_set_auto_start(call, false);
        if (r >= 0)
                r = sd_bus_call_async(u->bus, &u->subscribe, call, on_subscribed, u, 0);
        if (r < 0)
                log_warning_errno(r, "Cannot subscribe to systemd: %m; unit rules are inactive.");
}

static void on_systemd_owner(PeerWatch *pw, bool arrived, void *userdata) {
        UnitRules *u = userdata;
        (void) pw;
        for (size_t i = 0; i < u->n_watches; i++)
                unfollow(u->watches[i], AUDIT_END_RULE_GONE);
        if (arrived && u->n_watches > 0)
                subscribe(u); /* systemd is back (a re-exec): start over */
        else if (u->n_watches > 0)
                log_warning("systemd left the bus: unit rules are inactive until it is back.");
}

static int on_unit_new(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        RuleWatch *w = userdata;
        const char *id, *path;

        (void) error;
        if (!from_systemd(w->rules, message) || !sd_bus_message_has_signature(message, "so") ||
            sd_bus_message_read(message, "so", &id, &path) < 0 || strcmp(id, w->rule.unit) != 0)
                return 0;
        follow(w, path); /* loaded again: what is its state now? */
        return 0;
}

void unit_rules_init(UnitRules *u, Core *core, Publisher *pub) {
        assert(u && core && pub);
        *u = (UnitRules){ .core = core, .pub = pub };
        peer_watch_init(&u->systemd, SYSTEMD_NAME, on_systemd_owner, u);
}

void unit_rules_attach_bus(UnitRules *u, sd_bus *bus) {
        assert(u && bus && !u->bus);
        u->bus = sd_bus_ref(bus);
}

int unit_rules_watch(UnitRules *u) {
        assert(u && u->bus);
        int r = peer_watch_start(&u->systemd, u->bus, false);
        if (r < 0) {
                log_warning_errno(r, "Cannot follow systemd: %m; unit rules are inactive.");
                return r;
        }
        /* No rule, no subscription: systemd sends us nothing then. */
        if (u->n_watches > 0)
                subscribe(u);
        return 0;
}

/* At start, before the kernel is first written: the rules whose units run
 * hold their requests from the first write on, so a restart of pmqosd
 * loses no rule's bound for a moment. Blocking calls, bounded (128 rules at
 * most, 1 s each); nothing is served yet. Without systemd, nothing. */
void unit_rules_prime(UnitRules *u) {
        for (size_t i = 0; i < u->n_watches; i++) {
                RuleWatch *w = u->watches[i];
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = NULL, *reply = NULL, *state = NULL;
                const char *path, *text;
                int r = sd_bus_message_new_method_call(u->bus, &call, SYSTEMD_NAME, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                                       "LoadUnit");
                if (r >= 0)
                        r = sd_bus_message_append(call, "s", w->rule.unit);
                if (r >= 0)
                        r = sd_bus_message_set_auto_start(call, false);
                if (r >= 0)
                        r = sd_bus_call(u->bus, call, 1000000, NULL, &reply);
                if (r >= 0)
                        r = sd_bus_message_read(reply, "o", &path);
                if (r >= 0)
                        r = sd_bus_get_property(u->bus, SYSTEMD_NAME, path, SYSTEMD_UNIT, "ActiveState", NULL, &state,
                                                "s");
                if (r >= 0)
                        r = sd_bus_message_read(state, "s", &text);
                if (r < 0)
                        return; /* no systemd (or a slow one): the rules follow once it answers */
                snprintf(w->state, sizeof(w->state), "%s", text);
                if (!active_state(text) || w->req)
                        continue;
                Request *req = rule_request(w);
                if (req && core_add_loaded(u->core, req) >= 0)
                        w->req = req;
        }
}

/* ---- the set of rules ---- */

static void watch_free(RuleWatch *w, AuditEnd how) {
        if (!w)
                return;
        unfollow(w, how);
        rule_done(&w->rule);
        free(w);
}

int unit_rules_set(UnitRules *u, RuleSet *rules) {
        RuleWatch **next = calloc(rules->n + 1, sizeof(RuleWatch *));
        if (!next)
                return -ENOMEM;
        /* A rule that did not change keeps its watch and its request: no gap. */
        for (size_t i = 0; i < rules->n; i++)
                for (size_t k = 0; k < u->n_watches; k++)
                        if (u->watches[k] && rule_equal(&u->watches[k]->rule, &rules->rules[i])) {
                                next[i] = u->watches[k];
                                u->watches[k] = NULL;
                                rule_done(&rules->rules[i]);
                                break;
                        }
        for (size_t k = 0; k < u->n_watches; k++)
                watch_free(u->watches[k], AUDIT_END_RULE_GONE);
        free(u->watches);
        for (size_t i = 0; i < rules->n; i++) {
                if (next[i])
                        continue;
                next[i] = calloc(1, sizeof(RuleWatch));
                if (!next[i]) {
                        rule_done(&rules->rules[i]);
                        continue; /* forgotten; said once below */
                }
                next[i]->rules = u;
                next[i]->rule = rules->rules[i];
                if (u->bus && u->systemd.owner)
                        load(next[i]);
        }
        /* The rules moved into the watches; a watch that could not be made is left out. */
        size_t n_rules = rules->n, n = 0;
        free(rules->rules);
        *rules = (RuleSet){};
        for (size_t i = 0; i < n_rules; i++)
                if (next[i])
                        next[n++] = next[i];
        if (n < n_rules)
                log_error("Out of memory: %zu unit rule(s) are not followed.", n_rules - n);
        u->watches = next;
        u->n_watches = n;
        /* The first rules: systemd is to be asked now. */
        if (u->bus && n > 0 && !u->systemd.owner && !u->subscribe)
                subscribe(u);
        return 0;
}

void unit_rules_done(UnitRules *u) {
        for (size_t i = 0; i < u->n_watches; i++) {
                RuleWatch *w = u->watches[i];
                w->call = sd_bus_slot_unref(w->call);
                w->match = sd_bus_slot_unref(w->match);
                w->unit_new = sd_bus_slot_unref(w->unit_new);
                free(w->path);
                rule_done(&w->rule);
                free(w); /* its request goes with the core */
        }
        free(u->watches);
        u->watches = NULL;
        u->n_watches = 0;
        u->subscribe = sd_bus_slot_unref(u->subscribe);
        peer_watch_done(&u->systemd);
        u->bus = sd_bus_unref(u->bus);
}

size_t unit_rules_active(const UnitRules *u) {
        size_t n = 0;
        for (size_t i = 0; i < u->n_watches; i++)
                n += u->watches[i]->req != NULL;
        return n;
}

void unit_rules_get(const UnitRules *u, size_t i, const Rule **ret_rule, const char **ret_state, bool *ret_holds) {
        const RuleWatch *w = u->watches[i];
        *ret_rule = &w->rule;
        *ret_state = w->state;
        *ret_holds = w->req != NULL;
}

const Rule *unit_rules_rule_of(const UnitRules *u, const Request *req) {
        for (size_t i = 0; req && req->rule && i < u->n_watches; i++)
                if (u->watches[i]->req == req)
                        return &u->watches[i]->rule;
        return NULL;
}

bool unit_rules_followed(const UnitRules *u) {
        return u->systemd.owner != NULL;
}
