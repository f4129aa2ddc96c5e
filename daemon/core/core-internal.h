/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What core.c shares with start.c, and with no other layer. */
#pragma once

typedef struct Core Core; /* core/core.h */

/* Brings the kernel and the state file to the store: the one commit. */
int core_commit(Core *c);
/* Forgets the departures' record lines not yet written (a record written
 * whole has them). */
void core_discard_pending_record(Core *c);
