/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqosd: the configuration (options.c), the manager, the bus wired in
 * one place, the descriptor store and the privilege drop (service.c), and
 * the event loop until SIGTERM or SIGINT; SIGHUP reloads. */

#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "bus/bus.h"
#include "bus/custody.h"
#include "bus/gate.h"
#include "bus/manager.h"
#include "options.h"
#include "service.h"
#include "util/log.h"
#include "util/macro.h"

typedef struct ReloadContext {
        Options *options;
        Manager *manager;
        Custody *custody;
} ReloadContext;

static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        ReloadContext *ctx = userdata;
        Options *o = ctx->options;
        char *state_dir = NULL;

        (void) s, (void) si;
        (void) sd_notify(false, "RELOADING=1");
        Options next = *o;
        if (options_load_config(&next, &state_dir) < 0)
                log_error("Keeping the previous configuration.");
        else {
                if (state_dir && strcmp(state_dir, o->config.core.state_dir) != 0)
                        log_warning("StateDirectory=%s takes effect at the next start.", state_dir);
                free(state_dir);
                o->config.limits = next.config.limits;
                o->config.core.default_floor = next.config.core.default_floor;
                o->config.core.battery_floor = next.config.core.battery_floor;
                o->foreign_writes = ctx->custody->policy = next.foreign_writes;
                manager_set_limits(ctx->manager, &o->config.limits, o->config.core.default_floor,
                                   o->config.core.battery_floor);
                const Limits *l = &o->config.limits;
                log_info("Reloaded %s: %u requests per connection, %u per user, timeouts up to %u s (%u s without "
                         "request-latency-persistent), %u/%u/%u calls pending per connection/user/all, %u polkit "
                         "checks in flight, %u clients, default floor %d.",
                         o->config_path, l->max_per_connection, l->max_per_uid, l->max_timeout_sec,
                         l->max_unprivileged_timeout_sec, l->max_pending_per_connection, l->max_pending_per_uid,
                         l->max_pending, l->max_polkit_in_flight, l->max_clients, (int) o->config.core.default_floor);
        }
        /* The rules, all or nothing, like the configuration. */
        RuleSet rules = {};
        if (options_load_rules(o, &rules) < 0)
                log_error("Keeping the previous unit rules.");
        else {
                (void) unit_rules_set(&ctx->manager->rules, &rules);
                log_info("Reloaded %zu unit rule(s).", ctx->manager->rules.n_watches);
        }
        (void) sd_notify(false, "READY=1");
        return 0;
}

static int on_bus_disconnected(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        sd_event *event = userdata;
        (void) message, (void) error;
        /* Without the bus nobody can reach us or tell us a client left: exit so
         * that the service manager restarts us against the new bus. */
        log_error("Lost the connection to the system bus; exiting.");
        sd_event_exit(event, EXIT_FAILURE);
        return 0;
}

/* The bus, wired in one place: departures watched first (so that no
 * client's departure can be missed), then the objects, then the names. */
