/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the transaction core on stand-ins (a file for the device,
 * a fake sysfs tree, a scratch state directory, a clock the test sets):
 * change sets, rollback when the kernel refuses, floor rules, per-CPU
 * originals saved before the first write, expiry, departures and the
 * runtime record. (A start: test-start.c.) */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "unit.h"

#include "core-fixture.h"

START_TEST(test_change_sets) {
        Core c;
        ChangeSet cs;
        start(&c, device, 0);

        Request *r = new_request(&c, 100, false, 0, UINT32_MAX);
        ck_assert_int_eq(core_add(&c, r, NULL, &cs), 0);
        CHANGES(cs, true, true, true, false);
        ck_assert_int_eq(unit_read_device(device), 100);

        ck_assert_int_eq(core_update(&c, r, 50, 0, &cs), 0);
        CHANGES(cs, true, true, false, false);
        ck_assert_int_eq(core_update(&c, r, 50, 0, &cs), 0); /* nothing to do */
        CHANGES(cs, false, false, false, false);

        /* A looser second request changes the set, not the value. */
        Request *r2 = new_request(&c, 70, false, 0, UINT32_MAX);
        ck_assert_int_eq(core_add(&c, r2, NULL, &cs), 0);
        CHANGES(cs, false, true, true, false);
        ck_assert_int_eq(core_cancel(&c, r, 0, &cs), 0);
        CHANGES(cs, true, true, true, false);
        ck_assert_int_eq(c.effective, 70);
        ck_assert_int_eq(core_cancel(&c, r2, 0, &cs), 0);
        ck_assert_int_eq(c.effective, PMQOS_LATENCY_NONE);
        ck_assert_int_eq(unit_read_device(device), PMQOS_CONTRACT_LATENCY_MAX);
        core_done(&c);
}
END_TEST

START_TEST(test_rollback_when_the_device_refuses) {
        Core c;
        ChangeSet cs;
        start(&c, "/dev/full", 0);

        ck_assert_int_eq(core_add(&c, new_request(&c, 100, true, 0, UINT32_MAX), NULL, &cs), -ENOSPC);
        CHANGES(cs, false, false, false, false);
        ck_assert_uint_eq(store_size(&c.store), 0);
        ck_assert_ptr_null(strstr(unit_read_file(state, "state"), "request "));

        /* No requirement needs no write; making it one is undone. */
        Request *r = new_request(&c, PMQOS_LATENCY_NONE, false, 0, UINT32_MAX);
        ck_assert_int_eq(core_add(&c, r, NULL, &cs), 0);
        ck_assert_int_eq(core_update(&c, r, 10, 0, &cs), -ENOSPC);
        ck_assert_int_eq(r->value, PMQOS_LATENCY_NONE);
        ck_assert_int_eq(store_min(&c.store), PMQOS_LATENCY_NONE);
        ck_assert_int_eq(core_set_floor(&c, 5, 0, &cs), 0); /* a floor alone constrains nothing */
        ck_assert_int_eq(core_cancel(&c, r, 0, &cs), 0);
        core_done(&c);
}
END_TEST

START_TEST(test_rollback_when_a_cpu_refuses) {
        Core c;
        ChangeSet cs;
        char path[512];

        /* cpu1's file is /dev/full: every write to it fails. */
        snprintf(path, sizeof(path), "%s/%s", sysfs, CPU1);
        ck_assert_int_eq(unlink(path), 0);
        ck_assert_int_eq(symlink("/dev/full", path), 0);
        start(&c, device, 0);

        Request *r = request_new(&c.store);
        uint32_t both[] = { 0, 1 };
        r->value = 30;
        ck_assert_int_eq(request_set_cpus(r, both, 2), 0);
        ck_assert_int_eq(core_add(&c, r, NULL, &cs), -ENOSPC);
        CHANGES(cs, false, false, false, false);
        ck_assert_uint_eq(store_size(&c.store), 0);
        ck_assert_str_eq(unit_read_file(sysfs, CPU0), "0"); /* written, then given back */
        ck_assert_int_eq(unit_read_device(device), PMQOS_CONTRACT_LATENCY_MAX);
        core_done(&c);
}
END_TEST

