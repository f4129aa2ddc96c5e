/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of one request's line, field for field, as the state file
 * and the runtime record both write it. */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/state-format.h"
#include "unit.h"

/* The fields as the format documents them, byte for byte: the record and
 * the state file of an older pmqosd are read by a newer one. */
START_TEST(test_request_line_exact) {
        Store s;
        TextBuffer b = {};

        store_init(&s, 7);
        Request *r = request_new(&s); /* formatted, never added: any uid will do */
        ck_assert_ptr_nonnull(r);
        r->value = -1;
        r->persistent = true;
        r->created_usec = 1796014274123456;
        r->exec = shared_string_new("/bin/x a=b");
        uint32_t cpus[] = { 0, 12, 4294967295u };
        ck_assert_int_eq(request_set_cpus(r, cpus, 3), 0);
        r->uid = 4294967294u;
        r->pid = 0;
        r->expires_usec = 9223372036854775807;
        request_format(&b, r);
        char want[256];
        snprintf(want, sizeof(want),
                 "cookie=%u type=cpu_dma value=-1 uid=4294967294 pid=0 created=1796014274123456 "
                 "expires=9223372036854775807 cpus=0,12,4294967295 exec=/bin/x%%20a%%3Db reason=",
                 (unsigned) r->cookie);
        ck_assert_str_eq(b.data, want);

        b.len = 0;
        text_append_int(&b, INT64_MIN);
        text_append(&b, " ");
        text_append_int(&b, 0);
        text_append(&b, " ");
        text_append_uint(&b, UINT64_MAX);
        ck_assert_str_eq(b.data, "-9223372036854775808 0 18446744073709551615");
        free(b.data);
        request_free(r);
        store_done(&s);
}
END_TEST

/* The comm and unit the ledger names a request by, read when it was made,
 * are kept across a restart; a record without them (an older pmqosd's)
 * still loads, without an origin; what process_origin() could never have
 * read is refused. */
START_TEST(test_origin_round_trip) {
        Store s;
        TextBuffer b = {};
        Request *back = NULL;
        const char *why = NULL;

        store_init(&s, 7);
        Request *r = request_new(&s);
        ck_assert_ptr_nonnull(r);
        r->exec = shared_string_new("sshd -D");
        r->origin = origin_new("my prog", "victim.service");
        ck_assert_ptr_nonnull(r->origin);
        request_format(&b, r);
        ck_assert_ptr_nonnull(strstr(b.data, " reason= comm=my%20prog unit=victim.service"));
        ck_assert_int_eq(request_parse(b.data, NULL, &back, &why), 0);
        ck_assert_ptr_nonnull(back->origin);
        ck_assert_str_eq(back->origin->comm, "my prog");
        ck_assert_str_eq(back->origin->unit, "victim.service");
        ck_assert_str_eq(request_exec(back), "sshd -D");
        back = request_free(back);

        char old[] = "cookie=5 type=cpu_dma value=1 uid=0 pid=1 created=1 expires=0 cpus= exec=x reason=";
        ck_assert_int_eq(request_parse(old, NULL, &back, &why), 0);
        ck_assert_ptr_null(back->origin);
        back = request_free(back);

        const char *bad[] = { " comm=0123456789abcdef", " comm=a%0Ab", " unit=a%FFb", " comm=a comm=b" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char line[256];
                snprintf(line, sizeof(line), "%s%s",
                         "cookie=5 type=cpu_dma value=1 uid=0 pid=1 created=1 expires=0 cpus= exec=x reason=", bad[i]);
                ck_assert_int_eq(request_parse(line, NULL, &back, &why), -EBADMSG);
        }
        free(b.data);
        request_free(r);
        store_done(&s);
}
END_TEST

int main(void) {
        Suite *s = suite_create("request-codec");
        TCase *tc = tcase_create("request-codec");
        tcase_add_test(tc, test_request_line_exact);
        tcase_add_test(tc, test_origin_round_trip);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
