/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Opening a cgroup by its path in the unified hierarchy, through whichever
 * cgroup2 mount this mount namespace has. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/cgroup2.h"

#define MOUNTS_TRIED 8

int cgroup2_open(const char *cg) {
        char line[4096], mnts[MOUNTS_TRIED][2048], full[4200];
        int n = 0, fd = -1, e = ENOENT;

        FILE *f = fopen("/proc/self/mountinfo", "re");
        while (f && fgets(line, sizeof(line), f)) {
                char root[2048];
                if (strstr(line, " - cgroup2 ") &&
                    sscanf(line, "%*s %*s %*s %2047s %2047s", root, mnts[n % MOUNTS_TRIED]) == 2 &&
                    strcmp(root, "/") == 0)
                        n++;
        }
        if (f)
                fclose(f);
        for (int i = n - 1; i >= 0 && i >= n - MOUNTS_TRIED && fd < 0; i--) {
                if (snprintf(full, sizeof(full), "%s%s", mnts[i % MOUNTS_TRIED], cg) >= (int) sizeof(full)) {
                        e = ENAMETOOLONG;
                        continue;
                }
                fd = open(full, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        e = errno;
        }
        if (fd < 0)
                errno = e;
        return fd;
}
