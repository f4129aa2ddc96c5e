/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the C-state names of pmqosd.conf and of the unit rules,
 * resolved on a fake cpuidle tree: the largest exit latency of the state on
 * an online CPU, the name compared without case; an unknown name or a
 * machine without cpuidle refused as file:line: key: why, nothing changed. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/config.h"
#include "conf/rules.h"
#include "core/cstates.h"
#include "model/store.h"
#include "unit.h"

static void state(const char *root, unsigned cpu, unsigned k, const char *name, const char *latency) {
        char path[256];
        snprintf(path, sizeof(path), "devices/system/cpu/cpu%u/cpuidle/state%u/name", cpu, k);
        unit_write_file(root, path, name);
        snprintf(path, sizeof(path), "devices/system/cpu/cpu%u/cpuidle/state%u/latency", cpu, k);
        unit_write_file(root, path, latency);
}

/* cpu0 (no "online" file) and cpu1 are two models; cpu2 is offline, with a
 * C1E deeper than any online CPU's; cpu3 is online without cpuidle. */
static const char *fake_machine(void) {
        const char *root = unit_make_dir("cstates");
        state(root, 0, 0, "POLL\n", "0\n");
        state(root, 0, 1, "C1\n", "2\n");
        state(root, 0, 2, "C1E\n", "10\n");
        unit_write_file(root, "devices/system/cpu/cpu1/online", "1\n");
        state(root, 1, 0, "POLL\n", "0\n");
        state(root, 1, 1, "C1\n", "1\n");
        state(root, 1, 2, "c1e\n", "20\n");
        state(root, 1, 3, "C6\n", "133\n");
        unit_write_file(root, "devices/system/cpu/cpu2/online", "0\n");
        state(root, 2, 0, "C1E\n", "500\n");
        unit_write_file(root, "devices/system/cpu/cpu3/online", "1\n");
        return root;
}

static Config parsed(const char *text) {
        Config c = { .limits = LIMITS_DEFAULT, .default_floor = 7, .battery_floor = PMQOS_LATENCY_NONE };
        unsigned set;
        char err[256] = "";
        ck_assert_int_eq(config_parse("/etc/pmqos/pmqosd.conf", text, strlen(text), &c, &set, err, sizeof(err)), 0);
        return c;
}

START_TEST(test_config_names) {
        const char *root = fake_machine();
        char err[512] = "";

        Config c = parsed("[pmqosd]\nDefaultMinimumLatency=c1E\nOnBatteryMinimumLatency=C1\n");
        ck_assert_str_eq(c.default_floor_cstate.name, "c1E"); /* as written, until resolved */
        ck_assert_uint_eq(c.default_floor_cstate.line, 2);
        ck_assert_int_eq(core_resolve_config_cstates(&c, "/etc/pmqos/pmqosd.conf", root, err, sizeof(err)), 0);
        ck_assert_int_eq(c.default_floor, 20); /* cpu1's C1E, not offline cpu2's */
        ck_assert_int_eq(c.battery_floor, 2);
        ck_assert_ptr_null(c.default_floor_cstate.name);
        ck_assert_ptr_null(c.battery_floor_cstate.name);
        config_done(&c);

        /* A later line with a number wins over a name, and leaves nothing to resolve. */
        c = parsed("DefaultMinimumLatency=C6\nDefaultMinimumLatency=none\nOnBatteryMinimumLatency=C6\n");
        ck_assert_ptr_null(c.default_floor_cstate.name);
        ck_assert_int_eq(core_resolve_config_cstates(&c, "/etc/pmqos/pmqosd.conf", root, err, sizeof(err)), 0);
        ck_assert_int_eq(c.default_floor, PMQOS_LATENCY_NONE);
        ck_assert_int_eq(c.battery_floor, 133);
        config_done(&c);

        /* An unknown name: the whole value quoted, what this machine has, nothing changed. */
        c = parsed("DefaultMinimumLatency=C1\n# deep\nOnBatteryMinimumLatency=C10\n");
        ck_assert_int_eq(core_resolve_config_cstates(&c, "/etc/pmqos/pmqosd.conf", root, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "/etc/pmqos/pmqosd.conf:3: OnBatteryMinimumLatency: invalid value \"C10\", expected a "
                              "C-state this machine has (POLL, C1, C1E, c1e, C6)");
        ck_assert_int_eq(c.default_floor, 7);
        ck_assert_int_eq(c.battery_floor, PMQOS_LATENCY_NONE);
        config_done(&c);
        unit_remove_dir(root);

        /* A machine without cpuidle has no C-states at all. */
        root = unit_make_dir("no-cpuidle");
        unit_write_file(root, "devices/system/cpu/cpu0/power/pm_qos_resume_latency_us", "0\n");
        c = parsed("OnBatteryMinimumLatency=C1E\n");
        ck_assert_int_eq(core_resolve_config_cstates(&c, "/x.conf", root, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "/x.conf:1: OnBatteryMinimumLatency: invalid value \"C1E\", expected "
                                          "microseconds: this machine shows no C-states (no cpuidle under "));
        config_done(&c);
        unit_remove_dir(root);
}
END_TEST

static Rule rule(const char *file, const char *text) {
        Rule r;
        char err[256] = "";
        ck_assert_int_eq(rule_parse(file, text, strlen(text), &r, err, sizeof(err)), 0);
        return r;
}

START_TEST(test_rule_names) {
        const char *root = fake_machine();
        char err[512] = "";
        RuleSet s = { .rules = calloc(2, sizeof(Rule)), .n = 2 };
        ck_assert_ptr_nonnull(s.rules);
        s.rules[0] = rule("/r/a.conf", "[Rule]\nUnit=a.service\nLatency=40\n");
        s.rules[1] = rule("/r/b.conf", "[Rule]\n\nUnit=b.service\nLatency=POLL\n");
        ck_assert_str_eq(s.rules[1].latency_cstate, "POLL");
        ck_assert_uint_eq(s.rules[1].latency_line, 4);
        s.rules[1].latency = 99; /* not what a name stands for: replaced */
        ck_assert_int_eq(core_resolve_rule_cstates(&s, root, err, sizeof(err)), 0);
        ck_assert_int_eq(s.rules[0].latency, 40);
        ck_assert_int_eq(s.rules[1].latency, 0);

        /* One unknown name: refused with its file and line, no rule changed. */
        rule_done(&s.rules[1]);
        s.rules[0].latency_cstate = strdup("C1E");
        s.rules[0].latency_line = 3;
        s.rules[1] = rule("/r/b.conf", "[Rule]\nUnit=b.service\nLatency=C7s\n");
        ck_assert_int_eq(core_resolve_rule_cstates(&s, root, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "/r/b.conf:3: Latency: invalid value \"C7s\", expected a C-state this machine has "
                              "(POLL, C1, C1E, c1e, C6)");
        ck_assert_int_eq(s.rules[0].latency, 40);
        rule_set_done(&s);
        unit_remove_dir(root);
}
END_TEST

int main(void) {
        Suite *s = suite_create("cstates");
        TCase *tc = tcase_create("cstates");
        tcase_add_test(tc, test_config_names);
        tcase_add_test(tc, test_rule_names);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
