/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Requests not bound to the client's connection: Hold() (bound to a
 * descriptor the caller gets) and RequestFor() (bound to a pidfd or a cgroup
 * v2 directory), of either request type; GetLatency() of a type. The
 * broker keeps them itself; the client does not record them for re-issue
 * after a broker restart (the broker's fd store does). */

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "libpmqos-thread.h"

typedef struct ForArgs {
        RequestArgs a;
        const char *type;
        int target;
} ForArgs;

/* The contract's name of a request type, or NULL. */
static const char *type_name(pmqos_type type) {
        switch (type) {
        case PMQOS_TYPE_CPU_DMA:
                return "cpu_dma";
        case PMQOS_TYPE_CPU_WAKEUP:
                return "cpu_wakeup";
        }
        return NULL;
}

static int append_hold(sd_bus_message *m, const void *data) {
        const RequestArgs *a = data;
        int r = sd_bus_message_append(m, "si", "cpu_dma", a->value);
        return r < 0 ? r : client_append_options(m, a);
}

static int append_for(sd_bus_message *m, const void *data) {
        const ForArgs *f = data;
        int r = sd_bus_message_append(m, "sih", f->type, f->a.value, f->target);
        return r < 0 ? r : client_append_options(m, &f->a);
}

_public_ int pmqos_hold_fd(pmqos_client *c, int32_t usec, const char *reason, uint32_t timeout_sec,
                           const uint32_t *cpus, size_t n_cpus, uint32_t *ret_cookie, int *ret_fd) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        uint32_t cookie;
        int fd, r;

        if (ret_cookie)
                *ret_cookie = 0;
        if (ret_fd)
                *ret_fd = -1;
        CLIENT_ENTER(c, !ret_cookie || !ret_fd || (n_cpus > 0 && !cpus));
        RequestArgs a = { .value = usec, .reason = reason, .timeout_sec = timeout_sec, .cpus = cpus, .n_cpus = n_cpus };
        r = client_call(c, NATIVE_IFACE, "Hold", &reply, append_hold, &a);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "uh", &cookie, &fd);
        if (r < 0)
                return client_map_error(c, NULL, r);
        /* The message owns fd: ours is a copy, close-on-exec like any other. */
        int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (copy < 0)
                return -errno;
        *ret_cookie = cookie;
        *ret_fd = copy;
        return 0;
}

_public_ int pmqos_request_for_fd_type(pmqos_client *c, pmqos_type type, int32_t usec, int target_fd,
                                       const char *reason, uint32_t timeout_sec, const uint32_t *cpus, size_t n_cpus,
                                       uint32_t *ret_cookie) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        if (ret_cookie)
                *ret_cookie = 0;
        CLIENT_ENTER(c, !ret_cookie || target_fd < 0 || (n_cpus > 0 && !cpus) || !type_name(type));
        ForArgs f = {
                .a = { .value = usec, .reason = reason, .timeout_sec = timeout_sec, .cpus = cpus, .n_cpus = n_cpus },
                .type = type_name(type),
                .target = target_fd
        };
        r = client_call(c, NATIVE_IFACE, "RequestFor", &reply, append_for, &f);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "u", ret_cookie);
        return r < 0 ? client_map_error(c, NULL, r) : 0;
}

_public_ int pmqos_request_for_fd(pmqos_client *c, int32_t usec, int target_fd, const char *reason,
                                  uint32_t timeout_sec, const uint32_t *cpus, size_t n_cpus, uint32_t *ret_cookie) {
        return pmqos_request_for_fd_type(c, PMQOS_TYPE_CPU_DMA, usec, target_fd, reason, timeout_sec, cpus, n_cpus,
                                         ret_cookie);
}

_public_ int pmqos_request_for_pidfd(pmqos_client *c, int32_t usec, int pidfd, const char *reason, uint32_t timeout_sec,
                                     const uint32_t *cpus, size_t n_cpus, uint32_t *ret_cookie) {
        return pmqos_request_for_fd(c, usec, pidfd, reason, timeout_sec, cpus, n_cpus, ret_cookie);
}

_public_ int pmqos_request_for_cgroup(pmqos_client *c, int32_t usec, const char *path, const char *reason,
                                      uint32_t timeout_sec, const uint32_t *cpus, size_t n_cpus, uint32_t *ret_cookie) {
        if (ret_cookie)
                *ret_cookie = 0;
        if (!path)
                return -EINVAL;
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = pmqos_request_for_fd(c, usec, fd, reason, timeout_sec, cpus, n_cpus, ret_cookie);
        close(fd);
        return r;
}

static int append_type(sd_bus_message *m, const void *data) {
        return sd_bus_message_append(m, "s", (const char *) data);
}

_public_ int pmqos_get_latency_type(pmqos_client *c, pmqos_type type, int32_t *ret_usec) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;

        CLIENT_ENTER(c, !ret_usec || !type_name(type));
        int r = client_call(c, QOS_IFACE, "GetLatency", &reply, append_type, type_name(type));
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "i", ret_usec);
        return r < 0 ? client_map_error(c, NULL, r == -ENOMEM ? r : -EBADMSG) : 0;
}
