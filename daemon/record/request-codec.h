/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One request's fields, "cookie=… reason=…" without a newline, written and
 * parsed alike for the state file (state-format.c) and the runtime record
 * (runtime-format.c). */
#pragma once

#include <stdint.h>

#include "model/store.h"
#include "util/hashmap.h"
#include "util/text-buffer.h"

#define STATE_REASON_MAX 256u

/* The command lines met while parsing one file, each kept once: most
 * requests of a file come from a few programs (a restart with 10,000
 * requests of one client would otherwise clean and hold its command line
 * 10,000 times). Holds a reference to each; lives as long as the parse. */
typedef struct ExecCache {
        Hashmap by_text; /* cleaned command line → SharedString */
} ExecCache;

void exec_cache_init(ExecCache *c);
void exec_cache_done(ExecCache *c);

void request_format(TextBuffer *out, const Request *r);
/* Parses fields in place; the request comes back persistent and in no
 * store. execs may be NULL. -EBADMSG with the reason in *why. */
int request_parse(char *fields, ExecCache *execs, Request **ret, const char **why);

/* Canonical decimal in [min, max]. */
int record_parse_i64(const char *s, int64_t min, int64_t max, int64_t *ret);
/* Calls parse on each line of text (split in place), skipping blank lines
 * and "#" comments, until one fails; *lineno counts the lines seen. */
int record_parse_lines(char *text, int (*parse)(void *userdata, char *line, const char **why), void *userdata,
                       unsigned *lineno, const char **why);
