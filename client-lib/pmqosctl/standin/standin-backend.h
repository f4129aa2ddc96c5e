/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* How the stand-in server asks pmqosd for an open's bound: one request per
 * open of the stand-in, bound to the opening process (RequestFor with its
 * pidfd, through libpmqos), so that it ends when that process dies even if
 * the server died. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "pmqos.h"

/* The kernel's two devices, each served as a file of the stand-in. */
typedef enum standin_device {
        STANDIN_CPU_DMA,    /* /dev/cpu_dma_latency: requests of type "cpu_dma" */
        STANDIN_CPU_WAKEUP, /* /dev/cpu_wakeup_latency (Linux 6.19): type "cpu_wakeup" */
} standin_device;

typedef struct standin_backend {
        pmqos_client *client; /* every call: the requests, the machine's value */
        const char *reason;   /* --reason, or NULL */
        const uint32_t *cpus; /* --cpus: cpu_dma requests for these CPUs only */
        size_t n_cpus;
        int32_t clamp;   /* --clamp: a value below it is raised to it (0: none) */
        char error[256]; /* the broker's message for the last failure */
} standin_backend;

/* A request of device's type that constrains nothing yet (an open of the
 * kernel's device adds one at the default value), for the process pid, of
 * which pidfd is a pidfd. 0 and *ret_cookie, or a negative errno
 * (libpmqos's; -ENODEV when the broker has no device of that type). */
int standin_backend_open(standin_backend *b, standin_device device, int pidfd, pid_t pid, uint32_t *ret_cookie);
/* The open's value changed (the broker's value: 0 … 2000000000, or -1). */
int standin_backend_set(standin_backend *b, uint32_t cookie, int32_t value);
/* The last descriptor of the open was closed. */
int standin_backend_close(standin_backend *b, uint32_t cookie);
/* What the kernel's device reads now for all holders together (for
 * cpu_wakeup: what the broker asks of it, see standin-backend.c). */
int standin_backend_machine_value(standin_backend *b, standin_device device, int32_t *ret);
/* Disconnects. */
void standin_backend_done(standin_backend *b);
