/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One request as "key=value" fields, the codec the state file and the
 * runtime record share, and the line splitter both parsers run on. */

#include "record/request-codec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "model/validate.h"
#include "util/macro.h"
#include "util/text.h"

void request_format(TextBuffer *out, const Request *r) {
        text_append(out, "cookie=");
        text_append_uint(out, r->cookie);
        text_append(out, " type=");
        text_append(out, qos_type_to_string(r->type));
        text_append(out, " value=");
        text_append_int(out, r->value);
        text_append(out, " uid=");
        text_append_uint(out, r->uid);
        text_append(out, " pid=");
        text_append_int(out, r->pid);
        text_append(out, " created=");
        text_append_int(out, r->created_usec);
        text_append(out, " expires=");
        text_append_int(out, r->expires_usec);
        text_append(out, " cpus=");
        for (size_t i = 0; i < r->n_cpus; i++) {
                if (i)
                        text_append(out, ",");
                text_append_uint(out, r->cpus[i]);
        }
        text_append(out, " exec=");
        text_append_escaped(out, request_exec(r));
        text_append(out, " reason=");
        text_append_escaped(out, request_reason(r));
        if (r->origin) {
                text_append(out, " comm=");
                text_append_escaped(out, r->origin->comm);
                text_append(out, " unit=");
                text_append_escaped(out, r->origin->unit);
        }
}

