/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Authorization of callers for the polkit actions of policy/org.freedesktop.pmqos.policy. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "bus/auth-types.h"

#define ACTION_REQUEST_LATENCY "org.freedesktop.pmqos.request-latency"
#define ACTION_REQUEST_LATENCY_PERSISTENT "org.freedesktop.pmqos.request-latency-persistent"
#define ACTION_CANCEL_REQUEST "org.freedesktop.pmqos.cancel-request"
#define ACTION_SET_MINIMUM_LATENCY "org.freedesktop.pmqos.set-minimum-latency"
#define ACTION_REQUEST_LATENCY_FOR_OTHERS "org.freedesktop.pmqos.request-latency-for-others"

/* At most max_in_flight checks are handed to polkitd at once (its answers
 * share one bus connection, which dbus-daemon lets wait for 128 replies);
 * further ones wait their turn here, each at most as long as polkitd may
 * take to answer it (then answered AUTH_UNAVAILABLE). */
int auth_new(Auth **ret, sd_event *event, unsigned max_in_flight);
Auth *auth_free(Auth *a);
void auth_set_max_in_flight(Auth *a, unsigned max_in_flight);

/* Checks of one user (owner) that polkitd is given at once; more wait. */
#define AUTH_IN_FLIGHT_PER_OWNER 4u

/* Asks whether the peer with unique name bus_name, of user owner, may perform action.
 * Returns 0 when callback will be called later, from the event loop (unless
 * the query is cancelled first), or a negative errno. A question asked again
 * (same bus_name, action and interactive) while the first is not answered
 * yet is not put to polkitd again: the first answer is given to both. No
 * answer is kept past that. */
int auth_check(Auth *a, uint32_t owner, const char *bus_name, const char *action, bool interactive,
               AuthCallback callback, void *userdata, AuthQuery **ret_query);

/* The callback will not run; a check still waiting for its turn is dropped
 * at once, one polkitd has is cancelled there — unless the same question
 * asked since still waits for its answer. NULL-safe; returns NULL. */
AuthQuery *auth_query_cancel(AuthQuery *q);
