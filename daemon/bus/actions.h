/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What each method does once its arguments are read and valid, the same
 * for both interfaces: know the caller → limits → authorize → one core
 * transaction → reply → publish. Each returns what a bus handler returns;
 * 1 also when the call waits (the handler then runs again, see calls.h). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#include "bus/manager.h"
#include "model/validate.h"

/* A request as asked for; the strings and CPUs are the message's. */
typedef struct NewRequest {
        QosType type;
        int32_t value;
        bool persistent;
        uint64_t timeout_usec; /* 0: none */
        const char *reason;    /* NULL: none */
        const uint32_t *cpus;  /* sorted, unique */
        size_t n_cpus;
} NewRequest;

int action_request(Manager *m, sd_bus_message *message, const NewRequest *nr, sd_bus_error *error);
/* Hold(): the request and a descriptor it lives as long as, in the reply. */
int action_hold(Manager *m, sd_bus_message *message, const NewRequest *nr, sd_bus_error *error);
/* RequestFor(): the request for as long as target (a pidfd or a cgroup v2 directory) lives. */
int action_request_for(Manager *m, sd_bus_message *message, const NewRequest *nr, int target, sd_bus_error *error);

/* At start (adopt.c): a hold for each of d's held requests whose process
 * (same pid and start time) or cgroup (same id) is still there, set as its
 * owners[i]; the others end. Returns the holds, for held_rebind_done()
 * after core_start(), which frees those that own nothing; NULL if none. */
Hold **held_rebind(Manager *m, const RuntimeData *d, RequestOwner **owners);
void held_rebind_done(Hold **held, size_t n);

/* The steps the actions share (actions.c). */
const char *request_action(const Manager *m, bool persistent, uint64_t timeout_usec);
/* The per-connection and per-user caps (root is exempt). */
int check_request_limits(const Manager *m, const Client *c, sd_bus_error *error);
/* The core undid the change (r: why): the caller hears it as Failed. */
int kernel_refused(Manager *m, int r, sd_bus_error *error);
/* A request of c as nr asks, not yet added; NULL when out of memory. */
Request *new_request(Manager *m, const Client *c, const NewRequest *nr);
int action_update(Manager *m, sd_bus_message *message, uint32_t cookie, int32_t value, sd_bus_error *error);
int action_cancel(Manager *m, sd_bus_message *message, uint32_t cookie, sd_bus_error *error);
int action_set_floor(Manager *m, sd_bus_message *message, int32_t value, sd_bus_error *error);

/* Every handler that calls an action opens its run with this: what a
 * waiting step kept for the message and the run did not use is dropped. */
#define CALL_SCOPE(m, message) _cleanup_(call_scope_done) CallScope _scope = { &(m)->calls, (message) }
