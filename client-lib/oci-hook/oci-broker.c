/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* RequestFor() goes out through sd-bus here (libpmqos has no call for it
 * yet); listing and cancelling use libpmqos. Nothing here prints. */

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "dbus/contract.h"
#include "oci-broker.h"
#include "pmqos.h"

static int append_options(sd_bus_message *m, const OciPlan *plan) {
        int r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0)
                r = sd_bus_message_append(m, "{sv}", "reason", "s", plan->reason);
        if (r >= 0 && plan->n_cpus > 0) {
                r = sd_bus_message_open_container(m, 'e', "sv");
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", "cpus");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'v', "au");
                if (r >= 0)
                        r = sd_bus_message_append_array(m, 'u', plan->cpus, plan->n_cpus * sizeof(uint32_t));
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

int oci_request_for(int target, const OciPlan *plan, uint32_t *ret_cookie, char *err, size_t size) {
        sd_bus *bus = NULL;
        sd_bus_message *m = NULL, *reply = NULL;
        sd_bus_error e = SD_BUS_ERROR_NULL;

        int r = sd_bus_open_system(&bus);
        if (r < 0) {
                snprintf(err, size, "no system bus: %s", strerror(-r));
                return r;
        }
        r = sd_bus_message_new_method_call(bus, &m, PMQOS_BUS_NAME, PMQOS_OBJECT_PATH, PMQOS_NATIVE_INTERFACE,
                                           "RequestFor");
        if (r >= 0)
                r = sd_bus_message_append(m, "sih", "cpu_dma", plan->usec, target);
        if (r >= 0)
                r = append_options(m, plan);
        if (r < 0)
                snprintf(err, size, "cannot build the call: %s", strerror(-r));
        else {
                r = sd_bus_call(bus, m, OCI_CALL_TIMEOUT_USEC, &e, &reply);
                if (r < 0)
                        snprintf(err, size, "%s", e.message ? e.message : strerror(-r));
                else if ((r = sd_bus_message_read(reply, "u", ret_cookie)) < 0)
                        snprintf(err, size, "the broker's answer is not a cookie");
        }
        sd_bus_error_free(&e);
        sd_bus_message_unref(reply);
        sd_bus_message_unref(m);
        sd_bus_flush_close_unref(bus);
        return r;
}

int oci_cancel_container(const char *id, char *err, size_t size) {
        pmqos_client *c = NULL;
        pmqos_request_info *infos = NULL;
        size_t n = 0;

        int r = pmqos_client_new(&c);
        if (r == -ECONNREFUSED || r == -EHOSTDOWN)
                return 0; /* no broker: nothing of the container is held */
        if (r >= 0)
                r = pmqos_list_requests(c, &infos, &n);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                if (infos[i].uid != (uint32_t) getuid() || !oci_reason_matches(infos[i].reason, id))
                        continue;
                int k = pmqos_cancel(c, infos[i].cookie);
                if (k < 0 && k != -ENOENT)
                        r = k; /* ended meanwhile (the container died): fine */
        }
        if (r < 0)
                snprintf(err, size, "%s", c && pmqos_client_last_error(c) ? pmqos_client_last_error(c) : strerror(-r));
        if (r == -ECONNREFUSED || r == -EHOSTDOWN)
                r = 0;
        pmqos_request_info_free(infos, n);
        pmqos_client_free(c);
        return r;
}
