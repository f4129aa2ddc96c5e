/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A growing text buffer that remembers running out of memory instead of
 * failing each append, and percent-encoding both ways. */

#include "util/text-buffer.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void text_reserve(TextBuffer *b, size_t more) {
        if (b->oom || b->len + more + 1 <= b->cap)
                return;
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + more + 1)
                cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) {
                b->oom = true;
                return;
        }
        b->data = p;
        b->cap = cap;
}

void text_append(TextBuffer *b, const char *s) {
        size_t n = strlen(s);
        text_reserve(b, n);
        if (b->oom)
                return;
        memcpy(b->data + b->len, s, n + 1);
        b->len += n;
}

void text_printf(TextBuffer *b, const char *fmt, ...) {
        char line[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        text_append(b, line);
}

/* Decimal, without printf's format parsing: a record line is written before
 * every change's reply. */
void text_append_uint(TextBuffer *b, uint64_t v) {
        char digits[20];
        size_t n = 0;
        do {
                digits[n++] = (char) ('0' + v % 10);
                v /= 10;
        } while (v);
        text_reserve(b, n);
        if (b->oom)
                return;
        while (n)
                b->data[b->len++] = digits[--n];
        b->data[b->len] = 0;
}

void text_append_int(TextBuffer *b, int64_t v) {
        if (v < 0) {
                text_append(b, "-");
                text_append_uint(b, (uint64_t) 0 - (uint64_t) v); /* INT64_MIN too */
        } else
                text_append_uint(b, (uint64_t) v);
}

static bool needs_escape(unsigned char c) {
        return c <= 0x20 || c >= 0x7f || c == '%' || c == '=';
}

void text_append_escaped(TextBuffer *b, const char *s) {
        static const char hex[] = "0123456789ABCDEF";
        text_reserve(b, strlen(s) * 3);
        if (b->oom)
                return;
        for (const unsigned char *p = (const unsigned char *) s; *p; p++)
                if (needs_escape(*p)) {
                        b->data[b->len++] = '%';
                        b->data[b->len++] = hex[*p >> 4];
                        b->data[b->len++] = hex[*p & 15];
                } else
                        b->data[b->len++] = (char) *p;
        b->data[b->len] = 0;
}

static int hexval(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        return -1;
}

/* Decodes in place; refuses malformed escapes and embedded NULs. */
int text_unescape(char *s) {
        char *w = s;
        for (char *p = s; *p; p++) {
                if (*p != '%') {
                        *w++ = *p;
                        continue;
                }
                int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
                if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                        return -EINVAL;
                *w++ = (char) (hi << 4 | lo);
                p += 2;
        }
        *w = 0;
        return 0;
}
