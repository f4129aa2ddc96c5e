/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The gate: pmqosd's bus connection, with every descriptor a caller sends
 * kept out of pmqosd. sd-bus writes to the bus socket as usual but reads
 * from a socket pair the gate feeds: a thread (or, while the event loop
 * runs, the loop) that reads the bus socket itself, message by message,
 * never with room for descriptors. Where the
 * kernel says descriptors ride along (MSG_CTRUNC on a peek), the sorter
 * (sys/fd-sorter.h) takes them first; sd-bus then gets the pidfds and
 * cgroup2 files among them, and a stand-in for each of the others, so
 * every message stays whole and nothing pmqosd ever closes can wait. */
#pragma once

#include "bus/gate-uids.h"
#include "sys/fd-sorter.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

/* Descriptors one sorter keeps before it is retired (killed: its exit may
 * then wait on what it kept), and retired sorters not yet gone: past both,
 * descriptors are dropped by the kernel unseen and RequestFor() refused. */
#define GATE_KEPT_PER_SORTER 512u
#define GATE_MAX_RETIRED 2u

typedef struct BusGate BusGate;

/* Connects to the system bus ($DBUS_SYSTEM_BUS_ADDRESS or the default
 * socket) and starts sd-bus (not yet attached to a loop) behind the gate. */
int bus_gate_open(BusGate **ret_gate, sd_bus **ret_bus);
/* While e runs (from just before sd_event_loop() to just after): messages
 * without descriptors reach sd-bus on the loop, not through the thread;
 * no synchronous bus call may be made on the loop meanwhile. */
int bus_gate_attach_event(BusGate *g, sd_event *e);
void bus_gate_detach_event(BusGate *g);
/* After the bus is closed (and the gate detached): stops the thread, kills the sorters. */
BusGate *bus_gate_free(BusGate *g);
static inline void bus_gate_freep(BusGate **g) {
        bus_gate_free(*g);
}

/* Whether fd stands for a descriptor refused because the sorters are full. */
bool bus_gate_is_refused(const BusGate *g, int fd);
/* Whether more of the bus waits to be read (by the gate or by sd-bus). */
bool bus_gate_input_waiting(const BusGate *g);

/* The gate's state, shared by its thread (bus/gate.c) and its turns on
 * the event loop (bus/gate-loop.c), and theirs alone. One side at a time
 * owns it: the thread, unless on_loop says the loop does (under lock). */
#define GATE_MAX_FDS FD_SORTER_BATCH

struct BusGate {
        int bus_fd;      /* a copy of the bus socket: sd-bus writes to it, the gate alone reads */
        int forward;     /* the gate's end of the pair; sd-bus reads the other */
        int sd_input;    /* that other end, sd-bus's */
        int pair_sndbuf; /* the pair's send buffer (SO_SNDBUF): what the loop may fill */
        int stop[2];     /* written by bus_gate_free() */
        int kick;        /* an eventfd: the thread looks at who owns the gate */
        int back;        /* an eventfd: the thread gave the gate back to the loop */
        int kept_fd[4];  /* stand for a descriptor the sorter kept: a regular file, a socket, a directory, /dev/null */
        int refused_fd;  /* an eventfd: stands for one dropped unseen, the sorters full */
        dev_t refused_dev;
        ino_t refused_ino;
        FdSorter sorter;
        pid_t retired[GATE_MAX_RETIRED];
        GateUids uids;
        pthread_t thread;
        pthread_mutex_t lock; /* the three below */
        bool want_loop, on_loop, handed;
        sd_event_source *io, *back_source; /* the loop's, while it may read */
        bool running, authenticated, dropped;
        bool drained; /* the last read took less than asked: wait before peeking again */
        bool sorter_was_ready;
        uint8_t *buf; /* read, not yet forwarded: at most one message not whole, at the end */
        size_t len, cap;
        int fds[GATE_MAX_FDS];    /* the first message's: a copy of a safe one, or -1 for one kept */
        char kinds[GATE_MAX_FDS]; /* of those kept */
        size_t n_fds;
        uint8_t peek[FD_SORTER_CHUNK];
};

/* Whole messages read, at most limit bytes of them, to sd-bus: 1 if a
 * whole one is left (past the limit), 0 if none, or an error. */
int gate_forward_ready(BusGate *g, size_t limit);
/* Peeks at most want bytes, without room for descriptors. */
ssize_t gate_peek(BusGate *g, size_t want, bool *ret_ctrunc);
/* Reads n bytes, with no room for descriptors: 1 read, 0 none there. */
int gate_take_plain(BusGate *g, size_t n);
/* Wakes the thread to look at who owns the gate, or the loop to take it back. */
static inline void gate_kick(int fd) {
        (void) eventfd_write(fd, 1);
}
