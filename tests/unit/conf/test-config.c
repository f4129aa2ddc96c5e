/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of pmqosd.conf parsing: every key and its range, the file
 * refused whole with "path:line: key" on the first bad line, nothing kept. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conf/config.h"
#include "model/store.h"
#include "util/macro.h"
#include "unit.h"

static Config defaults(void) {
        return (Config){ .limits = LIMITS_DEFAULT,
                         .default_floor = PMQOS_LATENCY_NONE,
                         .battery_floor = PMQOS_LATENCY_NONE };
}

/* The numeric settings still hold what defaults() put there. */
static void check_numbers_are_defaults(const Config *c) {
        ck_assert_uint_eq(c->limits.max_per_connection, 64);
        ck_assert_uint_eq(c->limits.max_per_uid, 256);
        ck_assert_uint_eq(c->limits.max_timeout_sec, 86400);
        ck_assert_int_eq(c->default_floor, PMQOS_LATENCY_NONE);
}

static int parse(const char *text, Config *c, unsigned *set, char *err, size_t err_size) {
        return config_parse("/etc/pmqos/pmqosd.conf", text, strlen(text), c, set, err, err_size);
}

START_TEST(test_shipped_file_is_the_defaults) {
        Config c = defaults();
        unsigned set = 123;
        char err[256] = "";

        /* What daemon/pmqosd.conf holds: a section header and commented-out keys. */
        ck_assert_int_eq(parse("# comment\n[pmqosd]\n#MaxRequestsPerConnection=64\n; also a comment\n\n", &c, &set, err,
                               sizeof(err)),
                         0);
        ck_assert_uint_eq(set, 0);
        check_numbers_are_defaults(&c);
        ck_assert_ptr_null(c.state_dir);
        ck_assert_str_eq(err, "");
        config_done(&c);
}
END_TEST

START_TEST(test_every_key) {
        Config c = defaults();
        unsigned set = 0;
        char err[256] = "";

        ck_assert_int_eq(parse("[pmqosd]\r\n"
                               "  MaxRequestsPerConnection = 8\t\n"
                               "MaxRequestsPerUser=100000000\n"
                               "MaxTimeoutSec=1\n"
                               "DefaultMinimumLatency=0\n"
                               "OnBatteryMinimumLatency=400\n"
                               "StateDirectory=/var/lib/pmqos-test\n"
                               "StateDirectory=/run/pmqos", /* the last one wins; no final newline */
                               &c, &set, err, sizeof(err)),
                         0);
        ck_assert_uint_eq(set, CONFIG_SET_MAX_PER_CONNECTION | CONFIG_SET_MAX_PER_UID | CONFIG_SET_MAX_TIMEOUT |
                                       CONFIG_SET_DEFAULT_FLOOR | CONFIG_SET_BATTERY_FLOOR | CONFIG_SET_STATE_DIR);
        ck_assert_uint_eq(c.limits.max_per_connection, 8);
        ck_assert_uint_eq(c.limits.max_per_uid, 100000000);
        ck_assert_uint_eq(c.limits.max_timeout_sec, 1);
        ck_assert_int_eq(c.default_floor, 0);
        ck_assert_int_eq(c.battery_floor, 400);
        ck_assert_str_eq(c.state_dir, "/run/pmqos");

        /* A reload starts from the running values; "none" clears the floor, and
         * a file without StateDirectory no longer sets one. */
        ck_assert_int_eq(
                parse("DefaultMinimumLatency=none\nOnBatteryMinimumLatency=none\n", &c, &set, err, sizeof(err)), 0);
        ck_assert_uint_eq(set, CONFIG_SET_DEFAULT_FLOOR | CONFIG_SET_BATTERY_FLOOR);
        ck_assert_int_eq(c.default_floor, PMQOS_LATENCY_NONE);
        ck_assert_int_eq(c.battery_floor, PMQOS_LATENCY_NONE);
        ck_assert_uint_eq(c.limits.max_per_connection, 8);
        ck_assert_ptr_null(c.state_dir);
        config_done(&c);
}
END_TEST

