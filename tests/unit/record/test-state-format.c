/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the state file format: round trips, escaping, and the
 * damaged files that must be refused whole. */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/state-format.h"
#include "unit.h"

static Request *add(Store *s, int32_t value, bool persistent, const char *exec, const char *reason) {
        Request *r = request_new(s);
        r->value = value;
        r->uid = 1000;
        r->pid = 4242;
        r->persistent = persistent;
        r->created_usec = 1796014274123456;
        r->exec = shared_string_new(exec);
        r->reason = reason[0] ? strdup(reason) : NULL;
        ck_assert_int_eq(store_add(s, r, NULL), 0);
        return r;
}

static int parse_text(const char *text, StateData *d, char *err) {
        return state_parse(text, strlen(text), d, err, 256);
}

START_TEST(test_round_trip) {
        Store s;
        TextBuffer b = {};
        StateData d;
        char err[256];

        store_init(&s, 7);
        Request *a = add(&s, 50, true, "/usr/bin/game --fullscreen=yes %s", "päivä 100% = ok\ttab");
        add(&s, 60, false, "transient", "");
        Request *c = add(&s, -1, true, "", "");
        uint32_t cpus[] = { 3, 1, 3 };
        ck_assert_int_eq(request_set_cpus(c, cpus, 3), 0);
        c->expires_usec = 1896014274000000;
        CpuOriginal orig[] = { { .cpu = 1, .value = "n/a" }, { .cpu = 3, .value = "0" } };

        ck_assert_int_eq(state_serialize(&s, 75, orig, 2, &b), 0);
        ck_assert_int_eq(state_parse(b.data, b.len, &d, err, sizeof(err)), 0);

        ck_assert_int_eq(d.floor, 75);
        ck_assert_uint_eq(d.n_requests, 2); /* only persistent ones */
        ck_assert_uint_eq(d.requests[0]->cookie, a->cookie);
        ck_assert_int_eq(d.requests[0]->value, 50);
        ck_assert_str_eq(request_exec(d.requests[0]), request_exec(a));
        ck_assert_str_eq(request_reason(d.requests[0]), request_reason(a));
        ck_assert_int_eq(d.requests[0]->created_usec, a->created_usec);
        ck_assert_uint_eq(d.requests[0]->uid, 1000);
        ck_assert_int_eq(d.requests[0]->pid, 4242);
        ck_assert(d.requests[0]->persistent);
        ck_assert_uint_eq(d.requests[1]->cookie, c->cookie);
        ck_assert_uint_eq(d.requests[1]->n_cpus, 2);
        ck_assert_uint_eq(d.requests[1]->cpus[0], 1);
        ck_assert_uint_eq(d.requests[1]->cpus[1], 3);
        ck_assert_int_eq(d.requests[1]->expires_usec, c->expires_usec);
        ck_assert_int_eq(d.requests[1]->value, -1);
        ck_assert_uint_eq(d.n_originals, 2);
        ck_assert_str_eq(d.originals[0].value, "n/a");
        ck_assert_uint_eq(d.originals[1].cpu, 3);

        /* Every record is one line, whatever the strings held. */
        size_t lines = 0;
        for (size_t i = 0; i < b.len; i++)
                lines += b.data[i] == '\n';
        ck_assert_uint_eq(lines, 1 + 1 + 1 + 2 + 2 + 1);

        state_data_done(&d);
        free(b.data);
        store_done(&s);
}
END_TEST

/* The fields as the format documents them, byte for byte: the record and
 * the state file of an older pmqosd are read by a newer one. */
START_TEST(test_refused) {
        static const char *const bad[] = {
                "",
                "garbage\n",
                "pmqos-state 2\nfloor -1\nend\n",
                "pmqos-state 1\nend\n",
                "pmqos-state 1\nfloor -1\n",
                "pmqos-state 1\nfloor -1\nend",
                "pmqos-state 1\nfloor -1\nend\nfloor 5\n",
                "pmqos-state 1\nfloor -2\nend\n",
                "pmqos-state 1\nfloor 007\nend\n",
                "pmqos-state 1\nfloor -1\nfloor -1\nend\n",
                "pmqos-state 1\nfloor -1\nbogus 1\nend\n",
                "pmqos-state 1\nfloor -1\ncpu 1\nend\n",
                "pmqos-state 1\nfloor -1\ncpu 99999 0\nend\n",
                "pmqos-state 1\nfloor -1\ncpu 1 0\ncpu 1 0\nend\n",
                "pmqos-state 1\nfloor -1\nrequest cookie=1\nend\n",
                "pmqos-state 1\nfloor -1\nrequest cookie=0 type=cpu_dma value=1 uid=0 pid=1 created=1 expires=0 "
                "cpus= exec= reason=\nend\n",
                "pmqos-state 1\nfloor -1\nrequest cookie=1 type=network value=1 uid=0 pid=1 created=1 expires=0 "
                "cpus= exec= reason=\nend\n",
                "pmqos-state 1\nfloor -1\nrequest cookie=1 type=cpu_dma value=2000000001 uid=0 pid=1 created=1 "
                "expires=0 cpus= exec= reason=\nend\n",
                "pmqos-state 1\nfloor -1\nrequest cookie=1 type=cpu_dma value=1 uid=0 pid=1 created=1 expires=0 "
                "cpus=1,,2 exec= reason=\nend\n",
                "pmqos-state 1\nfloor -1\nrequest cookie=1 type=cpu_dma value=1 uid=0 pid=1 created=1 expires=0 "
                "cpus= exec=%zz reason=\nend\n",
                "pmqos-state 1\nfloor -1\nrequest cookie=1 type=cpu_dma value=1 uid=0 pid=1 created=1 expires=0 "
                "cpus= exec=%00 reason=\nend\n",
                "pmqos-state 1\nfloor -1\nrequest cookie=1 cookie=1 type=cpu_dma value=1 uid=0 pid=1 created=1 "
                "expires=0 cpus= exec= reason=\nend\n",
                "pmqos-state 1\nfloor -1\nrequest cookie=1 type=cpu_dma value=1 uid=0 pid=1 created=1 expires=0 "
                "cpus= exec= reason= extra=1\nend\n",
                "pmqos-state 1\nfloor -1\n"
                "request cookie=9 type=cpu_dma value=1 uid=0 pid=1 created=1 expires=0 cpus= exec= reason=\n"
                "request cookie=9 type=cpu_dma value=2 uid=0 pid=1 created=1 expires=0 cpus= exec= reason=\nend\n",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                StateData d;
                char err[256] = "";
                ck_assert_msg(parse_text(bad[i], &d, err) == -EBADMSG, "accepted case %zu", i);
                ck_assert_msg(err[0] != 0, "no reason for case %zu", i);
        }
        StateData d;
        char err[256];
        ck_assert_int_eq(state_parse("pmqos-state 1\nfloor -1\nend\n\0", 26, &d, err, sizeof(err)), -EBADMSG);
}
END_TEST

START_TEST(test_minimal_accepted) {
        StateData d;
        char err[256];
        ck_assert_int_eq(parse_text("# comment\npmqos-state 1\nfloor 10\nend\n", &d, err), 0);
        ck_assert_int_eq(d.floor, 10);
        ck_assert_uint_eq(d.n_requests, 0);
        state_data_done(&d);
}
END_TEST

int main(void) {
        Suite *s = suite_create("state-format");
        TCase *tc = tcase_create("format");
        tcase_add_test(tc, test_round_trip);
        tcase_add_test(tc, test_refused);
        tcase_add_test(tc, test_minimal_accepted);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
