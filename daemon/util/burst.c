/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* burst.h: a ring of the last BURST_LIMIT + 1 times. */

#include "util/burst.h"

bool burst_over(const Burst *b, uint64_t source, int64_t now, int64_t window) {
        if (b->source != source || b->n < BURST_LIMIT + 1u)
                return false;
        /* With the ring full, next is the oldest of the last BURST_LIMIT + 1. */
        return now - b->times[b->next] < window;
}

bool burst_note(Burst *b, uint64_t source, int64_t now, int64_t window) {
        if (b->source != source || b->n == 0)
                *b = (Burst){ .source = source };
        b->times[b->next] = now;
        b->next = (b->next + 1u) % (BURST_LIMIT + 1u);
        if (b->n < BURST_LIMIT + 1u)
                b->n++;
        return burst_over(b, source, now, window);
}
