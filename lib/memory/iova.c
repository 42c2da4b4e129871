/* SPDX-License-Identifier: MIT */
/* IOVA allocator and range-set arithmetic (see iova.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "failpoint_internal.h"
#include "iova.h"

/* An allocation (in used) or a hole (in free_by_start and free_by_size). */
struct seg {
    struct npv_avl_node by_start;
    struct npv_avl_node by_size;
    npv_iova_t start;
    npv_iova_t last;
};

struct size_key {
    uint64_t span; /* last - start: a length that cannot overflow for the full 64-bit space */
    npv_iova_t start;
};

static struct seg *seg_of_start(const struct npv_avl_node *n)
{
    return n != NULL ? npv_container_of(n, struct seg, by_start) : NULL;
}

static struct seg *seg_of_size(const struct npv_avl_node *n)
{
    return n != NULL ? npv_container_of(n, struct seg, by_size) : NULL;
}

static int cmp_u64(uint64_t a, uint64_t b)
{
    return a < b ? -1 : a > b;
}

static int start_cmp(const struct npv_avl_node *a, const struct npv_avl_node *b)
{
    return cmp_u64(seg_of_start(a)->start, seg_of_start(b)->start);
}

static int start_key(const void *key, const struct npv_avl_node *n)
{
    return cmp_u64(*(const npv_iova_t *)key, seg_of_start(n)->start);
}

static int size_key_cmp(const struct size_key *k, const struct seg *s)
{
    int c = cmp_u64(k->span, s->last - s->start);
    return c != 0 ? c : cmp_u64(k->start, s->start);
}

static int size_cmp(const struct npv_avl_node *a, const struct npv_avl_node *b)
{
    const struct seg *sa = seg_of_size(a);
    struct size_key k = {sa->last - sa->start, sa->start};
    return size_key_cmp(&k, seg_of_size(b));
}

static int size_key(const void *key, const struct npv_avl_node *n)
{
    return size_key_cmp(key, seg_of_size(n));
}

/* ---- range sets ---- */

static int range_cmp(const void *a, const void *b)
{
    const struct npv_iova_range *ra = a;
    const struct npv_iova_range *rb = b;
    int c = cmp_u64(ra->start, rb->start);
    return c != 0 ? c : cmp_u64(ra->last, rb->last);
}

size_t npv_ranges_normalize(struct npv_iova_range *r, size_t n)
{
    size_t valid = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].start <= r[i].last)
            r[valid++] = r[i];
    if (valid == 0)
        return 0;
    qsort(r, valid, sizeof(*r), range_cmp);
    size_t out = 0;
    for (size_t i = 1; i < valid; i++) {
        struct npv_iova_range *cur = &r[out];
        if (cur->last == UINT64_MAX || r[i].start <= cur->last + 1) {
            if (r[i].last > cur->last)
                cur->last = r[i].last;
        } else {
            r[++out] = r[i];
        }
    }
    return out + 1;
}

static int dup_normalized(const struct npv_iova_range *r, size_t n, struct npv_iova_range **out,
                          size_t *nout)
{
    *out = NULL;
    *nout = 0;
    if (n == 0)
        return 0;
    struct npv_iova_range *copy = malloc(n * sizeof(*copy));
    if (copy == NULL)
        return -ENOMEM;
    memcpy(copy, r, n * sizeof(*copy));
    *nout = npv_ranges_normalize(copy, n);
    if (*nout == 0) {
        free(copy);
        return 0;
    }
    *out = copy;
    return 0;
}

