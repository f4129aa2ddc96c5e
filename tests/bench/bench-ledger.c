/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqos-bench-ledger: what the ledger (daemon/sys/ledger.c) costs on a fake
 * cpuidle tree of 512 CPUs × 6 states in memory (/dev/shm): one sample of
 * every CPU (what Explain(), Ledger() and pmqosctl metrics cost it), against
 * one sweep of Explain()'s per-CPU tables on the same tree (the reference,
 * as a ratio); and the counters read by bound changes that change no CPU's
 * holder or blocked set (target: none) and by one that changes every CPU's
 * holder (one read each); and a bound gone and back on every CPU against
 * the sample (each way reads every CPU once, through the descriptors the
 * ledger keeps once it read a CPU: the row says how many). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sys/cpu-sink.h"
#include "sys/cpu-tables.h"
#include "sys/ledger.h"

#define CPUS 512u
#define STATES 6u
#define RUNS 21

static const uint32_t latencies[STATES] = { 0, 2, 10, 40, 133, 300 };
static char root[64];

static int64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "w");
        if (!f)
                return -errno;
        fputs(text, f);
        return fclose(f) == 0 ? 0 : -errno;
}

static int make_dirs(char *path) {
        for (char *p = path + 1; *p; p++)
                if (*p == '/') {
                        *p = 0;
                        (void) mkdir(path, 0755);
                        *p = '/';
                }
        return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -errno;
}

static int make_tree(void) {
        char path[256], text[32];
        for (unsigned cpu = 0; cpu < CPUS; cpu++) {
                snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%u/power", root, cpu);
                if (make_dirs(path) < 0)
                        return -1;
                snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%u/power/pm_qos_resume_latency_us", root, cpu);
                if (write_file(path, "0\n") < 0)
                        return -1;
                for (unsigned k = 0; k < STATES; k++) {
                        static const char *const names[] = { "name", "latency", "usage", "time", "disable" };
                        snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%u/cpuidle/state%u", root, cpu, k);
                        if (make_dirs(path) < 0)
                                return -1;
                        for (unsigned f = 0; f < 5; f++) {
                                snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%u/cpuidle/state%u/%s", root,
                                         cpu, k, names[f]);
                                if (f == 0)
                                        snprintf(text, sizeof(text), "C%u\n", k);
                                else
                                        snprintf(text, sizeof(text), "%u\n",
                                                 f == 1   ? latencies[k]
                                                 : f == 4 ? 0
                                                          : 1000 + k);
                                if (write_file(path, text) < 0)
                                        return -1;
                        }
                }
        }
        return 0;
}

static int cmp(const void *a, const void *b) {
        int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
        return (x > y) - (x < y);
}

static int64_t median(int64_t *v) {
        qsort(v, RUNS, sizeof(int64_t), cmp);
        return v[RUNS / 2];
}

/* A bound that goes and comes back on every CPU (the review's
 * Request(0)/Cancel loop): each way settles every CPU, one sample's
 * reading, through the descriptors kept (by path before: 30 ms). The p50
 * in µs; *by_path the CPUs read by path meanwhile. */
static int64_t cycle_p50(Ledger *l, const LedgerHolder *a, uint64_t *by_path) {
        int64_t cycle[RUNS];
        uint64_t before = l->n_by_path;
        for (int i = 0; i < RUNS; i++) {
                int64_t t0 = now_usec();
                for (uint32_t cpu = 0; cpu < CPUS; cpu++)
                        ledger_set(l, cpu, -1, &(LedgerHolder){ .kind = LEDGER_NONE }, NULL, NULL);
                for (uint32_t cpu = 0; cpu < CPUS; cpu++)
                        ledger_set(l, cpu, 0, a, NULL, NULL);
                cycle[i] = now_usec() - t0;
        }
        *by_path = l->n_by_path - before;
        return median(cycle);
}