static int connect_bus(Manager *m, sd_event *event, bool upower_name, BusGate **ret_gate, sd_bus **ret,
                       ChangeSet *ret_changes) {
        _cleanup_(bus_gate_freep) BusGate *gate = NULL;
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        static const char *const qos_paths[] = { PMQOS_OBJECT_PATH, PMQOS_UPOWER_POLICY_PATH };
        int r;

        /* Behind the gate: no descriptor a caller sends is ever pmqosd's to close. */
        r = bus_gate_open(&gate, &bus);
        if (r < 0)
                return r; /* said why */
        m->gate = gate;
        m->pub.gate = gate;
        r = sd_bus_attach_event(bus, event, SD_EVENT_PRIORITY_NORMAL);
        /* Still open after the loop ends: service_restart_pending() asks over it. */
        if (r >= 0)
                r = sd_bus_set_close_on_exit(bus, false);
        if (r >= 0)
                r = sd_bus_match_signal(bus, NULL, "org.freedesktop.DBus.Local", "/org/freedesktop/DBus/Local",
                                        "org.freedesktop.DBus.Local", "Disconnected", on_bus_disconnected, event);
        if (r >= 0)
                r = manager_attach_bus(m, bus);
        if (r < 0) {
                log_error_errno(r, "Cannot watch the bus: %m");
                return r;
        }
        /* Departures are watched: the previous run's owners can be checked, and the kernel set. */
        r = manager_start(m, ret_changes);
        if (r < 0)
                return r; /* said why */

        for (size_t i = 0; i < ELEMENTSOF(qos_paths) && r >= 0; i++)
                r = sd_bus_add_object_vtable(bus, NULL, qos_paths[i], PMQOS_QOS_INTERFACE, bus_upower_vtable, m);
        if (r >= 0)
                r = sd_bus_add_object_vtable(bus, NULL, PMQOS_OBJECT_PATH, PMQOS_NATIVE_INTERFACE, bus_native_vtable,
                                             m);
        if (r >= 0)
                r = sd_bus_add_filter(bus, NULL, bus_native_properties_filter, m);
        if (r >= 0)
                r = sd_bus_add_filter(bus, NULL, bus_upower_old_cancel_filter, m);
        /* Last added, first run: every call is counted before anything answers it. */
        if (r >= 0)
                r = budget_new(&m->budget, bus, &m->clients, &m->calls, &m->limits, &m->core);
        if (r < 0) {
                log_error_errno(r, "Cannot export the D-Bus objects: %m");
                return r;
        }

        r = sd_bus_request_name(bus, PMQOS_BUS_NAME, 0);
        if (r < 0) {
                log_error_errno(r, "Cannot own %s on the system bus: %m%s", PMQOS_BUS_NAME,
                                r == -EEXIST ? " (is another pmqosd running?)" : "");
                return r;
        }
        if (upower_name) {
                /* Only when free: never push a running UPower off its name. */
                r = sd_bus_request_name(bus, PMQOS_UPOWER_BUS_NAME, 0);
                if (r < 0)
                        log_warning_errno(r, "Not claiming %s: %m%s", PMQOS_UPOWER_BUS_NAME,
                                          r == -EEXIST ? " (UPower runs)" : "");
                else
                        log_info("Also serving %s for UPower-era clients.", PMQOS_UPOWER_BUS_NAME);
        }
        (void) battery_watch(&m->battery, bus); /* logs; without it the battery floor just never applies */
        (void) unit_rules_watch(&m->rules);     /* logs; without systemd the unit rules are inactive */
        *ret = TAKE_PTR(bus);
        *ret_gate = TAKE_PTR(gate);
        return 0;
}

/* SIGTERM and SIGINT end the loop, SIGHUP reloads (on_sighup, added once
 * there is something to reload): all three come through the loop. */
static int new_event_loop(sd_event **ret) {
        sigset_t mask;

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);

        /* Not sd_event_default(): that one checks its thread with gettid() on
         * every turn of the loop, a system call per message. */
        int r = sd_event_new(ret);
        if (r < 0)
                return log_error_errno(r, "Cannot create the event loop: %m");
        (void) sd_event_add_signal(*ret, NULL, SIGTERM, NULL, NULL);
        (void) sd_event_add_signal(*ret, NULL, SIGINT, NULL, NULL);
        return 0;
}

/* After the event loop (r its result): per-CPU bounds kept for a restart,
 * everything else let go before the bus goes. */
static int run_finish(Manager **mp, Custody *custody, sd_bus *bus, int r) {
        Manager *m = *mp;
        log_flush(); /* what the last turn logged; from now on each line at once */
        log_set_batch_notify(NULL, NULL);
        (void) sd_notify(false, "STOPPING=1");
        /* Per-CPU values persist in sysfs: across a restart they stay, like the device's bound in the store. */
        if (r == 0 && m->core.cpus.n_originals > 0 && service_restart_pending(bus)) {
                m->core.keep_cpus = true;
                log_info("Restarting: per-CPU bounds stay in place for the next run.");
        }
        custody_stop(custody);
        *mp = manager_free(m); /* per-CPU values restored before the bus goes */
        if (r < 0) {
                log_error_errno(r, "Event loop failed: %m");
                return 1;
        }
        return r; /* the exit code given to sd_event_exit(): 0 on SIGTERM/SIGINT */
}

/* Audit lines are batched (util/log.h): written in one write once the loop
 * has nothing more pending, never later than its next turn with nothing to
 * do. A crash loses the lines of that busy stretch not yet written: at most
 * LOG_BATCH_MAX bytes (some 20 entries). No timer: an idle loop has none. */