int npv_ranges_intersect(const struct npv_iova_range *a, size_t na, const struct npv_iova_range *b,
                         size_t nb, struct npv_iova_range **out, size_t *nout)
{
    struct npv_iova_range *x = NULL, *y = NULL, *res = NULL;
    size_t nx = 0, ny = 0, n = 0;
    int ret = dup_normalized(a, na, &x, &nx);
    if (ret == 0)
        ret = dup_normalized(b, nb, &y, &ny);
    if (ret == 0 && nx + ny > 0) {
        res = malloc((nx + ny) * sizeof(*res));
        if (res == NULL)
            ret = -ENOMEM;
    }
    if (ret < 0)
        goto out;
    for (size_t i = 0, j = 0; i < nx && j < ny;) {
        npv_iova_t s = x[i].start > y[j].start ? x[i].start : y[j].start;
        npv_iova_t l = x[i].last < y[j].last ? x[i].last : y[j].last;
        if (s <= l)
            res[n++] = (struct npv_iova_range){s, l};
        if (x[i].last < y[j].last)
            i++;
        else
            j++;
    }
    if (n == 0) {
        free(res);
        res = NULL;
    }
    *out = res;
    *nout = n;
out:
    free(x);
    free(y);
    return ret;
}

int npv_ranges_subtract(const struct npv_iova_range *a, size_t na, const struct npv_iova_range *b,
                        size_t nb, struct npv_iova_range **out, size_t *nout)
{
    struct npv_iova_range *x = NULL, *y = NULL, *res = NULL;
    size_t nx = 0, ny = 0, n = 0;
    int ret = dup_normalized(a, na, &x, &nx);
    if (ret == 0)
        ret = dup_normalized(b, nb, &y, &ny);
    /* Each range of b splits at most one range of a in two. */
    if (ret == 0 && nx > 0) {
        res = malloc((nx + ny) * sizeof(*res));
        if (res == NULL)
            ret = -ENOMEM;
    }
    if (ret < 0)
        goto out;
    size_t j = 0;
    for (size_t i = 0; i < nx; i++) {
        npv_iova_t cur = x[i].start;
        bool done = false;
        while (j < ny && y[j].last < cur)
            j++;
        for (size_t k = j; k < ny && y[k].start <= x[i].last && !done; k++) {
            if (y[k].start > cur)
                res[n++] = (struct npv_iova_range){cur, y[k].start - 1};
            if (y[k].last >= x[i].last)
                done = true;
            else
                cur = y[k].last + 1;
        }
        if (!done)
            res[n++] = (struct npv_iova_range){cur, x[i].last};
    }
    if (n == 0) {
        free(res);
        res = NULL;
    }
    *out = res;
    *nout = n;
out:
    free(x);
    free(y);
    return ret;
}

/* ---- the allocator ---- */

void npv_iova_space_init(struct npv_iova_space *sp)
{
    sp->ranges = NULL;
    sp->nr_ranges = 0;
    sp->ctx = NULL;
    npv_avl_init(&sp->used, start_cmp);
    npv_avl_init(&sp->free_by_start, start_cmp);
    npv_avl_init(&sp->free_by_size, size_cmp);
}

static void drop_holes(struct npv_iova_space *sp)
{
    struct npv_avl_node *n;
    while ((n = sp->free_by_start.root) != NULL) {
        struct seg *s = seg_of_start(n);
        npv_avl_remove(&sp->free_by_start, &s->by_start);
        npv_avl_remove(&sp->free_by_size, &s->by_size);
        free(s);
    }
}

void npv_iova_space_fini(struct npv_iova_space *sp)
{
    drop_holes(sp);
    struct npv_avl_node *n;
    while ((n = sp->used.root) != NULL) {
        npv_avl_remove(&sp->used, n);
        free(seg_of_start(n));
    }
    free(sp->ranges);
    sp->ranges = NULL;
    sp->nr_ranges = 0;
}

static void insert_hole(struct npv_iova_space *sp, struct seg *s)
{
    npv_avl_insert(&sp->free_by_start, &s->by_start);
    npv_avl_insert(&sp->free_by_size, &s->by_size);
}

static void remove_hole(struct npv_iova_space *sp, struct seg *s)
{
    npv_avl_remove(&sp->free_by_start, &s->by_start);
    npv_avl_remove(&sp->free_by_size, &s->by_size);
}

/* The first allocation starting at or after start, or NULL. */
static struct seg *used_from(const struct npv_iova_space *sp, npv_iova_t start)
{
    return seg_of_start(npv_avl_find_ge(&sp->used, &start, start_key));
}

