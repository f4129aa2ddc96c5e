/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The container as the kernel sees it. The init's pid comes from the
 * runtime, which is its parent and has not reaped it at createRuntime, so a
 * pidfd opened now is that process; everything else is read through the
 * pidfd's process while it is checked still alive. */

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "oci-state.h"
#include "oci-target.h"
#include "util/cgroup2.h"
#include "util/cpu-list.h"
#include "util/file-io.h"

/* The unified hierarchy's path of a /proc/PID/cgroup text ("0::/a/b"). */
static bool unified_path(const char *text, char *out, size_t size) {
        const char *p = strstr(text, "0::/");
        if (!p || (p != text && p[-1] != '\n'))
                return false;
        p += 3;
        size_t n = strcspn(p, "\n");
        if (n >= size)
                return false;
        memcpy(out, p, n);
        out[n] = 0;
        return true;
}

static int open_cgroup(int pid) {
        char path[64], text[4096], mine[4096], cg[2048], self[2048];
        snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
        if (read_small_at(AT_FDCWD, path, text, sizeof(text)) < 0 ||
            read_small_at(AT_FDCWD, "/proc/self/cgroup", mine, sizeof(mine)) < 0 ||
            !unified_path(text, cg, sizeof(cg)) || !unified_path(mine, self, sizeof(self)))
                return -1;
        /* The runtime's own cgroup, or the root, is not the container's. */
        if (strcmp(cg, self) == 0 || strcmp(cg, "/") == 0)
                return -1;
        return cgroup2_open(cg);
}

int oci_target_open(int pid, int *ret_pidfd, int *ret_cgroup_fd, char *err, size_t size) {
        *ret_pidfd = *ret_cgroup_fd = -1;
        if (pid <= 0) {
                snprintf(err, size, "the OCI state has no \"pid\" of the container's init");
                return -EINVAL;
        }
        int pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0) {
                int e = errno;
                snprintf(err, size, "the container's init (pid %d) is gone: %s", pid, strerror(e));
                return -e;
        }
        int cg = open_cgroup(pid);
        /* Read while the process lived: its cgroup was that of this pid. */
        if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0) {
                int e = errno;
                if (cg >= 0)
                        close(cg);
                close(pidfd);
                snprintf(err, size, "the container's init (pid %d) is gone: %s", pid, strerror(e));
                return -e;
        }
        *ret_pidfd = pidfd;
        *ret_cgroup_fd = cg;
        return 0;
}

static int affinity_cpus(int pid, char *buf, size_t size) {
        cpu_set_t set;
        if (sched_getaffinity(pid, sizeof(set), &set) < 0)
                return -errno;
        size_t len = 0;
        buf[0] = 0;
        for (int i = 0; i < CPU_SETSIZE && len + 8 < size; i++)
                if (CPU_ISSET(i, &set))
                        len += (size_t) snprintf(buf + len, size - len, "%s%d", len ? "," : "", i);
        return 0;
}

int oci_container_cpus(const char *config_cpus, int cgroup_fd, int pid, uint32_t **ret, size_t *ret_n, char *err,
                       size_t size) {
        char buf[8192];
        const char *from = "linux.resources.cpu.cpus";
        const char *text = config_cpus;
        if (!text || !text[0]) {
                text = buf;
                from = "cpuset.cpus.effective";
                if (cgroup_fd < 0 || read_small_at(cgroup_fd, "cpuset.cpus.effective", buf, sizeof(buf)) < 0 ||
                    !buf[strspn(buf, " \n")]) {
                        from = "the init's CPU affinity";
                        int r = affinity_cpus(pid, buf, sizeof(buf));
                        if (r < 0) {
                                snprintf(err, size, "cannot tell the container's CPUs: %s", strerror(-r));
                                return r;
                        }
                }
                buf[strcspn(buf, " \n")] = 0;
        }
        if (cpu_list_parse(text, ret, ret_n) < 0) {
                char shown[41];
                snprintf(err, size, "the container's CPUs (%s \"%s\") are not a CPU list", from,
                         oci_shown(text, shown, sizeof(shown)));
                return -EINVAL;
        }
        return 0;
}