START_TEST(test_floor_rules) {
        Core c;
        ChangeSet cs;
        start(&c, device, 0);

        /* A floor never creates a bound. */
        ck_assert_int_eq(core_set_floor(&c, 200, 0, &cs), 0);
        CHANGES(cs, false, false, false, true);
        ck_assert_int_eq(c.effective, PMQOS_LATENCY_NONE);
        ck_assert_str_ne(unit_read_file(state, "state"), "");

        /* It raises stricter bounds, global and per-CPU alike, and leaves looser ones. */
        Request *r = new_request(&c, 100, false, 0, UINT32_MAX);
        ck_assert_int_eq(core_add(&c, r, NULL, &cs), 0);
        ck_assert_int_eq(c.effective, 200);
        Request *cpu = new_request(&c, 30, false, 0, 1);
        ck_assert_int_eq(core_add(&c, cpu, NULL, &cs), 0);
        ck_assert_str_eq(unit_read_file(sysfs, CPU1), "200");
        ck_assert_int_eq(core_update(&c, r, 900, 0, &cs), 0);
        ck_assert_int_eq(c.effective, 900);

        /* The default floor applies only while no administrator floor is set. */
        ck_assert_int_eq(core_set_default_floor(&c, 950, &cs), 0);
        CHANGES(cs, false, false, false, false);
        ck_assert_int_eq(core_set_floor(&c, PMQOS_LATENCY_NONE, 0, &cs), 0);
        CHANGES(cs, true, false, false, true);
        ck_assert_int_eq(core_floor(&c), 950);
        ck_assert_int_eq(c.effective, 950);
        ck_assert_str_eq(unit_read_file(sysfs, CPU1), "950");
        ck_assert_int_eq(core_set_default_floor(&c, PMQOS_LATENCY_NONE, &cs), 0);
        ck_assert_int_eq(c.effective, 900);
        ck_assert_str_eq(unit_read_file(sysfs, CPU1), "30");

        /* The battery floor: one more floor, only while on battery, per-CPU bounds too. */
        ck_assert_int_eq(core_set_battery(&c, false, 500, &cs), 0);
        CHANGES(cs, false, false, false, false);
        ck_assert(!cs.battery);
        ck_assert_int_eq(core_set_battery(&c, true, 500, &cs), 0);
        CHANGES(cs, false, false, false, true);
        ck_assert(cs.battery);
        ck_assert_int_eq(c.effective, 900); /* above it: unchanged */
        ck_assert_str_eq(unit_read_file(sysfs, CPU1), "500");
        ck_assert_int_eq(core_set_battery(&c, true, 950, &cs), 0); /* a reload raised it */
        CHANGES(cs, true, false, false, true);
        ck_assert(!cs.battery);
        ck_assert_int_eq(c.effective, 950);
        ck_assert_int_eq(core_set_floor(&c, 100, 0, &cs), 0); /* the higher of the floors holds */
        ck_assert_int_eq(core_floor(&c), 950);
        ck_assert_int_eq(core_set_battery(&c, false, 950, &cs), 0);
        CHANGES(cs, true, false, false, true);
        ck_assert_int_eq(c.effective, 900);
        ck_assert_str_eq(unit_read_file(sysfs, CPU1), "100");
        core_done(&c);
        ck_assert_str_eq(unit_read_file(sysfs, CPU1), "100"); /* given back at the end */
}
END_TEST

START_TEST(test_originals_saved_before_the_first_cpu_write) {
        Core c, again;
        ChangeSet cs;
        start(&c, device, 0);

        ck_assert_int_eq(core_add(&c, new_request(&c, 0, false, 0, 1), NULL, &cs), 0);
        ck_assert_str_eq(unit_read_file(sysfs, CPU1), "n/a"); /* 0 µs is "n/a" there */
        ck_assert_ptr_nonnull(strstr(unit_read_file(state, "state"), "cpu 1 100\n"));

        /* A crash now (no core_done()): the next start gives cpu1 its value back. */
        start(&again, device, 0);
        ck_assert_str_eq(unit_read_file(sysfs, CPU1), "100");
        core_done(&again);
        store_done(&c.store); /* what the crashed run held, freed for the leak checker */
        sink_close(&c.sink);
        cpu_sink_done(&c.cpus);
        ledger_done(&c.ledger);
        free(c.state_dir);
}
END_TEST

