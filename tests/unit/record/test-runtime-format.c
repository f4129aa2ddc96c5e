/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the runtime record's format: a log replayed into the live
 * requests, a write cut short, and the records that must be refused whole. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/runtime-format.h"
#include "unit.h"

#define BUS "0123456789abcdef0123456789abcdef"

static Request *make(Store *s, int32_t value, int64_t expires, const char *reason) {
        Request *r = request_new(s);
        r->value = value;
        r->uid = 1000;
        r->pid = 4242;
        r->created_usec = 1796014274123456;
        r->expires_usec = expires;
        r->exec = shared_string_new("/usr/bin/ardour --session=a b");
        r->reason = reason[0] ? strdup(reason) : NULL;
        return r;
}

static int parse_text(const char *text, RuntimeData *d, char *err) {
        return runtime_parse(text, strlen(text), d, err, 256);
}

START_TEST(test_replay) {
        Store s;
        RequestOwner o = { .name = ":1.42" };
        TextBuffer b = {};
        RuntimeData d;
        char err[256];

        store_init(&s, 3);
        Request *a = make(&s, 50, 0, "recording 100% = ok");
        Request *t = make(&s, 70, 1796014999000000, "");
        Request *gone = make(&s, 10, 0, "");
        uint32_t cpus[] = { 2, 0 };
        ck_assert_int_eq(request_set_cpus(t, cpus, 2), 0);
        ck_assert_int_eq(store_add(&s, a, &o), 0);
        ck_assert_int_eq(store_add(&s, t, &o), 0);
        ck_assert_int_eq(store_add(&s, gone, &o), 0);

        runtime_format_header(&b, BUS);
        runtime_format_add(&b, a);
        runtime_format_add(&b, t);
        runtime_format_add(&b, gone);
        runtime_format_value(&b, a->cookie, 45);
        runtime_format_remove(&b, gone->cookie);
        runtime_format_detach(&b, t->cookie);
        ck_assert(!b.oom);

        ck_assert_int_eq(runtime_parse(b.data, b.len, &d, err, sizeof(err)), 0);
        ck_assert_str_eq(d.bus_id, BUS);
        ck_assert_uint_eq(d.n_entries, 2);
        ck_assert_uint_eq(d.entries[0].request->cookie, a->cookie);
        ck_assert_int_eq(d.entries[0].request->value, 45);
        ck_assert_str_eq(d.entries[0].sender, ":1.42");
        ck_assert_str_eq(d.entries[0].request->reason, "recording 100% = ok");
        ck_assert_str_eq(request_exec(d.entries[0].request), "/usr/bin/ardour --session=a b");
        ck_assert(!d.entries[0].request->persistent);
        ck_assert_uint_eq(d.entries[1].request->cookie, t->cookie);
        ck_assert_str_eq(d.entries[1].sender, "");
        ck_assert_int_eq(d.entries[1].request->expires_usec, 1796014999000000);
        ck_assert_uint_eq(d.entries[1].request->n_cpus, 2);
        ck_assert_uint_eq(d.entries[1].request->cpus[0], 0);
        /* Where a new run goes on writing: after every line, six changes in all. */
        ck_assert_uint_eq(d.length, b.len);
        ck_assert_uint_eq(d.n_changes, 6);
        runtime_data_done(&d);

        /* A write cut short by a crash: the last change never happened. */
        b.data[b.len - 3] = 0;
        ck_assert_int_eq(runtime_parse(b.data, b.len - 3, &d, err, sizeof(err)), 0);
        ck_assert_str_eq(d.entries[1].sender, ":1.42");
        ck_assert_uint_eq(d.length, strrchr(b.data, '\n') + 1 - b.data); /* the partial line is not counted */
        ck_assert_uint_eq(d.n_changes, 5);
        runtime_data_done(&d);

        /* pmqosd killed while the file had its reserved tail: zeros after the
         * lines, and a line cut short before them. */
        size_t whole = b.len - 3;
        char *padded = calloc(1, whole + 4096);
        ck_assert_ptr_nonnull(padded);
        memcpy(padded, b.data, whole);
        ck_assert_int_eq(runtime_parse(padded, whole + 4096, &d, err, sizeof(err)), 0);
        ck_assert_uint_eq(d.n_entries, 2);
        ck_assert_str_eq(d.entries[1].sender, ":1.42"); /* the detach was cut short */
        runtime_data_done(&d);
        /* A zero anywhere but in that tail is damage. */
        padded[whole - 40] = 0;
        ck_assert_int_eq(runtime_parse(padded, whole + 4096, &d, err, sizeof(err)), -EBADMSG);
        ck_assert_ptr_nonnull(strstr(err, "NUL"));
        free(padded);

        free(b.data);
        store_done(&s);
}
END_TEST

