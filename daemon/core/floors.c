/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The floors' transactions: the administrator's, the configured default and
 * the battery floor, each committed and audited like a request's change. */

#include "core/core.h"
#include "core/core-internal.h"

#include <stdio.h>

#include "record/audit.h"

static int set_floors(Core *c, int32_t admin_floor, int32_t default_floor, const char *why, ChangeSet *changes) {
        Before b = core_before(c);
        int32_t old_admin = c->admin_floor, old_default = c->default_floor;

        c->admin_floor = admin_floor;
        c->default_floor = default_floor;
        if (admin_floor != old_admin)
                c->state_dirty = true;
        int k = core_commit(c);
        if (k < 0) {
                c->admin_floor = old_admin;
                c->default_floor = old_default;
                return core_undo(c, &b, k, changes);
        }
        if (core_floor(c) != b.floor)
                audit_floor_changed(b.floor, core_floor(c), why);
        core_changed(c, &b, false, changes);
        return 0;
}

int core_set_floor(Core *c, int32_t admin_floor, uid_t by_uid, ChangeSet *changes) {
        char why[64];
        snprintf(why, sizeof(why), "the administrator floor was set by uid %u", (unsigned) by_uid);
        return set_floors(c, admin_floor, c->default_floor, why, changes);
}

int core_set_default_floor(Core *c, int32_t default_floor, ChangeSet *changes) {
        return set_floors(c, c->admin_floor, default_floor, "the configured default floor changed", changes);
}

int core_set_battery(Core *c, bool on_battery, int32_t battery_floor, ChangeSet *changes) {
        Before b = core_before(c);
        bool old_on = c->on_battery;
        int32_t old_floor = c->battery_floor;

        c->on_battery = on_battery;
        c->battery_floor = battery_floor;
        int k = core_commit(c);
        if (k < 0) {
                c->on_battery = old_on;
                c->battery_floor = old_floor;
                return core_undo(c, &b, k, changes);
        }
        if (core_floor(c) != b.floor)
                audit_floor_changed(b.floor, core_floor(c),
                                    on_battery != old_on ? (on_battery ? "the machine went on battery"
                                                                       : "the machine went on mains power")
                                                         : "the configured battery floor changed");
        core_changed(c, &b, false, changes);
        changes->battery = on_battery != old_on;
        return 0;
}
