/* SPDX-License-Identifier: MIT */
/*
 * Intrusive AVL tree. Recursive on purpose: the height of an AVL tree of n
 * nodes is below 1.45 log2(n), so even 2^32 nodes recurse less than 47 deep.
 */
#include <stdbool.h>

#include "avl.h"

static int height(const struct npv_avl_node *n)
{
    return n != NULL ? n->height : 0;
}

static void fix_height(struct npv_avl_node *n)
{
    int l = height(n->left);
    int r = height(n->right);
    n->height = 1 + (l > r ? l : r);
}

static struct npv_avl_node *rotate_right(struct npv_avl_node *y)
{
    struct npv_avl_node *x = y->left;
    y->left = x->right;
    x->right = y;
    fix_height(y);
    fix_height(x);
    return x;
}

static struct npv_avl_node *rotate_left(struct npv_avl_node *x)
{
    struct npv_avl_node *y = x->right;
    x->right = y->left;
    y->left = x;
    fix_height(x);
    fix_height(y);
    return y;
}

static struct npv_avl_node *rebalance(struct npv_avl_node *n)
{
    fix_height(n);
    int balance = height(n->left) - height(n->right);
    if (balance > 1) {
        if (height(n->left->left) < height(n->left->right))
            n->left = rotate_left(n->left);
        return rotate_right(n);
    }
    if (balance < -1) {
        if (height(n->right->right) < height(n->right->left))
            n->right = rotate_right(n->right);
        return rotate_left(n);
    }
    return n;
}

static struct npv_avl_node *insert_at(struct npv_avl_node *root, struct npv_avl_node *n,
                                      npv_avl_cmp_fn cmp)
{
    if (root == NULL) {
        n->left = NULL;
        n->right = NULL;
        n->height = 1;
        return n;
    }
    if (cmp(n, root) < 0)
        root->left = insert_at(root->left, n, cmp);
    else
        root->right = insert_at(root->right, n, cmp);
    return rebalance(root);
}

static struct npv_avl_node *remove_min(struct npv_avl_node *root, struct npv_avl_node **min)
{
    if (root->left == NULL) {
        *min = root;
        return root->right;
    }
    root->left = remove_min(root->left, min);
    return rebalance(root);
}

static struct npv_avl_node *remove_at(struct npv_avl_node *root, struct npv_avl_node *n,
                                      npv_avl_cmp_fn cmp, bool *found)
{
    if (root == NULL)
        return NULL;
    int c = root == n ? 0 : cmp(n, root);
    if (c < 0) {
        root->left = remove_at(root->left, n, cmp, found);
    } else if (c > 0) {
        root->right = remove_at(root->right, n, cmp, found);
    } else {
        *found = true;
        struct npv_avl_node *l = root->left;
        struct npv_avl_node *r = root->right;
        if (r == NULL)
            return l;
        struct npv_avl_node *min = NULL;
        r = remove_min(r, &min);
        min->left = l;
        min->right = r;
        return rebalance(min);
    }
    return rebalance(root);
}

void npv_avl_init(struct npv_avl *t, npv_avl_cmp_fn cmp)
{
    t->root = NULL;
    t->cmp = cmp;
    t->count = 0;
}

void npv_avl_insert(struct npv_avl *t, struct npv_avl_node *n)
{
    t->root = insert_at(t->root, n, t->cmp);
    t->count++;
}

void npv_avl_remove(struct npv_avl *t, struct npv_avl_node *n)
{
    bool found = false;
    t->root = remove_at(t->root, n, t->cmp, &found);
    if (found)
        t->count--;
}

struct npv_avl_node *npv_avl_find_le(const struct npv_avl *t, const void *key, npv_avl_key_fn f)
{
    struct npv_avl_node *best = NULL;
    struct npv_avl_node *n = t->root;
    while (n != NULL) {
        int c = f(key, n);
        if (c == 0)
            return n;
        if (c < 0) {
            n = n->left;
        } else {
            best = n;
            n = n->right;
        }
    }
    return best;
}

struct npv_avl_node *npv_avl_find_ge(const struct npv_avl *t, const void *key, npv_avl_key_fn f)
{
    struct npv_avl_node *best = NULL;
    struct npv_avl_node *n = t->root;
    while (n != NULL) {
        int c = f(key, n);
        if (c == 0)
            return n;
        if (c > 0) {
            n = n->right;
        } else {
            best = n;
            n = n->left;
        }
    }
    return best;
}

struct npv_avl_node *npv_avl_first(const struct npv_avl *t)
{
    struct npv_avl_node *n = t->root;
    while (n != NULL && n->left != NULL)
        n = n->left;
    return n;
}

struct npv_avl_node *npv_avl_next(const struct npv_avl *t, const struct npv_avl_node *cur)
{
    if (cur->right != NULL) {
        struct npv_avl_node *n = cur->right;
        while (n->left != NULL)
            n = n->left;
        return n;
    }
    struct npv_avl_node *best = NULL;
    struct npv_avl_node *n = t->root;
    while (n != NULL && n != cur) {
        if (t->cmp(cur, n) < 0) {
            best = n;
            n = n->left;
        } else {
            n = n->right;
        }
    }
    return best;
}
