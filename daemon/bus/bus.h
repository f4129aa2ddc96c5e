/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The bus front's two interfaces: their vtables (the documentation of what
 * each method takes), and the filter that gives Properties.Set of
 * MinimumLatency the path SetMinimumLatency takes. main.c registers them. */
#pragma once

#include <systemd/sd-bus.h>

#include "bus/manager.h"
#include "util/macro.h"
#include "model/validate.h"

/* org.freedesktop.UPower.QoS, at PMQOS_OBJECT_PATH and PMQOS_UPOWER_POLICY_PATH. */
extern const sd_bus_vtable bus_upower_vtable[];
/* org.freedesktop.PMQoS, at PMQOS_OBJECT_PATH. */
extern const sd_bus_vtable bus_native_vtable[];
/* Bus filters (userdata: the Manager): Properties.Set of MinimumLatency,
 * and CancelRequest with UPower's pre-0.9.17 signature "su". */
int bus_native_properties_filter(sd_bus_message *message, void *userdata, sd_bus_error *error);
int bus_upower_old_cancel_filter(sd_bus_message *message, void *userdata, sd_bus_error *error);

/* A type name a request may have here: cpu_wakeup only where the kernel has its device. */
static inline int bus_parse_type(const Manager *m, const char *s, QosType *t, ValidationError *v) {
        int r = parse_qos_type(s, t, v);
        return r < 0 ? r : check_type_supported(*t, core_has_wakeup(&m->core), v);
}

/* The D-Bus error a validation failure carries. */
int bus_reply_validation_error(sd_bus_error *error, const ValidationError *v);
/* CancelRequest(u) and Cancel(u): the same call under two names. */
int bus_method_cancel(sd_bus_message *message, void *userdata, sd_bus_error *error);
