/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The hook's two conversations with pmqosd. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "oci-state.h"

#define OCI_CALL_TIMEOUT_USEC (4 * 1000000ULL) /* one bus call; the whole hook is bounded by its alarm */

/* RequestFor(cpu_dma, plan->usec, target, {reason, cpus}). 0 with the
 * cookie, or a negative errno with the broker's (or the bus's) sentence. */
int oci_request_for(int target, const OciPlan *plan, uint32_t *ret_cookie, char *err, size_t err_size);
/* Cancels every request of this uid whose reason is the container's. No
 * broker, nothing listed, a request that ended meanwhile: 0. */
int oci_cancel_container(const char *id, char *err, size_t err_size);
