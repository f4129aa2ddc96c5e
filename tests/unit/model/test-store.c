/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the request store and the effective-value rule: owners,
 * cookies, per-CPU heaps, the expiry heap, and churn checked against a
 * brute-force model. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/store.h"
#include "unit.h"

static Request *add(Store *s, RequestOwner *o, int32_t value, uid_t uid, bool persistent) {
        Request *r = request_new(s);
        ck_assert_ptr_nonnull(r);
        r->value = value;
        r->uid = uid;
        r->persistent = persistent;
        ck_assert_int_eq(store_add(s, r, o), 0);
        return r;
}

START_TEST(test_min_and_floor) {
        Store s;
        RequestOwner o = {};

        store_init(&s, 1);
        ck_assert_int_eq(store_min(&s), PMQOS_LATENCY_NONE);

        Request *none = add(&s, &o, PMQOS_LATENCY_NONE, 1, false);
        ck_assert_int_eq(store_min(&s), PMQOS_LATENCY_NONE); /* -1 is listed, never constrains */

        Request *a = add(&s, &o, 100, 1, false);
        Request *zero = add(&s, &o, 0, 1, false);
        ck_assert_int_eq(store_min(&s), 0); /* 0 is the strictest bound, not "ignored" */
        store_remove(&s, zero);
        ck_assert_int_eq(store_min(&s), 100);

        ck_assert_int_eq(effective_latency(100, PMQOS_LATENCY_NONE), 100);
        ck_assert_int_eq(effective_latency(100, 500), 500);
        ck_assert_int_eq(effective_latency(1000, 500), 1000);
        ck_assert_int_eq(effective_latency(PMQOS_LATENCY_NONE, 500), PMQOS_LATENCY_NONE);

        ck_assert_int_eq(store_update(&s, none, 20), 0);
        ck_assert_int_eq(store_min(&s), 20);
        ck_assert_int_eq(store_update(&s, none, PMQOS_LATENCY_NONE), 0);
        ck_assert_int_eq(store_min(&s), 100);
        ck_assert_int_eq(store_update(&s, a, PMQOS_CONTRACT_LATENCY_MAX), 0);
        ck_assert_int_eq(store_min(&s), PMQOS_CONTRACT_LATENCY_MAX);

        ck_assert_uint_eq(store_size(&s), 2);
        ck_assert_uint_eq(o.n_requests, 2);
        store_done(&s);
        ck_assert_uint_eq(o.n_requests, 0);
}
END_TEST

static int n_emptied;

static void count_emptied(RequestOwner *o) {
        (void) o;
        n_emptied++;
}

START_TEST(test_drop_owner) {
        Store s;
        RequestOwner a = {}, b = {};

        store_init(&s, 2);
        add(&s, &a, 10, 1000, false);
        add(&s, &a, 20, 1000, false);
        a.name = ":1.9";
        Request *kept = add(&s, &a, 5, 1000, true);
        ck_assert_str_eq(request_sender(kept), ":1.9");
        Request *timed = request_new(&s);
        timed->value = 1;
        timed->uid = 1000;
        timed->expires_usec = 123;
        ck_assert_int_eq(store_add(&s, timed, &a), 0);
        add(&s, &b, 30, 1001, false);

        ck_assert_int_eq(store_min(&s), 1);
        ck_assert_uint_eq(store_count_uid(&s, 1000), 4);

        /* Persistent and timed requests outlive their owner's connection. */
        ck_assert_uint_eq(store_drop_owner(&s, &a), 4);
        ck_assert_uint_eq(a.n_requests, 0);
        ck_assert_uint_eq(store_size(&s), 3);
        ck_assert_ptr_null(kept->owner);
        ck_assert_str_eq(request_sender(kept), "");
        ck_assert_uint_eq(store_count_uid(&s, 1000), 2);
        ck_assert_int_eq(store_min(&s), 1);

        ck_assert_uint_eq(store_drop_owner(&s, &b), 1);
        ck_assert_uint_eq(store_count_uid(&s, 1001), 0);
        store_done(&s);
}
END_TEST

