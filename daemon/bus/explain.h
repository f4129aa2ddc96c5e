/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Explain(): who and what sets the latency, computed when asked. Calls that
 * arrive while a scan for external holders runs wait for the next one, and
 * every call of a round gets the same answer: a flood of Explain costs one
 * scan per round, never one per call, and the per-CPU figures come from
 * tables swept so seldom that sweeps take at most a tenth of the loop's time
 * (sys/cpu-tables.h). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "bus/unit-rules.h"
#include "core/core.h"
#include "sys/cpu-tables.h"
#include "sys/holders.h"

/* Calls waiting for a round: per user (root is not counted) and in all. */
#define EXPLAIN_WAITING_PER_UID 4u
#define EXPLAIN_WAITING_MAX 1024u

typedef struct WaitingExplain {
        sd_bus_message *message;
        uid_t uid;
        bool folded; /* ExplainFolded(): cpu_groups instead of cpus */
} WaitingExplain;

typedef struct Explainer {
        sd_event *event;
        Core *core;
        const UnitRules *rules;
        int helper_fd; /* -1: no helper (it ended); holders are then reported unknown */
        pid_t helper_pid;
        sd_event_source *helper_source, *defer_source;
        bool in_round;                /* a scan was asked for, or the deferred round is armed */
        WaitingExplain *round, *next; /* answered by the round in progress / by the one after */
        size_t n_round, n_next;
        CpuTables tables; /* the per-CPU figures, swept at most so often */
} Explainer;

/* Forks the helper (holders.h) for the device the core holds, before
 * pmqosd gives up root and before any thread exists (polkit's); uid/gid:
 * what the helper becomes, (uid_t) -1 to stay. Without a helper, holders
 * are reported unknown (logged). */
int explainer_init(Explainer *e, sd_event *event, Core *core, const UnitRules *rules, uid_t uid, gid_t gid);
/* Drops the calls still waiting, unanswered, and ends the helper. */
void explainer_done(Explainer *e);

/* An Explain() call of uid (ExplainFolded() if folded), answered by the
 * next round: 1, or an error when uid (root is not counted) or everyone has
 * too many waiting. Both kinds share the round and its holder scan. */
int explainer_queue(Explainer *e, sd_bus_message *message, uid_t uid, bool folded, sd_bus_error *error);
