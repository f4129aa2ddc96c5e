/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One directory descriptor per state, files read with openat(): a few
 * syscalls per file, no path built per file. */

#include "util/cpuidle.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util/file-io.h"
#include "util/text.h"

#define CPUIDLE_NAME_MAX 64u

static int trimmed(char *buf, ssize_t n) {
        if (n < 0)
                return (int) n;
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
                n--;
        buf[n] = 0;
        return (int) n;
}

int sysfs_read_at(int dir, const char *name, char *buf, size_t size) {
        return trimmed(buf, read_small_at(dir, name, buf, size));
}

int sysfs_read_fd(int fd, char *buf, size_t size) {
        return trimmed(buf, read_small_fd(fd, buf, size));
}

int cpuidle_parse_u64(const char *text, uint64_t *ret) {
        if (text[0] < '0' || text[0] > '9')
                return -EINVAL;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(text, &end, 10);
        if (errno || *end)
                return -EINVAL;
        *ret = v;
        return 0;
}

static int read_u64(int dir, const char *name, uint64_t *ret) {
        char buf[32] = "";
        int r = sysfs_read_at(dir, name, buf, sizeof(buf));
        return r < 0 ? r : cpuidle_parse_u64(buf, ret);
}

/* 1: read; 0: no such state (the list ends); -ENOMEM. */
static int read_state(int dir, CpuIdleState *st) {
        char name[256] = "";
        uint64_t latency = 0, disable = 0;
        int n = sysfs_read_at(dir, "name", name, sizeof(name));
        if (n < 0 || read_u64(dir, "latency", &latency) < 0 || latency > UINT32_MAX)
                return 0;
        (void) read_u64(dir, "disable", &disable); /* absent before Linux 5.5's per-state flag: not disabled */
        (void) read_u64(dir, "usage", &st->usage);
        (void) read_u64(dir, "time", &st->time);
        st->latency = (uint32_t) latency;
        st->disabled = disable != 0;
        st->name = text_clean(name, (size_t) n, CPUIDLE_NAME_MAX);
        return st->name ? 1 : -ENOMEM;
}

int cpuidle_read(const char *sysfs_root, uint32_t cpu, CpuIdle *ret) {
        char path[512];
        *ret = (CpuIdle){};
        snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%u/cpuidle", sysfs_root, (unsigned) cpu);
        int idle = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (idle < 0)
                return 0;
        int r = 0;
        for (unsigned k = 0; k < CPUIDLE_STATES_MAX; k++) {
                char name[16];
                snprintf(name, sizeof(name), "state%u", k);
                int dir = openat(idle, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dir < 0)
                        break;
                CpuIdleState st = {};
                r = read_state(dir, &st);
                close(dir);
                if (r <= 0)
                        break;
                ret->states[ret->n++] = st;
                r = 0;
        }
        close(idle);
        if (r < 0)
                cpuidle_done(ret);
        return r;
}

void cpuidle_done(CpuIdle *idle) {
        for (unsigned k = 0; k < idle->n; k++)
                free(idle->states[k].name);
        *idle = (CpuIdle){};
}

/* The online CPUs' numbers under root, ascending: 0, or -ENOMEM. A CPU
 * without an "online" file counts (cpu0 often has none: it cannot go offline). */
static int online_cpus(const char *root, uint32_t **ret, size_t *ret_n) {
        char path[512], buf[16];
        uint32_t *cpus = NULL;
        size_t n = 0;
        snprintf(path, sizeof(path), "%s/devices/system/cpu", root);
        DIR *d = opendir(path);
        for (struct dirent *de; d && (de = readdir(d));) {
                uint64_t cpu;
                if (strncmp(de->d_name, "cpu", 3) != 0 || cpuidle_parse_u64(de->d_name + 3, &cpu) < 0 ||
                    cpu > UINT32_MAX)
                        continue;
                snprintf(path, sizeof(path), "%s/devices/system/cpu/%s/online", root, de->d_name);
                if (sysfs_read_at(AT_FDCWD, path, buf, sizeof(buf)) >= 0 && strcmp(buf, "1") != 0)
                        continue;
                uint32_t *p = realloc(cpus, (n + 1) * sizeof(uint32_t));
                if (!p) {
                        free(cpus);
                        closedir(d);
                        return -ENOMEM;
                }
                cpus = p;
                cpus[n++] = (uint32_t) cpu;
        }
        if (d)
                closedir(d);
        for (size_t i = 1; i < n; i++) /* insertion sort: a few hundred at most */
                for (size_t j = i; j > 0 && cpus[j - 1] > cpus[j]; j--) {
                        uint32_t t = cpus[j];
                        cpus[j] = cpus[j - 1];
                        cpus[j - 1] = t;
                }
        *ret = cpus;
        *ret_n = n;
        return 0;
}

/* name once into the ", "-separated list names. */
static void add_name(char *names, size_t size, const char *name) {
        size_t len = strlen(name), used = strlen(names);
        for (const char *p = names; (p = strstr(p, name)); p += len)
                if ((p == names || p[-1] == ' ') && (p[len] == ',' || p[len] == 0))
                        return;
        if (used + len + 3 < size)
                snprintf(names + used, size - used, "%s%s", used ? ", " : "", name);
}

int cpuidle_latency_of(const char *sysfs_root, const char *name, uint32_t max, uint32_t *ret, char *names,
                       size_t names_size) {
        uint32_t *cpus;
        size_t n_cpus;
        bool found = false;
        int r = online_cpus(sysfs_root, &cpus, &n_cpus);
        if (r < 0)
                return r;
        names[0] = 0;
        for (size_t i = 0; i < n_cpus && r >= 0; i++) {
                CpuIdle idle;
                r = cpuidle_read(sysfs_root, cpus[i], &idle);
                for (unsigned k = 0; r >= 0 && k < idle.n; k++) {
                        const CpuIdleState *st = &idle.states[k];
                        add_name(names, names_size, st->name);
                        if (strcasecmp(st->name, name) == 0 && st->latency <= max && (!found || st->latency > *ret)) {
                                *ret = st->latency;
                                found = true;
                        }
                }
                if (r >= 0)
                        cpuidle_done(&idle);
        }
        free(cpus);
        if (r < 0)
                return r;
        return found ? 0 : names[0] ? -ENOENT : -ENODEV;
}
