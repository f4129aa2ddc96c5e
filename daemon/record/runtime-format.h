/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The runtime record's format: the requests that are not persistent (they
 * die with their connection, or at their deadline), kept as an append-only
 * log so that each change costs one short write, and replayed at start to
 * re-adopt them. Pure text in, text out; no I/O (see runtime-record.c). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "record/state-format.h"
#include "model/store.h"

#define RUNTIME_FORMAT_VERSION 1
#define RUNTIME_FILE_MAX (64u * 1024u * 1024u)
#define RUNTIME_BUS_ID_LEN 32 /* hex digits of the bus's id */
#define RUNTIME_SENDER_MAX 255

typedef struct RuntimeEntry {
        Request *request;   /* owned; not persistent, in no store */
        const char *sender; /* the owner's unique name when recorded, "" once it left (in RuntimeData.text) */
} RuntimeEntry;

typedef struct RuntimeData {
        char bus_id[RUNTIME_BUS_ID_LEN + 1]; /* the bus the senders were on */
        RuntimeEntry *entries;               /* in creation order */
        size_t n_entries;
        /* The record as read: its complete lines are its first length
         * bytes, n_changes of them changes; a new run of the same bus goes
         * on writing after them (runtime_record_resume()). */
        size_t length, n_changes;
        char *text; /* the record's text, cut into lines: the senders point into it */
} RuntimeData;

void runtime_data_done(RuntimeData *d);

/* Replays a whole record. A last line without its newline (a write cut
 * short) is ignored; anything else unexpected makes the whole record
 * corrupt: -EBADMSG with the reason ("line 3: …") in err. */
int runtime_parse(const char *buf, size_t len, RuntimeData *ret, char *err, size_t err_size);
/* The same without a copy: takes buf (malloc'd, len bytes and room for
 * one more), cuts it into lines in place and keeps it in ret (freed at
 * once on failure). */
int runtime_parse_in_place(char *buf, size_t len, RuntimeData *ret, char *err, size_t err_size);

/* The record's lines: the header, and one line per change. */
void runtime_format_header(TextBuffer *b, const char *bus_id);
void runtime_format_add(TextBuffer *b, const Request *r);
void runtime_format_value(TextBuffer *b, uint32_t cookie, int32_t value);
void runtime_format_remove(TextBuffer *b, uint32_t cookie);
void runtime_format_detach(TextBuffer *b, uint32_t cookie);
