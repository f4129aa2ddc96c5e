/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The bus front composed around the core: builds the clients, calls,
 * polkit, the emitter and the features, wires them to each other and to
 * the bus, and frees them; a client's departure is one core transaction. */

#include "bus/manager.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/macro.h"

static uint64_t random_seed(void) {
        uint64_t seed = 0;
        if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed)) {
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                seed = (uint64_t) ts.tv_nsec ^ ((uint64_t) ts.tv_sec << 32) ^ (uint64_t) getpid();
        }
        return seed;
}

/* A departure of this many requests lets the woken peers run before its bookkeeping. */
#define DEPARTURE_YIELD_MIN 64u

void manager_drop_owner(Manager *m, RequestOwner *owner, const char *who) {
        ChangeSet changes;

        if (owner->n_requests == 0)
                return;
        unsigned n = owner->n_requests;
        /* The kernel and LatencyChanged first: whoever waits for the bound to
         * lift hears it before the bookkeeping of a thousand requests. */
        int r = core_drop_owner(&m->core, owner, &changes);
        if (r < 0)
                log_error_errno(r, "Cannot lift the requests of %s from %s: %m", who, m->core.sink.path);
        /* The bound lifted: a process woken by that write (one watching the
         * device, or asleep until it reads back lower) is put on this CPU
         * beside its waker and would wait behind the signals and the
         * bookkeeping below; it runs first. Once per departure, and only
         * then: a system call when nobody waits. */
        if (changes.latency || changes.wakeup)
                (void) sched_yield();
        publish_now(&m->pub, &changes);
        /* That bookkeeping takes a few hundred µs for a thousand requests; the
         * bus, and whoever waits for LatencyChanged, were just woken and run
         * first where they share this CPU (measured: vanish p50 1.08 → 0.86 ms
         * on two cores). Once per large departure, never in a loop. */
        if (n >= DEPARTURE_YIELD_MIN)
                (void) sched_yield();
        core_drop_owner_finish(&m->core, owner);
        publish_rest(&m->pub, &changes);
        log_debug("%s is gone; %u request(s) released or detached.", who, n);
}

/* A client left: its dying requests go in one transaction, one signal. */
static void on_departed(Client *c, void *userdata) {
        manager_drop_owner(userdata, &c->owner, c->name);
}

/* Descriptors' last copies closed, processes exited, cgroups emptied (all
 * that the kernel said at once): their requests go in one transaction, one
 * signal, as a client's do. */
static void on_holds_ended(Hold *first, void *userdata) {
        static const char *const what[_HOLD_MAX] = {
                [HOLD_FD] = "The holder of a descriptor",
                [HOLD_PROCESS] = "The process of a request",
                [HOLD_CGROUP] = "The cgroup of a request",
        };
        RequestOwner ended = {};
        RequestHold kind = first->kind;
        unsigned n = 0;
        char who[64];

        for (Hold *h = first; h; h = h->ended_next)
                if (h->owner.n_requests > 0) {
                        store_move_requests(&ended, &h->owner);
                        kind = h->kind;
                        n++;
                }
        if (n > 1)
                snprintf(who, sizeof(who), "Each of %u holders, processes or cgroups", n);
        manager_drop_owner(userdata, &ended, n > 1 ? who : what[kind]);
}

int manager_new(Manager **ret, sd_event *event, const ManagerConfig *config) {
        CoreConfig core = config->core;
        int r;

        Manager *m = calloc(1, sizeof(Manager));
        if (!m)
                return -ENOMEM;
        m->event = sd_event_ref(event);
        m->explainer.helper_fd = -1; /* before anything can fail: manager_free() looks at it */
        m->limits = config->limits;
        clients_init(&m->clients, m->limits.max_clients, on_departed, m);
        holds_init(&m->holds, event, m->limits.max_held, on_holds_ended, m);

        core.seed = random_seed();
        r = core_init(&m->core, &core);
        if (r < 0) {
                manager_free(m);
                return r;
        }
        battery_init(&m->battery, &m->core, &m->pub);
        unit_rules_init(&m->rules, &m->core, &m->pub);
        r = publisher_init(&m->pub, event, &m->core, &m->clients);
        /* Before any thread exists (polkit's) and while root: the helper is a fork. */
        if (r >= 0)
                r = explainer_init(&m->explainer, event, &m->core, &m->rules, config->helper_uid, config->helper_gid);
        if (r >= 0)
                r = auth_new(&m->auth, event, m->limits.max_polkit_in_flight);
        if (r < 0) {
                log_error_errno(r, "Cannot set up the event loop: %m");
                manager_free(m);
                return r;
        }
        calls_init(&m->calls, &m->clients, m->auth, &m->limits);

        /* The kernel gets the loaded bounds in manager_start(), once the
         * previous run's owners are known: one write, no gap between. */
        r = core_load(&m->core, now_realtime_usec());
        if (r < 0) {
                manager_free(m);
                return r;
        }
        *ret = m;
        return 0;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        /* Calls first (they point at clients and polkit queries), then the
         * features, then the requests, then the clients that owned them.
         * The holds' descriptors stay in the service manager's store: it
         * keeps them across a restart and closes them itself at a stop. */
        m->holds.fdstore = false;
        m->budget = budget_free(m->budget); /* counts calls and clients by name only */
        if (m->auth)
                calls_done(&m->calls);
        explainer_done(&m->explainer);
        battery_done(&m->battery);
        unit_rules_done(&m->rules); /* the rules' requests go with the core */
        core_done(&m->core);        /* the holds of its requests go with them */
        holds_done(&m->holds);
        clients_done(&m->clients);
        auth_free(m->auth);
        publisher_done(&m->pub);
        sd_bus_unref(m->bus);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}

int manager_attach_bus(Manager *m, sd_bus *bus) {
        m->bus = sd_bus_ref(bus);
        publisher_attach_bus(&m->pub, bus);
        unit_rules_attach_bus(&m->rules, bus);
        calls_attach_bus(&m->calls, bus);
        return clients_watch(&m->clients, bus);
}

void manager_set_limits(Manager *m, const Limits *limits, int32_t default_floor, int32_t battery_floor) {
        ChangeSet changes;

        /* Live requests and calls above a new limit stay; only new ones are refused. */
        m->limits = *limits;
        m->clients.max = limits->max_clients;
        m->holds.max = limits->max_held;
        auth_set_max_in_flight(m->auth, limits->max_polkit_in_flight);
        int r = core_set_default_floor(&m->core, default_floor, &changes);
        if (r < 0)
                log_error_errno(r, "Cannot apply the new default floor: %m");
        publish(&m->pub, &changes);
        r = core_set_battery(&m->core, m->core.on_battery, battery_floor, &changes);
        if (r < 0)
                log_error_errno(r, "Cannot apply the new battery floor: %m");
        publish(&m->pub, &changes);
}
