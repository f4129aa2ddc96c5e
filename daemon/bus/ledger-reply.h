/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Ledger(): one row per holder that has bound a CPU since pmqosd started,
 * as of the call (sys/ledger.h). Open to all; priced by the budget. */
#pragma once

#include <systemd/sd-bus.h>

int bus_method_ledger(sd_bus_message *message, void *userdata, sd_bus_error *error);
