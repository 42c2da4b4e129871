/* SPDX-License-Identifier: MIT */
/*
 * An intrusive AVL tree: O(log n) insert, remove and ordered search. The
 * IOVA allocator and the domain's mapping journal index by it.
 *
 * Keys are unique under the tree's compare function; the caller embeds a
 * struct npv_avl_node in its own object and recovers it with
 * npv_container_of. No allocation happens here, so no call can fail.
 */
#ifndef NPV_AVL_H
#define NPV_AVL_H

#include <stddef.h>

#define npv_container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

struct npv_avl_node {
    struct npv_avl_node *left;
    struct npv_avl_node *right;
    int height;
};

/* Order of two nodes in the tree: <0, 0 (same node), >0. */
typedef int (*npv_avl_cmp_fn)(const struct npv_avl_node *a, const struct npv_avl_node *b);
/* Order of a search key against a node: <0 key sorts before node, 0 equal, >0 after. */
typedef int (*npv_avl_key_fn)(const void *key, const struct npv_avl_node *n);

struct npv_avl {
    struct npv_avl_node *root;
    npv_avl_cmp_fn cmp;
    size_t count;
};

void npv_avl_init(struct npv_avl *t, npv_avl_cmp_fn cmp);
/* n must not compare equal to a node already in t. */
void npv_avl_insert(struct npv_avl *t, struct npv_avl_node *n);
/* n must be in t. */
void npv_avl_remove(struct npv_avl *t, struct npv_avl_node *n);

/* The greatest node <= key, or NULL. */
struct npv_avl_node *npv_avl_find_le(const struct npv_avl *t, const void *key, npv_avl_key_fn f);
/* The least node >= key, or NULL. */
struct npv_avl_node *npv_avl_find_ge(const struct npv_avl *t, const void *key, npv_avl_key_fn f);

struct npv_avl_node *npv_avl_first(const struct npv_avl *t);
/* The node after n (n in t), or NULL. O(log n): nodes carry no parent link. */
struct npv_avl_node *npv_avl_next(const struct npv_avl *t, const struct npv_avl_node *n);

#endif
