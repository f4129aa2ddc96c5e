/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of Explain()'s per-CPU tables on a fake sysfs tree and a clock
 * the test moves: reused while younger than 9 × the last sweep's duration
 * and swept anew after, pmqosd's own writes seen at once without a sweep,
 * an offline CPU left out, no sweep kept when the clock says nothing. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sys/cpu-sink.h"
#include "sys/cpu-tables.h"
#include "model/store.h"
#include "unit.h"

/* The fake clock: each read returns now, then moves it on by step (so a
 * sweep, which reads it before and after, "takes" step µs). */
static int64_t now, step;

static int64_t fake_clock(void) {
        int64_t t = now;
        now += step;
        return t;
}

static const char *dir;

static void write_at(const char *name, const char *text) {
        unit_write_file(dir, name, text);
}

static void make_tree(void) {
        dir = unit_make_dir("cpu-tables");
        for (unsigned cpu = 0; cpu < 3; cpu++) {
                char path[128], text[32];
                snprintf(path, sizeof(path), "devices/system/cpu/cpu%u/power/pm_qos_resume_latency_us", cpu);
                write_at(path, "0\n");
                snprintf(path, sizeof(path), "devices/system/cpu/cpu%u/online", cpu);
                write_at(path, cpu == 2 ? "0\n" : "1\n");
                const char *files[][2] = { { "name", "POLL" }, { "latency", "0" }, { "usage", "5" }, { "time", "7" } };
                for (unsigned k = 0; k < 4; k++) {
                        snprintf(path, sizeof(path), "devices/system/cpu/cpu%u/cpuidle/state0/%s", cpu, files[k][0]);
                        snprintf(text, sizeof(text), "%s\n", files[k][1]);
                        write_at(path, text);
                }
                snprintf(path, sizeof(path), "devices/system/cpu/cpu%u/cpuidle/state1/name", cpu);
                write_at(path, "C6\n");
                snprintf(path, sizeof(path), "devices/system/cpu/cpu%u/cpuidle/state1/latency", cpu);
                write_at(path, "133\n");
        }
}

static uint64_t usage_of(const CpuTable *t, uint32_t cpu) {
        return t[cpu].idle.states[0].usage;
}

START_TEST(test_lifetime_follows_the_sweep) {
        CpuSink s;
        CpuTables t;
        const CpuTable *tab;
        uint32_t n;
        make_tree();
        ck_assert_int_eq(cpu_sink_init(&s, dir), 0);
        cpu_tables_init(&t, fake_clock);
        now = 1000;
        step = 100;

        /* The first look sweeps: read at 1000, swept from 1100 to 1200. */
        ck_assert_int_eq(cpu_tables_get(&t, &s, &tab, &n), 0);
        ck_assert_uint_eq(n, 3);
        ck_assert_uint_eq(t.n_sweeps, 1);
        ck_assert_int_eq(t.sweep_usec, 100);
        ck_assert_int_eq(cpu_tables_lifetime(&t), 900);
        ck_assert(tab[0].present && tab[1].present && !tab[2].present); /* cpu2 is offline */
        ck_assert_uint_eq(tab[0].idle.n, 2);
        ck_assert_str_eq(tab[0].idle.states[1].name, "C6");
        ck_assert_uint_eq(tab[0].idle.states[1].latency, 133);
        ck_assert_uint_eq(usage_of(tab, 1), 5);
        ck_assert_str_eq(tab[1].text, "0");

        /* Changed behind pmqosd's back: not seen while the sweep is young. */
        write_at("devices/system/cpu/cpu1/cpuidle/state0/usage", "6\n");
        write_at("devices/system/cpu/cpu2/online", "1\n");
        now = 1200 + 899;
        step = 0;
        ck_assert_int_eq(cpu_tables_get(&t, &s, &tab, &n), 0);
        ck_assert_uint_eq(t.n_sweeps, 1);
        ck_assert_uint_eq(usage_of(tab, 1), 5);
        ck_assert(!tab[2].present);

        /* 9 × 100 µs after the sweep ended, it is swept again: a slower
         * sweep (1,000 µs) serves for longer. */
        now = 1200 + 900;
        step = 1000;
        ck_assert_int_eq(cpu_tables_get(&t, &s, &tab, &n), 0);
        ck_assert_uint_eq(t.n_sweeps, 2);
        ck_assert_uint_eq(usage_of(tab, 1), 6);
        ck_assert(tab[2].present);
        ck_assert_int_eq(cpu_tables_lifetime(&t), 9000);
        int64_t swept = t.swept_usec;
        write_at("devices/system/cpu/cpu1/cpuidle/state0/usage", "8\n");
        now = swept + 8999;
        step = 0;
        ck_assert_int_eq(cpu_tables_get(&t, &s, &tab, &n), 0);
        ck_assert_uint_eq(usage_of(tab, 1), 6);
        now = swept + 9000;
        ck_assert_int_eq(cpu_tables_get(&t, &s, &tab, &n), 0);
        ck_assert_uint_eq(t.n_sweeps, 3);
        ck_assert_uint_eq(usage_of(tab, 1), 8);

        /* A sweep the clock says took no time serves no later call. */
        ck_assert_int_eq(cpu_tables_lifetime(&t), 0);
        ck_assert_int_eq(cpu_tables_get(&t, &s, &tab, &n), 0);
        ck_assert_uint_eq(t.n_sweeps, 4);
        /* Nor one the clock went back from. */
        step = 10;
        ck_assert_int_eq(cpu_tables_get(&t, &s, &tab, &n), 0);
        ck_assert_uint_eq(t.n_sweeps, 5);
        now -= 100;
        ck_assert_int_eq(cpu_tables_get(&t, &s, &tab, &n), 0);
        ck_assert_uint_eq(t.n_sweeps, 6);

        cpu_tables_done(&t);
        cpu_tables_done(&t); /* twice is harmless */
        cpu_sink_done(&s);
        unit_remove_dir(dir);
}
END_TEST

