/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The bus front: vtables of each interface and the signals they emit. */
#pragma once

#include <stdbool.h>

#include "manager.h"
#include "util.h"

int bus_upower_add(Manager *m);
int bus_upower_emit(Manager *m, bool latency_changed, bool requests_changed);

int bus_native_add(Manager *m);
int bus_native_emit(Manager *m, bool latency_changed, bool count_changed, bool floor_changed);
