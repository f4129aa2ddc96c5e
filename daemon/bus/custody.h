/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Custody of the per-CPU idle knobs: the fanotify watch of sys/foreign-writes.h
 * as one I/O source of the event loop (no timer), each foreign write named
 * in the log (rate-limited, with a count of what was left out) and handled
 * by ForeignWrites= (report, restore, adopt). */
#pragma once

#include <stdint.h>
#include <systemd/sd-event.h>

#include "conf/config.h"
#include "sys/foreign-writes.h"

typedef struct Manager Manager;

/* At most this many lines about foreign writes per CUSTODY_LOG_WINDOW_USEC;
 * then one line with how many were left out, at the next one logged. */
#define CUSTODY_LOG_BURST 20u
#define CUSTODY_LOG_WINDOW_USEC (10 * 1000000LL)

typedef struct Custody {
        ForeignWatch watch;
        sd_event_source *source;
        Manager *manager;
        ForeignPolicy policy;
        int64_t log_window_start; /* CLOCK_MONOTONIC µs */
        unsigned n_logged;
        uint64_t n_left_out;
        uint64_t n_restored, n_adopted;
} Custody;

/* Makes the watch (needs CAP_SYS_ADMIN: call it before the privilege drop)
 * and puts it on m's event loop; its writers show in m's Explain(). Without
 * the privilege it logs that foreign writers go unnamed, and returns 0. */
int custody_start(Custody *c, Manager *m, const char *sysfs_root, ForeignPolicy policy);
void custody_stop(Custody *c);
