/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the transaction core on stand-ins (a file for the device,
 * a fake sysfs tree, a scratch state directory, a clock the test sets):
 * change sets, rollback when the kernel refuses, floor rules, per-CPU
 * originals saved before the first write, expiry, loading. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "unit.h"

#define CPU0 "devices/system/cpu/cpu0/power/pm_qos_resume_latency_us"
#define CPU1 "devices/system/cpu/cpu1/power/pm_qos_resume_latency_us"

static char dir[256], device[300], state[300], sysfs[300];

static void setup(void) {
        snprintf(dir, sizeof(dir), "%s", unit_make_dir("core"));
        snprintf(device, sizeof(device), "%s/device", dir);
        snprintf(state, sizeof(state), "%s/state-dir", dir);
        snprintf(sysfs, sizeof(sysfs), "%s/sys", dir);
        unit_write_file(dir, "device", "");
        unit_write_file(sysfs, CPU0, "0\n");
        unit_write_file(sysfs, CPU1, "100\n");
        unit_write_file(sysfs, "devices/system/cpu/cpu1/online", "1\n");
}

static void teardown(void) {
        unit_remove_dir(dir);
}

static void start(Core *c, const char *dev, int64_t now) {
        CoreConfig config = { .device = dev,
                              .state_dir = state,
                              .sysfs_root = sysfs,
                              .state_owner = geteuid(),
                              .default_floor = PMQOS_LATENCY_NONE,
                              .seed = 42 };
        ck_assert_int_eq(core_init(c, &config), 0);
        ck_assert_int_eq(core_load(c, now), 0);
}

static Request *new_request(Core *c, int32_t value, bool persistent, int64_t expires, uint32_t cpu) {
        Request *r = request_new(&c->store);
        ck_assert_ptr_nonnull(r);
        r->value = value;
        r->persistent = persistent;
        r->created_usec = 1;
        r->expires_usec = expires;
        if (cpu != UINT32_MAX)
                ck_assert_int_eq(request_set_cpus(r, &cpu, 1), 0);
        return r;
}

#define CHANGES(cs, l, r, n, f)                     \
        do {                                        \
                ck_assert_int_eq((cs).latency, l);  \
                ck_assert_int_eq((cs).requests, r); \
                ck_assert_int_eq((cs).count, n);    \
                ck_assert_int_eq((cs).floor, f);    \
        } while (0)

START_TEST(test_change_sets) {
        Core c;
        ChangeSet cs;
        start(&c, device, 0);

        Request *r = new_request(&c, 100, false, 0, UINT32_MAX);
        ck_assert_int_eq(core_add(&c, r, NULL, &cs), 0);
        CHANGES(cs, true, true, true, false);
        ck_assert_int_eq(unit_read_device(device), 100);

        ck_assert_int_eq(core_update(&c, r, 50, &cs), 0);
        CHANGES(cs, true, true, false, false);
        ck_assert_int_eq(core_update(&c, r, 50, &cs), 0); /* nothing to do */
        CHANGES(cs, false, false, false, false);

        /* A looser second request changes the set, not the value. */
        Request *r2 = new_request(&c, 70, false, 0, UINT32_MAX);
        ck_assert_int_eq(core_add(&c, r2, NULL, &cs), 0);
        CHANGES(cs, false, true, true, false);
        ck_assert_int_eq(core_cancel(&c, r, &cs), 0);
        CHANGES(cs, true, true, true, false);
        ck_assert_int_eq(c.effective, 70);
        ck_assert_int_eq(core_cancel(&c, r2, &cs), 0);
        ck_assert_int_eq(c.effective, PMQOS_LATENCY_NONE);
        ck_assert_int_eq(unit_read_device(device), PMQOS_LATENCY_MAX_US);
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
        ck_assert_int_eq(core_update(&c, r, 10, &cs), -ENOSPC);
        ck_assert_int_eq(r->value, PMQOS_LATENCY_NONE);
        ck_assert_int_eq(store_min(&c.store), PMQOS_LATENCY_NONE);
        ck_assert_int_eq(core_set_floor(&c, 5, &cs), 0); /* a floor alone constrains nothing */
        ck_assert_int_eq(core_cancel(&c, r, &cs), 0);
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
        ck_assert_int_eq(unit_read_device(device), PMQOS_LATENCY_MAX_US);
        core_done(&c);
}
END_TEST

START_TEST(test_floor_rules) {
        Core c;
        ChangeSet cs;
        start(&c, device, 0);

        /* A floor never creates a bound. */
        ck_assert_int_eq(core_set_floor(&c, 200, &cs), 0);
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
        ck_assert_int_eq(core_update(&c, r, 900, &cs), 0);
        ck_assert_int_eq(c.effective, 900);

        /* The default floor applies only while no administrator floor is set. */
        ck_assert_int_eq(core_set_default_floor(&c, 950, &cs), 0);
        CHANGES(cs, false, false, false, false);
        ck_assert_int_eq(core_set_floor(&c, PMQOS_LATENCY_NONE, &cs), 0);
        CHANGES(cs, true, false, false, true);
        ck_assert_int_eq(core_floor(&c), 950);
        ck_assert_int_eq(c.effective, 950);
        ck_assert_str_eq(unit_read_file(sysfs, CPU1), "950");
        ck_assert_int_eq(core_set_default_floor(&c, PMQOS_LATENCY_NONE, &cs), 0);
        ck_assert_int_eq(c.effective, 900);
        ck_assert_str_eq(unit_read_file(sysfs, CPU1), "30");
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

START_TEST(test_load) {
        Core c;
        unit_write_file(state, "state",
                        "pmqos-state 1\nfloor 20\n"
                        "request cookie=5 type=cpu_dma value=300 uid=0 pid=1 created=1 expires=0 cpus= exec=a reason=\n"
                        "request cookie=6 type=cpu_dma value=7 uid=0 pid=1 created=1 expires=100 cpus= exec=b reason=\n"
                        "end\n");
        start(&c, device, 200); /* cookie 6 ended while pmqosd was down */

        ck_assert_ptr_nonnull(store_get(&c.store, 5));
        ck_assert_ptr_null(store_get(&c.store, 6));
        ck_assert_int_eq(core_floor(&c), 20);
        ck_assert_int_eq(c.effective, 300);
        ck_assert_int_eq(unit_read_device(device), 300);
        core_done(&c);
        ck_assert_ptr_null(strstr(unit_read_file(state, "state"), "cookie=6"));
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
        tcase_add_test(tc, test_load);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