int main(void) {
        snprintf(root, sizeof(root), "/dev/shm/pmqos-bench-ledger-%d", (int) getpid());
        if (access("/dev/shm", W_OK) < 0)
                snprintf(root, sizeof(root), "/tmp/pmqos-bench-ledger-%d", (int) getpid());
        /* As pmqosd does (service_raise_fd_limit()): the ledger keeps
         * descriptors up to half the soft limit. */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
        if (make_tree() < 0) {
                fprintf(stderr, "cannot make the fake tree under %s: %s\n", root, strerror(errno));
                return 1;
        }
        Ledger l;
        CpuSink sink;
        CpuTables tables;
        if (ledger_init(&l, root, CPUS, NULL) < 0 || cpu_sink_init(&sink, root) < 0)
                return 1;
        cpu_tables_init(&tables, NULL);

        LedgerHolder a = { .kind = LEDGER_REQUEST, .uid = 0, .cookie = 1 };
        LedgerHolder b = { .kind = LEDGER_REQUEST, .uid = 0, .cookie = 2 };
        for (uint32_t cpu = 0; cpu < CPUS; cpu++)
                ledger_set(&l, cpu, 0, &a, NULL, NULL); /* every CPU: 5 of 6 states blocked */

        int64_t sample[RUNS], sweep[RUNS];
        for (int i = 0; i < RUNS; i++) {
                int64_t t0 = now_usec();
                ledger_sample(&l);
                int64_t t1 = now_usec();
                const CpuTable *tab;
                uint32_t n;
                tables.swept_usec = -1; /* a sweep each time */
                (void) cpu_tables_get(&tables, &sink, &tab, &n);
                sample[i] = t1 - t0;
                sweep[i] = now_usec() - t1;
        }
        int64_t s = median(sample), w = median(sweep);
        unsigned fds = l.n_fds;

        uint64_t by_path;
        int64_t c = cycle_p50(&l, &a, &by_path);

        uint64_t reads = l.n_reads;
        for (int i = 0; i < 100; i++)
                for (uint32_t cpu = 0; cpu < CPUS; cpu++)
                        ledger_set(&l, cpu, 1, &a, NULL, NULL); /* 1 µs blocks what 0 µs did: nothing changes */
        uint64_t unchanged = l.n_reads - reads;
        reads = l.n_reads;
        for (uint32_t cpu = 0; cpu < CPUS; cpu++)
                ledger_set(&l, cpu, 1, &b, NULL, NULL);
        uint64_t changed = l.n_reads - reads;

        printf("ROW             VALUE                                                                 TARGET           "
               "        RESULT\n");
        printf("ledger sample   %u CPUs × %u states: p50 %.2f ms = %.2f × a sweep of Explain()'s tables (%.2f ms), "
               "%u descriptors kept   ≤ 2 ms   %s\n",
               CPUS, STATES, s / 1000.0, w > 0 ? (double) s / (double) w : 0.0, w / 1000.0, fds,
               s <= 2000 ? "PASS" : "FAIL");
        printf("ledger cycle    a bound gone and back on %u CPUs, %d times: p50 %.2f ms = %.2f × a sample; %llu CPUs "
               "read by path   0   %s\n",
               CPUS, RUNS, c / 1000.0, s > 0 ? (double) c / (double) s : 0.0, (unsigned long long) by_path,
               by_path == 0 ? "PASS" : "FAIL");
        printf("ledger no-change  100 bound changes × %u CPUs, same holder and blocked set: %llu CPUs read   0   %s\n",
               CPUS, (unsigned long long) unchanged, unchanged == 0 ? "PASS" : "FAIL");
        printf("ledger change   a new holder on every CPU: %llu CPUs read                            %u   %s\n",
               (unsigned long long) changed, CPUS, changed == CPUS ? "PASS" : "FAIL");

        ledger_done(&l);
        cpu_tables_done(&tables);
        cpu_sink_done(&sink);
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
        (void) system(cmd);
        return unchanged == 0 && changed == CPUS && by_path == 0 ? 0 : 1;
}
