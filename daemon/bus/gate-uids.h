/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Whose descriptors the sorters keep, for the bound per uid: the sender's
 * uid, asked of the bus on a connection of the gate's own (which takes no
 * descriptors, so nothing can be sent to it that could wait at a close),
 * and how many each uid has kept, for as long as the sorter keeping them
 * lives. One uid alone can then never fill a sorter, so that RequestFor()
 * with a pidfd or a cgroup stays open to everyone else. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

/* What one uid may have kept in all sorters: below what a sorter keeps
 * before it is retired less one write's (512 - 253). */
#define GATE_KEPT_PER_UID 256u
#define GATE_CHARGES 192u /* (sorter, uid) pairs; past them a uid counts as full */
#define GATE_NAMES 64u
#define GATE_UNASKED_MAX 4u      /* messages the look-up connection reads and drops, */
#define GATE_UNASKED_BYTES 4096u /* and bytes waiting, before it starts over */

typedef struct GateCharge {
        pid_t sorter;
        uid_t uid;
        unsigned kept;
} GateCharge;

typedef struct GateUids {
        sd_bus *bus; /* opened at the first need */
        struct {
                char name[256];
                uid_t uid;
        } names[GATE_NAMES]; /* unique names are never reused: a cache needs no expiry */
        size_t next_name;
        GateCharge charges[GATE_CHARGES];
} GateUids;

/* The uid of the connection with this unique name: 0 or -errno. */
int gate_uid_of(GateUids *u, const char *sender, uid_t *ret);
/* Whether the message whose first len bytes are in buf and then n in peek
 * may have its descriptors kept: its sender's uid (*ret_uid) has room for
 * all of them. False too for a sender the bus cannot say. */
bool gate_uid_has_room(GateUids *u, const uint8_t *buf, size_t len, const uint8_t *peek, size_t n, uid_t *ret_uid);
/* How many descriptors uid's calls left kept, in all sorters. */
unsigned gate_uid_kept(const GateUids *u, uid_t uid);
/* n more kept by the sorter for uid: false when there is no room to count them. */
bool gate_uid_charge(GateUids *u, pid_t sorter, uid_t uid, unsigned n);
/* The sorter is gone: what it kept no longer counts. */
void gate_uid_release(GateUids *u, pid_t sorter);
void gate_uids_done(GateUids *u);
