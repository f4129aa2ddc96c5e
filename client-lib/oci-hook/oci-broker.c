/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The hook's two conversations with pmqosd, through libpmqos: RequestFor
 * the container's cgroup or init, and the cancel of what its poststop finds
 * still held. Nothing here prints. */

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "oci-broker.h"
#include "pmqos.h"

/* The broker's sentence for the failure r on c (or libpmqos's for r). */
static int broker_failed(pmqos_client *c, int r, char *err, size_t size) {
        const char *why = c ? pmqos_client_last_error(c) : NULL;
        snprintf(err, size, "%s", why ? why : pmqos_strerror(r));
        return r;
}

int oci_request_for(int target, const OciPlan *plan, uint32_t *ret_cookie, char *err, size_t size) {
        pmqos_client *c = NULL;
        int r = pmqos_client_new(&c);
        if (r >= 0)
                r = pmqos_client_set_timeout(c, OCI_CALL_TIMEOUT_USEC);
        if (r >= 0)
                r = pmqos_request_for_fd(c, plan->usec, target, plan->reason, 0, plan->cpus, plan->n_cpus, ret_cookie);
        if (r < 0)
                broker_failed(c, r, err, size);
        pmqos_client_free(c); /* a RequestFor request ends with its target, not with c */
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
                broker_failed(c, r, err, size);
        if (r == -ECONNREFUSED || r == -EHOSTDOWN)
                r = 0;
        pmqos_request_info_free(infos, n);
        pmqos_client_free(c);
        return r;
}
