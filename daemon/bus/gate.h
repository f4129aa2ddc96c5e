/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The gate: pmqosd's bus connection, with every descriptor a caller sends
 * kept out of pmqosd. sd-bus writes to the bus socket as usual but reads
 * from a socket pair the gate feeds: a thread that reads the bus socket
 * itself, message by message, never with room for descriptors. Where the
 * kernel says descriptors ride along (MSG_CTRUNC on a peek), the sorter
 * (sys/fd-sorter.h) takes them first; sd-bus then gets the pidfds and
 * cgroup2 files among them, and a stand-in for each of the others, so
 * every message stays whole and nothing pmqosd ever closes can wait. */
#pragma once

#include <stdbool.h>
#include <systemd/sd-bus.h>

/* Descriptors one sorter keeps before it is retired (killed: its exit may
 * then wait on what it kept), and retired sorters not yet gone: past both,
 * descriptors are dropped by the kernel unseen and RequestFor() refused. */
#define GATE_KEPT_PER_SORTER 512u
#define GATE_MAX_RETIRED 2u

typedef struct BusGate BusGate;

/* Connects to the system bus ($DBUS_SYSTEM_BUS_ADDRESS or the default
 * socket) and starts sd-bus (not yet attached to a loop) behind the gate. */
int bus_gate_open(BusGate **ret_gate, sd_bus **ret_bus);
/* After the bus is closed: stops the thread, kills the sorters. */
BusGate *bus_gate_free(BusGate *g);
static inline void bus_gate_freep(BusGate **g) {
        bus_gate_free(*g);
}

/* Whether fd stands for a descriptor refused because the sorters are full. */
bool bus_gate_is_refused(const BusGate *g, int fd);
/* Whether more of the bus waits to be read (by the gate or by sd-bus). */
bool bus_gate_input_waiting(const BusGate *g);
