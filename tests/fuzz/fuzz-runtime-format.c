/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target: the runtime record's replay must refuse or accept any
 * bytes without crashing or leaking, and what it accepts must survive
 * being written whole again (as a rewrite does) and replayed. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "record/runtime-format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        RuntimeData d, again;
        char err[256];

        if (runtime_parse((const char *) data, size, &d, err, sizeof(err)) < 0)
                return 0;

        Store s;
        store_init(&s, 1);
        RequestOwner *owners = calloc(d.n_entries ?: 1, sizeof(RequestOwner));
        if (!owners)
                abort();
        for (size_t i = 0; i < d.n_entries; i++) {
                owners[i].name = d.entries[i].sender[0] ? d.entries[i].sender : NULL;
                if (store_add(&s, d.entries[i].request, owners[i].name ? &owners[i] : NULL) < 0)
                        abort();
                d.entries[i].request = NULL;
        }
        TextBuffer b = {};
        runtime_format_header(&b, d.bus_id);
        STORE_FOREACH(r, &s)
        runtime_format_add(&b, r);
        if (b.oom || runtime_parse(b.data, b.len, &again, err, sizeof(err)) < 0)
                abort();
        if (again.n_entries != store_size(&s) || strcmp(again.bus_id, d.bus_id) != 0)
                abort();
        for (size_t i = 0; i < again.n_entries; i++)
                if (strcmp(again.entries[i].sender, d.entries[i].sender) != 0)
                        abort();
        runtime_data_done(&again);
        free(b.data);
        store_done(&s);
        free(owners);
        runtime_data_done(&d);
        return 0;
}
