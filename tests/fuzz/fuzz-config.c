/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target: pmqosd.conf parsing. Refusals say where and why;
 * acceptances stay within the documented ranges. */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conf/config.h"
#include "model/store.h"
#include "util/parse-value.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Config c = { .limits = LIMITS_DEFAULT, .default_floor = -1, .battery_floor = -1 };
        unsigned set = 0;
        char err[512] = "";

        int r = config_parse("fuzz.conf", (const char *) data, size, &c, &set, err, sizeof(err));
        if (r == -EINVAL && strncmp(err, "fuzz.conf", 9) != 0)
                abort();
        const Limits *l = &c.limits;
        if (r == 0 &&
            (l->max_per_connection < 1 || l->max_per_uid < 1 || l->max_timeout_sec < 1 ||
             l->max_unprivileged_timeout_sec < 1 || l->max_pending_per_connection < 1 || l->max_pending_per_uid < 1 ||
             l->max_pending < 1 || l->max_polkit_in_flight < 1 || l->max_polkit_in_flight > POLKIT_IN_FLIGHT_CEILING ||
             l->max_clients < 1 || c.default_floor < -1 || c.default_floor > PMQOS_CONTRACT_LATENCY_MAX ||
             (c.state_dir && c.state_dir[0] != '/')))
                abort();
        /* A C-state name is kept only as the grammar writes one, with its line. */
        const ConfigCState *names[] = { &c.default_floor_cstate, &c.battery_floor_cstate };
        for (size_t i = 0; i < 2; i++)
                if (names[i]->name && (r != 0 || !latency_is_cstate_name(names[i]->name) || names[i]->line == 0))
                        abort();
        config_done(&c);
        return 0;
}
