/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One request as an a{sv} of ListRequests() and Explain()'s "binding". */
#pragma once

#include <systemd/sd-bus.h>

#include "model/store.h"

/* Appends req's a{sv} (cookie, type, value, uid, pid, exec, reason,
 * created, persistent, expires, sender, cpus) to reply. */
int bus_append_request(sd_bus_message *reply, const Request *req);
