/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* "pmqos-runtime 1", "bus ID", then one record per change:
 *   add sender=NAME [held=fd|held=process:PID:START|held=cgroup:ID:PATH] <the state file's request fields>
 *   value COOKIE VALUE
 *   detach COOKIE        (its owner left; a timed request lives on)
 *   remove COOKIE
 * Replay is strict: a change of a cookie that is not live is corruption. */

#include "record/runtime-format.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/hashmap.h"
#include "util/macro.h"
#include "util/text.h"

#define RUNTIME_MAGIC "pmqos-runtime"

void runtime_data_done(RuntimeData *d) {
        for (size_t i = 0; i < d->n_entries; i++)
                request_free(d->entries[i].request);
        free(d->entries);
        free(d->text);
        *d = (RuntimeData){};
}

/* ---- writing ---- */

void runtime_format_header(TextBuffer *b, const char *bus_id) {
        text_append(b, "# pmqosd runtime record: connection-bound and timed requests, re-adopted at restart.\n");
        text_printf(b, "%s %d\nbus %s\n", RUNTIME_MAGIC, RUNTIME_FORMAT_VERSION, bus_id);
}

/* What a held request is bound to, and how to find it again. */
static void format_held(TextBuffer *b, const Request *r) {
        switch (r->hold) {
        case HOLD_FD:
                text_append(b, "held=fd ");
                break;
        case HOLD_PROCESS:
                text_append(b, "held=process:");
                text_append_int(b, r->target_pid);
                text_append(b, ":");
                text_append_uint(b, r->target_key);
                text_append(b, " ");
                break;
        case HOLD_CGROUP:
                text_append(b, "held=cgroup:");
                text_append_uint(b, r->target_key);
                text_append(b, ":");
                text_append_escaped(b, request_target(r));
                text_append(b, " ");
                break;
        default:
                break;
        }
}

void runtime_format_add(TextBuffer *b, const Request *r) {
        text_append(b, "add sender=");
        text_append(b, request_sender(r)); /* a unique name: nothing to escape */
        text_append(b, " ");
        format_held(b, r);
        request_format(b, r);
        text_append(b, "\n");
}

void runtime_format_value(TextBuffer *b, uint32_t cookie, int32_t value) {
        text_append(b, "value ");
        text_append_uint(b, cookie);
        text_append(b, " ");
        text_append_int(b, value);
        text_append(b, "\n");
}

void runtime_format_remove(TextBuffer *b, uint32_t cookie) {
        text_append(b, "remove ");
        text_append_uint(b, cookie);
        text_append(b, "\n");
}

void runtime_format_detach(TextBuffer *b, uint32_t cookie) {
        text_append(b, "detach ");
        text_append_uint(b, cookie);
        text_append(b, "\n");
}

/* ---- reading ---- */

typedef struct Replay {
        RuntimeData d; /* entries in creation order, request NULL where removed until the end */
        size_t n_cap;
        size_t n_changes;
        Hashmap live; /* cookie → its entry's index + 1 */
        ExecCache execs;
        bool have_header, have_bus;
} Replay;

static int bad(const char **why, const char *reason) {
        *why = reason;
        return -EBADMSG;
}

static bool valid_bus_id(const char *s) {
        if (strlen(s) != RUNTIME_BUS_ID_LEN)
                return false;
        for (const char *p = s; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return false;
        return true;
}

/* What a bus hands out as a unique name: ":" and dot-separated [A-Za-z0-9_-]. */
static bool valid_sender(const char *s) {
        size_t n = strlen(s);
        if (n == 0)
                return true;
        if (s[0] != ':' || n < 2 || n > RUNTIME_SENDER_MAX)
                return false;
        for (const char *p = s + 1; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '.' ||
                      *p == '_' || *p == '-'))
                        return false;
        return true;
}

