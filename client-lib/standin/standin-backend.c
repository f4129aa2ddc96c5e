// SPDX-License-Identifier: LGPL-2.1-or-later
/* The stand-in's requests through libpmqos, on the server's own connection:
 * the server runs with the invoking user's credentials, so the broker
 * authorizes, limits and audits that user, whoever opened the file (the
 * server only serves opens of that same user). */

#include "standin-backend.h"

#include <stdio.h>

#define LATENCY_MAX 2000000000

int standin_backend_open(standin_backend *b, int pidfd, pid_t pid, uint32_t *ret_cookie) {
        (void) pidfd;
        char reason[256];
        if (b->reason)
                snprintf(reason, sizeof(reason), "%.200s (pid %d)", b->reason, (int) pid);
        else
                snprintf(reason, sizeof(reason), "stand-in /dev/cpu_dma_latency of pid %d", (int) pid);
        return pmqos_request_full(b->client, PMQOS_LATENCY_NONE, reason, 0, NULL, 0, 0, ret_cookie);
}

int standin_backend_set(standin_backend *b, uint32_t cookie, int32_t value) {
        return pmqos_update(b->client, cookie, value);
}

int standin_backend_close(standin_backend *b, uint32_t cookie) {
        return pmqos_cancel(b->client, cookie);
}

int standin_backend_machine_value(standin_backend *b, int32_t *ret) {
        int r = pmqos_get_kernel_latency(b->client, ret);
        if (r >= 0 && *ret < 0)
                *ret = LATENCY_MAX; /* nothing constrains: the kernel's default */
        return r;
}
