/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* store-page.h: a max-heap of the max smallest cookies above after seen so
 * far; a request smaller than its top replaces the top. */

#include "model/store-page.h"

#include <assert.h>

size_t store_page_size(uint32_t max) {
        if (max == 0)
                return STORE_PAGE_DEFAULT;
        return max > STORE_PAGE_MAX ? STORE_PAGE_MAX : max;
}

static void swap(const Request **a, const Request **b) {
        const Request *t = *a;
        *a = *b;
        *b = t;
}

/* Restores the max-heap below i (page[0] holds the greatest cookie). */
static void sift_down(const Request **page, size_t n, size_t i) {
        for (;;) {
                size_t l = 2 * i + 1, r = l + 1, top = i;
                if (l < n && page[l]->cookie > page[top]->cookie)
                        top = l;
                if (r < n && page[r]->cookie > page[top]->cookie)
                        top = r;
                if (top == i)
                        return;
                swap(&page[i], &page[top]);
                i = top;
        }
}

static void sift_up(const Request **page, size_t i) {
        while (i > 0 && page[(i - 1) / 2]->cookie < page[i]->cookie) {
                swap(&page[i], &page[(i - 1) / 2]);
                i = (i - 1) / 2;
        }
}

void store_page(const Store *s, uint32_t after, size_t max, const Request **page, size_t *ret_n, uint32_t *ret_next) {
        size_t n = 0;
        bool more = false; /* a cookie above after was left out */

        assert(s && ret_n && ret_next && (max == 0 || page));
        STORE_FOREACH(req, s) {
                if (req->cookie <= after)
                        continue;
                if (n < max) {
                        page[n] = req;
                        sift_up(page, n++);
                        continue;
                }
                more = true;
                if (max > 0 && req->cookie < page[0]->cookie) {
                        page[0] = req;
                        sift_down(page, n, 0);
                }
        }
        /* Heapsort in place: the greatest goes last, the heap shrinks. */
        for (size_t k = n; k > 1; k--) {
                swap(&page[0], &page[k - 1]);
                sift_down(page, k - 1, 0);
        }
        *ret_n = n;
        *ret_next = more && n > 0 ? page[n - 1]->cookie : 0;
}