START_TEST(test_expiry_on_a_fake_clock) {
        Core c;
        ChangeSet cs;
        start(&c, device, 1000);

        ck_assert_int_eq(core_add(&c, new_request(&c, 40, false, 5000, UINT32_MAX), NULL, &cs), 0);
        ck_assert_int_eq(core_add(&c, new_request(&c, 60, true, 9000, UINT32_MAX), NULL, &cs), 0);
        ck_assert_int_eq(core_next_deadline(&c), 5000);
        ck_assert_int_eq(core_expire(&c, 4999, &cs), 0);
        CHANGES(cs, false, false, false, false);
        ck_assert_int_eq(core_expire(&c, 5000, &cs), 0);
        CHANGES(cs, true, true, true, false);
        ck_assert_int_eq(c.effective, 60);
        ck_assert_int_eq(core_next_deadline(&c), 9000);
        ck_assert_int_eq(core_expire(&c, 20000, &cs), 0);
        ck_assert_uint_eq(store_size(&c.store), 0);
        ck_assert_ptr_null(strstr(unit_read_file(state, "state"), "request ")); /* persistent: gone from disk too */
        ck_assert_int_eq(core_next_deadline(&c), 0);
        core_done(&c);
}
END_TEST

/* kill -9 and a new run of the same bus: the record holds n entries, the
 * first of them cookie; all of them adopted (no owners), then a clean stop. */
static void crash_and_readopt(Core *c, size_t n, uint32_t cookie) {
        ChangeSet cs;
        crash(c);
        load_with_record(c, -1, 0);
        ck_assert_uint_eq(c->adoptable.n_entries, n);
        ck_assert_uint_eq(c->adoptable.entries[0].request->cookie, cookie);
        ck_assert_int_eq(core_start(c, BUS_ID, NULL, 0, &cs), 0);
        core_done(c);
}

/* A departure's record lines come after its signals (core_flush_record()):
 * a crash before them leaves a record that still names the departed owner,
 * and it must adopt nothing the lines would not have left. */
START_TEST(test_departure_before_its_record) {
        Core c;
        ChangeSet cs;
        RequestOwner gone = { .name = ":1.9" };

        load_with_record(&c, -1, 0);
        ck_assert_int_eq(core_start(&c, BUS_ID, NULL, 0, &cs), 0);
        ck_assert_int_eq(core_add(&c, new_request(&c, 30, false, 0, UINT32_MAX), &gone, &cs), 0);
        Request *timed = new_request(&c, 40, false, 1000000, UINT32_MAX);
        uint32_t timed_cookie = timed->cookie;
        ck_assert_int_eq(core_add(&c, timed, &gone, &cs), 0);
        ck_assert_int_eq(core_drop_owner(&c, &gone, &cs), 0);
        CHANGES(cs, true, true, true, false);
        ck_assert_int_eq(unit_read_device(device), 40); /* the kernel first */
        core_drop_owner_finish(&c, &gone);
        ck_assert(core_record_pending(&c));
        crash(&c); /* before core_flush_record() */

        load_with_record(&c, -1, 10);
        ck_assert_uint_eq(c.adoptable.n_entries, 2);
        ck_assert_str_eq(c.adoptable.entries[0].sender, ":1.9");
        RequestOwner *owners[] = { NULL, NULL }; /* :1.9 is not on the bus */
        ck_assert_int_eq(core_start(&c, BUS_ID, owners, 10, &cs), 0);
        ck_assert_uint_eq(store_size(&c.store), 1);
        ck_assert_ptr_null(store_get(&c.store, timed_cookie)->owner); /* as "detach" would have left it */
        core_done(&c);
}
END_TEST

/* A client of many requests leaving has the record written whole once, not
 * a line per request; what it describes is the same. */
START_TEST(test_big_departure_rewrites_the_record) {
        Core c;
        ChangeSet cs;
        RequestOwner big = { .name = ":1.11" }, other = { .name = ":1.12" };

        load_with_record(&c, -1, 0);
        ck_assert_int_eq(core_start(&c, BUS_ID, NULL, 0, &cs), 0);
        Request *keep = new_request(&c, 500, false, 0, UINT32_MAX);
        uint32_t cookie = keep->cookie;
        ck_assert_int_eq(core_add(&c, keep, &other, &cs), 0);
        for (int i = 0; i < 2000; i++)
                ck_assert_int_eq(core_add(&c, new_request(&c, 100 + i, false, 0, UINT32_MAX), &big, &cs), 0);
        ck_assert_int_eq(core_drop_owner(&c, &big, &cs), 0);
        ck_assert_int_eq(unit_read_device(device), 500);
        core_drop_owner_finish(&c, &big);
        ck_assert(c.pending_whole);
        ck_assert_ptr_null(c.record_pending.data); /* no line was formatted */
        core_flush_record(&c);
        ck_assert(!core_record_pending(&c));
        ck_assert_uint_eq(c.record.n_live, 1);
        ck_assert_uint_eq(c.record.n_lines, 1);
        /* A later change is appended after the rewrite. */
        ck_assert_int_eq(core_add(&c, new_request(&c, 600, false, 0, UINT32_MAX), &other, &cs), 0);
        crash_and_readopt(&c, 2, cookie);
}
END_TEST

