/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* "pmqos-runtime 1", "bus ID", then one record per change:
 *   add sender=NAME <the state file's request fields>
 *   value COOKIE VALUE
 *   detach COOKIE        (its owner left; a timed request lives on)
 *   remove COOKIE
 * Replay is strict: a change of a cookie that is not live is corruption. */

#include "runtime-format.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "util.h"

#define RUNTIME_MAGIC "pmqos-runtime"

void runtime_data_done(RuntimeData *d) {
        for (size_t i = 0; i < d->n_entries; i++) {
                request_free(d->entries[i].request);
                free(d->entries[i].sender);
        }
        free(d->entries);
        *d = (RuntimeData){};
}

/* ---- writing ---- */

void runtime_format_header(TextBuffer *b, const char *bus_id) {
        text_append(b, "# pmqosd runtime record: connection-bound and timed requests, re-adopted at restart.\n");
        text_printf(b, "%s %d\nbus %s\n", RUNTIME_MAGIC, RUNTIME_FORMAT_VERSION, bus_id);
}

void runtime_format_add(TextBuffer *b, const Request *r) {
        text_append(b, "add sender=");
        text_append(b, request_sender(r)); /* a unique name: nothing to escape */
        text_append(b, " ");
        state_format_request(b, r);
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
        RuntimeData d;          /* the bus id; entries are filled in at the end */
        RuntimeEntry **entries; /* in creation order; NULL where removed */
        size_t n_entries, n_cap;
        Hashmap live; /* cookie → RuntimeEntry */
        bool have_header, have_bus;
} Replay;

static void entry_free(RuntimeEntry *e) {
        if (!e)
                return;
        request_free(e->request);
        free(e->sender);
        free(e);
}

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
        if (state_parse_i64(buf, 1, UINT32_MAX, &v) < 0)
                return NULL;
        uint32_t cookie = (uint32_t) v;
        RuntimeEntry *e = hashmap_get(&p->live, &cookie);
        if (e)
                *rest = end ? end + 1 : NULL;
        return e;
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

        Request *req;
        int r = state_parse_request(rest, &req, why);
        if (r < 0)
                return r;
        req->persistent = false;
        if (hashmap_get(&p->live, &req->cookie)) {
                request_free(req);
                return bad(why, "add of a live cookie");
        }
        if (p->n_entries == p->n_cap) {
                size_t cap = p->n_cap ? p->n_cap * 2 : 64;
                RuntimeEntry **e = realloc(p->entries, cap * sizeof(RuntimeEntry *));
                if (!e) {
                        request_free(req);
                        return -ENOMEM;
                }
                p->entries = e;
                p->n_cap = cap;
        }
        RuntimeEntry *e = calloc(1, sizeof(RuntimeEntry));
        if (e)
                e->sender = strdup(sender);
        if (!e || !e->sender) {
                free(e);
                request_free(req);
                return -ENOMEM;
        }
        e->request = req;
        p->entries[p->n_entries++] = e;
        return hashmap_put(&p->live, &req->cookie, e);
}

static int parse_change(Replay *p, const char *verb, char *args, const char **why) {
        const char *rest = NULL;
        RuntimeEntry *e = lookup(p, args, &rest);
        if (!e)
                return bad(why, "change of a cookie that is not live");

        if (strcmp(verb, "value") == 0) {
                int64_t v;
                if (!rest || state_parse_i64(rest, PMQOS_LATENCY_NONE, PMQOS_LATENCY_MAX_US, &v) < 0)
                        return bad(why, "invalid value record");
                e->request->value = (int32_t) v;
                return 0;
        }
        if (rest)
                return bad(why, "trailing fields");
        if (strcmp(verb, "detach") == 0) {
                e->sender[0] = 0;
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

/* The live entries, in order, as the result; every slot is freed. */
static int collect(Replay *p, bool keep) {
        size_t n = 0;
        int r = 0;

        if (keep && p->n_entries > 0) {
                p->d.entries = calloc(p->n_entries, sizeof(RuntimeEntry));
                if (!p->d.entries)
                        r = -ENOMEM;
        }
        for (size_t i = 0; i < p->n_entries; i++) {
                RuntimeEntry *e = p->entries[i];
                if (r >= 0 && keep && e->request) {
                        p->d.entries[n++] = *e;
                        free(e);
                } else
                        entry_free(e);
        }
        free(p->entries);
        p->d.n_entries = n;
        return r;
}

int runtime_parse(const char *buf, size_t len, RuntimeData *ret, char *err, size_t err_size) {
        Replay p = {};
        const char *why = NULL;
        unsigned lineno = 0;
        int r = 0;

        if (len > RUNTIME_FILE_MAX) {
                snprintf(err, err_size, "larger than %u MiB", RUNTIME_FILE_MAX / (1024 * 1024));
                return -EBADMSG;
        }
        /* Zeros after the lines: the tail reserved while pmqosd ran (it was killed). */
        while (len > 0 && buf[len - 1] == 0)
                len--;
        if (memchr(buf, 0, len)) {
                snprintf(err, err_size, "contains a NUL byte");
                return -EBADMSG;
        }
        /* A write cut short leaves a partial last line: that change never completed. */
        while (len > 0 && buf[len - 1] != '\n')
                len--;

        char *copy = malloc(len + 1);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, buf, len);
        copy[len] = 0;
        hashmap_init(&p.live, &hashmap_u32_ops);

        r = state_parse_lines(copy, parse_line, &p, &lineno, &why);
        if (r >= 0 && !p.have_bus)
                r = bad(&why, "no header and bus line (empty or truncated record)");
        if (r == -EBADMSG)
                snprintf(err, err_size, "line %u: %s", lineno, why);

        hashmap_clear(&p.live);
        free(copy);
        int k = collect(&p, r >= 0);
        if (r >= 0)
                r = k;
        if (r < 0) {
                runtime_data_done(&p.d);
                return r;
        }
        *ret = p.d;
        return 0;
}
