/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit rules on the bus (unit-rules.c): each rule's unit followed through
 * systemd; while it runs, pmqosd holds the rule's request itself. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <systemd/sd-bus.h>

#include "bus/peer-watch.h"
#include "bus/publish.h"
#include "conf/rules.h"
#include "core/core.h"

typedef struct RuleWatch RuleWatch;

typedef struct UnitRules {
        Core *core;
        Publisher *pub;
        sd_bus *bus;
        PeerWatch systemd;      /* systemd's owner: only its signals count */
        sd_bus_slot *subscribe; /* a Subscribe in flight */
        RuleWatch **watches;    /* one per rule */
        size_t n_watches;
} UnitRules;

void unit_rules_init(UnitRules *u, Core *core, Publisher *pub);
void unit_rules_attach_bus(UnitRules *u, sd_bus *bus);
/* Follows systemd on the bus (after unit_rules_attach_bus()). */
int unit_rules_watch(UnitRules *u);
/* The rules to follow, taken from *rules (left empty); unchanged rules keep
 * their request, others end or begin. */
int unit_rules_set(UnitRules *u, RuleSet *rules);
/* Before the kernel is first written (manager_start()): asks systemd at
 * once which rules' units run, so that their bounds are in that first
 * write. */
void unit_rules_prime(UnitRules *u);
/* Frees the watches; their requests go with the core. */
void unit_rules_done(UnitRules *u);

/* For Explain(): how many rules hold a bound now, each rule with its unit's
 * ActiveState ("" unknown) and whether it holds, whether systemd answered
 * (the rules are followed), and the rule a request comes from (NULL if none). */
size_t unit_rules_active(const UnitRules *u);
void unit_rules_get(const UnitRules *u, size_t i, const Rule **ret_rule, const char **ret_state, bool *ret_holds);
bool unit_rules_followed(const UnitRules *u);
const Rule *unit_rules_rule_of(const UnitRules *u, const Request *req);
