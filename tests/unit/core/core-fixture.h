/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the core's unit tests share: a stand-in device, state and runtime
 * directories and sysfs under one temporary directory, a start on them, what
 * a kill -9 leaves, and a request made by hand. */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/core.h"
#include "unit.h"

#define CPU0 "devices/system/cpu/cpu0/power/pm_qos_resume_latency_us"
#define CPU1 "devices/system/cpu/cpu1/power/pm_qos_resume_latency_us"

static char dir[256], device[300], state[300], sysfs[300], runtime[300];
#define BUS_ID "0123456789abcdef0123456789abcdef"

static inline void setup(void) {
        snprintf(dir, sizeof(dir), "%s", unit_make_dir("core"));
        snprintf(device, sizeof(device), "%s/device", dir);
        snprintf(state, sizeof(state), "%s/state-dir", dir);
        snprintf(runtime, sizeof(runtime), "%s/run", dir);
        snprintf(sysfs, sizeof(sysfs), "%s/sys", dir);
        unit_write_file(dir, "device", "");
        unit_write_file(sysfs, CPU0, "0\n");
        unit_write_file(sysfs, CPU1, "100\n");
        unit_write_file(sysfs, "devices/system/cpu/cpu1/online", "1\n");
}

static inline void teardown(void) {
        unit_remove_dir(dir);
}

static inline void start(Core *c, const char *dev, int64_t now) {
        CoreConfig config = { .device = dev,
                              .state_dir = state,
                              .sysfs_root = sysfs,
                              .state_owner = geteuid(),
                              .default_floor = PMQOS_LATENCY_NONE,
                              .battery_floor = PMQOS_LATENCY_NONE,
                              .seed = 42 };
        ChangeSet changes;
        ck_assert_int_eq(core_init(c, &config), 0);
        ck_assert_int_eq(core_load(c, now), 0);
        ck_assert_int_eq(core_start(c, NULL, NULL, now, &changes), 0);
}

/* A start with a runtime record (and, when device_fd >= 0, the device's
 * descriptor back from a service manager), stopping before core_start(). */
static inline void load_with_record(Core *c, int device_fd, int64_t now) {
        CoreConfig config = { .device = device,
                              .state_dir = state,
                              .runtime_dir = runtime,
                              .sysfs_root = sysfs,
                              .state_owner = geteuid(),
                              .default_floor = PMQOS_LATENCY_NONE,
                              .battery_floor = PMQOS_LATENCY_NONE,
                              .have_device_fd = device_fd >= 0,
                              .device_fd = device_fd,
                              .seed = 7 };
        ck_assert_int_eq(core_init(c, &config), 0);
        ck_assert_int_eq(core_load(c, now), 0);
}

/* What a kill -9 leaves: nothing given back, nothing saved; memory freed for the leak checker. */
static inline void crash(Core *c) {
        store_done(&c->store);
        /* The record as the kernel leaves it: mapping and descriptor gone,
         * the reserved zeros past its lines still there. */
        if (c->record.map)
                munmap(c->record.map, c->record.map_len);
        if (c->record.fd >= 0)
                close(c->record.fd);
        free(c->record.dir);
        runtime_data_done(&c->adoptable);
        free(c->record_pending.data); /* what a departure had not written yet dies with the process */
        close(c->sink.fd);            /* not sink_close(): a stand-in device keeps what it held, as the fd store does */
        free(c->sink.path);
        cpu_sink_done(&c->cpus);
        ledger_done(&c->ledger);
        free(c->state_dir);
}

static inline Request *new_request(Core *c, int32_t value, bool persistent, int64_t expires, uint32_t cpu) {
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