/* Held requests come back with what finds their target again; one bad held= refuses the record. */
START_TEST(test_held_round_trip) {
        Store s;
        TextBuffer b = {};
        RuntimeData d;
        char err[256];

        store_init(&s, 5);
        Request *fd = make(&s, 50, 0, ""), *proc = make(&s, 40, 1796014999000000, ""), *cg = make(&s, 30, 0, "");
        fd->hold = HOLD_FD;
        proc->hold = HOLD_PROCESS;
        proc->target_pid = 777;
        proc->target_key = 123456789;
        proc->target = strdup("pid 777 (sleep 600)");
        cg->hold = HOLD_CGROUP;
        cg->target_key = 9001;
        cg->target = strdup("/sys/fs/cgroup/unified/a b:c%d");
        ck_assert_int_eq(store_add(&s, fd, NULL), 0);
        ck_assert_int_eq(store_add(&s, proc, NULL), 0);
        ck_assert_int_eq(store_add(&s, cg, NULL), 0);
        runtime_format_header(&b, BUS);
        STORE_FOREACH(r, &s)
        runtime_format_add(&b, r);
        ck_assert(!b.oom);

        ck_assert_int_eq(runtime_parse(b.data, b.len, &d, err, sizeof(err)), 0);
        ck_assert_uint_eq(d.n_entries, 3);
        ck_assert_int_eq(d.entries[0].request->hold, HOLD_FD);
        ck_assert_int_eq(d.entries[1].request->hold, HOLD_PROCESS);
        ck_assert_int_eq(d.entries[1].request->target_pid, 777);
        ck_assert_uint_eq(d.entries[1].request->target_key, 123456789);
        ck_assert_ptr_null(d.entries[1].request->target); /* read anew from /proc at the re-binding */
        ck_assert_int_eq(d.entries[2].request->hold, HOLD_CGROUP);
        ck_assert_uint_eq(d.entries[2].request->target_key, 9001);
        ck_assert_str_eq(d.entries[2].request->target, "/sys/fs/cgroup/unified/a b:c%d");
        ck_assert_str_eq(request_bound_to(d.entries[2].request), "cgroup");
        runtime_data_done(&d);

        static const char *const bad[] = { "held=cgroup:1:relative", "held=process:0:1",
                                           "held=process:5",         "held=socket",
                                           "held=cgroup:x:/a",       "held=" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char text[512];
                snprintf(text, sizeof(text),
                         "pmqos-runtime 1\nbus " BUS "\nadd sender= %s cookie=5 type=cpu_dma value=1 uid=0 pid=1 "
                         "created=1 expires=0 cpus= exec= reason=\n",
                         bad[i]);
                ck_assert_int_eq(parse_text(text, &d, err), -EBADMSG);
        }
        free(b.data);
        store_done(&s);
}
END_TEST

