/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ledger-reply.h: the ledger sampled now, its rows in the order they came. */

#include "bus/ledger-reply.h"

#include "bus/manager.h"
#include "util/macro.h"

static int append_row(sd_bus_message *reply, const LedgerRow *row) {
        return sd_bus_message_append(reply, "a{sv}", 9, "kind", "s", ledger_kind_name(row->who.kind), "uid", "u",
                                     row->who.uid, "comm", "s", row->who.comm, "unit", "s", row->who.unit, "cookie",
                                     "u", row->who.cookie, "active", "b", (int) (row->n_cpus > 0), "held", "t",
                                     row->cost.held, "shallow_idle", "t", row->cost.shallow_idle, "blocked_entries",
                                     "t", row->cost.blocked_entries);
}

int bus_method_ledger(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;

        (void) error;
        core_ledger_query(&m->core);
        int r = sd_bus_message_new_method_return(message, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        for (unsigned i = 0; r >= 0 && i < m->core.ledger.n_rows; i++)
                r = append_row(reply, &m->core.ledger.rows[i]);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r < 0 ? r : sd_bus_send(NULL, reply, NULL);
}