bool npv_iova_space_overlaps(const struct npv_iova_space *sp, npv_iova_t start, npv_iova_t last)
{
    /* Allocations are disjoint: only the last one starting at or before `last` can overlap. */
    struct seg *s = seg_of_start(npv_avl_find_le(&sp->used, &last, start_key));
    return s != NULL && s->last >= start;
}

/* The range of r (normalised) holding iova, or NULL. */
static const struct npv_iova_range *range_of(const struct npv_iova_range *r, size_t n,
                                             npv_iova_t iova)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r[mid].start <= iova)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || r[lo - 1].last < iova)
        return NULL;
    return &r[lo - 1];
}

bool npv_iova_space_fits(const struct npv_iova_space *sp, const struct npv_iova_range *r, size_t n)
{
    for (struct npv_avl_node *it = npv_avl_first(&sp->used); it != NULL;
         it = npv_avl_next(&sp->used, it)) {
        const struct seg *s = seg_of_start(it);
        const struct npv_iova_range *rr = range_of(r, n, s->start);
        if (rr == NULL || rr->last < s->last)
            return false;
    }
    return true;
}

/*
 * Visit the holes of ranges r (normalised) around the current allocations.
 * With out == NULL only counts them.
 */
static size_t build_holes(const struct npv_iova_space *sp, const struct npv_iova_range *r, size_t n,
                          struct seg **out)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        npv_iova_t cur = r[i].start;
        bool done = false;
        for (struct seg *a = used_from(sp, r[i].start); a != NULL && a->start <= r[i].last;
             a = seg_of_start(npv_avl_next(&sp->used, &a->by_start))) {
            if (a->start > cur) {
                if (out != NULL) {
                    out[count]->start = cur;
                    out[count]->last = a->start - 1;
                }
                count++;
            }
            if (a->last >= r[i].last) {
                done = true;
                break;
            }
            cur = a->last + 1;
        }
        if (!done) {
            if (out != NULL) {
                out[count]->start = cur;
                out[count]->last = r[i].last;
            }
            count++;
        }
    }
    return count;
}

int npv_iova_space_set_ranges(struct npv_iova_space *sp, const struct npv_iova_range *r, size_t n)
{
    struct npv_iova_range *nr = NULL;
    size_t nn = 0;
    struct seg **holes = NULL;
    size_t nh = 0, made = 0;
    int ret = dup_normalized(r, n, &nr, &nn);
    if (ret < 0)
        return ret;
    if (!npv_iova_space_fits(sp, nr, nn)) {
        ret = -ERANGE;
        goto err;
    }
    nh = build_holes(sp, nr, nn, NULL);
    if (nh > 0) {
        holes = npv_fp_calloc(sp->ctx, nh, sizeof(*holes));
        if (holes == NULL) {
            ret = -ENOMEM;
            goto err;
        }
        for (made = 0; made < nh; made++) {
            holes[made] = npv_fp_malloc(sp->ctx, sizeof(struct seg));
            if (holes[made] == NULL) {
                ret = -ENOMEM;
                goto err;
            }
        }
        build_holes(sp, nr, nn, holes);
    }
    drop_holes(sp);
    for (size_t i = 0; i < nh; i++)
        insert_hole(sp, holes[i]);
    free(holes);
    free(sp->ranges);
    sp->ranges = nr;
    sp->nr_ranges = nn;
    return 0;
err:
    for (size_t i = 0; i < made; i++)
        free(holes[i]);
    free(holes);
    free(nr);
    return ret;
}

