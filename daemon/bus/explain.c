/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Explain() and ExplainFolded(): a round asks the helper for a holder scan
 * (or, without one, runs on the next loop iteration), then builds one answer
 * of each kind asked from the core, the device and sysfs, and sends it to
 * every call of the round. */

#include "bus/explain.h"

#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bus/explain-cpus.h"
#include "bus/request-entry.h"
#include "dbus/contract.h"
#include "sys/cpu-tables.h"
#include "util/log.h"
#include "util/macro.h"

/* ---- the answer ---- */

static int append_i(sd_bus_message *reply, const char *key, int32_t v) {
        return sd_bus_message_append(reply, "{sv}", key, "i", v);
}

static int append_b(sd_bus_message *reply, const char *key, bool v) {
        return sd_bus_message_append(reply, "{sv}", key, "b", (int) v);
}

/* The strictest global cpu_dma request, the oldest of equals: what sets the bound. */
static const Request *binding_request(const Core *c, int32_t min) {
        const Request *best = NULL;
        STORE_FOREACH(req, &c->store)
        if (req->type == QOS_TYPE_CPU_DMA && req->n_cpus == 0 && req->value == min &&
            (!best || req->created_usec < best->created_usec))
                best = req;
        return best;
}

static bool kernel_ignores_writes(const Sink *s, int32_t kernel) {
        return s->ignores_writes || (s->written >= 0 && s->written < PMQOS_CONTRACT_LATENCY_MAX && kernel > s->written);
}

/* What sets the kernel's value, in the words of the bound_by key. */
static const char *bound_by(const Core *c, int32_t kernel, const Request **ret_binding) {
        int32_t min = store_min(&c->store), floor = core_floor(c);
        int32_t effective = effective_latency(min, floor);
        *ret_binding = NULL;
        if (kernel >= 0 && kernel < (effective >= 0 ? effective : PMQOS_CONTRACT_LATENCY_MAX))
                return "external";
        if (effective < 0)
                return "none";
        if (floor > min) {
                int32_t base = c->admin_floor >= 0 ? c->admin_floor : c->default_floor;
                if (c->on_battery && c->battery_floor > base)
                        return "battery-floor";
                return c->admin_floor >= 0 ? "floor" : "default-floor";
        }
        *ret_binding = binding_request(c, min);
        return "request";
}

/* The uids whose processes the scan's bound kept it from looking at. */
static int append_unscanned(sd_bus_message *reply, const HolderScan *scan) {
        int r = explain_open_entry(reply, "external_holders_unscanned", "aa{sv}");
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        for (uint32_t i = 0; r >= 0 && scan && i < scan->n_unscanned; i++)
                r = sd_bus_message_append(reply, "a{sv}", 2, "uid", "u", scan->unscanned[i].uid, "processes", "u",
                                          scan->unscanned[i].processes);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r < 0 ? r : explain_close_entry(reply);
}