START_TEST(test_refused_whole) {
        static const struct {
                const char *text, *why;
        } bad[] = {
                { "", "no header" },
                { "pmqos-runtime 2\nbus " BUS "\n", "version" },
                { "pmqos-runtime 1\n", "no header and bus" },
                { "pmqos-runtime 1\nbus 0123\n", "bus line" },
                { "pmqos-runtime 1\nbus " BUS "\nremove 5\n", "not live" },
                { "pmqos-runtime 1\nbus " BUS "\nvalue 5 7\n", "not live" },
                { "pmqos-runtime 1\nbus " BUS "\nadd cookie=5\n", "without a sender" },
                { "pmqos-runtime 1\nbus " BUS "\nadd sender=1.5 cookie=5 type=cpu_dma value=1 uid=0 pid=1 "
                  "created=1 expires=0 cpus= exec= reason=\n",
                  "invalid sender" },
                { "pmqos-runtime 1\nbus " BUS "\nadd sender=:1.5;rm cookie=5 type=cpu_dma value=1 uid=0 pid=1 "
                  "created=1 expires=0 cpus= exec= reason=\n",
                  "invalid sender" },
                { "pmqos-runtime 1\nbus " BUS "\nadd sender=:1.5 cookie=5 type=cpu_dma value=1 uid=0 pid=1 "
                  "created=1 expires=0 cpus= exec= reason=\n"
                  "add sender=:1.5 cookie=5 type=cpu_dma value=1 uid=0 pid=1 created=1 expires=0 cpus= exec= "
                  "reason=\n",
                  "live cookie" },
                { "pmqos-runtime 1\nbus " BUS "\nadd sender=:1.5 cookie=5 type=cpu_dma value=1 uid=0 pid=1 "
                  "created=1 expires=0 cpus= exec= reason=\nvalue 5 -2\n",
                  "invalid value" },
                { "pmqos-runtime 1\nbus " BUS "\nadd sender=:1.5 cookie=5 type=cpu_dma value=1 uid=0 pid=1 "
                  "created=1 expires=0 cpus= exec= reason=\nremove 5 extra\n",
                  "trailing" },
                { "pmqos-runtime 1\nbus " BUS "\nfloor 5\n", "unknown record" },
        };
        RuntimeData d;
        char err[256];

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ck_assert_int_eq(parse_text(bad[i].text, &d, err), -EBADMSG);
                ck_assert_msg(strstr(err, bad[i].why), "case %zu: \"%s\" lacks \"%s\"", i, err, bad[i].why);
        }
        char nul[] = "pmqos-runtime 1\nbus " BUS "\n\0\n";
        ck_assert_int_eq(runtime_parse(nul, sizeof(nul) - 1, &d, err, sizeof(err)), -EBADMSG);

        /* Removed, then added again under the same cookie: fine. */
        ck_assert_int_eq(parse_text("pmqos-runtime 1\nbus " BUS "\n"
                                    "add sender=:1.5 cookie=5 type=cpu_dma value=1 uid=0 pid=1 created=1 expires=0 "
                                    "cpus= exec= reason=\nremove 5\n"
                                    "add sender=:1.6 cookie=5 type=cpu_dma value=2 uid=0 pid=1 created=1 expires=0 "
                                    "cpus= exec= reason=\n",
                                    &d, err),
                         0);
        ck_assert_uint_eq(d.n_entries, 1);
        ck_assert_str_eq(d.entries[0].sender, ":1.6");
        runtime_data_done(&d);
}
END_TEST

/* Requests of one program share its command line once read back, as they
 * did while it ran; one that had to be cleaned is still cleaned. */
START_TEST(test_command_lines_shared) {
        RuntimeData d;
        char err[256];
        const char *line = "type=cpu_dma value=1 uid=0 pid=1 created=1 expires=0 cpus= reason= exec=";

        char text[2048];
        snprintf(text, sizeof(text),
                 "pmqos-runtime 1\nbus " BUS "\n"
                 "add sender=:1.5 cookie=5 %s/usr/bin/jackd%%20-d%%20alsa\n"
                 "add sender=:1.6 cookie=6 %s/usr/bin/game\n"
                 "add sender=:1.5 cookie=7 %s/usr/bin/jackd%%20-d%%20alsa\n"
                 "remove 5\n"
                 "add sender=:1.5 cookie=8 %s/usr/bin/jackd%%20-d%%20alsa\n"
                 "add sender=:1.7 cookie=9 %sbad%%01byte\n"
                 "add sender=:1.7 cookie=10 %sbad%%01byte\n",
                 line, line, line, line, line, line);
        ck_assert_int_eq(parse_text(text, &d, err), 0);
        ck_assert_uint_eq(d.n_entries, 5);
        ck_assert_str_eq(request_exec(d.entries[1].request), "/usr/bin/jackd -d alsa");
        ck_assert_ptr_eq(d.entries[1].request->exec, d.entries[2].request->exec); /* after 5 is gone too */
        ck_assert_ptr_ne(d.entries[0].request->exec, d.entries[1].request->exec);
        ck_assert_uint_eq(d.entries[1].request->exec->n_ref, 2);
        ck_assert_str_eq(request_exec(d.entries[3].request), "bad\\x01byte");
        ck_assert_str_eq(request_exec(d.entries[4].request), "bad\\x01byte");
        ck_assert_str_eq(d.entries[4].sender, ":1.7");
        runtime_data_done(&d);
}
END_TEST

int main(void) {
        Suite *s = suite_create("runtime-format");
        TCase *tc = tcase_create("runtime-format");
        tcase_add_test(tc, test_replay);
        tcase_add_test(tc, test_refused_whole);
        tcase_add_test(tc, test_held_round_trip);
        tcase_add_test(tc, test_command_lines_shared);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
