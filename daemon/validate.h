/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Checks of request arguments shared by every bus interface. Pure functions:
 * each fills a D-Bus error name and one-sentence message on failure. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "store.h"

#define PMQOS_ERROR_NO_SUCH_REQUEST "org.freedesktop.PMQoS.Error.NoSuchRequest"
#define PMQOS_ERROR_FAILED "org.freedesktop.PMQoS.Error.Failed"

typedef struct ValidationError {
        const char *name;
        char message[256];
} ValidationError;

/* "cpu_dma" → QOS_TYPE_CPU_DMA. "network" is NotSupported, anything else InvalidArgs.
 * Returns 0, or -EINVAL / -EOPNOTSUPP with *err filled. */
int parse_qos_type(const char *s, QosType *ret, ValidationError *err);

/* -1 (no requirement) or 0 … PMQOS_LATENCY_MAX_US. */
int check_latency_value(int32_t value, ValidationError *err);

const char *qos_type_to_string(QosType t);
