/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* All or nothing: the first bad line makes the whole file refused, so a
 * reload never applies half a configuration. */

#include "conf/config.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/key-file.h"
#include "model/store.h"
#include "util/macro.h"
#include "util/parse-value.h"

void config_done(Config *c) {
        free(c->state_dir);
        c->state_dir = NULL;
        free(c->default_floor_cstate.name);
        free(c->battery_floor_cstate.name);
        c->default_floor_cstate = c->battery_floor_cstate = (ConfigCState){};
}

/* A floor key's value: microseconds, "none", or a C-state name kept as
 * written (with its line) for the loader to resolve. 0, 1 for a value the
 * key does not take, -ENOMEM. */
static int parse_floor(const char *value, unsigned lineno, int32_t *floor, ConfigCState *cstate) {
        char *name = NULL;
        if (strcmp(value, "none") == 0)
                *floor = PMQOS_LATENCY_NONE;
        else if (latency_is_cstate_name(value)) {
                if (!(name = strdup(value)))
                        return -ENOMEM;
        } else if (parse_latency(value, PMQOS_CONTRACT_LATENCY_MAX, floor) < 0)
                return 1;
        free(cstate->name);
        *cstate = (ConfigCState){ .name = name, .line = lineno };
        return 0;
}

typedef struct NumberKey {
        const char *key;
        const char *expect;
        size_t offset; /* in Limits */
        long long min, max;
        unsigned bit;
        bool is_seconds; /* a time span in whole seconds, kept in a uint32_t; else an unsigned count */
} NumberKey;

