/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* On battery or not, as UPower says (battery.c): its OnBattery followed on
 * the bus; while it is true, OnBatteryMinimumLatency is one more floor. */
#pragma once

#include <systemd/sd-bus.h>

#include "bus/peer-watch.h"
#include "bus/publish.h"
#include "core/core.h"

typedef struct Battery {
        Core *core;
        Publisher *pub;
        sd_bus *bus;
        PeerWatch upower;
        sd_bus_slot *properties; /* UPower's PropertiesChanged */
        sd_bus_slot *get;        /* a Get of OnBattery in flight */
} Battery;

void battery_init(Battery *b, Core *core, Publisher *pub);
/* Follows UPower's OnBattery: its PropertiesChanged and its name owner,
 * event-driven; not when pmqosd serves org.freedesktop.UPower itself. */
int battery_watch(Battery *b, sd_bus *bus);
void battery_done(Battery *b);
