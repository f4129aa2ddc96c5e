/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What every Check unit test's main() ends with: run the suite, exit with
 * the verdict. */
#pragma once

#include <check.h>
#include <stdint.h>

/* Runs every test of s, each in a child unless $CK_FORK=no says otherwise
 * (CK_FORK_GETENV), or all in this process (CK_NOFORK: leak checkers see
 * everything); frees s; returns EXIT_SUCCESS or EXIT_FAILURE. */
int unit_run(Suite *s, enum fork_status fork);

/* Helpers the unit tests share: a scratch directory, small files, and the
 * 4-byte value a stand-in device holds. Each fails the test on error. */

/* Creates a fresh directory /tmp/pmqos-unit-NAME-XXXXXX; returns its path (static). */
const char *unit_make_dir(const char *name);
/* The same in memory (/dev/shm) where there is one: for thousands of small
 * files, which a loaded disk makes cost seconds. */
const char *unit_make_memory_dir(const char *name);
/* Removes either and everything in it. */
void unit_remove_dir(const char *path);
/* Writes text to dir/name, making missing parent directories. */
void unit_write_file(const char *dir, const char *name, const char *text);
/* What dir/name holds, up to 4 KiB (static; "" if it does not exist). */
const char *unit_read_file(const char *dir, const char *name);
/* The int32 a stand-in device (a 4-byte file) holds. */
int32_t unit_read_device(const char *path);
/* Runs f with stderr going to a file; returns what it wrote (free() it). */
char *unit_capture_stderr(void (*f)(void));
/* How many times what occurs in text. */
unsigned unit_count(const char *text, const char *what);
