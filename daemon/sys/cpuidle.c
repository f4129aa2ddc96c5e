/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One directory descriptor per state, files read with openat(): a few
 * syscalls per file, no path built per file. */

#include "sys/cpuidle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/text.h"

#define CPUIDLE_NAME_MAX 64u

int sysfs_read_at(int dir, const char *name, char *buf, size_t size) {
        int fd = openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
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
        return (int) n;
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
