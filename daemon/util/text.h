/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Text from outside (a process's command line, a state file) made safe for
 * the bus and for terminals: valid UTF-8, no control characters, bounded. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Whether s[0..len) is valid UTF-8 (no overlong forms, no surrogates, no
 * code point above U+10FFFF). */
bool utf8_is_valid(const char *s, size_t len);
/* The first len bytes of s, less a last character that is not whole: where
 * a cut at len keeps UTF-8 whole. */
size_t utf8_fit(const char *s, size_t len);

/* Copies s[0..len) into a new NUL-terminated string of at most max bytes (a
 * max below 8 counts as 8): bytes that are not part of valid UTF-8, NUL, C0
 * controls, DEL and C1 controls (U+0080–U+009F) become "\xNN" (a backslash
 * itself stays), and a text longer than max is cut at a character boundary
 * and ends in "…". Returns NULL only when out of memory. */
char *text_clean(const char *s, size_t len, size_t max);
