/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The files of a directory pmqosd keeps (the state file, the runtime
 * record): a checked directory, atomic writes, loads that move a damaged
 * file aside and say so, and the hand-over to the user pmqosd runs as. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Creates dir (0700) if missing and checks that we can write into it. An
 * existing dir must be a real directory owned by us or by owner (the user
 * we will run as), not writable by group or others; else -EPERM, logged. */
int durable_dir_prepare(const char *dir, uid_t owner);

/* Gives dir and dir/name to uid:gid through descriptors (no symlink, FIFO or
 * hard link is followed: -EMLINK), before pmqosd becomes that user. */
int durable_file_hand_over(const char *dir, const char *name, uid_t uid, gid_t gid);

/* Reads dir/name: a damaged or oversized one is moved aside, logged, and
 * -EBADMSG returned; a missing one is -ENOENT. What it returns has room for
 * one byte more than *ret_len. */
int durable_file_read(const char *dir, const char *name, size_t max, char **ret, size_t *ret_len);
/* Renames dir/name to name.corrupt-<time> (never over an earlier one), logged with why. */
void durable_file_move_aside(const char *dir, const char *name, const char *why);
/* Writes dir/name atomically: temp file and rename; fsync of the file when
 * sync, and of dir too when durable, so that it survives a power cut. */
int durable_file_write(const char *dir, const char *name, const char *data, size_t len, bool sync, bool durable);
