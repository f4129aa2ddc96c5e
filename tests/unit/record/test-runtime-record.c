/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the runtime record on disk: a start writes the store's
 * requests that are not persistent, a transaction's lines are appended, and
 * the next run reads back what the record describes, with the bus it was
 * written for; no directory, no record. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record/runtime-record.h"
#include "unit.h"

#define BUS_ID "0123456789abcdef0123456789abcdef"

static Request *add(Store *s, int32_t value, bool persistent) {
        Request *r = request_new(s);
        ck_assert_ptr_nonnull(r);
        r->value = value;
        r->uid = 1000;
        r->pid = 4242;
        r->created_usec = 1796014274123456;
        r->persistent = persistent;
        r->exec = shared_string_new("/usr/bin/app");
        ck_assert_int_eq(store_add(s, r, NULL), 0);
        return r;
}

START_TEST(test_start_append_load) {
        const char *dir = unit_make_dir("runtime-record");
        Store s;
        store_init(&s, 7);
        Request *a = add(&s, 100, false);
        (void) add(&s, 50, true); /* the state file's, not the record's */

        RuntimeRecord rec;
        ck_assert_int_eq(runtime_record_init(&rec, dir, geteuid()), 0);
        ck_assert_int_eq(runtime_record_start(&rec, BUS_ID, &s), 0);
        Request *b = add(&s, 30, false);
        TextBuffer lines = {};
        runtime_format_add(&lines, b);
        runtime_format_value(&lines, a->cookie, 80);
        a->value = 80; /* as the store would have it */
        runtime_record_append(&rec, &lines, 2, +1, &s);
        free(lines.data);
        runtime_record_done(&rec);

        RuntimeData d;
        ck_assert_int_eq(runtime_record_init(&rec, dir, geteuid()), 0);
        ck_assert_int_eq(runtime_record_load(&rec, &d), 0);
        ck_assert_str_eq(d.bus_id, BUS_ID);
        ck_assert_uint_eq(d.n_entries, 2);
        ck_assert_uint_eq(d.entries[0].request->cookie, a->cookie);
        ck_assert_int_eq(d.entries[0].request->value, 80);
        ck_assert_uint_eq(d.entries[1].request->cookie, b->cookie);
        ck_assert_int_eq(d.entries[1].request->value, 30);
        ck_assert(!d.entries[0].request->persistent);
        runtime_data_done(&d);
        runtime_record_done(&rec);
        store_done(&s);
        unit_remove_dir(dir);
}
END_TEST

START_TEST(test_no_directory_no_record) {
        RuntimeRecord rec;
        RuntimeData d;
        ck_assert_int_eq(runtime_record_init(&rec, "", geteuid()), 0);
        ck_assert_ptr_null(rec.dir);
        ck_assert_int_eq(runtime_record_load(&rec, &d), 0);
        ck_assert_uint_eq(d.n_entries, 0);
        runtime_data_done(&d);
        runtime_record_done(&rec);
}
END_TEST

int main(void) {
        Suite *s = suite_create("runtime-record");
        TCase *tc = tcase_create("runtime-record");
        tcase_add_test(tc, test_start_append_load);
        tcase_add_test(tc, test_no_directory_no_record);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
