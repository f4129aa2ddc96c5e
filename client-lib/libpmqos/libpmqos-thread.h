/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The client's lock and its helper thread (libpmqos-thread.c): every public
 * function of libpmqos holds the lock for its whole run (CLIENT_SCOPE). */
#pragma once

#include "libpmqos-client.h"

/* Every public function holds c's lock for its whole run. */
void client_lock(pmqos_client *c);
void client_unlock(pmqos_client *c);
static inline void client_unlockp(pmqos_client **c) {
        if (*c)
                client_unlock(*c);
}
#define CLIENT_SCOPE(c) _cleanup_(client_unlockp) pmqos_client *_client_scope = (client_lock(c), (c))
/* The start of a public call that talks to the broker: -EINVAL when c is
 * NULL or invalid holds, else c's lock held until the call returns and what
 * arrived dispatched first (its failure returned). */
#define CLIENT_ENTER(c, invalid)                   \
        if (!(c) || (invalid))                     \
                return -EINVAL;                    \
        CLIENT_SCOPE(c);                           \
        do {                                       \
                int _enter_r = client_dispatch(c); \
                if (_enter_r < 0)                  \
                        return _enter_r;           \
        } while (0)

/* Starts the helper thread unless the application integrated the fd or it
 * runs already; best effort (a failure leaves the re-issue to the next call). */
void client_helper_start(pmqos_client *c);
/* Asks it to end; with join, waits for it (never from the helper itself).
 * Called with the lock held once; releases it around the join. */
void client_helper_stop(pmqos_client *c, bool join);
