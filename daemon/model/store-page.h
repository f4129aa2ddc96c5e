/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One page of the store in cookie order, as ListRequestsPage() lists it:
 * picked in one pass with a bounded heap, never a sort of the whole store. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "model/store.h"

/* The most a page holds, and what a page size of 0 means. */
#define STORE_PAGE_MAX 1024u
#define STORE_PAGE_DEFAULT 256u

/* The page size a caller's max asks for: 0 → STORE_PAGE_DEFAULT, above
 * STORE_PAGE_MAX → STORE_PAGE_MAX. */
size_t store_page_size(uint32_t max);

/* The requests of s whose cookie is greater than after, ascending, at most
 * max of them (max <= STORE_PAGE_MAX), written to page (room for max);
 * *ret_n: how many; *ret_next: the last one's cookie when more follow it,
 * else 0. O(n log max) for n requests. */
void store_page(const Store *s, uint32_t after, size_t max, const Request **page, size_t *ret_n, uint32_t *ret_next);
