/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Under journald (JOURNAL_STREAM names our stderr) entries are sent with
 * sd_journal_send(); otherwise they are log lines. The text is the same. */

#include "record/audit.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-journal.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"
#include "util/text-buffer.h"
#include "util/text.h"
#include "model/validate.h"

static int journal = -1;
typedef struct Bucket {
        double tokens;
        uint64_t last_usec; /* CLOCK_MONOTONIC */
        unsigned long suppressed;
        bool started;
        uint32_t uid;
} Bucket;
/* The effective value's entries share one; each user's changes have their
 * own (a few users at once; a new one takes the fullest slot, as good as
 * new). Root's changes and floors are never left out. */
static Bucket shared;
static Bucket users[AUDIT_USER_SLOTS];

bool audit_to_journal(void) {
        if (journal < 0) {
                const char *e = getenv("JOURNAL_STREAM");
                unsigned long long dev, ino;
                struct stat st;
                journal = e && sscanf(e, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0 &&
                          st.st_dev == dev && st.st_ino == ino;
        }
        return journal;
}

void audit_reset(void) {
        journal = -1;
        shared = (Bucket){};
        memset(users, 0, sizeof(users));
}

void audit_age(unsigned sec) {
        shared.last_usec -= (uint64_t) sec * 1000000u;
        for (size_t i = 0; i < AUDIT_USER_SLOTS; i++)
                users[i].last_usec -= (uint64_t) sec * 1000000u;
}

/* The coarse clock (a tick, some ms) is plenty for a refill of one token in
 * seconds, and costs next to nothing: a flood asks it once per entry. */
static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static void refill(Bucket *b, uint64_t now) {
        if (!b->started) {
                b->tokens = AUDIT_BURST;
                b->last_usec = now;
                b->started = true;
        }
        b->tokens += (double) (now - b->last_usec) / (AUDIT_REFILL_SEC * 1e6);
        if (b->tokens > AUDIT_BURST)
                b->tokens = AUDIT_BURST;
        b->last_usec = now;
}

/* The bucket of uid's entries; NULL for root's, never limited. */
static Bucket *user_bucket(uid_t uid, uint64_t now) {
        if (uid == 0)
                return NULL;
        Bucket *fullest = &users[0];
        for (size_t i = 0; i < AUDIT_USER_SLOTS; i++) {
                if (users[i].started && users[i].uid == (uint32_t) uid)
                        return &users[i];
                refill(&users[i], now);
                if (users[i].tokens > fullest->tokens)
                        fullest = &users[i];
        }
        *fullest = (Bucket){ .uid = (uint32_t) uid };
        return fullest;
}

/* Whether an entry may be made now (b NULL: always); *ret_suppressed: how
 * many of b's were not, since its last one. */
static bool take_token(Bucket *b, unsigned long *ret_suppressed) {
        *ret_suppressed = 0;
        if (!b)
                return true;
        refill(b, now_usec());
        if (b->tokens < 1) {
                b->suppressed++;
                return false;
        }
        b->tokens -= 1;
        *ret_suppressed = b->suppressed;
        b->suppressed = 0;
        return true;
}

static bool take_user_token(uid_t uid, unsigned long *ret_suppressed) {
        return take_token(user_bucket(uid, now_usec()), ret_suppressed);
}

/* An entry's text is built without a format string: a busy root client
 * makes three entries a request. */
static void add_usec(TextBuffer *l, int32_t v) {
        if (v < 0) {
                text_append(l, "none");
                return;
        }
        text_append_int(l, v);
        text_append(l, " µs");
}

/* One entry, admitted by take_token(): its text (freed here), and for a
 * request its fields. */
static void entry(const char *id, const Request *r, int32_t old, int32_t new, uid_t by_uid, TextBuffer *message,
                  unsigned long suppressed) {
        if (suppressed > 0) {
                text_append(message, " (");
                text_append_uint(message, suppressed);
                text_append(message, " earlier entries were left out: too many at once)");
        }
        const char *text = message->oom || !message->data ? "(out of memory)" : message->data;
        if (!audit_to_journal())
                log_text_batched(6, text); /* written when the loop has nothing more to do (bus/log-batch.c) */
        else if (r)
                (void) sd_journal_send("MESSAGE=%s", text, "MESSAGE_ID=%s", id, "PRIORITY=6", "COOKIE=%" PRIu32,
                                       r->cookie, "REQUEST_UID=%u", (unsigned) r->uid, "REQUEST_PID=%d", (int) r->pid,
                                       "REQUEST_EXEC=%s", request_exec(r), "REASON=%s", request_reason(r),
                                       "OLD_LATENCY=%" PRIi32, old, "NEW_LATENCY=%" PRIi32, new, "BY_UID=%u",
                                       (unsigned) by_uid, "TYPE=%s", qos_type_to_string(r->type), "SUPPRESSED=%lu",
                                       suppressed, NULL);
        else
                (void) sd_journal_send("MESSAGE=%s", text, "MESSAGE_ID=%s", id, "PRIORITY=6", "OLD_LATENCY=%" PRIi32,
                                       old, "NEW_LATENCY=%" PRIi32, new, "SUPPRESSED=%lu", suppressed, NULL);
        free(message->data);
}

/* "request 7 of uid 1000 pid 4711 (ardour)" */
static void add_who(TextBuffer *l, const Request *r) {
        text_append(l, "request ");
        text_append_uint(l, r->cookie);
        text_append(l, " of uid ");
        text_append_uint(l, r->uid);
        text_append(l, " pid ");
        text_append_int(l, r->pid);
        text_append(l, " (");
        text_append(l, request_exec(r)[0] ? request_exec(r) : "?");
        text_append(l, ")");
}

void audit_request_added(const Request *r) {
        audit_request_added_for(r, NULL);
}

void audit_request_added_for(const Request *r, const char *asker) {
        unsigned long suppressed;
        if (!take_user_token(r->uid, &suppressed))
                return; /* before any formatting: a flood costs next to nothing */
        TextBuffer msg = {};
        text_append(&msg, "New ");
        add_who(&msg, r);
        text_append(&msg, ": ");
        add_usec(&msg, r->value);
        if (r->type == QOS_TYPE_CPU_WAKEUP)
                text_append(&msg, " of cpu_wakeup");
        if (r->n_cpus)
                text_append(&msg, " on some CPUs");
        if (r->persistent)
                text_append(&msg, ", persistent");
        if (r->hold == HOLD_FD)
                text_append(&msg, ", held by a descriptor");
        if (r->target) { /* cleaned where it was read (sys/target.c) */
                text_append(&msg, ", bound to ");
                text_append(&msg, r->target);
        }
        if (asker) { /* cleaned where it was read (bus/client.c) */
                text_append(&msg, ", asked by ");
                text_append(&msg, asker);
        }
        /* The caller's words: no newline or escape sequence reaches the log
         * line (the journal's REASON= field keeps them as they are). */
        const char *raw = request_reason(r);
        if (raw[0]) {
                char *reason = text_clean(raw, strlen(raw), 4 * PMQOS_REASON_MAX);
                text_append(&msg, ", reason: ");
                text_append(&msg, reason ? reason : "?");
                free(reason);
        }
        text_append(&msg, ".");
        entry(AUDIT_ID_REQUEST_ADDED, r, PMQOS_LATENCY_NONE, r->value, r->uid, &msg, suppressed);
}

void audit_request_changed(const Request *r, int32_t old, uid_t by_uid) {
        unsigned long suppressed;
        if (!take_user_token(by_uid, &suppressed))
                return; /* before any formatting: a flood costs next to nothing */
        TextBuffer msg = {};
        text_append(&msg, "Changed ");
        add_who(&msg, r);
        text_append(&msg, " from ");
        add_usec(&msg, old);
        text_append(&msg, " to ");
        add_usec(&msg, r->value);
        text_append(&msg, " (by uid ");
        text_append_uint(&msg, by_uid);
        text_append(&msg, ").");
        entry(AUDIT_ID_REQUEST_CHANGED, r, old, r->value, by_uid, &msg, suppressed);
}

static const char *end_reason(const Request *r, AuditEnd how) {
        switch (how) {
        case AUDIT_END_OWNER_LEFT:
                return r->hold == HOLD_FD        ? "its descriptor was closed"
                       : r->hold == HOLD_PROCESS ? "its process exited"
                       : r->hold == HOLD_CGROUP  ? "its cgroup has no process left"
                                                 : "its owner left the bus";
        case AUDIT_END_EXPIRED:
                return "it expired";
        case AUDIT_END_UNIT_INACTIVE:
                return "its unit is no longer active";
        default:
                return "its rule changed or systemd left";
        }
}

void audit_request_ended(const Request *r, int32_t value, AuditEnd how, uid_t by_uid) {
        unsigned long suppressed;
        if (!take_user_token(how == AUDIT_END_CANCELLED ? by_uid : r->uid, &suppressed))
                return; /* before any formatting: a flood costs next to nothing */
        TextBuffer msg = {};
        text_append(&msg, "Ended ");
        add_who(&msg, r);
        text_append(&msg, ", ");
        add_usec(&msg, value);
        text_append(&msg, ": ");
        if (how == AUDIT_END_CANCELLED) {
                text_append(&msg, "cancelled by uid ");
                text_append_uint(&msg, by_uid);
        } else
                text_append(&msg, end_reason(r, how));
        text_append(&msg, ".");
        entry(AUDIT_ID_REQUEST_ENDED, r, value, PMQOS_LATENCY_NONE, by_uid, &msg, suppressed);
}

void audit_floor_changed(int32_t old, int32_t new, const char *what) {
        unsigned long suppressed;
        (void) take_token(NULL, &suppressed); /* the administrator's: never left out */
        TextBuffer msg = {};
        text_append(&msg, "The floor went from ");
        add_usec(&msg, old);
        text_append(&msg, " to ");
        add_usec(&msg, new);
        text_append(&msg, ": ");
        text_append(&msg, what);
        text_append(&msg, ".");
        entry(AUDIT_ID_FLOOR_CHANGED, NULL, old, new, 0, &msg, suppressed);
}

void audit_latency_changed(QosType type, int32_t old, int32_t new) {
        unsigned long suppressed;
        if (!take_token(&shared, &suppressed))
                return; /* before any formatting: a flood costs next to nothing */
        TextBuffer msg = {};
        text_append(&msg, type == QOS_TYPE_CPU_WAKEUP ? "The effective wakeup latency bound went from "
                                                      : "The effective latency bound went from ");
        add_usec(&msg, old);
        text_append(&msg, " to ");
        add_usec(&msg, new);
        text_append(&msg, ".");
        entry(type == QOS_TYPE_CPU_WAKEUP ? AUDIT_ID_WAKEUP_LATENCY_CHANGED : AUDIT_ID_LATENCY_CHANGED, NULL, old, new,
              0, &msg, suppressed);
}

void audit_kernel_ignores_writes(const char *path, int32_t reported, int32_t asked) {
        char msg[512];
        snprintf(msg, sizeof(msg),
                 "The kernel ignores writes to %s: it reports %" PRIi32 " µs after pmqosd asked for %" PRIi32
                 " µs. Latency bounds have no effect on this kernel.",
                 path, reported, asked);
        if (!audit_to_journal()) {
                log_warning("%s", msg);
                return;
        }
        (void) sd_journal_send("MESSAGE=%s", msg, "MESSAGE_ID=%s", AUDIT_ID_KERNEL_IGNORES_WRITES, "PRIORITY=4",
                               "OLD_LATENCY=%" PRIi32, reported, "NEW_LATENCY=%" PRIi32, asked, NULL);
}
