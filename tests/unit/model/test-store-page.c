/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the store's pages: every cookie once, ascending, across
 * pages of any size; the page size rule; the end of the listing. */

#include <stdlib.h>

#include "model/store-page.h"
#include "unit.h"

static void fill(Store *s, RequestOwner *o, size_t n) {
        store_init(s, 7);
        for (size_t i = 0; i < n; i++) {
                Request *r = request_new(s);
                ck_assert_ptr_nonnull(r);
                r->value = 100;
                ck_assert_int_eq(store_add(s, r, o), 0);
        }
}

static int cmp_u32(const void *a, const void *b) {
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
        return (x > y) - (x < y);
}

/* Every cookie of s, ascending, in a fresh array of store_size(s). */
static uint32_t *sorted_cookies(const Store *s) {
        uint32_t *all = calloc(store_size(s) + 1, sizeof(uint32_t));
        size_t n = 0;
        ck_assert_ptr_nonnull(all);
        STORE_FOREACH(req, s)
        all[n++] = req->cookie;
        qsort(all, n, sizeof(uint32_t), cmp_u32);
        return all;
}

static void check_walk(size_t n_requests, size_t max) {
        Store s;
        RequestOwner o = {};
        const Request *page[STORE_PAGE_MAX];
        fill(&s, &o, n_requests);
        uint32_t *all = sorted_cookies(&s);
        size_t seen = 0, pages = 0;
        uint32_t after = 0;

        for (;;) {
                size_t n;
                uint32_t next;
                store_page(&s, after, max, page, &n, &next);
                ck_assert_uint_le(n, max);
                for (size_t i = 0; i < n; i++) {
                        ck_assert_uint_lt(seen, n_requests);
                        ck_assert_uint_eq(page[i]->cookie, all[seen++]);
                }
                pages++;
                if (next == 0)
                        break;
                ck_assert_uint_eq(n, max); /* only a full page says more follow */
                ck_assert_uint_eq(next, page[n - 1]->cookie);
                after = next;
        }
        ck_assert_uint_eq(seen, n_requests);
        ck_assert_uint_eq(pages, n_requests == 0 ? 1 : (n_requests + max - 1) / max);
        free(all);
        store_done(&s);
}

START_TEST(test_walks) {
        check_walk(0, 5);
        check_walk(1, 1);
        check_walk(300, 64);
        check_walk(256, 256); /* exactly one full page: next is 0 */
        check_walk(257, 256);
        check_walk(1000, 1);
        check_walk(3000, STORE_PAGE_MAX);
}
END_TEST

START_TEST(test_after_last_and_between) {
        Store s;
        RequestOwner o = {};
        const Request *page[8];
        size_t n;
        uint32_t next;
        fill(&s, &o, 50);
        uint32_t *all = sorted_cookies(&s);

        store_page(&s, all[49], 8, page, &n, &next);
        ck_assert_uint_eq(n, 0);
        ck_assert_uint_eq(next, 0);
        store_page(&s, UINT32_MAX, 8, page, &n, &next);
        ck_assert_uint_eq(n, 0);
        ck_assert_uint_eq(next, 0);

        /* after need not be a live cookie: the page starts above it. */
        store_page(&s, all[10] + 1 == all[11] ? all[10] : all[10] + 1, 8, page, &n, &next);
        ck_assert_uint_eq(n, 8);
        ck_assert_uint_eq(page[0]->cookie, all[11]);
        ck_assert_uint_eq(next, all[18]);

        store_page(&s, all[45], 8, page, &n, &next);
        ck_assert_uint_eq(n, 4);
        ck_assert_uint_eq(next, 0);
        free(all);
        store_done(&s);
}
END_TEST

START_TEST(test_page_size) {
        ck_assert_uint_eq(store_page_size(0), STORE_PAGE_DEFAULT);
        ck_assert_uint_eq(store_page_size(1), 1);
        ck_assert_uint_eq(store_page_size(64), 64);
        ck_assert_uint_eq(store_page_size(STORE_PAGE_MAX), STORE_PAGE_MAX);
        ck_assert_uint_eq(store_page_size(STORE_PAGE_MAX + 1), STORE_PAGE_MAX);
        ck_assert_uint_eq(store_page_size(UINT32_MAX), STORE_PAGE_MAX);
}
END_TEST

int main(void) {
        Suite *s = suite_create("store-page");
        TCase *tc = tcase_create("core");
        tcase_add_test(tc, test_walks);
        tcase_add_test(tc, test_after_last_and_between);
        tcase_add_test(tc, test_page_size);
        suite_add_tcase(s, tc);

        return unit_run(s, CK_FORK_GETENV);
}
