/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the unit rules on disk: every key and its refusals with
 * file:line, unit names systemd could have, and the two directories — a
 * file of /etc overriding one of /usr/lib, an empty file masking it, a bad
 * file refusing the whole set. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf/rules.h"
#include "unit.h"

static int parse(const char *text, Rule *r, char *err) {
        return rule_parse("/x/r.conf", text, strlen(text), r, err, 256);
}

START_TEST(test_parse_every_key) {
        Rule r;
        char err[256];
        ck_assert_int_eq(parse("# a comment\n\n[Rule]\nUnit=postgresql@15-main.service\nLatency=50\nCPUs=2-3,0\n"
                               "Reason= nightly load \n",
                               &r, err),
                         0);
        ck_assert_str_eq(r.file, "/x/r.conf");
        ck_assert_str_eq(r.unit, "postgresql@15-main.service");
        ck_assert_int_eq(r.latency, 50);
        ck_assert_uint_eq(r.n_cpus, 3);
        ck_assert_uint_eq(r.cpus[0], 0);
        ck_assert_uint_eq(r.cpus[2], 3);
        ck_assert_str_eq(r.reason, "nightly load");
        Rule same;
        ck_assert_int_eq(parse("[Rule]\nUnit=postgresql@15-main.service\nLatency=50\nCPUs=0,2,3\nReason=nightly load\n",
                               &same, err),
                         0);
        ck_assert(rule_equal(&r, &same));
        same.latency = 51;
        ck_assert(!rule_equal(&r, &same));
        rule_done(&same);
        rule_done(&r);
        ck_assert_int_eq(parse("[Rule]\nUnit=a.socket\nLatency=0", &r, err), 0); /* no final newline */
        ck_assert_ptr_null(r.cpus);
        ck_assert_ptr_null(r.reason);
        rule_done(&r);
}
END_TEST

/* Latency= takes the grammar of pmqosctl (util/parse-value.h): decimal µs,
 * or a span with a unit. */
START_TEST(test_latency_grammar) {
        static const struct {
                const char *value;
                int32_t latency;
        } cases[] = {
                { "50", 50 },        { "010", 10 },        { "0", 0 },        { "50us", 50 },
                { "2ms", 2000 },     { "1.5ms", 1500 },    { "1s", 1000000 }, { "2000000000", 2000000000 },
                { "1ms 5us", 1005 }, { "3 \xc2\xb5s", 3 },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char text[128], err[256] = "";
                Rule r;
                snprintf(text, sizeof(text), "[Rule]\nUnit=a.service\nLatency=%s\n", cases[i].value);
                ck_assert_msg(parse(text, &r, err) == 0, "%s: %s", cases[i].value, err);
                ck_assert_int_eq(r.latency, cases[i].latency);
                ck_assert_ptr_null(r.latency_cstate);
                rule_done(&r);
        }
        /* A C-state name is kept as written, with its line: the loader resolves it (core/cstates.h). */
        Rule r;
        char err[256] = "";
        ck_assert_int_eq(parse("[Rule]\n# deep\nLatency=C1E\nUnit=a.service\n", &r, err), 0);
        ck_assert_str_eq(r.latency_cstate, "C1E");
        ck_assert_uint_eq(r.latency_line, 3);
        rule_done(&r);
}
END_TEST

