/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An intrusive indexed binary min-heap: nodes live inside the objects they
 * order, and know their position, so deleting any node is O(log n). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define HEAP_NOT_IN SIZE_MAX

typedef struct HeapNode {
        int64_t key;
        size_t idx; /* HEAP_NOT_IN when not in a heap */
} HeapNode;

typedef struct Heap {
        HeapNode **items;
        size_t n, cap;
} Heap;

#define HEAP_NODE_INIT \
        { .idx = HEAP_NOT_IN }

/* Makes room for one more node; call before heap_insert() so that inserting cannot fail. */
int heap_reserve(Heap *h);
void heap_insert(Heap *h, HeapNode *node);
void heap_delete(Heap *h, HeapNode *node);
void heap_set_key(Heap *h, HeapNode *node, int64_t key); /* node must be in h */
void heap_done(Heap *h);

static inline HeapNode *heap_top(const Heap *h) {
        return h->n > 0 ? h->items[0] : NULL;
}

static inline int heap_contains(const HeapNode *node) {
        return node->idx != HEAP_NOT_IN;
}