static RuntimeEntry *lookup(Replay *p, const char *text, const char **rest) {
        char *end;
        int64_t v;
        char buf[16];

        end = strchr(text, ' ');
        size_t n = end ? (size_t) (end - text) : strlen(text);
        if (n == 0 || n >= sizeof(buf))
                return NULL;
        memcpy(buf, text, n);
        buf[n] = 0;
        if (record_parse_i64(buf, 1, UINT32_MAX, &v) < 0)
                return NULL;
        uint32_t cookie = (uint32_t) v;
        uintptr_t slot = (uintptr_t) hashmap_get(&p->live, &cookie);
        if (slot == 0)
                return NULL;
        *rest = end ? end + 1 : NULL;
        return &p->d.entries[slot - 1];
}

/* "fd", "process:PID:START" or "cgroup:ID:PATH" (PATH escaped, absolute). */
static int parse_held(char *s, Request *req) {
        int64_t v;

        if (strcmp(s, "fd") == 0) {
                req->hold = HOLD_FD;
                return 0;
        }
        bool process = strncmp(s, "process:", 8) == 0;
        if (!process && strncmp(s, "cgroup:", 7) != 0)
                return -EINVAL;
        char *a = s + (process ? 8 : 7), *b = strchr(a, ':');
        if (!b)
                return -EINVAL;
        *b++ = 0;
        if (process) {
                if (record_parse_i64(a, 1, INT32_MAX, &v) < 0)
                        return -EINVAL;
                req->hold = HOLD_PROCESS;
                req->target_pid = (pid_t) v;
                if (record_parse_i64(b, 0, INT64_MAX, &v) < 0)
                        return -EINVAL;
                req->target_key = (uint64_t) v;
                return 0;
        }
        if (record_parse_i64(a, 1, INT64_MAX, &v) < 0 || text_unescape(b) < 0 || b[0] != '/' || strlen(b) >= PATH_MAX ||
            !utf8_is_valid(b, strlen(b)))
                return -EINVAL;
        req->hold = HOLD_CGROUP;
        req->target_key = (uint64_t) v;
        req->target = strdup(b);
        return req->target ? 0 : -ENOMEM;
}

static int parse_add(Replay *p, char *fields, const char **why) {
        if (strncmp(fields, "sender=", 7) != 0)
                return bad(why, "add record without a sender");
        char *sender = fields + 7, *rest = strchr(sender, ' ');
        if (!rest)
                return bad(why, "add record without request fields");
        *rest++ = 0;
        if (!valid_sender(sender))
                return bad(why, "invalid sender");

        char *held = NULL;
        if (strncmp(rest, "held=", 5) == 0) {
                held = rest + 5;
                rest = strchr(held, ' ');
                if (!rest)
                        return bad(why, "add record without request fields");
                *rest++ = 0;
        }

        Request *req;
        int r = request_parse(rest, &p->execs, &req, why);
        if (r < 0)
                return r;
        req->persistent = false;
        if (held && parse_held(held, req) < 0) {
                request_free(req);
                return bad(why, "invalid held field");
        }
        if (hashmap_get(&p->live, &req->cookie)) {
                request_free(req);
                return bad(why, "add of a live cookie");
        }
        if (p->d.n_entries == p->n_cap) {
                size_t cap = p->n_cap ? p->n_cap * 2 : 64;
                RuntimeEntry *e = realloc(p->d.entries, cap * sizeof(RuntimeEntry));
                if (!e) {
                        request_free(req);
                        return -ENOMEM;
                }
                p->d.entries = e;
                p->n_cap = cap;
        }
        /* The sender stays where it is, in the text (NUL-terminated above). */
        p->d.entries[p->d.n_entries++] = (RuntimeEntry){ .request = req, .sender = sender };
        /* NOLINTNEXTLINE(performance-no-int-to-ptr): the index + 1, never dereferenced (the array moves) */
        void *slot = (void *) (uintptr_t) p->d.n_entries;
        return hashmap_put(&p->live, &req->cookie, slot);
}

