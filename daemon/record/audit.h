/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The audit trail: every change of the request set, the floor and the
 * effective value, one entry each — structured journal fields under
 * journald (a MESSAGE_ID per kind, see README "Audit trail"), a plain line
 * otherwise. Entries callers can cause are rate-limited, never silently. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/store.h"

/* journalctl MESSAGE_ID=… selects one kind. Fixed forever: scripts use them. */
#define AUDIT_ID_REQUEST_ADDED "39c7c27af2ee49939c9558b9c89a5e08"
#define AUDIT_ID_REQUEST_CHANGED "64ff0f5f272d49ccb4d8886fa012358d"
#define AUDIT_ID_REQUEST_ENDED "5634ba2b1d844b49a91d5f4a1864143a"
#define AUDIT_ID_FLOOR_CHANGED "2b766ad732a2402eb28daf8e39e38625"
#define AUDIT_ID_LATENCY_CHANGED "85a63a23b39e47d5b40fb8ec616bfd8c"
#define AUDIT_ID_KERNEL_IGNORES_WRITES "029d2c986d5941a5b397585cec1e640c"
#define AUDIT_ID_WAKEUP_LATENCY_CHANGED "a0c7a1e5b7e14d0f9d2b6c3e8f415a27"

/* At most AUDIT_BURST entries at once, then one per AUDIT_REFILL_SEC: a
 * desktop day (tens of holds) never reaches it; a client looping on
 * Request/Cancel costs the journal 360 entries an hour, and the next entry
 * says how many were left out (field SUPPRESSED=). Measured on
 * CLOCK_MONOTONIC when an entry is made: no timer. */
#define AUDIT_BURST 200u
#define AUDIT_REFILL_SEC 10u
/* The budget is per user (root's changes and floors are never left out):
 * one user's churn never hides another's. Users at once with a budget. */
#define AUDIT_USER_SLOTS 32u

typedef enum AuditEnd {
        AUDIT_END_CANCELLED,
        AUDIT_END_OWNER_LEFT,
        AUDIT_END_EXPIRED,
        AUDIT_END_UNIT_INACTIVE, /* a unit rule's request: its unit is no longer active */
        AUDIT_END_RULE_GONE,     /* a unit rule's request: its rule changed, went, or systemd left */
} AuditEnd;

/* A request was added (by its owner: the request's uid, pid, exec). */
void audit_request_added(const Request *r);
/* The same, made by asker ("pid N (exec)", or NULL: r's own) on behalf of
 * the process r is named after (RequestFor() on a pidfd). */
void audit_request_added_for(const Request *r, const char *asker);
/* Its value went from old to r->value; by_uid asked. */
void audit_request_changed(const Request *r, int32_t old, uid_t by_uid);
/* It ended, with value (what it had asked for), before it is freed; by_uid
 * asked for it (AUDIT_END_CANCELLED). */
void audit_request_ended(const Request *r, int32_t value, AuditEnd how, uid_t by_uid);
/* The floor in force went from old to new; what: "administrator floor set by uid N", … */
void audit_floor_changed(int32_t old, int32_t new, const char *what);
/* The effective value of type pmqosd asks of the kernel went from old to new. */
void audit_latency_changed(QosType type, int32_t old, int32_t new);

/* Once per run: a write was read back as having had no effect. Not limited. */
void audit_kernel_ignores_writes(const char *path, int32_t reported, int32_t asked);

/* For tests: whether entries go to the journal; the limiter's state
 * forgotten; its clock moved sec seconds into the past. */
bool audit_to_journal(void);
void audit_reset(void);
void audit_age(unsigned sec);