static int on_loop_idle(sd_event_source *s, void *userdata) {
        (void) s;
        (void) userdata;
        log_flush();
        return 0;
}

static void log_batch_begun(void *userdata) {
        (void) sd_event_source_set_enabled(userdata, SD_EVENT_ONESHOT);
}

static void batch_log_lines(sd_event *event, sd_event_source **ret) {
        if (sd_event_add_defer(event, ret, on_loop_idle, NULL) < 0)
                return; /* unbatched: each line its own write */
        if (sd_event_source_set_priority(*ret, SD_EVENT_PRIORITY_IDLE) >= 0 &&
            sd_event_source_set_enabled(*ret, SD_EVENT_OFF) >= 0)
                log_set_batch_notify(log_batch_begun, *ret);
}

/* Whatever way run() ends, what is batched is written. */
static void log_batch_done(sd_event_source **s) {
        log_flush();
        log_set_batch_notify(NULL, NULL);
        sd_event_source_unref(*s);
}

static int run(int argc, char *argv[]) {
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_(bus_gate_freep) BusGate *gate = NULL; /* after the bus, which reads through it */
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(manager_freep) Manager *m = NULL;
        Options o;
        int r;

        r = options_parse_argv(argc, argv, &o);
        if (r <= 0)
                return r < 0 ? 2 : 0;
        log_set_verbose(o.verbose);
        if (o.check_config)
                return options_check_config(&o);

        _cleanup_(freep) char *config_state_dir = NULL;
        if (options_load_config(&o, &config_state_dir) < 0)
                return 1;
        if (config_state_dir)
                o.config.core.state_dir = config_state_dir;
        _cleanup_(rule_set_done) RuleSet rules = {};
        if (options_load_rules(&o, &rules) < 0)
                return 1;

        /* The user to become is looked up while the user database is still readable. */
        struct passwd user;
        if (options_resolve_user(&o, &user) < 0)
                return 1;

        if (new_event_loop(&event) < 0)
                return 1;
        _cleanup_(log_batch_done) sd_event_source *log_batch = NULL;
        batch_log_lines(event, &log_batch);

        /* Everything that needs root first: the device, the per-CPU files, the
         * state, whose bounds the kernel gets before any client can ask. */
        unsigned max_kept = service_raise_fd_limit(&o.config.limits);
        service_take_stored_fds(&o.config.core);
        r = manager_new(&m, event, &o.config);
        if (r < 0)
                return 1; /* manager_new said why */
        calls_set_max_kept(&m->calls, max_kept);
        service_store_device_fds(m, &o.config.core);
        if (unit_rules_set(&m->rules, &rules) < 0)
                return 1;
        /* fanotify needs CAP_SYS_ADMIN to be made, nothing once it is. */
        _cleanup_(custody_stop) Custody custody = {};
        if (custody_start(&custody, m, o.config.core.sysfs_root, o.foreign_writes) < 0)
                return 1;

        /* Then, optionally, nothing of root at all; the bus sees who we really are. */
        if (o.user && service_drop_privileges(&user, o.config.core.state_dir, &m->core.record) < 0)
                return 1;

        ChangeSet startup;
        r = connect_bus(m, event, o.upower_name, &gate, &bus, &startup);
        if (r < 0)
                return 1; /* connect_bus said why */
        /* What differs from the previous run, now that subscribers can hear it. */
        publish(&m->pub, &startup);

        ReloadContext reload = { .options = &o, .manager = m, .custody = &custody };
        (void) sd_event_add_signal(event, NULL, SIGHUP, on_sighup, &reload);

        log_info("Serving %s on %s.", PMQOS_BUS_NAME, o.config.core.device);
        /* State is loaded and the name is ours: clients can be served. */
        publish_status(&m->pub);
        (void) sd_notify(false, "READY=1");
        /* No synchronous bus call on the loop from here: the gate reads on it. */
        (void) bus_gate_attach_event(gate, event);
        r = sd_event_loop(event);
        bus_gate_detach_event(gate);
        return run_finish(&m, &custody, bus, r);
}

int main(int argc, char *argv[]) {
        return run(argc, argv);
}
