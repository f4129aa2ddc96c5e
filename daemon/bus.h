/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The bus front: vtables of each interface and the signals they emit. */
#pragma once

#include <stdbool.h>

#include "manager.h"
#include "util.h"
#include "validate.h"

/* Replies with the D-Bus error a validation failure carries. */
int bus_reply_validation_error(sd_bus_error *error, const ValidationError *v);
/* CancelRequest(u) and Cancel(u): the same call under two names. */
int bus_method_cancel(sd_bus_message *message, void *userdata, sd_bus_error *error);

int bus_upower_add(Manager *m);
int bus_upower_emit(Manager *m, bool latency_changed, bool requests_changed);

int bus_native_add(Manager *m);
int bus_native_emit(Manager *m, bool latency_changed, bool count_changed, bool floor_changed);
