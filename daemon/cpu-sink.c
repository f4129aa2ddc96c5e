/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* In pm_qos_resume_latency_us, "0" means no constraint and "n/a" means 0 µs
 * (poll only), so a bound of 0 is written as "n/a". */

#include "cpu-sink.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"

int cpu_sink_init(CpuSink *s, const char *sysfs_root) {
        *s = (CpuSink){};
        s->sysfs_root = strdup(sysfs_root);
        return s->sysfs_root ? 0 : -ENOMEM;
}

void cpu_sink_done(CpuSink *s) {
        for (size_t i = 0; i < s->n_originals; i++)
                free(s->originals[i].value);
        free(s->originals);
        free(s->sysfs_root);
        *s = (CpuSink){};
}

static void cpu_path(const CpuSink *s, uint32_t cpu, const char *file, char *buf, size_t size) {
        snprintf(buf, size, "%s/devices/system/cpu/cpu%" PRIu32 "/%s", s->sysfs_root, cpu, file);
}

static int read_text(const char *path, char *buf, size_t size) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, size - 1);
        int r = n < 0 ? -errno : 0;
        close(fd);
        if (r < 0)
                return r;
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
                n--;
        buf[n] = 0;
        return 0;
}

static int write_text(const char *path, const char *text) {
        /* O_TRUNC as "echo >" does: harmless on sysfs, needed for a plain-file stand-in. */
        int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        size_t len = strlen(text);
        ssize_t n = write(fd, text, len);
        int r = n < 0 ? -errno : (size_t) n != len ? -EIO : 0;
        if (close(fd) < 0 && r == 0)
                r = -errno;
        return r;
}

int cpu_sink_check_cpu(const CpuSink *s, uint32_t cpu) {
        char path[512], buf[16];

        if (cpu >= PMQOS_MAX_CPUS)
                return -ENOENT;
        cpu_path(s, cpu, "power/pm_qos_resume_latency_us", path, sizeof(path));
        if (access(path, F_OK) < 0)
                return -ENOENT;
        /* cpu0 often has no "online" file: it cannot go offline. */
        cpu_path(s, cpu, "online", path, sizeof(path));
        if (read_text(path, buf, sizeof(buf)) == 0 && strcmp(buf, "1") != 0)
                return -EHOSTDOWN;
        return 0;
}

static CpuOriginal *find(const CpuSink *s, uint32_t cpu) {
        for (size_t i = 0; i < s->n_originals; i++)
                if (s->originals[i].cpu == cpu)
                        return &s->originals[i];
        return NULL;
}

bool cpu_sink_constrains(const CpuSink *s, uint32_t cpu) {
        return find(s, cpu) != NULL;
}

static int add_original(CpuSink *s, uint32_t cpu, const char *value) {
        CpuOriginal *p = realloc(s->originals, (s->n_originals + 1) * sizeof(CpuOriginal));
        if (!p)
                return -ENOMEM;
        s->originals = p;
        char *copy = strdup(value);
        if (!copy)
                return -ENOMEM;
        s->originals[s->n_originals++] = (CpuOriginal){ .cpu = cpu, .value = copy, .written = PMQOS_LATENCY_NONE };
        return 0;
}

static void forget_original(CpuSink *s, CpuOriginal *o) {
        CpuOriginal *last = &s->originals[s->n_originals - 1];
        free(o->value);
        if (o != last)
                *o = *last;
        s->n_originals--;
}

int cpu_sink_remember(CpuSink *s, uint32_t cpu) {
        char path[512], buf[64];

        if (find(s, cpu))
                return 0;
        cpu_path(s, cpu, "power/pm_qos_resume_latency_us", path, sizeof(path));
        int r = read_text(path, buf, sizeof(buf));
        if (r < 0)
                return r;
        return add_original(s, cpu, buf);
}

int cpu_sink_write(CpuSink *s, uint32_t cpu, int32_t usec) {
        char path[512], text[16];
        CpuOriginal *o = find(s, cpu);
        int r;

        cpu_path(s, cpu, "power/pm_qos_resume_latency_us", path, sizeof(path));
        if (usec < 0) {
                if (!o)
                        return 0;
                r = write_text(path, o->value);
                if (r < 0)
                        return r;
                forget_original(s, o);
                s->n_writes++;
                return 0;
        }

        if (!o)
                return -ESTALE; /* cpu_sink_remember() first */
        if (usec == 0)
                snprintf(text, sizeof(text), "n/a");
        else
                snprintf(text, sizeof(text), "%" PRIi32, usec);
        r = write_text(path, text);
        if (r < 0)
                return r;
        o->written = usec;
        s->n_writes++;
        return 0;
}

int32_t cpu_sink_written(const CpuSink *s, uint32_t cpu) {
        const CpuOriginal *o = find(s, cpu);
        return o ? o->written : PMQOS_LATENCY_NONE;
}

int cpu_sink_restore_originals(CpuSink *s, const CpuOriginal *originals, size_t n) {
        char path[512];
        int ret = 0;

        for (size_t i = 0; i < n; i++) {
                cpu_path(s, originals[i].cpu, "power/pm_qos_resume_latency_us", path, sizeof(path));
                int r = write_text(path, originals[i].value);
                if (r < 0 && r != -ENOENT && ret == 0)
                        ret = r; /* a CPU that is gone has nothing to restore */
        }
        return ret;
}

int cpu_sink_restore_all(CpuSink *s) {
        char path[512];
        int ret = 0;

        for (size_t i = 0; i < s->n_originals; i++) {
                cpu_path(s, s->originals[i].cpu, "power/pm_qos_resume_latency_us", path, sizeof(path));
                int r = write_text(path, s->originals[i].value);
                if (r < 0 && ret == 0)
                        ret = r;
                s->n_writes++;
                free(s->originals[i].value);
        }
        free(s->originals);
        s->originals = NULL;
        s->n_originals = 0;
        return ret;
}
