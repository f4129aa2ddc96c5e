// SPDX-License-Identifier: LGPL-2.1-or-later
/* The stand-in's requests, through libpmqos on the server's one client:
 * RequestFor(pidfd of the opener) of the device's type, Update, Cancel. The
 * connection has the invoking user's credentials: pmqosd authorizes, limits
 * and audits that user; a target of another user would need
 * request-latency-for-others (and the server serves that user's opens
 * only, so it never asks).
 *
 * The machine's cpu_wakeup value: pmqosd has no KernelLatency for it; the
 * wakeup device's own read-back is only in Explain()'s wakeup_kernel, which
 * costs a scan of every process's descriptors and is refused beyond a few
 * waiting calls per user: no price for a read(). So a read of the wakeup
 * stand-in gives GetLatency("cpu_wakeup"), the value pmqosd writes to that
 * device (floor included; -1, nothing asked, is the kernel's 2000000000).
 * It differs from the kernel's own read only while a program outside
 * pmqosd holds the real device with a stricter value. */

#include "standin-backend.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dbus/contract.h"
#include "util/file-io.h"
#include "util/macro.h"
#include "util/text.h"

static const pmqos_type types[] = {
        [STANDIN_CPU_DMA] = PMQOS_TYPE_CPU_DMA, [STANDIN_CPU_WAKEUP] = PMQOS_TYPE_CPU_WAKEUP
};
static const char *const device_paths[] = {
        [STANDIN_CPU_DMA] = "/dev/cpu_dma_latency", [STANDIN_CPU_WAKEUP] = "/dev/cpu_wakeup_latency"
};

/* Keeps the broker's sentence for the failure r. */
static int failed(standin_backend *b, int r) {
        const char *why = b->client ? pmqos_client_last_error(b->client) : NULL;
        snprintf(b->error, sizeof(b->error), "%s", why ? why : pmqos_strerror(r));
        return r;
}

/* The systemd unit of a cgroup v2 path ("/system.slice/tuned.service/x"):
 * its first component that is no slice, if that names a service or a
 * scope (as systemd's cg_path_get_unit()); else "". */
static void unit_of_cgroup(const char *path, char *unit, size_t size) {
        unit[0] = 0;
        for (const char *c = path; *c;) {
                c += strspn(c, "/");
                size_t n = strcspn(c, "/");
                if (n > 6 && strncmp(c + n - 6, ".slice", 6) == 0) {
                        c += n;
                        continue;
                }
                bool named = (n > 8 && strncmp(c + n - 8, ".service", 8) == 0) ||
                             (n > 6 && strncmp(c + n - 6, ".scope", 6) == 0);
                if (named && n < size)
                        snprintf(unit, size, "%.*s", (int) n, c);
                return;
        }
}

/* The opener's comm and unit, for the reason that names it (who opened,
 * not the stand-in's server): ", " and the unit when it has one; read
 * while the pidfd shows that pid is still the opener. Each cleaned for
 * the bus (comm is any bytes). */
static void opener_names(int pidfd, pid_t pid, char **comm, char **unit) {
        char path[64], buf[4096], u[256] = "";
        snprintf(path, sizeof(path), "/proc/%d/comm", (int) pid);
        ssize_t n = read_small_at(AT_FDCWD, path, buf, sizeof(buf));
        *comm = n > 0 ? text_clean(buf, strcspn(buf, "\n"), 64) : NULL;
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int) pid);
        if (read_small_at(AT_FDCWD, path, buf, sizeof(buf)) > 0) {
                char *v2 = strncmp(buf, "0::", 3) == 0 ? buf : strstr(buf, "\n0::"); /* the v2 line */
                if (v2) {
                        v2 += (*v2 == '\n') + 3;
                        v2[strcspn(v2, "\n")] = 0;
                        unit_of_cgroup(v2, u, sizeof(u));
                }
        }
        *unit = u[0] ? text_clean(u, strlen(u), 256) : NULL;
        if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0) { /* gone: that pid may be another's */
                free(*comm);
                free(*unit);
                *comm = *unit = NULL;
        }
}

int standin_backend_open(standin_backend *b, standin_device device, int pidfd, pid_t pid, uint32_t *ret_cookie) {
        char reason[512];
        _cleanup_(freep) char *comm = NULL;
        _cleanup_(freep) char *unit = NULL;
        opener_names(pidfd, pid, &comm, &unit);
        const char *c = comm ? comm : "?", *sep = unit ? ", " : "", *u = unit ? unit : "";
        if (b->reason)
                snprintf(reason, sizeof(reason), "%.200s (%s, pid %d%s%s)", b->reason, c, (int) pid, sep, u);
        else
                snprintf(reason, sizeof(reason), "stand-in %s of %s (pid %d%s%s)", device_paths[device], c, (int) pid,
                         sep, u);
        reason[utf8_fit(reason, strnlen(reason, PMQOS_REASON_MAX))] = 0; /* the contract's bound, UTF-8 whole */
        bool dma = device == STANDIN_CPU_DMA;                            /* cpu_wakeup has no per-CPU form */
        int r = pmqos_request_for_fd_type(b->client, types[device], PMQOS_LATENCY_NONE, pidfd, reason, 0,
                                          dma ? b->cpus : NULL, dma ? b->n_cpus : 0, ret_cookie);
        if (r == -EOPNOTSUPP)
                return -ENODEV; /* no device of that type in the broker */
        return r < 0 ? failed(b, r) : 0;
}

int standin_backend_set(standin_backend *b, uint32_t cookie, int32_t value) {
        if (value >= 0 && value < b->clamp)
                value = b->clamp; /* cyclictest and DPDK write 0 µs whatever they need */
        int r = pmqos_update(b->client, cookie, value);
        return r < 0 ? failed(b, r) : 0;
}

int standin_backend_close(standin_backend *b, uint32_t cookie) {
        int r = pmqos_cancel(b->client, cookie);
        return r < 0 ? failed(b, r) : 0;
}

int standin_backend_machine_value(standin_backend *b, standin_device device, int32_t *ret) {
        int r = device == STANDIN_CPU_DMA ? pmqos_get_kernel_latency(b->client, ret)
                                          : pmqos_get_latency_type(b->client, types[device], ret);
        if (r < 0)
                return failed(b, r);
        if (*ret < 0)
                *ret = PMQOS_LATENCY_MAX; /* nothing constrains: the kernel's default */
        return 0;
}

void standin_backend_done(standin_backend *b) {
        b->client = pmqos_client_free(b->client);
}