/* A restart on the same bus goes on with the record instead of writing it
 * whole: the lines stay where they are, the start's own changes (an owner
 * gone, a timed request detached) are appended after what a kill left. */
START_TEST(test_record_stays_small) {
        Core c;
        ChangeSet cs;

        load_with_record(&c, -1, 0);
        ck_assert_int_eq(core_start(&c, BUS_ID, NULL, 0, &cs), 0);
        Request *keep = new_request(&c, 77, false, 0, UINT32_MAX);
        uint32_t cookie = keep->cookie;
        ck_assert_int_eq(core_add(&c, keep, NULL, &cs), 0);
        for (int i = 0; i < 5000; i++) {
                Request *r = new_request(&c, 100 + i, false, 0, UINT32_MAX);
                ck_assert_int_eq(core_add(&c, r, NULL, &cs), 0);
                ck_assert_int_eq(core_cancel(&c, r, 0, &cs), 0);
        }
        /* 10,001 changes, rewritten whenever the file held 1,024 lines more than twice what it describes. */
        ck_assert_uint_le(c.record.n_lines, 2 * 1 + 1024);
        crash_and_readopt(&c, 1, cookie);
}
END_TEST

START_TEST(test_wakeup_apart) {
        char wakeup[320];
        snprintf(wakeup, sizeof(wakeup), "%s/wakeup", dir);
        unit_write_file(dir, "wakeup", "");
        CoreConfig config = { .device = device,
                              .wakeup_device = wakeup,
                              .state_dir = state,
                              .sysfs_root = sysfs,
                              .state_owner = geteuid(),
                              .default_floor = PMQOS_LATENCY_NONE,
                              .battery_floor = PMQOS_LATENCY_NONE,
                              .seed = 3 };
        Core c;
        ChangeSet cs;
        ck_assert_int_eq(core_init(&c, &config), 0);
        ck_assert(core_has_wakeup(&c));
        ck_assert_int_eq(core_load(&c, 1), 0);
        ck_assert_int_eq(core_start(&c, NULL, NULL, 1, &cs), 0);

        Request *w = new_request(&c, 30, false, 0, UINT32_MAX);
        w->type = QOS_TYPE_CPU_WAKEUP;
        ck_assert_int_eq(core_add(&c, w, NULL, &cs), 0);
        ck_assert(cs.wakeup && !cs.latency);
        ck_assert_int_eq(unit_read_device(wakeup), 30);
        ck_assert_int_eq(unit_read_device(device), PMQOS_CONTRACT_LATENCY_MAX);
        Request *d = new_request(&c, 50, false, 0, UINT32_MAX);
        ck_assert_int_eq(core_add(&c, d, NULL, &cs), 0);
        ck_assert(cs.latency && !cs.wakeup);
        ck_assert_int_eq(unit_read_device(device), 50);
        ck_assert_int_eq(core_set_floor(&c, 40, 0, &cs), 0); /* one floor for both */
        ck_assert(cs.wakeup && !cs.latency);
        ck_assert_int_eq(unit_read_device(wakeup), 40);
        ck_assert_int_eq(core_cancel(&c, w, 0, &cs), 0);
        ck_assert_int_eq(c.wakeup_effective, PMQOS_LATENCY_NONE);
        ck_assert_int_eq(unit_read_device(wakeup), PMQOS_CONTRACT_LATENCY_MAX);
        core_done(&c);

        /* Where the kernel has no such device, there is no wakeup sink. */
        config.wakeup_device = "/nonexistent/cpu_wakeup_latency";
        ck_assert_int_eq(core_init(&c, &config), 0);
        ck_assert(!core_has_wakeup(&c));
        core_done(&c);
}
END_TEST

int main(void) {
        Suite *s = suite_create("core");
        TCase *tc = tcase_create("core");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_change_sets);
        tcase_add_test(tc, test_rollback_when_the_device_refuses);
        tcase_add_test(tc, test_rollback_when_a_cpu_refuses);
        tcase_add_test(tc, test_floor_rules);
        tcase_add_test(tc, test_originals_saved_before_the_first_cpu_write);
        tcase_add_test(tc, test_expiry_on_a_fake_clock);
        tcase_add_test(tc, test_record_stays_small);
        tcase_add_test(tc, test_departure_before_its_record);
        tcase_add_test(tc, test_big_departure_rewrites_the_record);
        tcase_add_test(tc, test_wakeup_apart);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
