/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The state file on disk (dir/state): atomic saves, loads that never crash
 * and never silently discard a damaged file. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "record/state-format.h"

/* Gives dir and dir/state to uid:gid through descriptors (no symlink, FIFO
 * or hard link is followed: -EMLINK), before pmqosd becomes that user. */
int state_hand_over(const char *dir, uid_t uid, gid_t gid);

/* Loads dir/state. A missing file gives empty data. A damaged one is logged
 * with the reason, moved aside as state.corrupt-<time>, and gives empty data. */
int state_load(const char *dir, StateData *ret);

/* Writes dir/state atomically: temp file, fsync, rename, and — when durable —
 * fsync of dir, so that the new file survives a power cut. */
int state_save(const char *dir, const char *data, size_t len, bool durable);