START_TEST(test_own_writes_seen_at_once) {
        CpuSink s;
        CpuTables t;
        const CpuTable *tab;
        uint32_t n;
        make_tree();
        ck_assert_int_eq(cpu_sink_init(&s, dir), 0);
        cpu_tables_init(&t, fake_clock);
        now = 0;
        step = 1000000; /* a sweep of 1 s: serves for 9 s */
        ck_assert_int_eq(cpu_tables_get(&t, &s, &tab, &n), 0);
        step = 0;

        /* pmqosd writes cpu1's file: the next look shows it, with no sweep
         * (cpu1's usage, changed meanwhile, is still the swept one). */
        write_at("devices/system/cpu/cpu1/cpuidle/state0/usage", "6\n");
        ck_assert_int_eq(cpu_sink_remember(&s, 1), 0);
        ck_assert_int_eq(cpu_sink_write(&s, 1, 0), 0);
        ck_assert_int_eq(cpu_tables_get(&t, &s, &tab, &n), 0);
        ck_assert_uint_eq(t.n_sweeps, 1);
        ck_assert_str_eq(tab[1].text, "n/a");
        ck_assert_uint_eq(usage_of(tab, 1), 5);
        CpuFileView view;
        cpu_sink_view_text(&s, 1, tab[1].text, &view);
        ck_assert_int_eq(view.bound, 0);
        ck_assert(!view.foreign);

        /* Also the original put back; a write refused before any I/O changes nothing. */
        ck_assert_int_eq(cpu_sink_write(&s, 1, PMQOS_LATENCY_NONE), 0);
        ck_assert_int_eq(cpu_tables_get(&t, &s, &tab, &n), 0);
        ck_assert_str_eq(tab[1].text, "0");
        uint64_t changes = s.changes;
        ck_assert_int_eq(cpu_sink_write(&s, 0, 5), -ESTALE); /* not remembered first */
        ck_assert_uint_eq(s.changes, changes);

        /* A file written by someone else while the tables are young is not
         * seen (the figures may be that old); our next write re-reads it. */
        write_at("devices/system/cpu/cpu0/power/pm_qos_resume_latency_us", "40\n");
        ck_assert_int_eq(cpu_tables_get(&t, &s, &tab, &n), 0);
        ck_assert_str_eq(tab[0].text, "0");
        ck_assert_int_eq(cpu_sink_remember(&s, 1), 0);
        ck_assert_int_eq(cpu_sink_write(&s, 1, 20), 0);
        ck_assert_int_eq(cpu_tables_get(&t, &s, &tab, &n), 0);
        ck_assert_str_eq(tab[0].text, "40");
        ck_assert_str_eq(tab[1].text, "20");
        ck_assert_uint_eq(t.n_sweeps, 1);

        ck_assert_int_eq(cpu_sink_restore_all(&s), 0);
        cpu_tables_done(&t);
        cpu_sink_done(&s);
        unit_remove_dir(dir);
}
END_TEST

START_TEST(test_no_cpus) {
        CpuSink s;
        CpuTables t;
        const CpuTable *tab;
        uint32_t n = 1;
        dir = unit_make_dir("cpu-tables-none");
        ck_assert_int_eq(cpu_sink_init(&s, dir), 0);
        cpu_tables_init(&t, NULL); /* the real clock */
        ck_assert_int_eq(cpu_tables_get(&t, &s, &tab, &n), 0);
        ck_assert_uint_eq(n, 0);
        ck_assert_uint_eq(t.n_sweeps, 1);
        cpu_tables_done(&t);
        cpu_sink_done(&s);
        unit_remove_dir(dir);
}
END_TEST

int main(void) {
        Suite *s = suite_create("cpu-tables");
        TCase *tc = tcase_create("cpu-tables");
        tcase_add_test(tc, test_lifetime_follows_the_sweep);
        tcase_add_test(tc, test_own_writes_seen_at_once);
        tcase_add_test(tc, test_no_cpus);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
