/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Sift operations move a hole rather than swapping, updating each moved
 * node's index as they go. */

#include "util/heap.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

static void place(Heap *h, size_t i, HeapNode *node) {
        h->items[i] = node;
        node->idx = i;
}

static void sift_up(Heap *h, size_t i) {
        HeapNode *node = h->items[i];
        while (i > 0) {
                size_t parent = (i - 1) / 2;
                if (h->items[parent]->key <= node->key)
                        break;
                place(h, i, h->items[parent]);
                i = parent;
        }
        place(h, i, node);
}

static void sift_down(Heap *h, size_t i) {
        HeapNode *node = h->items[i];
        for (;;) {
                size_t child = 2 * i + 1;
                if (child >= h->n)
                        break;
                if (child + 1 < h->n && h->items[child + 1]->key < h->items[child]->key)
                        child++;
                if (node->key <= h->items[child]->key)
                        break;
                place(h, i, h->items[child]);
                i = child;
        }
        place(h, i, node);
}

int heap_reserve(Heap *h) {
        if (h->n < h->cap)
                return 0;
        size_t cap = h->cap ? h->cap * 2 : 64;
        HeapNode **items = realloc(h->items, cap * sizeof(HeapNode *));
        if (!items)
                return -ENOMEM;
        h->items = items;
        h->cap = cap;
        return 0;
}

void heap_insert(Heap *h, HeapNode *node) {
        assert(h && node && !heap_contains(node) && h->n < h->cap); /* heap_reserve() first */
        place(h, h->n++, node);
        sift_up(h, node->idx);
}

void heap_delete(Heap *h, HeapNode *node) {
        assert(h && node && node->idx < h->n && h->items[node->idx] == node);
        size_t i = node->idx;
        node->idx = HEAP_NOT_IN;
        HeapNode *last = h->items[--h->n];
        if (last == node)
                return;
        place(h, i, last);
        sift_up(h, i);
        sift_down(h, last->idx);
}

void heap_set_key(Heap *h, HeapNode *node, int64_t key) {
        assert(h && node && node->idx < h->n && h->items[node->idx] == node);
        int64_t old = node->key;
        node->key = key;
        if (key < old)
                sift_up(h, node->idx);
        else
                sift_down(h, node->idx);
}

void heap_done(Heap *h) {
        free(h->items);
        *h = (Heap){};
}
