/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What core.c shares with start.c and floors.c, and with no other layer. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Core Core;           /* core/core.h */
typedef struct ChangeSet ChangeSet; /* core/core.h */

/* The snapshot a transaction compares with to say what changed. */
typedef struct Before {
        int32_t effective, wakeup_effective, floor;
        size_t count;
        bool state_dirty;
} Before;

Before core_before(const Core *c);
/* What changed since b: into changes, and the audit's entries of the latency. */
void core_changed(const Core *c, const Before *b, bool requests, ChangeSet *changes);
/* A transaction the kernel refused: state back as b, committed again; returns error. */
int core_undo(Core *c, const Before *b, int error, ChangeSet *changes);

/* Brings the kernel and the state file to the store: the one commit. */
int core_commit(Core *c);
/* Forgets the departures' record lines not yet written (a record written
 * whole has them). */
void core_discard_pending_record(Core *c);
