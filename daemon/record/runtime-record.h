/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The runtime record on disk (/run/pmqos/requests, a tmpfs): every change of
 * a request that is not persistent appended as it happens, before the
 * caller hears back, so that a restart — SIGTERM or kill -9 — finds every
 * acknowledged request (departures, which nobody waits for, come with the
 * next change: see core_flush_record()). No fsync: it lives as long as the
 * boot. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "record/runtime-format.h"
#include "model/store.h"

#define RUNTIME_RECORD_NAME "requests"

typedef struct RuntimeRecord {
        char *dir;   /* NULL: no record is kept */
        int fd;      /* the record, open for appending once started; -1 before or after a failure */
        size_t used; /* bytes of lines in it; past them, reserved zeros */
        char *map;   /* the mapped window at its tail, or NULL */
        size_t map_offset, map_len;
        char bus_id[RUNTIME_BUS_ID_LEN + 1];
        size_t n_lines; /* change lines in the file */
        size_t n_live;  /* requests the file describes */
        bool failed;    /* the last write failed: rewrite it whole at the next change */
} RuntimeRecord;

/* Prepares dir like the state directory (owned by us or owner, not writable
 * by others). dir NULL or "": no record. */
int runtime_record_init(RuntimeRecord *rec, const char *dir, uid_t owner);
void runtime_record_done(RuntimeRecord *rec);

/* What the previous run left: a missing record gives empty data; a damaged
 * one is logged, moved aside, and gives empty data. */
int runtime_record_load(RuntimeRecord *rec, RuntimeData *ret);

/* Starts a fresh record for this bus: the header and every request of s
 * that is not persistent, written whole, then kept open for appending. */
int runtime_record_start(RuntimeRecord *rec, const char *bus_id, const Store *s);

/* Goes on with the previous run's record, which was read as of bus_id:
 * cut to its complete lines (the first length bytes, n_changes changes
 * describing n_live requests), then the start's own changes appended as by
 * runtime_record_append(). A start that re-adopts 10,000 requests so
 * writes only what differs. Written whole from s when the file cannot be
 * reopened. */
int runtime_record_resume(RuntimeRecord *rec, const char *bus_id, size_t length, size_t n_changes, size_t n_live,
                          const TextBuffer *lines, size_t n_lines, long live_delta, const Store *s);

/* Appends the lines of one transaction (lines is empty: nothing): n_lines
 * changes, after which the record describes live_delta more requests (or
 * fewer). When the file has
 * grown well past what it describes, or a write failed, it is written
 * whole again from s. Failures are logged, never returned: the kernel
 * and the bus are served from memory meanwhile. */
void runtime_record_append(RuntimeRecord *rec, const TextBuffer *lines, size_t n_lines, long live_delta,
                           const Store *s);

/* Whether appending n_lines changes (live_delta as above) would have the
 * record written whole anyway: the caller of a big transaction (a client
 * of a thousand requests leaving) may then skip the lines and call
 * runtime_record_rewrite() once the store holds the outcome. */
bool runtime_record_rewrite_due(const RuntimeRecord *rec, size_t n_lines, long live_delta);
void runtime_record_rewrite(RuntimeRecord *rec, const Store *s);

/* Hands dir and the record to the user pmqosd becomes. */
int runtime_record_hand_over(RuntimeRecord *rec, uid_t uid, gid_t gid);