static int append_holders(sd_bus_message *reply, const HolderScan *scan) {
        int r = explain_open_entry(reply, "external_holders", "aa{sv}");
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        for (uint32_t i = 0; r >= 0 && scan && i < scan->n; i++) {
                char path[32];
                struct stat st;
                snprintf(path, sizeof(path), "/proc/%" PRIu32, scan->pids[i]);
                if (stat(path, &st) < 0)
                        continue; /* gone since the scan */
                char *exec = process_command_line((pid_t) scan->pids[i]);
                if (!exec)
                        return -ENOMEM;
                r = sd_bus_message_append(reply, "a{sv}", 3, "pid", "u", scan->pids[i], "uid", "u", scan->uids[i],
                                          "exec", "s", exec);
                free(exec);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = explain_close_entry(reply);
        if (r >= 0)
                r = append_b(reply, "external_holders_complete", scan && scan->complete);
        if (r >= 0)
                r = sd_bus_message_append(reply, "{sv}", "external_holders_left_out", "u", scan ? scan->left_out : 0);
        return r < 0 ? r : append_unscanned(reply, scan);
}

/* From the cached tables (sys/cpu-tables.h): swept at most so often. */
static int append_cpus(Explainer *e, sd_bus_message *reply, int32_t kernel, bool folded) {
        const CpuTable *tables;
        uint32_t n;
        if (!folded)
                core_ledger_query(e->core);
        int r = cpu_tables_get(&e->tables, &e->core->cpus, &tables, &n);
        if (r < 0)
                return r;
        return folded ? explain_append_cpu_groups(reply, e->core, kernel, tables, n)
                      : explain_append_cpus(reply, e->core, kernel, tables, n);
}

static int append_rules(sd_bus_message *reply, const UnitRules *u) {
        int r = explain_open_entry(reply, "rules", "aa{sv}");
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        for (size_t i = 0; r >= 0 && i < u->n_watches; i++) {
                const Rule *rule;
                const char *state;
                bool holds;
                unit_rules_get(u, i, &rule, &state, &holds);
                r = sd_bus_message_open_container(reply, 'a', "{sv}");
                if (r >= 0)
                        r = sd_bus_message_append(reply, "{sv}{sv}{sv}{sv}{sv}", "file", "s", rule->file, "unit", "s",
                                                  rule->unit, "latency", "i", rule->latency, "state", "s", state,
                                                  "holds", "b", (int) holds);
                if (r >= 0)
                        r = explain_open_entry(reply, "cpus", "au");
                if (r >= 0)
                        r = sd_bus_message_append_array(reply, 'u', rule->cpus, rule->n_cpus * sizeof(uint32_t));
                if (r >= 0)
                        r = explain_close_entry(reply);
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = explain_close_entry(reply);
        return r < 0 ? r : append_b(reply, "rules_followed", unit_rules_followed(u));
}

static int append_explanation(Explainer *e, sd_bus_message *reply, const HolderScan *scan, bool folded) {
        Core *c = e->core;
        int32_t kernel;
        if (sink_read(&c->sink, &kernel) < 0)
                kernel = PMQOS_LATENCY_NONE;
        const Request *binding;
        const char *by = bound_by(c, kernel, &binding);

        int r = sd_bus_message_open_container(reply, 'a', "{sv}");
        if (r >= 0)
                r = append_i(reply, "effective", c->effective);
        if (r >= 0)
                r = append_i(reply, "kernel", kernel);
        if (r >= 0)
                r = append_i(reply, "floor", core_floor(c));
        int32_t wakeup_kernel = PMQOS_LATENCY_NONE;
        if (core_has_wakeup(c) && sink_read(&c->wakeup, &wakeup_kernel) < 0)
                wakeup_kernel = PMQOS_LATENCY_NONE;
        if (r >= 0)
                r = append_i(reply, "wakeup_effective", c->wakeup_effective);
        if (r >= 0)
                r = append_i(reply, "wakeup_kernel", wakeup_kernel);
        if (r >= 0)
                r = sd_bus_message_append(reply, "{sv}", "bound_by", "s", by);
        if (r >= 0)
                r = explain_open_entry(reply, "binding", "a{sv}");
        if (r >= 0) {
                if (binding)
                        r = bus_append_request(reply, binding);
                else if ((r = sd_bus_message_open_container(reply, 'a', "{sv}")) >= 0)
                        r = sd_bus_message_close_container(reply);
        }
        if (r >= 0)
                r = explain_close_entry(reply);
        if (r >= 0)
                r = append_holders(reply, scan);
        if (r >= 0)
                r = append_cpus(e, reply, kernel, folded);
        if (r >= 0)
                r = append_b(reply, "kernel_ignores_writes", kernel_ignores_writes(&c->sink, kernel));
        if (r >= 0)
                r = append_rules(reply, e->rules);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r;
}

/* ---- rounds ---- */

static void answer_round(Explainer *e, const HolderScan *scan) {
        /* The first answer of each kind (per CPU, folded) is built; the others are copies of it. */
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *per_cpu = NULL, *folded_one = NULL;
        int r = 0;

        for (size_t i = 0; i < e->n_round; i++) {
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
                sd_bus_message *call = e->round[i].message;
                bool folded = e->round[i].folded;
                sd_bus_message **first = folded ? &folded_one : &per_cpu;
                r = sd_bus_message_new_method_return(call, &reply);
                if (r >= 0) {
                        if (!*first)
                                r = append_explanation(e, reply, scan, folded);
                        else if ((r = sd_bus_message_rewind(*first, true)) >= 0)
                                r = sd_bus_message_copy(reply, *first, true);
                }
                if (r >= 0)
                        r = sd_bus_send(NULL, reply, NULL);
                if (r < 0)
                        (void) sd_bus_reply_method_errorf(call, PMQOS_ERROR_FAILED, "Cannot build the explanation: %s.",
                                                          strerror(-r));
                else if (!*first)
                        *first = sd_bus_message_ref(reply);
                sd_bus_message_unref(call);
        }
        e->n_round = 0;
}

static void helper_ended(Explainer *e, const char *why) {
        log_warning("The holder scan helper ended (%s): Explain() reports external holders as unknown from now on.",
                    why);
        e->helper_source = sd_event_source_disable_unref(e->helper_source);
        close(e->helper_fd);
        e->helper_fd = -1;
        if (e->helper_pid > 0)
                (void) waitpid(e->helper_pid, NULL, WNOHANG);
        e->helper_pid = 0;
}

static void start_round(Explainer *e);

static void finish_round(Explainer *e, const HolderScan *scan) {
        answer_round(e, scan);
        e->in_round = false;
        /* The calls that came meanwhile get a scan that began after they did. */
        WaitingExplain *t = e->round;
        e->round = e->next;
        e->n_round = e->n_next;
        e->next = t;
        e->n_next = 0;
        if (e->n_round > 0)
                start_round(e);
}

static void start_round(Explainer *e) {
        e->in_round = true;
        if (e->helper_fd >= 0) {
                char byte = 1;
                if (send(e->helper_fd, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
                        return;
                helper_ended(e, strerror(errno));
        }
        (void) sd_event_source_set_enabled(e->defer_source, SD_EVENT_ONESHOT);
}

static int on_helper(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Explainer *e = userdata;
        uint8_t buf[HOLDERS_WIRE_MAX + 1];
        HolderScan scan;

        (void) s;
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n <= 0 || !e->in_round || holders_decode(buf, (size_t) n, &scan) < 0) {
                helper_ended(e, n < 0    ? strerror(errno)
                                : n == 0 ? "it closed its socket"
                                         : "it sent a malformed answer");
                if (e->in_round)
                        finish_round(e, NULL);
                return 0;
        }
        (void) revents;
        finish_round(e, &scan);
        return 0;
}

static int on_defer(sd_event_source *s, void *userdata) {
        (void) s;
        finish_round(userdata, NULL);
        return 0;
}

static void start_helper(Explainer *e, uid_t uid, gid_t gid) {
        HolderTarget target;
        int r = holder_target_init(&target, e->core->sink.fd, e->core->sink.path);
        if (r >= 0)
                r = holders_helper_start(&target, uid, gid, &e->helper_pid, &e->helper_fd);
        if (r < 0)
                log_warning_errno(
                        r, "Cannot start the holder scan helper (%m): Explain() reports external holders as unknown.");
}

int explainer_init(Explainer *e, sd_event *event, Core *core, const UnitRules *rules, uid_t uid, gid_t gid) {
        assert(e && event && core && rules);
        *e = (Explainer){ .helper_fd = -1, .event = event, .core = core, .rules = rules };
        cpu_tables_init(&e->tables, NULL);
        start_helper(e, uid, gid);
        e->round = calloc(EXPLAIN_WAITING_MAX, sizeof(WaitingExplain));
        e->next = calloc(EXPLAIN_WAITING_MAX, sizeof(WaitingExplain));
        if (!e->round || !e->next)
                return -ENOMEM;
        int r = sd_event_add_defer(event, &e->defer_source, on_defer, e);
        if (r >= 0)
                r = sd_event_source_set_enabled(e->defer_source, SD_EVENT_OFF);
        if (r >= 0 && e->helper_fd >= 0)
                r = sd_event_add_io(event, &e->helper_source, e->helper_fd, EPOLLIN, on_helper, e);
        return r;
}

void explainer_done(Explainer *e) {
        for (size_t i = 0; i < e->n_round; i++)
                sd_bus_message_unref(e->round[i].message);
        for (size_t i = 0; i < e->n_next; i++)
                sd_bus_message_unref(e->next[i].message);
        free(e->round);
        free(e->next);
        cpu_tables_done(&e->tables);
        e->helper_source = sd_event_source_disable_unref(e->helper_source);
        e->defer_source = sd_event_source_disable_unref(e->defer_source);
        if (e->helper_fd >= 0)
                close(e->helper_fd);
        /* Not waited for politely: a scan never keeps pmqosd from ending. (A
         * pid of 0 would be our whole process group.) */
        if (e->helper_pid > 0) {
                (void) kill(e->helper_pid, SIGKILL);
                (void) waitpid(e->helper_pid, NULL, 0);
        }
        *e = (Explainer){ .helper_fd = -1 };
}

/* ---- the call ---- */

static size_t waiting_of(const Explainer *e, uid_t uid) {
        size_t n = 0;
        for (size_t i = 0; i < e->n_round; i++)
                n += e->round[i].uid == uid;
        for (size_t i = 0; i < e->n_next; i++)
                n += e->next[i].uid == uid;
        return n;
}

int explainer_queue(Explainer *e, sd_bus_message *message, uid_t uid, bool folded, sd_bus_error *error) {
        if (uid != 0 && waiting_of(e, uid) >= EXPLAIN_WAITING_PER_UID)
                return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                         "User %u already has %u Explain() calls waiting; wait for their answers.",
                                         (unsigned) uid, EXPLAIN_WAITING_PER_UID);
        if (e->n_round + e->n_next >= EXPLAIN_WAITING_MAX)
                return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                         "%u Explain() calls are waiting already; try again shortly.",
                                         EXPLAIN_WAITING_MAX);

        WaitingExplain w = { .message = sd_bus_message_ref(message), .uid = uid, .folded = folded };
        if (e->in_round)
                e->next[e->n_next++] = w;
        else {
                e->round[e->n_round++] = w;
                start_round(e);
        }
        return 1;
}