/* The grammar of pmqosctl (util/parse-value.h): decimal (a leading zero
 * is decimal), a *Sec key a span with a unit or bare seconds, a latency a
 * span or bare µs. */
/* ForeignWrites= (sys/foreign-writes.h): the three words, report by default, the last line wins. */
START_TEST(test_foreign_writes) {
        Config c = defaults();
        unsigned set = 0;
        char err[256] = "";

        ck_assert_int_eq(c.foreign_writes, FOREIGN_REPORT);
        ck_assert_int_eq(parse("ForeignWrites=adopt\nForeignWrites=restore\n", &c, &set, err, sizeof(err)), 0);
        ck_assert_uint_eq(set, CONFIG_SET_FOREIGN_WRITES);
        ck_assert_int_eq(c.foreign_writes, FOREIGN_RESTORE);
        ck_assert_int_eq(parse("ForeignWrites=adopt\n", &c, &set, err, sizeof(err)), 0);
        ck_assert_str_eq(foreign_policy_to_string(c.foreign_writes), "adopt");
        ck_assert_int_eq(parse("ForeignWrites=report\n", &c, &set, err, sizeof(err)), 0);
        ck_assert_int_eq(c.foreign_writes, FOREIGN_REPORT);
        config_done(&c);
}
END_TEST

START_TEST(test_value_grammar) {
        Config c = defaults();
        unsigned set = 0;
        char err[512] = "";

        ck_assert_int_eq(parse("MaxTimeoutSec=010\n"
                               "MaxUnprivilegedTimeoutSec=5min\n"
                               "MaxRequestsPerConnection=010\n"
                               "DefaultMinimumLatency=2ms\n"
                               "OnBatteryMinimumLatency=050\n",
                               &c, &set, err, sizeof(err)),
                         0);
        ck_assert_str_eq(err, "");
        ck_assert_uint_eq(c.limits.max_timeout_sec, 10);
        ck_assert_uint_eq(c.limits.max_unprivileged_timeout_sec, 300);
        ck_assert_uint_eq(c.limits.max_per_connection, 10);
        ck_assert_int_eq(c.default_floor, 2000);
        ck_assert_int_eq(c.battery_floor, 50);

        static const struct {
                const char *text;
                uint32_t sec;
        } spans[] = {
                { "MaxTimeoutSec=90", 90 },
                { "MaxTimeoutSec=1h", 3600 },
                { "MaxTimeoutSec=1h 30min", 5400 },
                { "MaxTimeoutSec=1.5min", 90 },
                { "MaxTimeoutSec=2000ms", 2 },
                { "MaxTimeoutSec=1d", 86400 },
                { "MaxTimeoutSec=100000000s", 100000000 },
                { "MaxTimeoutSec=30 s", 30 },
        };
        for (size_t i = 0; i < ELEMENTSOF(spans); i++) {
                ck_assert_msg(parse(spans[i].text, &c, &set, err, sizeof(err)) == 0, "%s: %s", spans[i].text, err);
                ck_assert_uint_eq(c.limits.max_timeout_sec, spans[i].sec);
        }

        static const struct {
                const char *text;
                int32_t usec;
        } latencies[] = {
                { "DefaultMinimumLatency=0", 0 },
                { "DefaultMinimumLatency=50us", 50 },
                { "DefaultMinimumLatency=1.5ms", 1500 },
                { "DefaultMinimumLatency=2s", 2000000 },
                { "DefaultMinimumLatency=2000000000", 2000000000 },
        };
        for (size_t i = 0; i < ELEMENTSOF(latencies); i++) {
                ck_assert_msg(parse(latencies[i].text, &c, &set, err, sizeof(err)) == 0, "%s: %s", latencies[i].text,
                              err);
                ck_assert_int_eq(c.default_floor, latencies[i].usec);
        }
        config_done(&c);
}
END_TEST

