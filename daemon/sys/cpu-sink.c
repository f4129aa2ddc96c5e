/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* In pm_qos_resume_latency_us, "0" means no constraint and "n/a" means 0 µs
 * (poll only), so a bound of 0 is written as "n/a". */

#include "sys/cpu-sink.h"
#include "util/cpuidle.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/store.h"

static void cpu_path(const CpuSink *s, uint32_t cpu, const char *file, char *buf, size_t size) {
        snprintf(buf, size, "%s/devices/system/cpu/cpu%" PRIu32 "/%s", s->sysfs_root, cpu, file);
}

void cpu_sink_path(const CpuSink *s, uint32_t cpu, char *buf, size_t size) {
        cpu_path(s, cpu, "power/pm_qos_resume_latency_us", buf, size);
}

int cpu_sink_init(CpuSink *s, const char *sysfs_root) {
        char dir[512], path[600];

        *s = (CpuSink){};
        s->sysfs_root = strdup(sysfs_root);
        if (!s->sysfs_root)
                return -ENOMEM;

        snprintf(dir, sizeof(dir), "%s/devices/system/cpu", sysfs_root);
        DIR *d = opendir(dir);
        if (!d)
                return 0; /* no per-CPU files here: per-CPU requests will be refused */
        struct dirent *de;
        while ((de = readdir(d))) {
                char *end;
                if (strncmp(de->d_name, "cpu", 3) != 0 || de->d_name[3] < '0' || de->d_name[3] > '9')
                        continue;
                unsigned long cpu = strtoul(de->d_name + 3, &end, 10);
                if (*end || cpu >= PMQOS_MAX_CPUS)
                        continue;
                if (cpu >= s->n_fds) {
                        uint32_t n = (uint32_t) cpu + 1;
                        int *fds = realloc(s->fds, n * sizeof(int));
                        if (!fds) {
                                closedir(d);
                                return -ENOMEM;
                        }
                        for (uint32_t k = s->n_fds; k < n; k++)
                                fds[k] = -1;
                        s->fds = fds;
                        s->n_fds = n;
                }
                cpu_path(s, (uint32_t) cpu, "power/pm_qos_resume_latency_us", path, sizeof(path));
                s->fds[cpu] = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY);
        }
        closedir(d);
        return 0;
}

void cpu_sink_done(CpuSink *s) {
        for (size_t i = 0; i < s->n_originals; i++)
                free(s->originals[i].value);
        free(s->originals);
        for (uint32_t i = 0; i < s->n_fds; i++)
                if (s->fds[i] >= 0)
                        close(s->fds[i]);
        free(s->fds);
        free(s->sysfs_root);
        *s = (CpuSink){};
}

static int cpu_fd(const CpuSink *s, uint32_t cpu) {
        return cpu < s->n_fds ? s->fds[cpu] : -1;
}

int cpu_sink_read(const CpuSink *s, uint32_t cpu, char *buf, size_t size) {
        int fd = cpu_fd(s, cpu);
        if (fd < 0)
                return -ENOENT;
        ssize_t n = pread(fd, buf, size - 1, 0);
        if (n < 0)
                return -errno;
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
                n--;
        buf[n] = 0;
        return 0;
}

/* A fresh write at offset 0, as "echo >" does; a plain file standing in for
 * sysfs in tests is truncated first. */
static int write_value(CpuSink *s, uint32_t cpu, const char *text) {
        int fd = cpu_fd(s, cpu);
        struct stat st;
        if (fd < 0)
                return -ENOENT;
        s->changes++;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && ftruncate(fd, 0) < 0 && errno != EINVAL &&
            errno != EPERM)
                return -errno;
        size_t len = strlen(text);
        ssize_t n = pwrite(fd, text, len, 0);
        if (n < 0)
                return -errno;
        return (size_t) n == len ? 0 : -EIO;
}

int cpu_sink_check_cpu(const CpuSink *s, uint32_t cpu) {
        char path[512], buf[16];

        if (cpu_fd(s, cpu) < 0)
                return -ENOENT;
        /* cpu0 often has no "online" file: it cannot go offline. */
        cpu_path(s, cpu, "online", path, sizeof(path));
        if (sysfs_read_at(AT_FDCWD, path, buf, sizeof(buf)) >= 0 && strcmp(buf, "1") != 0)
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
        char buf[64];

        if (find(s, cpu))
                return 0;
        int r = cpu_sink_read(s, cpu, buf, sizeof(buf));
        if (r < 0)
                return r;
        return add_original(s, cpu, buf);
}

int cpu_sink_write(CpuSink *s, uint32_t cpu, int32_t usec) {
        char text[16];
        CpuOriginal *o = find(s, cpu);
        int r;

        if (usec < 0) {
                if (!o)
                        return 0;
                r = write_value(s, cpu, o->value);
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
        r = write_value(s, cpu, text);
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

/* What a file holds, as a bound we could have written ("n/a" is 0 µs, "0" no bound). */
static int32_t parse_written(const char *text) {
        char *end;
        if (strcmp(text, "n/a") == 0)
                return 0;
        errno = 0;
        long v = strtol(text, &end, 10);
        if (errno || end == text || *end || v <= 0 || v > PMQOS_CONTRACT_LATENCY_MAX)
                return CPU_WRITTEN_UNKNOWN;
        return (int32_t) v;
}

int cpu_sink_adopt_originals(CpuSink *s, const CpuOriginal *originals, size_t n) {
        char now[64];

        for (size_t i = 0; i < n; i++) {
                uint32_t cpu = originals[i].cpu;
                if (find(s, cpu) || cpu_sink_read(s, cpu, now, sizeof(now)) < 0)
                        continue; /* a CPU that is gone has nothing to give back */
                int r = add_original(s, cpu, originals[i].value);
                if (r < 0)
                        return r;
                s->originals[s->n_originals - 1].written = parse_written(now);
        }
        return 0;
}

void cpu_sink_view_text(const CpuSink *s, uint32_t cpu, const char *text, CpuFileView *ret) {
        *ret = (CpuFileView){};
        snprintf(ret->text, sizeof(ret->text), "%s", text);
        ret->bound = strcmp(ret->text, "0") == 0 ? PMQOS_LATENCY_NONE : parse_written(ret->text);
        const CpuOriginal *o = find(s, cpu);
        ret->foreign = o ? ret->bound != o->written : ret->bound != PMQOS_LATENCY_NONE;
}

int cpu_sink_view(const CpuSink *s, uint32_t cpu, CpuFileView *ret) {
        char text[sizeof(ret->text)];
        *ret = (CpuFileView){};
        int r = cpu_sink_read(s, cpu, text, sizeof(text));
        if (r >= 0)
                cpu_sink_view_text(s, cpu, text, ret);
        return r;
}

int cpu_sink_restore_all(CpuSink *s) {
        int ret = 0;

        for (size_t i = 0; i < s->n_originals; i++) {
                int r = write_value(s, s->originals[i].cpu, s->originals[i].value);
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
