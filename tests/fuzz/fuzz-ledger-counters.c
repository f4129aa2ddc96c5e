/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target: the ledger's reading of cpuidle counters. The input is
 * a bound on its first line, then readings of one CPU separated by "--"
 * lines, each a line per state of "latency usage time" as sysfs shows them
 * (each word through cpuidle_parse_u64(), as ledger_read_counters() reads
 * them; a state whose words do not parse ends the reading, as a missing
 * file does). Successive readings are charged with ledger_account(): the
 * figures only grow, blocked entries never exceed the blocked states'
 * usage, and nothing is charged with nothing blocked. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/cpuidle.h"
#include "sys/ledger.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One state's line into c (its next state): 0, or -1 when it does not parse. */
static int parse_state(char *line, LedgerCounters *c) {
        char *words[3], *save = NULL;
        uint64_t v[3];
        for (int i = 0; i < 3; i++) {
                words[i] = strtok_r(i == 0 ? line : NULL, " ", &save);
                if (!words[i] || cpuidle_parse_u64(words[i], &v[i]) < 0)
                        return -1;
        }
        if (c->n >= CPUIDLE_STATES_MAX)
                return -1;
        c->latency[c->n] = v[0] > UINT32_MAX ? UINT32_MAX : (uint32_t) v[0];
        c->usage[c->n] = v[1];
        c->time[c->n] = v[2];
        c->n++;
        return 0;
}

static void check(const LedgerCounters *a, const LedgerCounters *b, int32_t bound, uint32_t grace) {
        uint32_t blocked = ledger_blocked(a, bound);
        LedgerCost cost = { .shallow_idle = 5, .blocked_entries = 7 }, before = cost;
        uint64_t entries = 0;
        ledger_account(a, b, blocked, grace, &cost, &entries);
        if (cost.shallow_idle < before.shallow_idle || cost.blocked_entries < before.blocked_entries)
                abort();
        if (blocked == 0 && (cost.shallow_idle != before.shallow_idle || entries != 0))
                abort();
        uint64_t usage = 0;
        for (unsigned k = 0; k < b->n; k++)
                if (blocked & (1u << k)) {
                        uint64_t u = b->usage[k];
                        usage = usage > UINT64_MAX - u ? UINT64_MAX : usage + u;
                }
        if (entries > usage)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > 8192)
                return 0;
        char *text = malloc(size + 1), *save = NULL;
        memcpy(text, data, size);
        text[size] = 0;

        LedgerCounters readings[2] = {};
        unsigned cur = 0, n_readings = 0;
        bool ended = false;
        char *line = strtok_r(text, "\n", &save);
        uint64_t b = 0;
        int32_t bound = line && cpuidle_parse_u64(line, &b) >= 0 && b < INT32_MAX ? (int32_t) b : -1;
        for (line = line ? strtok_r(NULL, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
                if (strcmp(line, "--") == 0) {
                        if (n_readings++ > 0)
                                check(&readings[!cur], &readings[cur], bound, n_readings == 2 ? 6 : 0);
                        cur = !cur;
                        readings[cur] = (LedgerCounters){};
                        ended = false;
                } else if (!ended && parse_state(line, &readings[cur]) < 0)
                        ended = true;
        }
        if (n_readings > 0)
                check(&readings[!cur], &readings[cur], bound, 0);
        free(text);
        return 0;
}
