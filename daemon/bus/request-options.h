/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The options of org.freedesktop.PMQoS.Request (reason, persistent, timeout,
 * cpus), as read from the bus. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-bus.h>

#include "model/validate.h"

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
