/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the intrusive indexed min-heap: random inserts, deletes of
 * any node and key changes, checked after each step against a plain array. */

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/heap.h"
#include "unit.h"

#define N_NODES 512

/* Every node knows its slot, every parent is <= its children, and the top is
 * the smallest key of the nodes the model says are in. (Plain comparisons,
 * one assertion: the test also runs under valgrind.) */
static void check_heap(const Heap *h, const HeapNode *nodes, const bool *in) {
        size_t n_in = 0, bad_index = 0, bad_order = 0;
        int64_t min = INT64_MAX;

        for (size_t k = 0; k < N_NODES; k++) {
                if ((bool) heap_contains(&nodes[k]) != in[k])
                        bad_index++;
                if (!in[k])
                        continue;
                n_in++;
                if (nodes[k].key < min)
                        min = nodes[k].key;
                if (nodes[k].idx >= h->n || h->items[nodes[k].idx] != &nodes[k])
                        bad_index++;
        }
        for (size_t i = 1; i < h->n; i++)
                if (h->items[(i - 1) / 2]->key > h->items[i]->key)
                        bad_order++;
        ck_assert_uint_eq(bad_index, 0);
        ck_assert_uint_eq(bad_order, 0);
        ck_assert_uint_eq(h->n, n_in);
        if (n_in == 0)
                ck_assert_ptr_null(heap_top(h));
        else
                ck_assert_int_eq(heap_top(h)->key, min);
}

START_TEST(test_random_operations_against_model) {
        Heap h = {};
        HeapNode nodes[N_NODES];
        bool in[N_NODES] = {};
        unsigned seed = 20261130u + (unsigned) _i;

        for (size_t k = 0; k < N_NODES; k++)
                nodes[k] = (HeapNode) HEAP_NODE_INIT;

        for (int step = 0; step < 20000; step++) {
                size_t k = (size_t) rand_r(&seed) % N_NODES;
                /* Few distinct keys: ties are the case that breaks a careless sift. */
                int64_t key = (int64_t) (rand_r(&seed) % 64) - 8;
                if (!in[k]) {
                        ck_assert_int_eq(heap_reserve(&h), 0);
                        nodes[k].key = key;
                        heap_insert(&h, &nodes[k]);
                        in[k] = true;
                } else if (rand_r(&seed) % 2) {
                        heap_delete(&h, &nodes[k]);
                        in[k] = false;
                } else
                        heap_set_key(&h, &nodes[k], key);
                if (step % 7 == 0)
                        check_heap(&h, nodes, in);
        }
        check_heap(&h, nodes, in);

        /* Draining from the top yields the keys in order. */
        int64_t last = INT64_MIN;
        while (heap_top(&h)) {
                HeapNode *top = heap_top(&h);
                ck_assert_int_ge(top->key, last);
                last = top->key;
                heap_delete(&h, top);
                in[top - nodes] = false;
        }
        check_heap(&h, nodes, in);
        heap_done(&h);
        ck_assert_ptr_null(h.items);
}
END_TEST

START_TEST(test_delete_last_and_only) {
        Heap h = {};
        HeapNode a = HEAP_NODE_INIT, b = HEAP_NODE_INIT;

        a.key = 5;
        b.key = 7;
        ck_assert_int_eq(heap_reserve(&h), 0);
        heap_insert(&h, &a);
        ck_assert_int_eq(heap_reserve(&h), 0);
        heap_insert(&h, &b);
        heap_delete(&h, &b); /* the last slot: nothing moves */
        ck_assert_ptr_eq(heap_top(&h), &a);
        ck_assert(!heap_contains(&b));
        heap_set_key(&h, &a, -3);
        ck_assert_int_eq(heap_top(&h)->key, -3);
        heap_delete(&h, &a);
        ck_assert_ptr_null(heap_top(&h));
        ck_assert(!heap_contains(&a));
        heap_done(&h);
}
END_TEST

int main(void) {
        Suite *s = suite_create("heap");
        TCase *tc = tcase_create("heap");
        tcase_set_timeout(tc, 60);
        tcase_add_loop_test(tc, test_random_operations_against_model, 0, 4);
        tcase_add_test(tc, test_delete_last_and_only);
        suite_add_tcase(s, tc);

        return unit_run(s, CK_FORK_GETENV);
}
