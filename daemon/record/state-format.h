/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The state file's format: persistent requests, the floor and the per-CPU
 * values to restore. Pure text in, text out; no I/O (see state-file.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/store.h"
#include "record/request-codec.h"
#include "sys/cpu-sink.h"
#include "util/text-buffer.h"

#define STATE_FORMAT_VERSION 1
#define STATE_FILE_MAX (16u * 1024u * 1024u)

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

/* Writes the header, the floor, the originals and every persistent request of s. */
int state_serialize(const Store *s, int32_t floor, const CpuOriginal *originals, size_t n_originals, TextBuffer *out);
