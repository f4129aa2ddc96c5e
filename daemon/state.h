/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The state directory on disk: atomic saves, loads that never crash and
 * never silently discard a damaged file. */
#pragma once

#include <stddef.h>

#include "state-file.h"

/* Creates dir (0700) if missing and checks that we can write into it. */
int state_dir_prepare(const char *dir);

/* Loads dir/state. A missing file gives empty data. A damaged one is logged
 * with the reason, moved aside as state.corrupt-<time>, and gives empty data. */
int state_load(const char *dir, StateData *ret);

/* Writes dir/state atomically: temp file, fsync, rename, fsync of dir. */
int state_save(const char *dir, const char *data, size_t len);
