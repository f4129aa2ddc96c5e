/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target: the state file parser must refuse or accept any bytes
 * without crashing or leaking, and what it accepts must survive a round trip. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "record/state-format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        StateData d;
        char err[256];

        if (state_parse((const char *) data, size, &d, err, sizeof(err)) < 0)
                return 0;

        /* Re-serialize what was accepted and parse it again: same records. */
        Store s;
        store_init(&s, 1);
        for (size_t i = 0; i < d.n_requests; i++) {
                if (store_add(&s, d.requests[i], NULL) < 0)
                        abort();
                d.requests[i] = NULL;
        }
        TextBuffer b = {};
        if (state_serialize(&s, d.floor, d.originals, d.n_originals, &b) < 0)
                abort();
        StateData again;
        if (state_parse(b.data, b.len, &again, err, sizeof(err)) < 0)
                abort();
        if (again.n_requests != store_size(&s) || again.floor != d.floor || again.n_originals != d.n_originals)
                abort();
        state_data_done(&again);
        free(b.data);
        store_done(&s);
        state_data_done(&d);
        return 0;
}
