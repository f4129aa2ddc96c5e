/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Whole-file reads and complete writes. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* Reads the regular file path (never through a symlink, never blocking on a
 * FIFO) of at most max bytes into a new buffer with room for one byte more
 * than *ret_len. -EBADMSG if it is not a regular file or a symlink, -EFBIG
 * if it is or grows larger than max, else 0 or a negative errno. */
int read_file_bounded(const char *path, size_t max, char **ret, size_t *ret_len);

/* A small file of /proc or sysfs (name relative to dir, or AT_FDCWD), which
 * one read() gives whole: at most size - 1 bytes, NUL-terminated. Its
 * length, or a negative errno. The one small-file reader of the tree. */
ssize_t read_small_at(int dir, const char *name, char *buf, size_t size);

/* The same from a descriptor kept open, read again from its start (a sysfs
 * attribute shows its value anew at offset 0): its length, or a negative
 * errno (-ENODEV: the attribute is gone). */
ssize_t read_small_fd(int fd, char *buf, size_t size);

/* All of data at offset of fd (a short write or EINTR is carried on); 0 or -errno. */
int pwrite_all(int fd, const char *data, size_t len, size_t offset);
