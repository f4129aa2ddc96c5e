// SPDX-License-Identifier: LGPL-2.1-or-later
/* The stand-in's requests: RequestFor(pidfd of the opener) on a connection
 * of the server's own, which has the invoking user's credentials. pmqosd
 * authorizes, limits and audits that user; a target of another user would
 * need request-latency-for-others (and the server serves that user's opens
 * only, so it never asks). Libpmqos has no RequestFor yet: these calls go
 * through sd-bus directly; cpu_dma's machine value through libpmqos.
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
#include <stdio.h>
#include <string.h>
#include <systemd/sd-bus.h>

#define LATENCY_MAX 2000000000
#define BUS_NAME "org.freedesktop.PMQoS"
#define OBJECT_PATH "/org/freedesktop/PMQoS"
#define NATIVE_IFACE "org.freedesktop.PMQoS"
#define QOS_IFACE "org.freedesktop.UPower.QoS"

static const char *const type_names[] = { [STANDIN_CPU_DMA] = "cpu_dma", [STANDIN_CPU_WAKEUP] = "cpu_wakeup" };
static const char *const device_paths[] = {
        [STANDIN_CPU_DMA] = "/dev/cpu_dma_latency", [STANDIN_CPU_WAKEUP] = "/dev/cpu_wakeup_latency"
};

/* libpmqos's errors for the broker's answers (libpmqos(3)). */
static int failed(standin_backend *b, sd_bus_error *e, int r) {
        snprintf(b->error, sizeof(b->error), "%s", e->message ? e->message : strerror(-r));
        if (sd_bus_error_has_name(e, SD_BUS_ERROR_LIMITS_EXCEEDED))
                r = -EUSERS;
        else if (sd_bus_error_has_names(e, SD_BUS_ERROR_ACCESS_DENIED, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED))
                r = -EACCES;
        else if (sd_bus_error_has_name(e, "org.freedesktop.PMQoS.Error.NoSuchRequest"))
                r = -ENOENT;
        else if (sd_bus_error_has_name(e, SD_BUS_ERROR_NOT_SUPPORTED))
                r = -ENODEV; /* no device of that type in the broker */
        sd_bus_error_free(e);
        return r;
}

int standin_backend_open(standin_backend *b, standin_device device, int pidfd, pid_t pid, uint32_t *ret_cookie) {
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
                snprintf(reason, sizeof(reason), "stand-in %s of pid %d", device_paths[device], (int) pid);
        r = sd_bus_call_method(b->bus, BUS_NAME, OBJECT_PATH, NATIVE_IFACE, "RequestFor", &e, &reply, "siha{sv}",
                               type_names[device], PMQOS_LATENCY_NONE, pidfd, 1, "reason", "s", reason);
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

/* GetLatency(type): what the broker asks of that type's device. */
static int broker_value(standin_backend *b, standin_device device, int32_t *ret) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        if (!b->bus)
                return -ENOTCONN;
        int r = sd_bus_call_method(b->bus, BUS_NAME, OBJECT_PATH, QOS_IFACE, "GetLatency", &e, &reply, "s",
                                   type_names[device]);
        if (r < 0)
                return failed(b, &e, r);
        r = sd_bus_message_read(reply, "i", ret);
        sd_bus_message_unref(reply);
        return r < 0 ? r : 0;
}

int standin_backend_machine_value(standin_backend *b, standin_device device, int32_t *ret) {
        int r = device == STANDIN_CPU_DMA ? pmqos_get_kernel_latency(b->client, ret) : broker_value(b, device, ret);
        if (r >= 0 && *ret < 0)
                *ret = LATENCY_MAX; /* nothing constrains: the kernel's default */
        return r;
}

void standin_backend_done(standin_backend *b) {
        b->bus = sd_bus_flush_close_unref(b->bus);
        b->client = pmqos_client_free(b->client);
}
