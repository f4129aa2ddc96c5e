/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The words auth.h and the polkit thread (auth-thread.h) share: a check's
 * answer, the checker, a query and the callback that gets the answer. */
#pragma once

typedef enum AuthResult {
        AUTH_ALLOWED,
        AUTH_DENIED,
        AUTH_CHALLENGE,   /* polkit would ask, but the caller did not allow interaction */
        AUTH_UNAVAILABLE, /* polkit gave no answer (not running, an error, or not in time): denied */
} AuthResult;

typedef struct Auth Auth;
typedef struct AuthQuery AuthQuery;
typedef void (*AuthCallback)(AuthResult result, void *userdata);
