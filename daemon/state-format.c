/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One record per line, "key=value" fields, strings percent-encoded so that a
 * record never spans lines and an admin can read it. The parser is strict:
 * anything unexpected makes the whole file corrupt, never half-loaded. */

#include "state-format.h"

#include "text.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "validate.h"

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

/* ---- writing ---- */

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

void state_format_request(TextBuffer *out, const Request *r) {
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
                state_format_request(out, r);
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
int state_unescape(char *s) {
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

int state_parse_i64(const char *s, int64_t min, int64_t max, int64_t *ret) {
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
                if (n >= sizeof(cpus) / sizeof(cpus[0]) || state_parse_i64(tok, 0, PMQOS_MAX_CPUS - 1, &v) < 0)
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
};

static const char *const request_fields[] = { "cookie",  "type",    "value", "uid",  "pid",
                                              "created", "expires", "cpus",  "exec", "reason" };

/* One key=value of a request record, the key's index in request_fields. */
static int parse_field(Request *r, unsigned i, char *val, ExecCache *execs) {
        int64_t v = 0;
        int k = 0;
        QosType t;
        ValidationError verr;

        switch (1u << i) {
        case F_COOKIE:
                k = state_parse_i64(val, 1, UINT32_MAX, &v);
                r->cookie = (uint32_t) v;
                break;
        case F_TYPE:
                k = parse_qos_type(val, &t, &verr);
                r->type = t;
                break;
        case F_VALUE:
                k = state_parse_i64(val, PMQOS_LATENCY_NONE, PMQOS_LATENCY_MAX_US, &v);
                r->value = (int32_t) v;
                break;
        case F_UID:
                k = state_parse_i64(val, 0, UINT32_MAX - 1, &v);
                r->uid = (uid_t) v;
                break;
        case F_PID:
                k = state_parse_i64(val, 0, INT32_MAX, &v);
                r->pid = (pid_t) v;
                break;
        case F_CREATED:
                k = state_parse_i64(val, 0, INT64_MAX, &v);
                r->created_usec = v;
                break;
        case F_EXPIRES:
                k = state_parse_i64(val, 0, INT64_MAX, &v);
                r->expires_usec = v;
                break;
        case F_CPUS:
                k = parse_cpus(val, r);
                break;
        case F_EXEC:
                k = state_unescape(val);
                if (k >= 0 && val[0])
                        k = set_exec(r, val, execs);
                break;
        case F_REASON:
                k = state_unescape(val);
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
        }
        return k;
}

int state_parse_request(char *fields, ExecCache *execs, Request **ret, const char **why) {
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
        if (seen != F_ALL) {
                *why = "request record lacks a field";
                goto fail;
        }
        *ret = r;
        return 0;

fail:
        request_free(r);
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
        if (p->have_floor || state_parse_i64(value, PMQOS_LATENCY_NONE, PMQOS_LATENCY_MAX_US, &v) < 0)
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
        if (state_parse_i64(fields, 0, PMQOS_MAX_CPUS - 1, &cpu) < 0 || state_unescape(sp + 1) < 0 ||
            strlen(sp + 1) > 64)
                return bad(why, "invalid cpu record");
        for (size_t i = 0; i < p->d.n_originals; i++)
                if (p->d.originals[i].cpu == cpu)
                        return bad(why, "repeated cpu record");
        return append_original(&p->d, (uint32_t) cpu, sp + 1);
}

static int parse_request_record(Parser *p, char *fields, const char **why) {
        Request *req;
        int r = state_parse_request(fields, &p->execs, &req, why);
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

int state_parse_lines(char *text, int (*parse)(void *userdata, char *line, const char **why), void *userdata,
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

        r = state_parse_lines(copy, parse_line, &p, &lineno, &why);
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
