/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the audit trail's plain lines (no journald here): what each
 * entry says, and its rate limit — AUDIT_BURST entries, then one per
 * AUDIT_REFILL_SEC, the next entry saying how many were left out. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record/audit.h"
#include "model/store.h"
#include "unit.h"

static Store store;
static Request *req;

static void setup(void) {
        unsetenv("JOURNAL_STREAM");
        audit_reset();
        store_init(&store, 1);
        req = request_new(&store);
        req->value = 20;
        req->cookie = 7;
        req->uid = 1000;
        req->pid = 4711;
        req->exec = shared_string_new("ardour --session x");
        req->reason = strdup("recording");
}

static void teardown(void) {
        request_free(req);
        store_done(&store);
}

static void each_kind(void) {
        audit_request_added(req);
        req->value = 10;
        audit_request_changed(req, 20, 1000);
        audit_request_ended(req, 10, AUDIT_END_CANCELLED, 0);
        audit_request_ended(req, 10, AUDIT_END_OWNER_LEFT, 1000);
        audit_request_ended(req, 10, AUDIT_END_EXPIRED, 1000);
        audit_floor_changed(PMQOS_LATENCY_NONE, 100, "the administrator floor was set by uid 0");
        audit_latency_changed(QOS_TYPE_CPU_DMA, 20, PMQOS_LATENCY_NONE);
        audit_latency_changed(QOS_TYPE_CPU_WAKEUP, 5, 6);
}

START_TEST(test_what_each_entry_says) {
        ck_assert(!audit_to_journal());
        char *out = unit_capture_stderr(each_kind);
        ck_assert_ptr_nonnull(strstr(out, "New request 7 of uid 1000 pid 4711 (ardour --session x): 20 µs, reason: "
                                          "recording.\n"));
        ck_assert_ptr_nonnull(strstr(out, "Changed request 7 of uid 1000 pid 4711 (ardour --session x) from 20 µs to "
                                          "10 µs (by uid 1000).\n"));
        ck_assert_ptr_nonnull(strstr(out, "Ended request 7 of uid 1000 pid 4711 (ardour --session x), 10 µs: cancelled "
                                          "by uid 0.\n"));
        ck_assert_ptr_nonnull(strstr(out, ": its owner left the bus.\n"));
        ck_assert_ptr_nonnull(strstr(out, ": it expired.\n"));
        ck_assert_ptr_nonnull(
                strstr(out, "The floor went from none to 100 µs: the administrator floor was set by uid 0.\n"));
        ck_assert_ptr_nonnull(strstr(out, "The effective latency bound went from 20 µs to none.\n"));
        ck_assert_ptr_nonnull(strstr(out, "The effective wakeup latency bound went from 5 µs to 6 µs.\n"));
        free(out);
}
END_TEST

static void variants(void) {
        req->persistent = true;
        req->type = QOS_TYPE_CPU_WAKEUP;
        free(req->reason);
        req->reason = strdup(""); /* no reason: no ", reason:" */
        audit_request_added(req);
        req->persistent = false;
        req->type = QOS_TYPE_CPU_DMA;
        req->hold = HOLD_FD;
        req->value = PMQOS_LATENCY_NONE;
        req->pid = -1;
        audit_request_added(req);
        req->hold = HOLD_PROCESS;
        req->target = strdup("pid 99 (cyclictest)");
        req->value = 2000000000;
        audit_request_added(req);
        audit_request_ended(req, 2000000000, AUDIT_END_OWNER_LEFT, 0);
        audit_request_ended(req, 5, AUDIT_END_UNIT_INACTIVE, 0);
}

/* The entries are built without a format string (a root client's three a
 * request were most of its cost): every piece in its place. */
START_TEST(test_each_variant_of_an_entry) {
        char *out = unit_capture_stderr(variants);
        ck_assert_ptr_nonnull(strstr(out, "New request 7 of uid 1000 pid 4711 (ardour --session x): 20 µs of "
                                          "cpu_wakeup, persistent.\n"));
        ck_assert_ptr_nonnull(strstr(out, "New request 7 of uid 1000 pid -1 (ardour --session x): none, held by a "
                                          "descriptor.\n"));
        ck_assert_ptr_nonnull(strstr(out, "New request 7 of uid 1000 pid -1 (ardour --session x): 2000000000 µs, "
                                          "bound to pid 99 (cyclictest).\n"));
        ck_assert_ptr_nonnull(strstr(out, "(ardour --session x), 2000000000 µs: its process exited.\n"));
        ck_assert_ptr_nonnull(strstr(out, "(ardour --session x), 5 µs: its unit is no longer active.\n"));
        free(out);
}
END_TEST

static void flood(void) {
        for (int i = 0; i < 1000; i++)
                audit_latency_changed(QOS_TYPE_CPU_DMA, i, i + 1);
}

static void later(void) {
        audit_age(AUDIT_REFILL_SEC);
        audit_latency_changed(QOS_TYPE_CPU_DMA, 5, 6);
        audit_latency_changed(QOS_TYPE_CPU_DMA, 6, 7); /* no token yet: left out */
}

START_TEST(test_flood_is_limited_and_counted) {
        char *out = unit_capture_stderr(flood);
        ck_assert_uint_eq(unit_count(out, "The effective latency bound went"), AUDIT_BURST);
        free(out);
        out = unit_capture_stderr(later);
        ck_assert_uint_eq(unit_count(out, "The effective latency bound went"), 1);
        ck_assert_ptr_nonnull(strstr(out, "(800 earlier entries were left out: too many at once)"));
        free(out);
}
END_TEST

START_TEST(test_journal_stream_must_be_ours) {
        setenv("JOURNAL_STREAM", "1:2", 1); /* not our stderr: plain lines still */
        audit_reset();
        ck_assert(!audit_to_journal());
        unsetenv("JOURNAL_STREAM");
}
END_TEST

int main(void) {
        Suite *s = suite_create("audit");
        TCase *tc = tcase_create("core");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_what_each_entry_says);
        tcase_add_test(tc, test_each_variant_of_an_entry);
        tcase_add_test(tc, test_flood_is_limited_and_counted);
        tcase_add_test(tc, test_journal_stream_must_be_ours);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
