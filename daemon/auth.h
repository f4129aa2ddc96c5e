/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Authorization of callers for the polkit actions of SPEC §4. */
#pragma once

#include <stdbool.h>
#include <systemd/sd-event.h>

#define ACTION_REQUEST_LATENCY "org.freedesktop.pmqos.request-latency"
#define ACTION_REQUEST_LATENCY_PERSISTENT "org.freedesktop.pmqos.request-latency-persistent"
#define ACTION_CANCEL_REQUEST "org.freedesktop.pmqos.cancel-request"
#define ACTION_SET_MINIMUM_LATENCY "org.freedesktop.pmqos.set-minimum-latency"

typedef enum AuthResult {
        AUTH_ALLOWED,
        AUTH_DENIED,
        AUTH_CHALLENGE, /* polkit would ask, but the caller did not allow interaction */
} AuthResult;

typedef struct Auth Auth;
typedef struct AuthQuery AuthQuery;
typedef void (*AuthCallback)(AuthResult result, void *userdata);

int auth_new(Auth **ret, sd_event *event);
Auth *auth_free(Auth *a);

/* Asks whether the peer with unique name bus_name may perform action.
 * Returns 0 with *ret_result set when the answer is known at once, or 1 when
 * callback will be called later (unless the query is cancelled first). */
int auth_check(Auth *a, const char *bus_name, const char *action, bool interactive, AuthCallback callback,
               void *userdata, AuthQuery **ret_query, AuthResult *ret_result);

/* The callback will not run. NULL-safe; returns NULL. */
AuthQuery *auth_query_cancel(AuthQuery *q);
