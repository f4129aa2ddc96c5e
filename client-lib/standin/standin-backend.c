// SPDX-License-Identifier: LGPL-2.1-or-later
/* The stand-in's requests: RequestFor(pidfd of the opener) on a connection
 * of the server's own, which has the invoking user's credentials. pmqosd
 * authorizes, limits and audits that user; a target of another user would
 * need request-latency-for-others (and the server serves that user's opens
 * only, so it never asks). Libpmqos has no RequestFor yet: these three calls
 * go through sd-bus directly; the machine's value through libpmqos. */

#include "standin-backend.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-bus.h>

#define LATENCY_MAX 2000000000
#define BUS_NAME "org.freedesktop.PMQoS"
#define OBJECT_PATH "/org/freedesktop/PMQoS"
#define NATIVE_IFACE "org.freedesktop.PMQoS"

/* libpmqos's errors for the broker's answers (libpmqos(3)). */
static int failed(standin_backend *b, sd_bus_error *e, int r) {
        snprintf(b->error, sizeof(b->error), "%s", e->message ? e->message : strerror(-r));
        if (sd_bus_error_has_name(e, SD_BUS_ERROR_LIMITS_EXCEEDED))
                r = -EUSERS;
        else if (sd_bus_error_has_names(e, SD_BUS_ERROR_ACCESS_DENIED, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED))
                r = -EACCES;
        else if (sd_bus_error_has_name(e, "org.freedesktop.PMQoS.Error.NoSuchRequest"))
                r = -ENOENT;
        sd_bus_error_free(e);
        return r;
}

int standin_backend_open(standin_backend *b, int pidfd, pid_t pid, uint32_t *ret_cookie) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        char reason[256];
        int r;
        if (!b->bus && (r = sd_bus_open_system(&b->bus)) < 0) {
                snprintf(b->error, sizeof(b->error), "cannot reach the system bus: %s", strerror(-r));
                return r;
        }
        if (b->reason)
                snprintf(reason, sizeof(reason), "%.200s (pid %d)", b->reason, (int) pid);
        else
                snprintf(reason, sizeof(reason), "stand-in /dev/cpu_dma_latency of pid %d", (int) pid);
        r = sd_bus_call_method(b->bus, BUS_NAME, OBJECT_PATH, NATIVE_IFACE, "RequestFor", &e, &reply, "siha{sv}",
                               "cpu_dma", PMQOS_LATENCY_NONE, pidfd, 1, "reason", "s", reason);
        if (r < 0)
                return failed(b, &e, r);
        r = sd_bus_message_read(reply, "u", ret_cookie);
        sd_bus_message_unref(reply);
        return r < 0 ? r : 0;
}

static int call_u(standin_backend *b, const char *method, const char *sig, uint32_t cookie, int32_t value) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        if (!b->bus)
                return -ENOTCONN;
        int r = sig[1] ? sd_bus_call_method(b->bus, BUS_NAME, OBJECT_PATH, NATIVE_IFACE, method, &e, NULL, sig, cookie,
                                            value)
                       : sd_bus_call_method(b->bus, BUS_NAME, OBJECT_PATH, NATIVE_IFACE, method, &e, NULL, sig, cookie);
        return r < 0 ? failed(b, &e, r) : 0;
}

int standin_backend_set(standin_backend *b, uint32_t cookie, int32_t value) {
        return call_u(b, "Update", "ui", cookie, value);
}

int standin_backend_close(standin_backend *b, uint32_t cookie) {
        return call_u(b, "Cancel", "u", cookie, 0);
}

int standin_backend_machine_value(standin_backend *b, int32_t *ret) {
        int r = pmqos_get_kernel_latency(b->client, ret);
        if (r >= 0 && *ret < 0)
                *ret = LATENCY_MAX; /* nothing constrains: the kernel's default */
        return r;
}

void standin_backend_done(standin_backend *b) {
        b->bus = sd_bus_flush_close_unref(b->bus);
        b->client = pmqos_client_free(b->client);
}