/* Each bad file is refused whole: *ret keeps every earlier value. */
static const struct {
        const char *text;
        const char *message;
} bad[] = {
        { "MaxRequestsPerConnection=0\n", "/etc/pmqos/pmqosd.conf:1: MaxRequestsPerConnection: invalid value \"0\"" },
        { "MaxRequestsPerConnection=100000001\n", ":1: MaxRequestsPerConnection: invalid value" },
        { "MaxRequestsPerUser=-1\n", ":1: MaxRequestsPerUser: invalid value \"-1\", expected a number" },
        { "MaxRequestsPerUser=12abc\n", ":1: MaxRequestsPerUser: invalid value" },
        { "MaxRequestsPerUser=+5\n", ":1: MaxRequestsPerUser: invalid value" },
        { "MaxTimeoutSec=\n", ":1: MaxTimeoutSec: invalid value \"\", expected seconds" },
        { "MaxTimeoutSec=99999999999999999999\n", ":1: MaxTimeoutSec: invalid value" },
        { "DefaultMinimumLatency=-1\n", ":1: DefaultMinimumLatency: invalid value \"-1\", expected microseconds" },
        { "DefaultMinimumLatency=-0\n", ":1: DefaultMinimumLatency: invalid value \"-0\"" },
        { "DefaultMinimumLatency=2000000001\n", ":1: DefaultMinimumLatency: invalid value" },
        { "OnBatteryMinimumLatency=-5\n", ":1: OnBatteryMinimumLatency: invalid value \"-5\", expected microseconds" },
        { "MaxTimeoutSec=0x10\n", ":1: MaxTimeoutSec: invalid value \"0x10\", expected seconds from 1 to 100000000" },
        { "MaxRequestsPerUser=0x10\n", ":1: MaxRequestsPerUser: invalid value \"0x10\", expected a number" },
        { "MaxRequestsPerUser=5min\n", ":1: MaxRequestsPerUser: invalid value \"5min\"" }, /* a count has no unit */
        { "MaxRequestsPerUser=99999999999999999999\n", ":1: MaxRequestsPerUser: invalid value" },
        { "MaxTimeoutSec=1500ms\n", ":1: MaxTimeoutSec: invalid value \"1500ms\"" }, /* not whole seconds */
        { "MaxTimeoutSec=0.5\n", ":1: MaxTimeoutSec: invalid value \"0.5\"" },
        { "MaxTimeoutSec=0s\n", ":1: MaxTimeoutSec: invalid value \"0s\"" },
        { "MaxTimeoutSec=100000001\n", ":1: MaxTimeoutSec: invalid value" },
        { "MaxUnprivilegedTimeoutSec=1200d\n", ":1: MaxUnprivilegedTimeoutSec: invalid value \"1200d\"" },
        { "MaxTimeoutSec=99999999999999w\n", ":1: MaxTimeoutSec: invalid value \"99999999999999w\"" },
        { "MaxTimeoutSec=5 fortnights\n",
          ":1: MaxTimeoutSec: invalid value \"5 fortnights\", expected seconds from 1 to 100000000, bare or with a "
          "unit (\"90\", \"5min\", \"1h 30min\")" },
        { "DefaultMinimumLatency=0x10\n", ":1: DefaultMinimumLatency: invalid value \"0x10\", expected microseconds" },
        { "DefaultMinimumLatency=1h\n", ":1: DefaultMinimumLatency: invalid value \"1h\", expected microseconds (0 … "
                                        "2000000000), bare or with a unit "
                                        "(\"50us\", \"2ms\"), a C-state name (\"C1E\"), or \"none\"" },
        { "DefaultMinimumLatency=99999999999999999999\n", ":1: DefaultMinimumLatency: invalid value" },
        { "OnBatteryMinimumLatency=1C\n", ":1: OnBatteryMinimumLatency: invalid value \"1C\"" },
        { "OnBatteryMinimumLatency=C1=2\n", ":1: OnBatteryMinimumLatency: invalid value \"C1=2\"" },
        { "OnBatteryMinimumLatency=None\n", ":1: OnBatteryMinimumLatency: invalid value \"None\"" },
        { "StateDirectory=var/lib/pmqos\n",
          ":1: StateDirectory: invalid value \"var/lib/pmqos\", expected an absolute" },
        { "# fine\nMaxTimeoutSec=60\nMaxRequests=5\n",
          ":3: MaxRequests: unknown key (known: MaxRequestsPerConnection" },
        { "MaxTimeoutSec=60\njust words\n", ":2: expected Key=Value, got \"just words\"" },
        { "ForeignWrites=Restore\n",
          ":1: ForeignWrites: invalid value \"Restore\", expected report, restore or adopt" },
        { "ForeignWrites=\n", ":1: ForeignWrites: invalid value \"\", expected report, restore or adopt" },
        { "[other]\n", ":1: expected Key=Value" },
};