#define COUNT_KEY(name, field, bit, max) \
        { name, "a number from 1 to " #max, offsetof(Limits, field), 1, max, bit, false }
#define SECONDS_EXPECT "seconds from 1 to 100000000, bare or with a unit (\"90\", \"5min\", \"1h 30min\")"
#define SECONDS_KEY(name, field, bit) \
        { name, SECONDS_EXPECT, offsetof(Limits, field), 1, 100000000, bit, true }

/* The table is the list of keys: pmqosd.conf(5) documents each. */
static const NumberKey number_keys[] = {
        COUNT_KEY("MaxRequestsPerConnection", max_per_connection, CONFIG_SET_MAX_PER_CONNECTION, 100000000),
        COUNT_KEY("MaxRequestsPerUser", max_per_uid, CONFIG_SET_MAX_PER_UID, 100000000),
        SECONDS_KEY("MaxTimeoutSec", max_timeout_sec, CONFIG_SET_MAX_TIMEOUT),
        SECONDS_KEY("MaxUnprivilegedTimeoutSec", max_unprivileged_timeout_sec, CONFIG_SET_MAX_UNPRIVILEGED_TIMEOUT),
        COUNT_KEY("MaxPendingPerConnection", max_pending_per_connection, CONFIG_SET_MAX_PENDING_PER_CONNECTION, 100000),
        COUNT_KEY("MaxPendingPerUser", max_pending_per_uid, CONFIG_SET_MAX_PENDING_PER_UID, 100000),
        COUNT_KEY("MaxPending", max_pending, CONFIG_SET_MAX_PENDING, 1000000),
        COUNT_KEY("MaxPolkitChecksInFlight", max_polkit_in_flight, CONFIG_SET_MAX_POLKIT_IN_FLIGHT, 100),
        COUNT_KEY("MaxClients", max_clients, CONFIG_SET_MAX_CLIENTS, 1000000),
        COUNT_KEY("MaxHeldRequests", max_held, CONFIG_SET_MAX_HELD, PMQOS_MAX_MAX_HELD),
        COUNT_KEY("MaxCallsPerSecondPerUser", max_calls_per_sec_per_uid, CONFIG_SET_MAX_CALLS_PER_SEC, 1000000),
        COUNT_KEY("MaxUnreadBytesPerConnection", max_unread_bytes_per_connection, CONFIG_SET_MAX_UNREAD_PER_CONNECTION,
                  1073741824),
        COUNT_KEY("MaxUnreadBytesPerUser", max_unread_bytes_per_uid, CONFIG_SET_MAX_UNREAD_PER_UID, 1073741824),
};

/* A count: decimal digits (util/parse-value.h), min … max. A *Sec key: a
 * time span in whole seconds, a bare number counting in seconds ("300",
 * "5min", "1h 30min"). */
static int parse_number(const NumberKey *nk, const char *s, long long *ret) {
        uint64_t v;
        if (nk->is_seconds) {
                int r = parse_timespan(s, USEC_PER_SEC, &v);
                if (r < 0)
                        return r;
                if (v % USEC_PER_SEC != 0)
                        return -EINVAL;
                v /= USEC_PER_SEC;
        } else {
                int r = parse_decimal(s, (uint64_t) nk->max, &v);
                if (r < 0)
                        return r;
        }
        if (v < (uint64_t) nk->min || v > (uint64_t) nk->max)
                return -ERANGE;
        *ret = (long long) v;
        return 0;
}

/* One Key=Value into c: its CONFIG_SET_* bit in *ret_bit; 0 with *ret_expect
 * set for a value that is not what the key takes; -ENOKEY for a key that is
 * not known; -ENOMEM. */
const char *foreign_policy_to_string(ForeignPolicy p) {
        static const char *const names[] = { "report", "restore", "adopt" };
        return (unsigned) p < ELEMENTSOF(names) ? names[p] : "report";
}

static int parse_key(Config *c, const char *key, const char *value, unsigned lineno, unsigned *ret_bit,
                     const char **ret_expect) {
        long long v;

        *ret_expect = NULL;
        for (size_t i = 0; i < ELEMENTSOF(number_keys); i++) {
                const NumberKey *nk = &number_keys[i];
                if (strcmp(key, nk->key) != 0)
                        continue;
                *ret_bit = nk->bit;
                if (nk->bit == CONFIG_SET_MAX_TIMEOUT)
                        c->max_timeout_line = lineno;
                else if (nk->bit == CONFIG_SET_MAX_UNPRIVILEGED_TIMEOUT)
                        c->max_unprivileged_timeout_line = lineno;
                if (parse_number(nk, value, &v) < 0)
                        *ret_expect = nk->expect;
                else if (nk->is_seconds)
                        *(uint32_t *) ((char *) &c->limits + nk->offset) = (uint32_t) v;
                else
                        *(unsigned *) ((char *) &c->limits + nk->offset) = (unsigned) v;
                return 0;
        }
        if (strcmp(key, "DefaultMinimumLatency") == 0 || strcmp(key, "OnBatteryMinimumLatency") == 0) {
                bool battery = key[0] == 'O';
                *ret_bit = battery ? CONFIG_SET_BATTERY_FLOOR : CONFIG_SET_DEFAULT_FLOOR;
                int r = parse_floor(value, lineno, battery ? &c->battery_floor : &c->default_floor,
                                    battery ? &c->battery_floor_cstate : &c->default_floor_cstate);
                if (r > 0)
                        *ret_expect = "microseconds (0 … 2000000000), bare or with a unit (\"50us\", \"2ms\"), a "
                                      "C-state name (\"C1E\"), or \"none\"";
                return r < 0 ? r : 0;
        }
        if (strcmp(key, "ForeignWrites") == 0) {
                *ret_bit = CONFIG_SET_FOREIGN_WRITES;
                for (ForeignPolicy p = FOREIGN_REPORT; p <= FOREIGN_ADOPT; p++)
                        if (strcmp(value, foreign_policy_to_string(p)) == 0) {
                                c->foreign_writes = p;
                                return 0;
                        }
                *ret_expect = "report, restore or adopt";
                return 0;
        }
        if (strcmp(key, "StateDirectory") == 0) {
                *ret_bit = CONFIG_SET_STATE_DIR;
                if (value[0] != '/' || strlen(value) > 1024) {
                        *ret_expect = "an absolute path";
                        return 0;
                }
                free(c->state_dir);
                c->state_dir = strdup(value);
                return c->state_dir ? 0 : -ENOMEM;
        }
        return -ENOKEY;
}

int config_parse(const char *path, const char *text, size_t len, Config *ret, unsigned *ret_set, char *err,
                 size_t err_size) {
        Config c = *ret;
        unsigned set = 0;
        int r = 0;

        c.state_dir = NULL;
        c.max_timeout_line = c.max_unprivileged_timeout_line = 0;
        c.default_floor_cstate = c.battery_floor_cstate = (ConfigCState){};
        KeyFile f;
        r = key_file_open(&f, path, text, len, CONFIG_FILE_MAX, err, err_size);
        if (r < 0) {
                key_file_done(&f);
                return r;
        }
        for (char *l; (l = key_file_next(&f));) {
                unsigned lineno = f.lineno, bit = 0;
                const char *expect;
                char *key, *value;
                if (strcmp(l, "[pmqosd]") == 0)
                        continue;
                if (key_file_split(l, &key, &value) < 0) {
                        snprintf(err, err_size, "%s:%u: expected Key=Value, got \"%s\" (the one section is [pmqosd])",
                                 path, lineno, l);
                        r = -EINVAL;
                        break;
                }
                r = parse_key(&c, key, value, lineno, &bit, &expect);
                if (r == -ENOKEY) {
                        snprintf(err, err_size,
                                 "%s:%u: %s: unknown key (known: MaxRequestsPerConnection, MaxRequestsPerUser, "
                                 "MaxTimeoutSec, MaxUnprivilegedTimeoutSec, MaxPendingPerConnection, "
                                 "MaxPendingPerUser, MaxPending, MaxPolkitChecksInFlight, MaxClients, MaxHeldRequests, "
                                 "MaxCallsPerSecondPerUser, MaxUnreadBytesPerConnection, MaxUnreadBytesPerUser, "
                                 "DefaultMinimumLatency, OnBatteryMinimumLatency, StateDirectory, ForeignWrites)",
                                 path, lineno, key);
                        r = -EINVAL;
                }
                if (r < 0)
                        break;
                if (expect) {
                        snprintf(err, err_size, "%s:%u: %s: invalid value \"%s\", expected %s", path, lineno, key,
                                 value, expect);
                        r = -EINVAL;
                        break;
                }
                set |= bit;
        }
        key_file_done(&f);

        if (r < 0) {
                config_done(&c);
                return r;
        }
        if (!(set & CONFIG_SET_STATE_DIR))
                c.state_dir = NULL;
        config_done(ret);
        *ret = c;
        *ret_set = set;
        return 0;
}
