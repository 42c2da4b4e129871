/* SPDX-License-Identifier: MIT */
/*
 * A queue's counters as the hot path writes them (include/npuvfio/stats.h):
 * one writer at a time, relaxed atomic stores of load + n, so the owner pays
 * a plain add and a reader never sees a torn value. The registry links every
 * queue of a context under ctx->stats_lock.
 */
#ifndef NPV_STATS_INTERNAL_H
#define NPV_STATS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <errno.h>

#include <npuvfio/ring.h>
#include <npuvfio/stats.h>

struct npv_stats_queue {
    /* Cold: the registry's links and the names, under ctx->stats_lock. */
    struct npv_stats_queue *next, *prev;
    struct npv_ctx *ctx;
    char device[64];
    char queue[32];
    bool latency; /* measure latency (fixed at creation) */
    /* Hot: written by the queue's owner only (embedded in its npv_inflight). */
    uint64_t requests;
    uint64_t ok, dev_error, timeout, cancelled, fault;
    uint64_t resets;
    uint64_t latency_count, latency_sum_ns;
    uint64_t hist[NPV_STATS_HIST_BUCKETS];
};

static inline void npv_stat_add(uint64_t *c, uint64_t n)
{
    __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

static inline unsigned npv_stats_bucket_inline(uint64_t ns)
{
    if (ns < 8)
        return (unsigned)ns;
    unsigned e = 63u - (unsigned)__builtin_clzll(ns);
    if (e > 35)
        return NPV_STATS_HIST_BUCKETS - 1;
    return (e - 2) * 8 + (unsigned)((ns >> (e - 3)) & 7);
}

static inline void npv_stats_latency(struct npv_stats_queue *q, uint64_t ns)
{
    npv_stat_add(&q->latency_count, 1);
    npv_stat_add(&q->latency_sum_ns, ns);
    npv_stat_add(&q->hist[npv_stats_bucket_inline(ns)], 1);
}

/* Count one reaped completion by its result class. */
static inline void npv_stats_completion(struct npv_stats_queue *q, int32_t status)
{
    switch (status) {
    case 0:
        npv_stat_add(&q->ok, 1);
        break;
    case -EIO:
        npv_stat_add(&q->dev_error, 1);
        break;
    case -ETIMEDOUT:
        npv_stat_add(&q->timeout, 1);
        break;
    case -ECANCELED:
        npv_stat_add(&q->cancelled, 1);
        break;
    default:
        npv_stat_add(&q->fault, 1);
        break;
    }
}

/*
 * Names are printed into JSON keys and Prometheus labels: keep them to a safe
 * alphabet (model choice), truncated to size - 1 characters; NULL is "".
 */
static inline void npv_stats_copy_name(char *dst, size_t size, const char *src)
{
    size_t i = 0;
    for (; src != NULL && src[i] != '\0' && i + 1 < size; i++) {
        char c = src[i];
        int safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '-' || c == '_' || c == '.' || c == ':' || c == '/';
        dst[i] = safe ? c : '_';
    }
    dst[i] = '\0';
}

/* A source's name, an entity's, a counter's: up to 63 characters. */
#define NPV_STATS_NAME_MAX 64

/* One counter a source emitted. */
struct npv_stats_sample {
    size_t source; /* index into npv_stats_samples.names */
    char entity[NPV_STATS_NAME_MAX];
    char counter[NPV_STATS_NAME_MAX];
    uint64_t value;
};

/* What every source emitted in one npv_stats_format, in addition and emit order. */
struct npv_stats_samples {
    char (*names)[NPV_STATS_NAME_MAX]; /* the sources' names */
    size_t sources;
    struct npv_stats_sample *v;
    size_t n, cap;
    bool nomem; /* an emit could not be kept */
};

/*
 * With ctx->stats_lock held: call every source's fn, keeping what it emits in
 * *out (zeroed first). 0 or -ENOMEM; *out is to be freed either way.
 */
int npv_stats_sources_collect(struct npv_ctx *ctx, struct npv_stats_samples *out);
void npv_stats_samples_free(struct npv_stats_samples *s);

/* Link q into ctx's registry under a default name (zeroes its counters). */
void npv_stats_queue_register(struct npv_ctx *ctx, struct npv_stats_queue *q);
void npv_stats_queue_unregister(struct npv_stats_queue *q);
void npv_stats_queue_name(struct npv_stats_queue *q, const char *device, const char *queue);

/* Context-wide counters (multi-writer, rare: atomic adds). */
void npv_stats_ctx_dma_map(struct npv_ctx *ctx, uint64_t bytes);
void npv_stats_ctx_domain_switch(struct npv_ctx *ctx);

#endif
