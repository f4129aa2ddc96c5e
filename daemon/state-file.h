/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The state directory on disk: atomic saves, loads that never crash and
 * never silently discard a damaged file. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "state-format.h"

/* Creates dir (0700) if missing and checks that we can write into it. An
 * existing dir must be a real directory owned by us or by owner (the user
 * we will run as), not writable by group or others; else -EPERM, logged. */
int state_dir_prepare(const char *dir, uid_t owner);

/* Gives dir and dir/state to uid:gid through descriptors (no symlink, FIFO
 * or hard link is followed: -EMLINK), before pmqosd becomes that user. */
int state_hand_over(const char *dir, uid_t uid, gid_t gid);

/* Loads dir/state. A missing file gives empty data. A damaged one is logged
 * with the reason, moved aside as state.corrupt-<time>, and gives empty data. */
int state_load(const char *dir, StateData *ret);

/* Writes dir/state atomically: temp file, fsync, rename, and — when durable —
 * fsync of dir, so that the new file survives a power cut. */
int state_save(const char *dir, const char *data, size_t len, bool durable);

/* The same for any file of a directory pmqosd keeps (the runtime record):
 * hand over, read (a damaged or oversized one is moved aside, logged, and
 * -EBADMSG returned; a missing one is -ENOENT), move aside, and write
 * atomically (temp file and rename; fsync only when sync). */
int state_hand_over_file(const char *dir, const char *name, uid_t uid, gid_t gid);
int state_file_read(const char *dir, const char *name, size_t max, char **ret, size_t *ret_len);
/* (What state_file_read() returns has room for one byte more than *ret_len.) */
void state_file_move_aside(const char *dir, const char *name, const char *why);
int state_file_write(const char *dir, const char *name, const char *data, size_t len, bool sync, bool durable);

/* All of data at offset of fd (a short write or EINTR is carried on); 0 or -errno. */
int pwrite_all(int fd, const char *data, size_t len, size_t offset);
