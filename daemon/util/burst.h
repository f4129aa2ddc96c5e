/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Whether one source acts more than BURST_LIMIT times within a window: the
 * times of its last BURST_LIMIT + 1 acts, compared when one happens, on a
 * clock the caller passes (no timer; tests pass a fake one). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define BURST_LIMIT 3u

typedef struct Burst {
        uint64_t source;                 /* whose acts these are; another source starts afresh */
        int64_t times[BURST_LIMIT + 1u]; /* a ring of the last acts' times */
        unsigned n, next;
} Burst;

/* Notes an act of source at now (any unit, as window); returns true when it
 * is the (BURST_LIMIT + 1)th or later within window (now included). */
bool burst_note(Burst *b, uint64_t source, int64_t now, int64_t window);
/* Whether source is still over the limit at now without a new act. */
bool burst_over(const Burst *b, uint64_t source, int64_t now, int64_t window);