START_TEST(test_move_requests) {
        Store s;
        RequestOwner a = {}, b = {}, all = {};

        store_init(&s, 7);
        a.emptied = b.emptied = count_emptied;
        n_emptied = 0;
        Request *ra = add(&s, &a, 10, 1000, false);
        Request *rb1 = add(&s, &b, 20, 1000, false);
        Request *rb2 = add(&s, &b, 30, 1000, false);

        /* Two owners' requests, gathered to be dropped as one. */
        store_move_requests(&all, &a);
        store_move_requests(&all, &b);
        ck_assert_uint_eq(a.n_requests + b.n_requests, 0);
        ck_assert_ptr_null(a.head);
        ck_assert_ptr_null(b.head);
        ck_assert_int_eq(n_emptied, 0); /* a move empties nobody */
        ck_assert_uint_eq(all.n_requests, 3);
        ck_assert(ra->owner == &all && rb1->owner == &all && rb2->owner == &all);
        ck_assert_int_eq(store_min(&s), 10);

        ck_assert_uint_eq(store_unplace_owner(&s, &all), 3);
        ck_assert_int_eq(store_min(&s), PMQOS_LATENCY_NONE);
        ck_assert_uint_eq(store_drop_owner(&s, &all), 3);
        ck_assert_uint_eq(store_size(&s), 0);
        ck_assert_int_eq(n_emptied, 0);
        store_done(&s);
}
END_TEST

START_TEST(test_cookies_unique_nonzero) {
        Store s;
        store_init(&s, 3);
        for (int i = 0; i < 5000; i++) {
                Request *r = add(&s, NULL, i, 0, false);
                ck_assert_uint_ne(r->cookie, 0);
                ck_assert_ptr_eq(store_get(&s, r->cookie), r);
        }
        ck_assert_uint_eq(store_size(&s), 5000);
        store_done(&s);
}
END_TEST

/* Random adds, updates, removes and owner drops, checked after every step
 * against a plain array scanned the slow way. */
START_TEST(test_churn_against_model) {
        enum { N_OWNERS = 8, MAX_LIVE = 2000, STEPS = 40000 };
        Store s;
        RequestOwner owners[N_OWNERS] = {};
        Request *live[MAX_LIVE];
        size_t n_live = 0;
        unsigned seed = 12345;

        store_init(&s, 4);
        for (int step = 0; step < STEPS; step++) {
                int op = rand_r(&seed) % 100;
                if ((op < 45 || n_live == 0) && n_live < MAX_LIVE) {
                        int32_t v = rand_r(&seed) % 10 == 0 ? PMQOS_LATENCY_NONE : rand_r(&seed) % 5000;
                        live[n_live++] = add(&s, &owners[rand_r(&seed) % N_OWNERS], v, rand_r(&seed) % 4,
                                             rand_r(&seed) % 8 == 0);
                } else if (op < 70) {
                        size_t i = (size_t) rand_r(&seed) % n_live;
                        int32_t v = rand_r(&seed) % 10 == 0 ? PMQOS_LATENCY_NONE : rand_r(&seed) % 5000;
                        ck_assert_int_eq(store_update(&s, live[i], v), 0);
                } else if (op < 97) {
                        size_t i = (size_t) rand_r(&seed) % n_live;
                        store_remove(&s, live[i]);
                        live[i] = live[--n_live];
                } else {
                        RequestOwner *o = &owners[rand_r(&seed) % N_OWNERS];
                        store_drop_owner(&s, o);
                        /* Rebuild the model from what the store says survived. */
                        n_live = 0;
                        STORE_FOREACH(r, &s)
                        live[n_live++] = r;
                }

                int32_t want = PMQOS_LATENCY_NONE;
                unsigned per_uid[4] = {};
                for (size_t i = 0; i < n_live; i++) {
                        if (live[i]->value >= 0 && (want < 0 || live[i]->value < want))
                                want = live[i]->value;
                        per_uid[live[i]->uid]++;
                        ck_assert_ptr_eq(store_get(&s, live[i]->cookie), live[i]);
                }
                ck_assert_int_eq(store_min(&s), want);
                ck_assert_uint_eq(store_size(&s), n_live);
                for (uid_t u = 0; u < 4; u++)
                        ck_assert_uint_eq(store_count_uid(&s, u), per_uid[u]);
        }
        store_done(&s);
}
END_TEST