int record_parse_i64(const char *s, int64_t min, int64_t max, int64_t *ret) {
        char *end;
        if (!*s || (s[0] == '0' && s[1] != 0) || (s[0] == '-' && (s[1] == '0' || !s[1])))
                return -EINVAL; /* canonical decimal only */
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno || *end || v < min || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

void exec_cache_init(ExecCache *c) {
        hashmap_init(&c->by_text, &hashmap_string_ops);
}

void exec_cache_done(ExecCache *c) {
        void *s;
        for (size_t i = 0; hashmap_next(&c->by_text, &i, &s);)
                shared_string_unref(s);
        hashmap_clear(&c->by_text);
}

/* The command line as a listing shows it: cleaned like one read from /proc,
 * and shared with the requests before it that have the same. */
static int set_exec(Request *r, const char *val, ExecCache *execs) {
        SharedString *s = execs ? hashmap_get(&execs->by_text, val) : NULL;
        if (s) {
                r->exec = shared_string_ref(s);
                return 0;
        }
        char *clean = text_clean(val, strlen(val), PMQOS_EXEC_MAX);
        if (!clean)
                return -ENOMEM;
        s = shared_string_new(clean);
        bool unchanged = strcmp(clean, val) == 0;
        free(clean);
        if (!s)
                return -ENOMEM;
        r->exec = s;
        /* Only a text that needed no cleaning is its own key; out of memory, it is just not shared. */
        if (execs && unchanged && hashmap_put(&execs->by_text, s->text, s) >= 0)
                shared_string_ref(s);
        return 0;
}

static int parse_cpus(char *s, Request *r) {
        uint32_t cpus[PMQOS_CPUS_MAX]; /* as many as a request may name */
        size_t n = 0;

        if (!*s)
                return request_set_cpus(r, NULL, 0);
        for (char *tok = s, *next; tok; tok = next) {
                next = strchr(tok, ',');
                if (next)
                        *next++ = 0;
                int64_t v;
                if (n >= sizeof(cpus) / sizeof(cpus[0]) || record_parse_i64(tok, 0, PMQOS_MAX_CPUS - 1, &v) < 0)
                        return -EINVAL;
                cpus[n++] = (uint32_t) v;
        }
        return request_set_cpus(r, cpus, n);
}

enum {
        F_COOKIE = 1 << 0,
        F_TYPE = 1 << 1,
        F_VALUE = 1 << 2,
        F_UID = 1 << 3,
        F_PID = 1 << 4,
        F_CREATED = 1 << 5,
        F_EXPIRES = 1 << 6,
        F_CPUS = 1 << 7,
        F_EXEC = 1 << 8,
        F_REASON = 1 << 9,
        F_ALL = (1 << 10) - 1,
        /* Optional (pmqosd wrote them since it names the ledger's rows from them): */
        F_COMM = 1 << 10,
        F_UNIT = 1 << 11,
};

static const char *const request_fields[] = { "cookie",  "type", "value", "uid",    "pid",  "created",
                                              "expires", "cpus", "exec",  "reason", "comm", "unit" };

/* A comm or unit as process_origin() keeps them: printable ASCII, cut. */
static int set_origin(Request *r, const char *val, bool unit) {
        for (const char *c = val; *c; c++)
                if ((unsigned char) *c < 0x20 || (unsigned char) *c >= 0x7f)
                        return -EINVAL;
        if (strlen(val) >= (unit ? PMQOS_UNIT_MAX : PMQOS_COMM_MAX))
                return -EINVAL;
        Origin *o = unit ? origin_new(r->origin ? r->origin->comm : "", val)
                         : origin_new(val, r->origin ? r->origin->unit : "");
        if (!o)
                return -ENOMEM;
        origin_unref(r->origin);
        r->origin = o;
        return 0;
}

/* One key=value of a request record, the key's index in request_fields. */
static int parse_field(Request *r, unsigned i, char *val, ExecCache *execs) {
        int64_t v = 0;
        int k = 0;
        QosType t;
        ValidationError verr;

        switch (1u << i) {
        case F_COOKIE:
                k = record_parse_i64(val, 1, UINT32_MAX, &v);
                r->cookie = (uint32_t) v;
                break;
        case F_TYPE:
                k = parse_qos_type(val, &t, &verr);
                r->type = t;
                break;
        case F_VALUE:
                k = record_parse_i64(val, PMQOS_LATENCY_NONE, PMQOS_CONTRACT_LATENCY_MAX, &v);
                r->value = (int32_t) v;
                break;
        case F_UID:
                k = record_parse_i64(val, 0, UINT32_MAX - 1, &v);
                r->uid = (uid_t) v;
                break;
        case F_PID:
                k = record_parse_i64(val, 0, INT32_MAX, &v);
                r->pid = (pid_t) v;
                break;
        case F_CREATED:
                k = record_parse_i64(val, 0, INT64_MAX, &v);
                r->created_usec = v;
                break;
        case F_EXPIRES:
                k = record_parse_i64(val, 0, INT64_MAX, &v);
                r->expires_usec = v;
                break;
        case F_CPUS:
                k = parse_cpus(val, r);
                break;
        case F_EXEC:
                k = text_unescape(val);
                if (k >= 0 && val[0])
                        k = set_exec(r, val, execs);
                break;
        case F_REASON:
                k = text_unescape(val);
                if (k >= 0 && strlen(val) > STATE_REASON_MAX)
                        k = -EINVAL;
                /* A file edited by hand may hold anything: the bus takes only UTF-8. */
                if (k >= 0 && val[0])
                        k = (r->reason = utf8_is_valid(val, strlen(val))
                                                 ? strdup(val)
                                                 : text_clean(val, strlen(val), STATE_REASON_MAX))
                                    ? 0
                                    : -ENOMEM;
                break;
        case F_COMM:
        case F_UNIT:
                k = text_unescape(val);
                if (k >= 0)
                        k = set_origin(r, val, (1u << i) == F_UNIT);
                break;
        }
        return k;
}

int request_parse(char *fields, ExecCache *execs, Request **ret, const char **why) {
        Request *r = calloc(1, sizeof(Request));
        unsigned seen = 0;

        if (!r) {
                *why = "out of memory";
                return -ENOMEM;
        }
        r->value_node = (HeapNode) HEAP_NODE_INIT;
        r->expiry_node = (HeapNode) HEAP_NODE_INIT;
        r->persistent = true;

        for (char *tok = fields, *next; tok && *tok; tok = next) {
                next = strchr(tok, ' ');
                if (next)
                        *next++ = 0;
                char *eq = strchr(tok, '=');
                if (!eq) {
                        *why = "field without '='";
                        goto fail;
                }
                *eq = 0;
                unsigned i;
                for (i = 0; i < ELEMENTSOF(request_fields) && strcmp(tok, request_fields[i]) != 0; i++)
                        ;
                if (i == ELEMENTSOF(request_fields)) {
                        *why = "unknown request field";
                        goto fail;
                }
                if (seen & (1u << i)) {
                        *why = "repeated request field";
                        goto fail;
                }
                seen |= 1u << i;
                if (parse_field(r, i, eq + 1, execs) < 0) {
                        *why = "invalid request field value";
                        goto fail;
                }
        }
        if ((seen & F_ALL) != F_ALL) {
                *why = "request record lacks a field";
                goto fail;
        }
        *ret = r;
        return 0;

fail:
        request_free(r);
        return -EBADMSG;
}

int record_parse_lines(char *text, int (*parse)(void *userdata, char *line, const char **why), void *userdata,
                       unsigned *lineno, const char **why) {
        int r = 0;
        for (char *line = text, *next; line && *line && r >= 0; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = 0;
                (*lineno)++;
                if (line[0] != '#' && line[0] != 0)
                        r = parse(userdata, line, why);
        }
        return r;
}
