/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the bounds cost: Ledger()'s rows, and Explain()'s per-CPU figures
 * of it read beside each CPU (pmqos.h). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libpmqos-client.h"
#include "libpmqos-thread.h"

#define LEDGER_ROWS_MAX 1024u /* pmqosd keeps 64: anything far past that is not its answer */

/* ---- Ledger() ---- */

static const char *const row_keys[] = { "kind",   "uid",  "comm",         "unit",           "cookie",
                                        "active", "held", "shallow_idle", "blocked_entries" };

static int row_field(sd_bus_message *m, unsigned key, void *userdata) {
        pmqos_ledger_row *row = userdata;
        switch (key) {
        case 0:
                return read_string(m, &row->kind);
        case 1:
                return sd_bus_message_read(m, "v", "u", &row->uid);
        case 2:
                return read_string(m, &row->comm);
        case 3:
                return read_string(m, &row->unit);
        case 4:
                return sd_bus_message_read(m, "v", "u", &row->cookie);
        case 5:
                return read_bool(m, &row->active);
        case 6:
                return sd_bus_message_read(m, "v", "t", &row->held_usec);
        case 7:
                return sd_bus_message_read(m, "v", "t", &row->shallow_idle_usec);
        default:
                return sd_bus_message_read(m, "v", "t", &row->blocked_entries);
        }
}

static void row_done(void *entry) {
        pmqos_ledger_row *row = entry;
        free(row->kind);
        free(row->comm);
        free(row->unit);
}

static int row_item(sd_bus_message *m, void *entry) {
        pmqos_ledger_row *row = entry;
        int r = read_dict(m, row_keys, 9, row_field, row);
        char **strings[] = { &row->kind, &row->comm, &row->unit };
        for (size_t i = 0; r >= 0 && i < 3; i++)
                if (!*strings[i] && !(*strings[i] = strdup("")))
                        r = -ENOMEM;
        return r;
}

_public_ pmqos_ledger_row *pmqos_ledger_free(pmqos_ledger_row *rows, size_t n) {
        for (size_t i = 0; rows && i < n; i++)
                row_done(&rows[i]);
        free(rows);
        return NULL;
}

_public_ int pmqos_ledger(pmqos_client *c, pmqos_ledger_row **ret, size_t *ret_n) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        if (ret)
                *ret = NULL;
        if (ret_n)
                *ret_n = 0;
        CLIENT_ENTER(c, !ret || !ret_n);
        int r = client_call(c, NATIVE_IFACE, "Ledger", &reply, NULL, NULL);
        if (r < 0)
                return r;
        /* read_array() reads a variant: the reply's aa{sv} is bare. */
        pmqos_ledger_row *rows = NULL;
        size_t n = 0;
        r = sd_bus_message_enter_container(reply, 'a', "a{sv}");
        while (r >= 0 && (r = sd_bus_message_at_end(reply, false)) == 0) {
                pmqos_ledger_row *p = n < LEDGER_ROWS_MAX ? realloc(rows, (n + 1) * sizeof(*rows)) : NULL;
                if (!p) {
                        r = n < LEDGER_ROWS_MAX ? -ENOMEM : -EBADMSG;
                        break;
                }
                rows = p;
                rows[n] = (pmqos_ledger_row){};
                r = row_item(reply, &rows[n++]);
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r < 0) {
                pmqos_ledger_free(rows, n);
                return client_map_error(c, NULL, r == -ENOMEM ? r : -EBADMSG);
        }
        *ret = rows;
        *ret_n = n;
        return 0;
}
