/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One record per line, "key=value" fields, strings percent-encoded so that a
 * record never spans lines and an admin can read it. The parser is strict:
 * anything unexpected makes the whole file corrupt, never half-loaded. */

#include "record/state-format.h"

#include "util/text.h"
#include "util/macro.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/validate.h"

#define STATE_MAGIC "pmqos-state"

void state_data_done(StateData *d) {
        for (size_t i = 0; i < d->n_requests; i++)
                request_free(d->requests[i]);
        free(d->requests);
        for (size_t i = 0; i < d->n_originals; i++)
                free(d->originals[i].value);
        free(d->originals);
        *d = (StateData){ .floor = PMQOS_LATENCY_NONE };
}

int state_serialize(const Store *s, int32_t floor, const CpuOriginal *originals, size_t n_originals, TextBuffer *out) {
        text_append(out, "# pmqosd state: written atomically by pmqosd; edit only while it is stopped.\n");
        text_printf(out, "%s %d\n", STATE_MAGIC, STATE_FORMAT_VERSION);
        text_printf(out, "floor %" PRIi32 "\n", floor);
        for (size_t i = 0; i < n_originals; i++) {
                text_printf(out, "cpu %" PRIu32 " ", originals[i].cpu);
                text_append_escaped(out, originals[i].value);
                text_append(out, "\n");
        }
        STORE_FOREACH(r, s) {
                if (!r->persistent)
                        continue;
                text_append(out, "request ");
                request_format(out, r);
                text_append(out, "\n");
        }
        /* A file cut short at a line boundary still lacks this. */
        text_append(out, "end\n");
        return out->oom ? -ENOMEM : 0;
}

/* ---- reading ---- */

static int fail(char *err, size_t err_size, unsigned line, const char *what) {
        snprintf(err, err_size, "line %u: %s", line, what);
        return -EBADMSG;
}

static int append_request(StateData *d, Request *r) {
        Request **p = realloc(d->requests, (d->n_requests + 1) * sizeof(Request *));
        if (!p)
                return -ENOMEM;
        d->requests = p;
        d->requests[d->n_requests++] = r;
        return 0;
}

static int append_original(StateData *d, uint32_t cpu, const char *value) {
        CpuOriginal *p = realloc(d->originals, (d->n_originals + 1) * sizeof(CpuOriginal));
        if (!p)
                return -ENOMEM;
        d->originals = p;
        char *copy = strdup(value);
        if (!copy)
                return -ENOMEM;
        d->originals[d->n_originals++] = (CpuOriginal){ .cpu = cpu, .value = copy };
        return 0;
}

/* What the parser has seen so far. */
typedef struct Parser {
        StateData d;
        Hashmap cookies;
        ExecCache execs;
        bool have_header, have_floor, have_end;
} Parser;

static int bad(const char **why, const char *reason) {
        *why = reason;
        return -EBADMSG;
}

static int parse_header(Parser *p, const char *line, const char **why) {
        char want[32];
        snprintf(want, sizeof(want), "%s %d", STATE_MAGIC, STATE_FORMAT_VERSION);
        if (strncmp(line, STATE_MAGIC " ", strlen(STATE_MAGIC) + 1) == 0 && strcmp(line, want) != 0)
                return bad(why, "unknown state format version");
        if (strcmp(line, want) != 0)
                return bad(why, "not a pmqos state file");
        p->have_header = true;
        return 0;
}

static int parse_floor(Parser *p, const char *value, const char **why) {
        int64_t v;
        if (p->have_floor || record_parse_i64(value, PMQOS_LATENCY_NONE, PMQOS_CONTRACT_LATENCY_MAX, &v) < 0)
                return bad(why, "invalid or repeated floor");
        p->d.floor = (int32_t) v;
        p->have_floor = true;
        return 0;
}

static int parse_cpu(Parser *p, char *fields, const char **why) {
        char *sp = strchr(fields, ' ');
        int64_t cpu;
        if (!sp)
                return bad(why, "cpu record without a value");
        *sp = 0;
        if (record_parse_i64(fields, 0, PMQOS_MAX_CPUS - 1, &cpu) < 0 || text_unescape(sp + 1) < 0 ||
            strlen(sp + 1) > 64)
                return bad(why, "invalid cpu record");
        for (size_t i = 0; i < p->d.n_originals; i++)
                if (p->d.originals[i].cpu == cpu)
                        return bad(why, "repeated cpu record");
        return append_original(&p->d, (uint32_t) cpu, sp + 1);
}

static int parse_request_record(Parser *p, char *fields, const char **why) {
        Request *req;
        int r = request_parse(fields, &p->execs, &req, why);
        if (r < 0)
                return r;
        if (hashmap_get(&p->cookies, &req->cookie)) {
                request_free(req);
                return bad(why, "repeated cookie");
        }
        r = append_request(&p->d, req);
        if (r < 0) {
                request_free(req);
                return r;
        }
        return hashmap_put(&p->cookies, &req->cookie, req); /* req is d's now, whatever happens */
}

static int parse_line(void *userdata, char *line, const char **why) {
        Parser *p = userdata;

        if (p->have_end)
                return bad(why, "records after the end line");
        if (!p->have_header)
                return parse_header(p, line, why);
        if (strcmp(line, "end") == 0) {
                p->have_end = true;
                return 0;
        }
        if (strncmp(line, "floor ", 6) == 0)
                return parse_floor(p, line + 6, why);
        if (strncmp(line, "cpu ", 4) == 0)
                return parse_cpu(p, line + 4, why);
        if (strncmp(line, "request ", 8) == 0)
                return parse_request_record(p, line + 8, why);
        return bad(why, "unknown record");
}

int state_parse(const char *buf, size_t len, StateData *ret, char *err, size_t err_size) {
        Parser p = { .d = { .floor = PMQOS_LATENCY_NONE } };
        const char *why = NULL;
        unsigned lineno = 0;
        int r = 0;

        if (len > STATE_FILE_MAX)
                return fail(err, err_size, 0, "file is larger than 16 MiB");
        if (memchr(buf, 0, len))
                return fail(err, err_size, 0, "file contains a NUL byte");
        if (len > 0 && buf[len - 1] != '\n')
                return fail(err, err_size, 0, "file does not end with a newline (truncated?)");

        char *copy = malloc(len + 1);
        if (!copy)
                return -ENOMEM;
        hashmap_init(&p.cookies, &hashmap_u32_ops);
        exec_cache_init(&p.execs);
        memcpy(copy, buf, len);
        copy[len] = 0;

        r = record_parse_lines(copy, parse_line, &p, &lineno, &why);
        if (r >= 0 && !p.have_header)
                r = bad(&why, "no header line (empty or truncated file)");
        else if (r >= 0 && (!p.have_floor || !p.have_end))
                r = bad(&why, "no floor or end record (truncated file?)");
        if (r == -EBADMSG)
                r = fail(err, err_size, lineno, why);

        hashmap_clear(&p.cookies);
        exec_cache_done(&p.execs);
        free(copy);
        if (r < 0) {
                state_data_done(&p.d);
                return r;
        }
        *ret = p.d;
        return 0;
}
