/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Small helpers used across the daemon. */
#pragma once

#include <inttypes.h>
#include <stdlib.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))
/* Hands ownership on: returns p and leaves NULL behind. */
#define TAKE_PTR(p)                     \
        ({                              \
                __typeof__(p) _p = (p); \
                (p) = NULL;             \
                _p;                     \
        })

static inline void freep(void *p) {
        free(*(void **) p);
}

static inline void *mfree(void *p) {
        free(p);
        return NULL;
}