/* A C-state name is kept as written, with its line, for the loader to
 * resolve (conf/ reads no sysfs); a file's names are its own. */
START_TEST(test_cstate_names_kept) {
        Config c = defaults();
        unsigned set = 0;
        char err[256] = "";

        ck_assert_int_eq(parse("[pmqosd]\nOnBatteryMinimumLatency=C1E\nDefaultMinimumLatency=haltpoll idle\n", &c, &set,
                               err, sizeof(err)),
                         0);
        ck_assert_uint_eq(set, CONFIG_SET_DEFAULT_FLOOR | CONFIG_SET_BATTERY_FLOOR);
        ck_assert_str_eq(c.battery_floor_cstate.name, "C1E");
        ck_assert_uint_eq(c.battery_floor_cstate.line, 2);
        ck_assert_str_eq(c.default_floor_cstate.name, "haltpoll idle");
        ck_assert_uint_eq(c.default_floor_cstate.line, 3);
        ck_assert_int_eq(c.battery_floor, PMQOS_LATENCY_NONE); /* not guessed */

        /* A refused file leaves the names; the next file has its own. */
        ck_assert_int_eq(parse("OnBatteryMinimumLatency=C6\nColour=blue\n", &c, &set, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(c.battery_floor_cstate.name, "C1E");
        ck_assert_int_eq(parse("OnBatteryMinimumLatency=C6\nDefaultMinimumLatency=C1\nDefaultMinimumLatency=5\n", &c,
                               &set, err, sizeof(err)),
                         0);
        ck_assert_str_eq(c.battery_floor_cstate.name, "C6");
        ck_assert_uint_eq(c.battery_floor_cstate.line, 1);
        ck_assert_ptr_null(c.default_floor_cstate.name); /* the number on the later line wins */
        ck_assert_int_eq(c.default_floor, 5);
        ck_assert_int_eq(parse("MaxClients=5\n", &c, &set, err, sizeof(err)), 0);
        ck_assert_ptr_null(c.battery_floor_cstate.name);
        config_done(&c);
}
END_TEST

START_TEST(test_bounds_on_callers) {
        Config c = defaults();
        unsigned set = 0;
        char err[512] = "";

        ck_assert_int_eq(parse("MaxUnprivilegedTimeoutSec=60\n"
                               "MaxPendingPerConnection=3\n"
                               "MaxPendingPerUser=7\n"
                               "MaxPending=99\n"
                               "MaxPolkitChecksInFlight=100\n"
                               "MaxClients=12\n",
                               &c, &set, err, sizeof(err)),
                         0);
        ck_assert_uint_eq(set, CONFIG_SET_MAX_UNPRIVILEGED_TIMEOUT | CONFIG_SET_MAX_PENDING_PER_CONNECTION |
                                       CONFIG_SET_MAX_PENDING_PER_UID | CONFIG_SET_MAX_PENDING |
                                       CONFIG_SET_MAX_POLKIT_IN_FLIGHT | CONFIG_SET_MAX_CLIENTS);
        ck_assert_uint_eq(c.limits.max_unprivileged_timeout_sec, 60);
        ck_assert_uint_eq(c.limits.max_pending_per_connection, 3);
        ck_assert_uint_eq(c.limits.max_pending_per_uid, 7);
        ck_assert_uint_eq(c.limits.max_pending, 99);
        ck_assert_uint_eq(c.limits.max_polkit_in_flight, 100);
        ck_assert_uint_eq(c.limits.max_clients, 12);
        ck_assert_uint_eq(c.limits.max_per_connection, 64); /* untouched */

        /* polkitd's answers share one connection that dbus-daemon lets wait for
         * 128 replies: more than 100 in flight is refused. */
        ck_assert_int_eq(parse("MaxPolkitChecksInFlight=101\n", &c, &set, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "/etc/pmqos/pmqosd.conf:1: MaxPolkitChecksInFlight: invalid value \"101\", expected a "
                              "number from 1 to 100");
        ck_assert_int_eq(parse("MaxClients=0\n", &c, &set, err, sizeof(err)), -EINVAL);
        ck_assert_int_eq(parse("MaxPendingPerUser=-1\n", &c, &set, err, sizeof(err)), -EINVAL);
        ck_assert_uint_eq(c.limits.max_polkit_in_flight, 100); /* nothing of a refused file kept */
        config_done(&c);
}
END_TEST

START_TEST(test_bad_file_refused_whole) {
        Config c = defaults();
        c.state_dir = strdup("/var/lib/pmqos");
        ck_assert_ptr_nonnull(c.state_dir);
        unsigned set = 77;
        char err[256] = "";

        ck_assert_int_eq(parse(bad[_i].text, &c, &set, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, bad[_i].message), "\"%s\" does not contain \"%s\"", err, bad[_i].message);
        ck_assert_uint_eq(set, 77);
        check_numbers_are_defaults(&c);
        ck_assert_str_eq(c.state_dir, "/var/lib/pmqos");
        config_done(&c);
}
END_TEST

START_TEST(test_binary_and_oversized_files) {
        Config c = defaults();
        unsigned set = 0;
        char err[256] = "";

        ck_assert_int_eq(config_parse("x.conf", "MaxTimeoutSec=5\0\n", 17, &c, &set, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "x.conf: file contains a NUL byte");

        size_t len = CONFIG_FILE_MAX + 1;
        char *big = malloc(len);
        ck_assert_ptr_nonnull(big);
        memset(big, '#', len);
        ck_assert_int_eq(config_parse("x.conf", big, len, &c, &set, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "x.conf: file is larger than 64 KiB");
        /* Exactly the limit is fine (one long comment). */
        ck_assert_int_eq(config_parse("x.conf", big, CONFIG_FILE_MAX, &c, &set, err, sizeof(err)), 0);
        free(big);
        check_numbers_are_defaults(&c);
        config_done(&c);
}
END_TEST

int main(void) {
        Suite *s = suite_create("config");
        TCase *tc = tcase_create("parse");
        tcase_add_test(tc, test_shipped_file_is_the_defaults);
        tcase_add_test(tc, test_every_key);
        tcase_add_test(tc, test_foreign_writes);
        tcase_add_test(tc, test_bounds_on_callers);
        tcase_add_test(tc, test_cstate_names_kept);
        tcase_add_test(tc, test_value_grammar);
        tcase_add_loop_test(tc, test_bad_file_refused_whole, 0, (int) (sizeof(bad) / sizeof(bad[0])));
        tcase_add_test(tc, test_binary_and_oversized_files);
        suite_add_tcase(s, tc);

        return unit_run(s, CK_FORK_GETENV);
}
