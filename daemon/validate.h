/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Checks of request arguments shared by every bus interface. Pure functions:
 * each fills a D-Bus error name and one-sentence message on failure. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-bus.h>

#include "contract.h"
#include "store.h"

typedef struct ValidationError {
        const char *name;
        char message[256];
} ValidationError;

/* "cpu_dma", "cpu_wakeup" → their QosType. "network" is NotSupported, anything else InvalidArgs.
 * Returns 0, or -EINVAL / -EOPNOTSUPP with *err filled. */
int parse_qos_type(const char *s, QosType *ret, ValidationError *err);
/* cpu_wakeup is NotSupported where the kernel has no /dev/cpu_wakeup_latency (wakeup_device false). */
int check_type_supported(QosType t, bool wakeup_device, ValidationError *err);

/* -1 (no requirement) or 0 … PMQOS_LATENCY_MAX_US. */
int check_latency_value(int32_t value, ValidationError *err);

const char *qos_type_to_string(QosType t);

typedef struct RequestOptions {
        char *reason; /* NULL if not given */
        bool persistent;
        uint32_t timeout_sec; /* 0 if not given */
        uint32_t *cpus;
        size_t n_cpus;
} RequestOptions;

void request_options_done(RequestOptions *o);

/* Reads the a{sv} options of org.freedesktop.PMQoS.Request from m. Unknown
 * keys, repeated keys, wrong variant types and out-of-range values fail with
 * InvalidArgs. CPU numbers are checked for range only; the caller checks
 * that they exist and are online. */
int parse_request_options(sd_bus_message *m, uint32_t max_timeout_sec, RequestOptions *ret, ValidationError *err);