/* Take [start, last] out of hole h and record it as an allocation. */
static int carve(struct npv_iova_space *sp, struct seg *h, npv_iova_t start, npv_iova_t last)
{
    bool left = start > h->start;
    bool right = last < h->last;
    struct seg *u = npv_fp_malloc(sp->ctx, sizeof(*u));
    struct seg *extra = left && right ? npv_fp_malloc(sp->ctx, sizeof(*extra)) : NULL;
    if (u == NULL || (left && right && extra == NULL)) {
        free(u);
        free(extra);
        return -ENOMEM;
    }
    remove_hole(sp, h);
    if (left && right) {
        extra->start = last + 1;
        extra->last = h->last;
        insert_hole(sp, extra);
        h->last = start - 1;
        insert_hole(sp, h);
    } else if (left) {
        h->last = start - 1;
        insert_hole(sp, h);
    } else if (right) {
        h->start = last + 1;
        insert_hole(sp, h);
    } else {
        free(h);
    }
    u->start = start;
    u->last = last;
    npv_avl_insert(&sp->used, &u->by_start);
    return 0;
}

int npv_iova_alloc(struct npv_iova_space *sp, uint64_t size, uint64_t align, npv_iova_t *iova)
{
    if (size == 0 || align == 0 || (align & (align - 1)) != 0)
        return -EINVAL;
    struct size_key k = {size - 1, 0};
    /*
     * Holes in increasing size: the first that still holds size after its
     * start is aligned up is the best fit.
     */
    for (struct npv_avl_node *it = npv_avl_find_ge(&sp->free_by_size, &k, size_key); it != NULL;
         it = npv_avl_next(&sp->free_by_size, it)) {
        struct seg *h = seg_of_size(it);
        npv_iova_t start = h->start;
        uint64_t rem = start & (align - 1);
        if (rem != 0) {
            if (start > UINT64_MAX - (align - rem))
                continue;
            start += align - rem;
        }
        if (start > h->last || h->last - start < size - 1)
            continue;
        int ret = carve(sp, h, start, start + (size - 1));
        if (ret == 0)
            *iova = start;
        return ret;
    }
    return -ENOSPC;
}

int npv_iova_alloc_at(struct npv_iova_space *sp, npv_iova_t iova, uint64_t size)
{
    if (size == 0 || iova > UINT64_MAX - (size - 1))
        return -EINVAL;
    npv_iova_t last = iova + (size - 1);
    if (npv_iova_space_overlaps(sp, iova, last))
        return -EBUSY;
    /* Holes are maximal, so a usable free range lies inside exactly one. */
    struct seg *h = seg_of_start(npv_avl_find_le(&sp->free_by_start, &iova, start_key));
    if (h == NULL || h->last < last)
        return -ERANGE;
    return carve(sp, h, iova, last);
}

int npv_iova_free(struct npv_iova_space *sp, npv_iova_t iova)
{
    struct seg *s = seg_of_start(npv_avl_find_le(&sp->used, &iova, start_key));
    if (s == NULL || s->start != iova)
        return -ENOENT;
    npv_avl_remove(&sp->used, &s->by_start);
    /*
     * Usable ranges are never adjacent, so a hole touching this one is in the
     * same range and the two merge.
     */
    if (s->start > 0) {
        npv_iova_t before = s->start - 1;
        struct seg *p = seg_of_start(npv_avl_find_le(&sp->free_by_start, &before, start_key));
        if (p != NULL && p->last == before) {
            remove_hole(sp, p);
            s->start = p->start;
            free(p);
        }
    }
    if (s->last < UINT64_MAX) {
        npv_iova_t after = s->last + 1;
        struct seg *nx = seg_of_start(npv_avl_find_ge(&sp->free_by_start, &after, start_key));
        if (nx != NULL && nx->start == after) {
            remove_hole(sp, nx);
            s->last = nx->last;
            free(nx);
        }
    }
    insert_hole(sp, s);
    return 0;
}

size_t npv_iova_count(const struct npv_iova_space *sp)
{
    return sp->used.count;
}

size_t npv_iova_holes(const struct npv_iova_space *sp, struct npv_iova_range *out, size_t max)
{
    size_t n = 0;
    for (struct npv_avl_node *it = npv_avl_first(&sp->free_by_start); it != NULL;
         it = npv_avl_next(&sp->free_by_start, it), n++)
        if (n < max)
            out[n] = (struct npv_iova_range){seg_of_start(it)->start, seg_of_start(it)->last};
    return n;
}