static int parse_change(Replay *p, const char *verb, char *args, const char **why) {
        const char *rest = NULL;
        RuntimeEntry *e = lookup(p, args, &rest);
        if (!e)
                return bad(why, "change of a cookie that is not live");

        if (strcmp(verb, "value") == 0) {
                int64_t v;
                if (!rest || record_parse_i64(rest, PMQOS_LATENCY_NONE, PMQOS_CONTRACT_LATENCY_MAX, &v) < 0)
                        return bad(why, "invalid value record");
                e->request->value = (int32_t) v;
                return 0;
        }
        if (rest)
                return bad(why, "trailing fields");
        if (strcmp(verb, "detach") == 0) {
                e->sender = "";
                return 0;
        }
        hashmap_remove(&p->live, &e->request->cookie);
        e->request = request_free(e->request); /* the slot stays, empty, until the end */
        return 0;
}

static int parse_line(void *userdata, char *line, const char **why) {
        Replay *p = userdata;

        if (!p->have_header) {
                char want[32];
                snprintf(want, sizeof(want), "%s %d", RUNTIME_MAGIC, RUNTIME_FORMAT_VERSION);
                if (strcmp(line, want) != 0)
                        return bad(why, "not a pmqos runtime record of this version");
                p->have_header = true;
                return 0;
        }
        if (!p->have_bus) {
                if (strncmp(line, "bus ", 4) != 0 || !valid_bus_id(line + 4))
                        return bad(why, "no valid bus line after the header");
                memcpy(p->d.bus_id, line + 4, RUNTIME_BUS_ID_LEN + 1);
                p->have_bus = true;
                return 0;
        }
        p->n_changes++;
        if (strncmp(line, "add ", 4) == 0)
                return parse_add(p, line + 4, why);
        static const char *const verbs[] = { "value", "detach", "remove" };
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++) {
                size_t n = strlen(verbs[i]);
                if (strncmp(line, verbs[i], n) == 0 && line[n] == ' ')
                        return parse_change(p, verbs[i], line + n + 1, why);
        }
        return bad(why, "unknown record");
}

/* The live entries, in order: the removed ones' slots close up. */
static void collect(RuntimeData *d) {
        size_t n = 0;
        for (size_t i = 0; i < d->n_entries; i++)
                if (d->entries[i].request)
                        d->entries[n++] = d->entries[i];
        d->n_entries = n;
}

static int too_large(char *err, size_t err_size) {
        snprintf(err, err_size, "larger than %u MiB", RUNTIME_FILE_MAX / (1024 * 1024));
        return -EBADMSG;
}

int runtime_parse_in_place(char *buf, size_t len, RuntimeData *ret, char *err, size_t err_size) {
        Replay p = {};
        const char *why = NULL;
        unsigned lineno = 0;
        int r = 0;

        if (len > RUNTIME_FILE_MAX) {
                free(buf);
                return too_large(err, err_size);
        }
        /* Zeros after the lines: the tail reserved while pmqosd ran (it was killed). */
        while (len > 0 && buf[len - 1] == 0)
                len--;
        if (memchr(buf, 0, len)) {
                free(buf);
                snprintf(err, err_size, "contains a NUL byte");
                return -EBADMSG;
        }
        /* A write cut short leaves a partial last line: that change never completed. */
        while (len > 0 && buf[len - 1] != '\n')
                len--;
        buf[len] = 0;
        p.d.text = buf;
        p.d.length = len;
        hashmap_init(&p.live, &hashmap_u32_ops);
        exec_cache_init(&p.execs);

        r = record_parse_lines(buf, parse_line, &p, &lineno, &why);
        if (r >= 0 && !p.have_bus)
                r = bad(&why, "no header and bus line (empty or truncated record)");
        if (r == -EBADMSG)
                snprintf(err, err_size, "line %u: %s", lineno, why);

        hashmap_clear(&p.live);
        exec_cache_done(&p.execs);
        if (r < 0) {
                runtime_data_done(&p.d);
                return r;
        }
        collect(&p.d);
        p.d.n_changes = p.n_changes;
        *ret = p.d;
        return 0;
}

int runtime_parse(const char *buf, size_t len, RuntimeData *ret, char *err, size_t err_size) {
        if (len > RUNTIME_FILE_MAX)
                return too_large(err, err_size);
        char *copy = malloc(len + 1);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, buf, len);
        return runtime_parse_in_place(copy, len, ret, err, err_size);
}
