/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The rules for "type" and "value" of both interfaces (pmqosd(8)), in one place. */

#include "util/macro.h"
#include "model/validate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h> /* the standard error names only */

static const char *const qos_type_names[_QOS_TYPE_MAX] = {
        [QOS_TYPE_CPU_DMA] = "cpu_dma",
        [QOS_TYPE_CPU_WAKEUP] = "cpu_wakeup",
};

const char *qos_type_to_string(QosType t) {
        return t < _QOS_TYPE_MAX ? qos_type_names[t] : NULL;
}

int validation_fail(ValidationError *err, int r, const char *name, const char *before, const char *arg,
                    const char *after) {
        err->name = name;
        /* Keep only printable ASCII of what the caller sent, and not too much of it. */
        char clean[64];
        size_t j = 0;
        for (size_t i = 0; arg && arg[i] && j < sizeof(clean) - 4; i++)
                clean[j++] = (arg[i] >= 0x20 && arg[i] < 0x7f) ? arg[i] : '?';
        if (arg && strlen(arg) > j)
                clean[j++] = '.', clean[j++] = '.', clean[j++] = '.';
        clean[j] = 0;
        snprintf(err->message, sizeof(err->message), "%s%s%s", before, clean, after);
        return r;
}

int parse_qos_type(const char *s, QosType *ret, ValidationError *err) {
        for (QosType t = 0; t < _QOS_TYPE_MAX; t++)
                if (strcmp(s, qos_type_names[t]) == 0) {
                        *ret = t;
                        return 0;
                }

        /* The kernel removed /dev/network_latency in Linux 5.7; the name stays known. */
        if (strcmp(s, "network") == 0)
                return validation_fail(err, -EOPNOTSUPP, SD_BUS_ERROR_NOT_SUPPORTED, "Latency type \"", s,
                                       "\" is not supported: this kernel has no /dev/network_latency.");

        return validation_fail(err, -EINVAL, SD_BUS_ERROR_INVALID_ARGS, "Unknown latency type \"", s,
                               "\"; the types are \"cpu_dma\" and \"cpu_wakeup\".");
}

int check_type_supported(QosType t, bool wakeup_device, ValidationError *err) {
        if (t == QOS_TYPE_CPU_WAKEUP && !wakeup_device)
                return validation_fail(
                        err, -EOPNOTSUPP, SD_BUS_ERROR_NOT_SUPPORTED, "Latency type \"", "cpu_wakeup",
                        "\" is not supported: this kernel has no /dev/cpu_wakeup_latency (Linux 6.19+).");
        return 0;
}

int check_latency_value(int32_t value, ValidationError *err) {
        if (value == PMQOS_LATENCY_NONE || (value >= 0 && value <= PMQOS_CONTRACT_LATENCY_MAX))
                return 0;

        char buf[16];
        snprintf(buf, sizeof(buf), "%" PRIi32, value);
        return validation_fail(err, -EINVAL, SD_BUS_ERROR_INVALID_ARGS, "Latency ", buf,
                               " µs is out of range; use 0 … 2000000000 µs, or -1 for no requirement.");
}