START_TEST(test_cpu_heaps) {
        Store s;
        store_init(&s, 7);
        uint32_t c13[] = { 3, 1, 3 }, c2[] = { 2 };

        Request *a = request_new(&s), *b = request_new(&s);
        a->value = 50;
        b->value = 20;
        ck_assert_int_eq(request_set_cpus(a, c13, 3), 0);
        ck_assert_uint_eq(a->n_cpus, 2); /* sorted, unique */
        ck_assert_uint_eq(a->cpus[0], 1);
        ck_assert_uint_eq(a->cpus[1], 3);
        ck_assert_int_eq(request_set_cpus(b, c2, 1), 0);
        ck_assert_int_eq(store_add(&s, a, NULL), 0);
        ck_assert_int_eq(store_add(&s, b, NULL), 0);

        /* Per-CPU requests leave the global minimum alone. */
        ck_assert_int_eq(store_min(&s), PMQOS_LATENCY_NONE);
        ck_assert_int_eq(store_cpu_min(&s, 1), 50);
        ck_assert_int_eq(store_cpu_min(&s, 2), 20);
        ck_assert_int_eq(store_cpu_min(&s, 3), 50);
        ck_assert_int_eq(store_cpu_min(&s, 0), PMQOS_LATENCY_NONE);
        ck_assert_int_eq(store_cpu_min(&s, 5000), PMQOS_LATENCY_NONE);
        ck_assert_int_eq(store_update(&s, a, -1), 0);
        ck_assert_int_eq(store_cpu_min(&s, 1), PMQOS_LATENCY_NONE);
        ck_assert_int_eq(store_update(&s, a, 10), 0);
        ck_assert_int_eq(store_cpu_min(&s, 3), 10);

        /* An inactive request (its CPU is gone) is listed but bounds nothing. */
        Request *gone = request_new(&s);
        uint32_t c9[] = { 9 };
        gone->value = 1;
        gone->inactive = true;
        ck_assert_int_eq(request_set_cpus(gone, c9, 1), 0);
        ck_assert_int_eq(store_add(&s, gone, NULL), 0);
        ck_assert_int_eq(store_cpu_min(&s, 9), PMQOS_LATENCY_NONE);
        ck_assert_int_eq(store_update(&s, gone, 0), 0);
        ck_assert_int_eq(store_cpu_min(&s, 9), PMQOS_LATENCY_NONE);
        ck_assert_uint_eq(store_size(&s), 3);

        store_remove(&s, a);
        ck_assert_int_eq(store_cpu_min(&s, 1), PMQOS_LATENCY_NONE);
        store_done(&s);
}
END_TEST

/* A per-CPU request without a value, first in a store with no CPU heap yet
 * (a state file's): once pointer arithmetic on a NULL heap array (UBSan). */
START_TEST(test_cpu_request_without_value_first) {
        Store s;
        store_init(&s, 9);
        Request *r = request_new(&s);
        uint32_t c4[] = { 4 };
        r->value = PMQOS_LATENCY_NONE;
        ck_assert_int_eq(request_set_cpus(r, c4, 1), 0);
        ck_assert_int_eq(store_add(&s, r, NULL), 0);
        ck_assert_int_eq(store_cpu_min(&s, 4), PMQOS_LATENCY_NONE);
        ck_assert_int_eq(store_update(&s, r, 30), 0);
        ck_assert_int_eq(store_cpu_min(&s, 4), 30);
        store_done(&s);
}
END_TEST

START_TEST(test_expiry_heap) {
        Store s;
        store_init(&s, 9);
        int64_t deadlines[] = { 500, 100, 300, 0, 200 };
        Request *r[5];

        for (int i = 0; i < 5; i++) {
                r[i] = request_new(&s);
                r[i]->value = 10 * i;
                r[i]->expires_usec = deadlines[i];
                ck_assert_int_eq(store_add(&s, r[i], NULL), 0);
        }
        ck_assert_int_eq(store_next_expiry(&s), 100);
        ck_assert_ptr_null(store_first_expired(&s, 99));
        ck_assert_ptr_eq(store_first_expired(&s, 100), r[1]);
        store_remove(&s, r[1]);
        ck_assert_int_eq(store_next_expiry(&s), 200);
        store_remove(&s, r[4]); /* removed before its deadline */
        ck_assert_int_eq(store_next_expiry(&s), 300);
        Request *e;
        int n = 0;
        while ((e = store_first_expired(&s, 1000))) {
                ck_assert(e->expires_usec > 0); /* never the untimed one */
                store_remove(&s, e);
                n++;
        }
        ck_assert_int_eq(n, 2);
        ck_assert_int_eq(store_next_expiry(&s), 0);
        ck_assert_uint_eq(store_size(&s), 1);
        store_done(&s);
}
END_TEST

int main(void) {
        Suite *s = suite_create("store");
        TCase *tc = tcase_create("core");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_min_and_floor);
        tcase_add_test(tc, test_drop_owner);
        tcase_add_test(tc, test_move_requests);
        tcase_add_test(tc, test_cookies_unique_nonzero);
        tcase_add_test(tc, test_churn_against_model);
        tcase_add_test(tc, test_cpu_heaps);
        tcase_add_test(tc, test_cpu_request_without_value_first);
        tcase_add_test(tc, test_expiry_heap);
        suite_add_tcase(s, tc);

        return unit_run(s, CK_FORK_GETENV);
}
