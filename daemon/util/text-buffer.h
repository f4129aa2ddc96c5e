/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A growing text buffer (one line per item of a record) and the
 * percent-encoding that keeps any string on one line. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Appends never fail: out of memory, oom is set and the rest is dropped; the
 * writer checks oom once at the end. */
typedef struct TextBuffer {
        char *data;
        size_t len, cap;
        bool oom;
} TextBuffer;

void text_append(TextBuffer *b, const char *s);
/* s with every byte <= 0x20, >= 0x7f, '%' and '=' as "%XX". */
void text_append_escaped(TextBuffer *b, const char *s);
void text_append_uint(TextBuffer *b, uint64_t v);
void text_append_int(TextBuffer *b, int64_t v);
void text_printf(TextBuffer *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Decodes "%XX" in place; -EINVAL for a malformed escape or an embedded NUL. */
int text_unescape(char *s);
