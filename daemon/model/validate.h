/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Checks of request arguments shared by every bus interface. Pure functions:
 * each fills a D-Bus error name and one-sentence message on failure. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "dbus/contract.h"
#include "model/store.h"

typedef struct ValidationError {
        const char *name;
        char message[256];
} ValidationError;

/* "cpu_dma", "cpu_wakeup" → their QosType. "network" is NotSupported, anything else InvalidArgs.
 * Returns 0, or -EINVAL / -EOPNOTSUPP with *err filled. */
int parse_qos_type(const char *s, QosType *ret, ValidationError *err);
/* cpu_wakeup is NotSupported where the kernel has no /dev/cpu_wakeup_latency (wakeup_device false). */
int check_type_supported(QosType t, bool wakeup_device, ValidationError *err);

/* -1 (no requirement) or 0 … PMQOS_CONTRACT_LATENCY_MAX. */
int check_latency_value(int32_t value, ValidationError *err);

const char *qos_type_to_string(QosType t);

/* Fills err with the error name and before + arg (printable ASCII of it,
 * at most 60 bytes) + after; returns r. */
int validation_fail(ValidationError *err, int r, const char *name, const char *before, const char *arg,
                    const char *after);