START_TEST(test_parse_refusals) {
        static const struct {
                const char *text, *error;
        } cases[] = {
                { "Unit=a.service\n", "/x/r.conf:1: expected [Rule] before any key" },
                { "[Service]\n", "/x/r.conf:1: unknown section (expected [Rule])" },
                { "[Rule]\n[Rule]\n", "/x/r.conf:2: [Rule] twice: one rule per file" },
                { "[Rule]\nUnit a.service\n", "/x/r.conf:2: expected Key=Value" },
                { "[Rule]\nUnit=a.service\nUnit=b.service\nLatency=1\n", "/x/r.conf:3: Unit: set twice" },
                { "[Rule]\nUnit=a\nLatency=1\n", "/x/r.conf:2: Unit: not a unit name" },
                { "[Rule]\nUnit=a@.service\nLatency=1\n", "/x/r.conf:2: Unit: not a unit name" },
                { "[Rule]\nUnit=a b.service\n", "/x/r.conf:2: Unit: not a unit name" },
                { "[Rule]\nLatency=-1\n", "/x/r.conf:2: Latency: expected microseconds, 0 … 2000000000" },
                { "[Rule]\nLatency=2000000001\n", "/x/r.conf:2: Latency: expected microseconds" },
                { "[Rule]\nLatency=0x10\n", "/x/r.conf:2: Latency: expected microseconds" },
                { "[Rule]\nLatency=1e3\n", "/x/r.conf:2: Latency: expected microseconds" },
                { "[Rule]\nLatency=+5\n", "/x/r.conf:2: Latency: expected microseconds" },
                { "[Rule]\nLatency=5 parsecs\n", "/x/r.conf:2: Latency: expected microseconds" },
                { "[Rule]\nLatency=1h\n",
                  "/x/r.conf:2: Latency: expected microseconds, 0 … 2000000000, bare or with a unit" },
                { "[Rule]\nLatency=99999999999999999999\n", "/x/r.conf:2: Latency: expected microseconds" },
                { "[Rule]\nLatency=none\n", "/x/r.conf:2: Latency: expected microseconds" },
                { "[Rule]\nLatency=\xc2\xb5s\n", "/x/r.conf:2: Latency: expected microseconds" },
                { "[Rule]\nLatency=C1/2\n", "/x/r.conf:2: Latency: expected microseconds" },
                { "[Rule]\nLatency=1h\n",
                  "/x/r.conf:2: Latency: expected microseconds, 0 … 2000000000, bare or with a unit (\"50us\", "
                  "\"2ms\"), or a C-state name (\"C1E\")" },
                { "[Rule]\nCPUs=3-1\n", "/x/r.conf:2: CPUs: expected a CPU list such as 0-3,8" },
                { "[Rule]\nReason=\n", "/x/r.conf:2: Reason: expected 1 … 256 bytes of UTF-8" },
                { "[Rule]\nReason=\xff\n", "/x/r.conf:2: Reason: expected 1 … 256 bytes of UTF-8" },
                { "[Rule]\nReason=a\x1b[31m\n", "/x/r.conf:2: Reason: contains a control character" },
                { "[Rule]\nColour=red\n", "/x/r.conf:2: Colour: unknown key (known: Unit, Latency, CPUs, Reason)" },
                { "[Rule]\nLatency=5\n", "/x/r.conf: a rule needs Unit=" },
                { "[Rule]\nUnit=a.service\n", "/x/r.conf: a rule needs Latency=" },
                { "", "/x/r.conf: a rule needs Unit= and Latency=" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                Rule r = { .latency = 77 };
                char err[256] = "";
                ck_assert_int_eq(parse(cases[i].text, &r, err), -EINVAL);
                ck_assert_msg(strncmp(err, cases[i].error, strlen(cases[i].error)) == 0, "case %zu: \"%s\"", i, err);
                ck_assert_int_eq(r.latency, 77); /* untouched */
        }
        char err[256];
        Rule r;
        ck_assert_int_eq(rule_parse("/x/r.conf", "[Rule]\0", 7, &r, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "/x/r.conf: file contains a NUL byte");
}
END_TEST

START_TEST(test_unit_names) {
        ck_assert(rule_unit_name_valid("sshd.service"));
        ck_assert(rule_unit_name_valid("dev-sda1.device"));
        ck_assert(rule_unit_name_valid("system-getty.slice"));
        ck_assert(rule_unit_name_valid("getty@tty1.service"));
        ck_assert(rule_unit_name_valid("foo\\x2dbar.mount"));
        ck_assert(!rule_unit_name_valid(".service"));
        ck_assert(!rule_unit_name_valid("a.exe"));
        ck_assert(!rule_unit_name_valid("a@b@c.service"));
        ck_assert(!rule_unit_name_valid("@a.service"));
        ck_assert(!rule_unit_name_valid("a/b.service"));
        char longname[300];
        memset(longname, 'a', sizeof(longname));
        strcpy(longname + 260, ".service");
        ck_assert(!rule_unit_name_valid(longname));
}
END_TEST

START_TEST(test_two_directories) {
        const char *etc_dir = unit_make_dir("rules-etc");
        char etc[256];
        snprintf(etc, sizeof(etc), "%s", etc_dir);
        const char *lib = unit_make_dir("rules-lib");
        unit_write_file(lib, "db.conf", "[Rule]\nUnit=db.service\nLatency=100\n");
        unit_write_file(lib, "web.conf", "[Rule]\nUnit=web.service\nLatency=70\n");
        unit_write_file(lib, "old.conf", "[Rule]\nUnit=old.service\nLatency=9\n");
        unit_write_file(lib, "notes.txt", "not a rule");
        unit_write_file(etc, "db.conf", "[Rule]\nUnit=db.service\nLatency=40\n"); /* overrides */
        unit_write_file(etc, "old.conf", "");                                     /* masks */
        unit_write_file(etc, "a.conf", "[Rule]\nUnit=a.service\nLatency=1\n");

        const char *dirs[] = { etc, lib };
        RuleSet set = {};
        char err[512];
        ck_assert_int_eq(rules_load(dirs, 2, &set, err, sizeof(err)), 0);
        ck_assert_uint_eq(set.n, 3);
        ck_assert_str_eq(set.rules[0].unit, "a.service"); /* by file name */
        ck_assert_str_eq(set.rules[1].unit, "db.service");
        ck_assert_int_eq(set.rules[1].latency, 40);
        ck_assert_str_eq(set.rules[2].unit, "web.service");

        /* A bad file anywhere: the whole set is refused, the old one kept. */
        unit_write_file(lib, "zz.conf", "[Rule]\nUnit=z.service\nLatency=-5\n");
        ck_assert_int_eq(rules_load(dirs, 2, &set, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "zz.conf:3: Latency: expected microseconds"));
        ck_assert_uint_eq(set.n, 3);
        rule_set_done(&set);

        const char *none[] = { "/nonexistent/pmqos-rules" };
        ck_assert_int_eq(rules_load(none, 1, &set, err, sizeof(err)), 0);
        ck_assert_uint_eq(set.n, 0);
        rule_set_done(&set);
        unit_remove_dir(etc);
        unit_remove_dir(lib);
}
END_TEST

int main(void) {
        Suite *s = suite_create("rules");
        TCase *tc = tcase_create("core");
        tcase_add_test(tc, test_parse_every_key);
        tcase_add_test(tc, test_latency_grammar);
        tcase_add_test(tc, test_parse_refusals);
        tcase_add_test(tc, test_unit_names);
        tcase_add_test(tc, test_two_directories);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
