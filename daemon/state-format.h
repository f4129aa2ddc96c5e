/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The state file's format: persistent requests, the floor and the per-CPU
 * values to restore. Pure text in, text out; no I/O (see state-file.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hashmap.h"
#include "store.h"

#define STATE_FORMAT_VERSION 1
#define STATE_FILE_MAX (16u * 1024u * 1024u)
#define STATE_REASON_MAX 256u

typedef struct CpuOriginal {
        uint32_t cpu;
        char *value;     /* the sysfs text found before our first write */
        int32_t written; /* what we wrote since (in memory only) */
} CpuOriginal;

typedef struct StateData {
        int32_t floor;
        Request **requests; /* owned; not in any store */
        size_t n_requests;
        CpuOriginal *originals;
        size_t n_originals;
} StateData;

void state_data_done(StateData *d);

/* Parses a whole file. Returns 0, or -EBADMSG with a reason ("line 3: …") in err. */
int state_parse(const char *buf, size_t len, StateData *ret, char *err, size_t err_size);

/* Appends one text line per item to a growing buffer. */
typedef struct TextBuffer {
        char *data;
        size_t len, cap;
        bool oom;
} TextBuffer;

void text_append(TextBuffer *b, const char *s);
void text_append_escaped(TextBuffer *b, const char *s);
void text_append_uint(TextBuffer *b, uint64_t v);
void text_append_int(TextBuffer *b, int64_t v);
void text_printf(TextBuffer *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes the header, the floor, the originals and every persistent request of s. */
int state_serialize(const Store *s, int32_t floor, const CpuOriginal *originals, size_t n_originals, TextBuffer *out);

/* The command lines met while parsing one file, each kept once: most
 * requests of a file come from a few programs (a restart with 10,000
 * requests of one client would otherwise clean and hold its command line
 * 10,000 times). Holds a reference to each; lives as long as the parse. */
typedef struct ExecCache {
        Hashmap by_text; /* cleaned command line → SharedString */
} ExecCache;

void exec_cache_init(ExecCache *c);
void exec_cache_done(ExecCache *c);

/* Shared with the runtime record (runtime-format.c): one request's fields,
 * "cookie=… reason=…" without a newline, and their parser (in place; the
 * request comes back persistent and in no store). execs may be NULL. */
void state_format_request(TextBuffer *out, const Request *r);
int state_parse_request(char *fields, ExecCache *execs, Request **ret, const char **why);
/* Canonical decimal in [min, max]; percent-decoding in place (no NUL). */
int state_parse_i64(const char *s, int64_t min, int64_t max, int64_t *ret);
int state_unescape(char *s);
/* Calls parse on each line of text (split in place), skipping blank lines
 * and "#" comments, until one fails; *lineno counts the lines seen. */
int state_parse_lines(char *text, int (*parse)(void *userdata, char *line, const char **why), void *userdata,
                      unsigned *lineno, const char **why);
