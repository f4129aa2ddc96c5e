/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One table, sized by the sink's CPU numbers at the first sweep and kept
 * until cpu_tables_done(); a sweep reads into it in place. */

#include "sys/cpu-tables.h"

#include <errno.h>
#include <stdlib.h>

#include "util/clock.h"

void cpu_tables_init(CpuTables *t, int64_t (*clock)(void)) {
        *t = (CpuTables){ .clock = clock ? clock : now_monotonic_usec, .swept_usec = -1 };
}

static void drop(CpuTables *t) {
        for (uint32_t cpu = 0; cpu < t->n; cpu++)
                cpuidle_done(&t->cpus[cpu].idle);
        free(t->cpus);
        t->cpus = NULL;
        t->n = 0;
        t->swept_usec = -1;
}

void cpu_tables_done(CpuTables *t) {
        drop(t);
        *t = (CpuTables){ .swept_usec = -1 };
}

int64_t cpu_tables_lifetime(const CpuTables *t) {
        return t->sweep_usec > 0 ? CPU_TABLES_AGE_FACTOR * t->sweep_usec : 0;
}

static void read_text(const CpuSink *s, uint32_t cpu, CpuTable *e) {
        if (e->present && cpu_sink_read(s, cpu, e->text, sizeof(e->text)) < 0)
                e->present = false;
}

static int sweep(CpuTables *t, const CpuSink *s) {
        int64_t start = t->clock();
        if (t->n != s->n_fds || !t->cpus) {
                drop(t);
                t->cpus = calloc(s->n_fds > 0 ? s->n_fds : 1, sizeof(CpuTable));
                if (!t->cpus)
                        return -ENOMEM;
                t->n = s->n_fds;
        }
        for (uint32_t cpu = 0; cpu < t->n; cpu++) {
                CpuTable *e = &t->cpus[cpu];
                cpuidle_done(&e->idle);
                e->present = cpu_sink_check_cpu(s, cpu) >= 0;
                read_text(s, cpu, e);
                if (e->present && cpuidle_read(s->sysfs_root, cpu, &e->idle) < 0) {
                        drop(t);
                        return -ENOMEM;
                }
        }
        t->changes = s->changes;
        int64_t end = t->clock();
        t->sweep_usec = end > start ? end - start : 0;
        t->swept_usec = end;
        t->n_sweeps++;
        return 0;
}

int cpu_tables_get(CpuTables *t, const CpuSink *s, const CpuTable **ret, uint32_t *ret_n) {
        int64_t now = t->clock();
        *ret = NULL;
        *ret_n = 0;
        if (t->swept_usec < 0 || t->n != s->n_fds || now < t->swept_usec ||
            now - t->swept_usec >= cpu_tables_lifetime(t)) {
                int r = sweep(t, s);
                if (r < 0)
                        return r;
        } else if (t->changes != s->changes) {
                for (uint32_t cpu = 0; cpu < t->n; cpu++)
                        read_text(s, cpu, &t->cpus[cpu]);
                t->changes = s->changes;
        }
        *ret = t->cpus;
        *ret_n = t->n;
        return 0;
}
