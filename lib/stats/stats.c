/* SPDX-License-Identifier: MIT */
/*
 * The registry of queues and their snapshots, the latency buckets, and the
 * two text formats (include/npuvfio/stats.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/stats.h>

#include "ctx_internal.h"
#include "stats_internal.h"

unsigned npv_stats_bucket(uint64_t ns)
{
    return npv_stats_bucket_inline(ns);
}

uint64_t npv_stats_bucket_lower(unsigned i)
{
    if (i < 8)
        return i;
    if (i >= NPV_STATS_HIST_BUCKETS)
        i = NPV_STATS_HIST_BUCKETS - 1;
    unsigned e = i / 8 + 2;
    return (uint64_t)(8 + i % 8) << (e - 3);
}

uint64_t npv_stats_bucket_upper(unsigned i)
{
    if (i < 8)
        return i;
    if (i >= NPV_STATS_HIST_BUCKETS - 1)
        return UINT64_MAX;
    unsigned e = i / 8 + 2;
    return npv_stats_bucket_lower(i) + ((uint64_t)1 << (e - 3)) - 1;
}

void npv_stats_set_latency(struct npv_ctx *ctx, int on)
{
    if (ctx != NULL)
        atomic_store_explicit(&ctx->stats_latency, on != 0, memory_order_relaxed);
}

void npv_stats_queue_register(struct npv_ctx *ctx, struct npv_stats_queue *q)
{
    memset(q, 0, sizeof(*q));
    q->ctx = ctx;
    if (ctx == NULL) {
        snprintf(q->device, sizeof(q->device), "unnamed");
        snprintf(q->queue, sizeof(q->queue), "queue");
        return;
    }
    q->latency = atomic_load_explicit(&ctx->stats_latency, memory_order_relaxed) != 0;
    pthread_mutex_lock(&ctx->stats_lock);
    snprintf(q->device, sizeof(q->device), "unnamed");
    snprintf(q->queue, sizeof(q->queue), "queue%u", ctx->stats_queue_seq++);
    q->prev = ctx->stats_last;
    if (ctx->stats_last != NULL)
        ctx->stats_last->next = q;
    else
        ctx->stats_first = q;
    ctx->stats_last = q;
    pthread_mutex_unlock(&ctx->stats_lock);
}

void npv_stats_queue_unregister(struct npv_stats_queue *q)
{
    struct npv_ctx *ctx = q->ctx;
    if (ctx == NULL)
        return;
    pthread_mutex_lock(&ctx->stats_lock);
    if (q->prev != NULL)
        q->prev->next = q->next;
    else
        ctx->stats_first = q->next;
    if (q->next != NULL)
        q->next->prev = q->prev;
    else
        ctx->stats_last = q->prev;
    pthread_mutex_unlock(&ctx->stats_lock);
    q->ctx = NULL;
}

void npv_stats_queue_name(struct npv_stats_queue *q, const char *device, const char *queue)
{
    if (q->ctx != NULL)
        pthread_mutex_lock(&q->ctx->stats_lock);
    if (device != NULL)
        npv_stats_copy_name(q->device, sizeof(q->device), device);
    if (queue != NULL)
        npv_stats_copy_name(q->queue, sizeof(q->queue), queue);
    if (q->ctx != NULL)
        pthread_mutex_unlock(&q->ctx->stats_lock);
}

void npv_stats_ctx_dma_map(struct npv_ctx *ctx, uint64_t bytes)
{
    if (ctx == NULL)
        return;
    atomic_fetch_add_explicit(&ctx->stats_dma_maps, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ctx->stats_dma_map_bytes, bytes, memory_order_relaxed);
}

void npv_stats_ctx_domain_switch(struct npv_ctx *ctx)
{
    if (ctx != NULL)
        atomic_fetch_add_explicit(&ctx->stats_domain_switches, 1, memory_order_relaxed);
}

static uint64_t ld(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* Add q's counters into *st (a snapshot of relaxed loads). */
static void snapshot_add(const struct npv_stats_queue *q, struct npv_stats *st)
{
    uint64_t req = ld(&q->requests), ok = ld(&q->ok), dev_error = ld(&q->dev_error),
             timeout = ld(&q->timeout), cancelled = ld(&q->cancelled), fault = ld(&q->fault);
    uint64_t done = ok + dev_error + timeout + cancelled + fault;
    st->requests += req;
    st->ok += ok;
    st->dev_error += dev_error;
    st->timeout += timeout;
    st->cancelled += cancelled;
    st->fault += fault;
    st->in_flight += req > done ? req - done : 0;
    st->resets += ld(&q->resets);
    st->latency_count += ld(&q->latency_count);
    st->latency_sum_ns += ld(&q->latency_sum_ns);
    for (unsigned i = 0; i < NPV_STATS_HIST_BUCKETS; i++)
        st->latency[i] += ld(&q->hist[i]);
}

int npv_stats_read(struct npv_ctx *ctx, const char *device, struct npv_stats *out, size_t size)
{
    if (ctx == NULL || out == NULL)
        return -EINVAL;
    struct npv_stats st;
    memset(&st, 0, sizeof(st));
    int n = 0;
    pthread_mutex_lock(&ctx->stats_lock);
    for (const struct npv_stats_queue *q = ctx->stats_first; q != NULL; q = q->next) {
        if (device != NULL && strcmp(device, q->device) != 0)
            continue;
        snapshot_add(q, &st);
        n++;
    }
    pthread_mutex_unlock(&ctx->stats_lock);
    memcpy(out, &st, size < sizeof(st) ? size : sizeof(st));
    if (size > sizeof(st))
        memset((uint8_t *)out + sizeof(st), 0, size - sizeof(st));
    return n;
}

void npv_stats_read_ctx(struct npv_ctx *ctx, struct npv_stats_ctx *out)
{
    memset(out, 0, sizeof(*out));
    if (ctx == NULL)
        return;
    out->dma_maps = atomic_load_explicit(&ctx->stats_dma_maps, memory_order_relaxed);
    out->dma_map_bytes = atomic_load_explicit(&ctx->stats_dma_map_bytes, memory_order_relaxed);
    out->domain_switches = atomic_load_explicit(&ctx->stats_domain_switches, memory_order_relaxed);
}

int npv_stats_foreach(struct npv_ctx *ctx, npv_stats_fn fn, void *user)
{
    if (ctx == NULL || fn == NULL)
        return -EINVAL;
    struct npv_stats *st = malloc(sizeof(*st));
    if (st == NULL)
        return -ENOMEM;
    int n = 0;
    pthread_mutex_lock(&ctx->stats_lock);
    for (const struct npv_stats_queue *q = ctx->stats_first; q != NULL; q = q->next) {
        memset(st, 0, sizeof(*st));
        snapshot_add(q, st);
        fn(user, q->device, q->queue, st);
        n++;
    }
    pthread_mutex_unlock(&ctx->stats_lock);
    free(st);
    return n;
}

/* ---- formats ---- */

/* Every queue's snapshot, copied out under the lock so formatting runs without it. */
struct snap {
    char device[64];
    char queue[32];
    struct npv_stats st;
};

/*
 * Every queue's snapshot and every source's samples (the sources' fn run
 * here, under the lock, as npv_stats_remove_source relies on).
 */
static int collect(struct npv_ctx *ctx, struct snap **out, size_t *count,
                   struct npv_stats_samples *samples)
{
    size_t n = 0, cap = 0;
    struct snap *v = NULL;
    pthread_mutex_lock(&ctx->stats_lock);
    int rc = npv_stats_sources_collect(ctx, samples);
    if (rc < 0) {
        pthread_mutex_unlock(&ctx->stats_lock);
        npv_stats_samples_free(samples);
        return rc;
    }
    for (const struct npv_stats_queue *q = ctx->stats_first; q != NULL; q = q->next) {
        if (n == cap) {
            size_t ncap = cap != 0 ? cap * 2 : 4;
            struct snap *nv = realloc(v, ncap * sizeof(*v));
            if (nv == NULL) {
                pthread_mutex_unlock(&ctx->stats_lock);
                free(v);
                npv_stats_samples_free(samples);
                return -ENOMEM;
            }
            v = nv;
            cap = ncap;
        }
        memset(&v[n], 0, sizeof(v[n]));
        memcpy(v[n].device, q->device, sizeof(q->device));
        memcpy(v[n].queue, q->queue, sizeof(q->queue));
        snapshot_add(q, &v[n].st);
        n++;
    }
    pthread_mutex_unlock(&ctx->stats_lock);
    *out = v;
    *count = n;
    return 0;
}

static const struct {
    const char *name;
    size_t off;
    const char *help;
} counters[] = {
    {"requests", offsetof(struct npv_stats, requests), "jobs claimed"},
    {"ok", offsetof(struct npv_stats, ok), "completions with status 0"},
    {"dev_error", offsetof(struct npv_stats, dev_error),
     "completions with the device's error word"},
    {"timeout", offsetof(struct npv_stats, timeout), "completions past their own deadline"},
    {"cancelled", offsetof(struct npv_stats, cancelled), "completions failed with a neighbour"},
    {"fault", offsetof(struct npv_stats, fault), "completions failed by a device fault"},
    {"in_flight", offsetof(struct npv_stats, in_flight), "jobs claimed and not yet reaped"},
    {"resets", offsetof(struct npv_stats, resets), "device resets"},
};
#define N_COUNTERS (sizeof(counters) / sizeof(counters[0]))

static uint64_t field(const struct npv_stats *st, size_t i)
{
    return *(const uint64_t *)((const uint8_t *)st + counters[i].off);
}

static void json_stats(FILE *f, const struct npv_stats *st)
{
    fputc('{', f);
    for (size_t i = 0; i < N_COUNTERS; i++)
        fprintf(f, "\"%s\":%" PRIu64 ",", counters[i].name, field(st, i));
    fprintf(f, "\"latency_ns\":{\"count\":%" PRIu64 ",\"sum\":%" PRIu64 ",\"buckets\":[",
            st->latency_count, st->latency_sum_ns);
    /* Only the non-empty buckets: [lower, upper, count] each. */
    bool first = true;
    for (unsigned b = 0; b < NPV_STATS_HIST_BUCKETS; b++) {
        if (st->latency[b] == 0)
            continue;
        fprintf(f, "%s[%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]", first ? "" : ",",
                npv_stats_bucket_lower(b),
                b == NPV_STATS_HIST_BUCKETS - 1 ? npv_stats_bucket_lower(b)
                                                : npv_stats_bucket_upper(b),
                st->latency[b]);
        first = false;
    }
    fprintf(f, "]}}");
}

static void sum_into(struct npv_stats *a, const struct npv_stats *b)
{
    for (size_t i = 0; i < N_COUNTERS; i++)
        *(uint64_t *)((uint8_t *)a + counters[i].off) += field(b, i);
    a->latency_count += b->latency_count;
    a->latency_sum_ns += b->latency_sum_ns;
    for (unsigned k = 0; k < NPV_STATS_HIST_BUCKETS; k++)
        a->latency[k] += b->latency[k];
}

/*
 * "sources": one object per source, in addition order; in each, its entities
 * at their first emit, each with its counters in emit order (an entity
 * emitted in several runs is merged, so no key repeats for that reason).
 * Each sample is linked to the next of its entity, so the text is written in
 * one pass per source. 0 or -ENOMEM.
 */
static int json_sources(FILE *f, const struct npv_stats_samples *s)
{
    size_t cap = s->n != 0 ? s->n : 1;
    size_t *link = malloc(4 * cap * sizeof(*link));
    if (link == NULL)
        return -ENOMEM;
    size_t *entity = link;          /* a sample's entity, numbered from its source's first */
    size_t *next = link + cap;      /* the next sample of the same entity, or SIZE_MAX */
    size_t *first = link + 2 * cap; /* an entity's first sample */
    size_t *last = link + 3 * cap;  /* an entity's last sample so far */
    fprintf(f, ",\"sources\":{");
    size_t at = 0; /* samples are in source order */
    for (size_t k = 0; k < s->sources; k++) {
        size_t begin = at, entities = 0;
        for (; at < s->n && s->v[at].source == k; at++) {
            const char *e = s->v[at].entity;
            size_t d = entities;
            /* A source usually emits an entity's counters together: try the previous first. */
            if (at > begin && strcmp(s->v[at - 1].entity, e) == 0)
                d = entity[at - 1];
            else
                for (size_t x = 0; x < entities && d == entities; x++)
                    if (strcmp(s->v[first[x]].entity, e) == 0)
                        d = x;
            if (d == entities) {
                first[d] = at;
                entities++;
            } else {
                next[last[d]] = at;
            }
            entity[at] = d;
            last[d] = at;
            next[at] = SIZE_MAX;
        }
        fprintf(f, "%s\"%s\":{", k == 0 ? "" : ",", s->names[k]);
        for (size_t d = 0; d < entities; d++) {
            fprintf(f, "%s\"%s\":{", d == 0 ? "" : ",", s->v[first[d]].entity);
            for (size_t j = first[d]; j != SIZE_MAX; j = next[j])
                fprintf(f, "%s\"%s\":%" PRIu64, j == first[d] ? "" : ",", s->v[j].counter,
                        s->v[j].value);
            fputc('}', f);
        }
        fputc('}', f);
    }
    fputc('}', f);
    free(link);
    return 0;
}

static int format_json(FILE *f, const struct npv_stats_ctx *c, const struct snap *v, size_t n,
                       const struct npv_stats_samples *samples)
{
    fprintf(f,
            "{\"context\":{\"dma_maps\":%" PRIu64 ",\"dma_map_bytes\":%" PRIu64
            ",\"domain_switches\":%" PRIu64 "},\"devices\":{",
            c->dma_maps, c->dma_map_bytes, c->domain_switches);
    struct npv_stats *dev = malloc(sizeof(*dev));
    bool first_dev = true;
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(v[j].device, v[i].device) == 0;
        if (seen)
            continue;
        fprintf(f, "%s\"%s\":{\"total\":", first_dev ? "" : ",", v[i].device);
        first_dev = false;
        if (dev != NULL) {
            memset(dev, 0, sizeof(*dev));
            for (size_t j = i; j < n; j++)
                if (strcmp(v[j].device, v[i].device) == 0)
                    sum_into(dev, &v[j].st);
            json_stats(f, dev);
        } else {
            fprintf(f, "null");
        }
        fprintf(f, ",\"queues\":{");
        bool first_q = true;
        for (size_t j = i; j < n; j++) {
            if (strcmp(v[j].device, v[i].device) != 0)
                continue;
            fprintf(f, "%s\"%s\":", first_q ? "" : ",", v[j].queue);
            first_q = false;
            json_stats(f, &v[j].st);
        }
        fprintf(f, "}}");
    }
    free(dev);
    fputc('}', f);
    int rc = json_sources(f, samples);
    fprintf(f, "}\n");
    return rc;
}

/* The metric name of sample x: npuvfio_<source>_<counter> in the metric alphabet. */
static void metric_name(char *dst, size_t size, const struct npv_stats_samples *s,
                        const struct npv_stats_sample *x)
{
    snprintf(dst, size, "npuvfio_%s_%s", s->names[x->source], x->counter);
    /* Prometheus metric names are [a-zA-Z_:][a-zA-Z0-9_:]* (exposition format 0.0.4). */
    for (char *p = dst; *p != '\0'; p++)
        if (*p == '-' || *p == '.' || *p == '/')
            *p = '_';
}

/*
 * The sources' samples as gauges, grouped per metric name (the format wants
 * a metric's samples together under its one TYPE line) in first-emit order,
 * whatever order the sources emitted them in. 0 or -ENOMEM.
 */
enum { METRIC_MAX = sizeof("npuvfio__") + 2 * NPV_STATS_NAME_MAX };

static int prometheus_sources(FILE *f, const struct npv_stats_samples *s)
{
    if (s->n == 0)
        return 0;
    char(*name)[METRIC_MAX] = malloc(s->n * sizeof(*name));
    size_t *metric = malloc(s->n * sizeof(*metric)); /* each sample's first sample of its name */
    if (name == NULL || metric == NULL) {
        free(name);
        free(metric);
        return -ENOMEM;
    }
    for (size_t i = 0; i < s->n; i++) {
        metric_name(name[i], sizeof(name[i]), s, &s->v[i]);
        metric[i] = i;
        /* Compare with the first sample of each name so far (few: one per counter). */
        for (size_t j = 0; j < i; j++) {
            if (metric[j] == j && strcmp(name[j], name[i]) == 0) {
                metric[i] = j;
                break;
            }
        }
    }
    for (size_t i = 0; i < s->n; i++) {
        if (metric[i] != i)
            continue;
        fprintf(f, "# TYPE %s gauge\n", name[i]);
        for (size_t j = i; j < s->n; j++)
            if (metric[j] == i)
                fprintf(f, "%s{entity=\"%s\"} %" PRIu64 "\n", name[i], s->v[j].entity,
                        s->v[j].value);
    }
    free(name);
    free(metric);
    return 0;
}

static int format_prometheus(FILE *f, const struct npv_stats_ctx *c, const struct snap *v, size_t n,
                             const struct npv_stats_samples *samples)
{
    fprintf(f,
            "# HELP npuvfio_dma_maps_total DMA buffers mapped into a domain\n"
            "# TYPE npuvfio_dma_maps_total counter\nnpuvfio_dma_maps_total %" PRIu64 "\n"
            "# HELP npuvfio_dma_map_bytes_total bytes mapped into a domain\n"
            "# TYPE npuvfio_dma_map_bytes_total counter\nnpuvfio_dma_map_bytes_total %" PRIu64 "\n"
            "# HELP npuvfio_domain_switches_total devices attached to another domain\n"
            "# TYPE npuvfio_domain_switches_total counter\nnpuvfio_domain_switches_total %" PRIu64
            "\n",
            c->dma_maps, c->dma_map_bytes, c->domain_switches);
    for (size_t k = 0; k < N_COUNTERS; k++) {
        bool gauge = strcmp(counters[k].name, "in_flight") == 0;
        const char *suffix = gauge ? "" : "_total";
        fprintf(f, "# HELP npuvfio_queue_%s%s %s\n# TYPE npuvfio_queue_%s%s %s\n", counters[k].name,
                suffix, counters[k].help, counters[k].name, suffix, gauge ? "gauge" : "counter");
        for (size_t i = 0; i < n; i++)
            fprintf(f, "npuvfio_queue_%s%s{device=\"%s\",queue=\"%s\"} %" PRIu64 "\n",
                    counters[k].name, suffix, v[i].device, v[i].queue, field(&v[i].st, k));
    }
    fprintf(f, "# HELP npuvfio_queue_latency_seconds job latency, doorbell to collect\n"
               "# TYPE npuvfio_queue_latency_seconds histogram\n");
    for (size_t i = 0; i < n; i++) {
        const struct npv_stats *st = &v[i].st;
        uint64_t cum = 0;
        /* Cumulative buckets at each non-empty bucket's upper bound, then +Inf. */
        for (unsigned b = 0; b + 1 < NPV_STATS_HIST_BUCKETS; b++) {
            if (st->latency[b] == 0)
                continue;
            cum += st->latency[b];
            fprintf(f,
                    "npuvfio_queue_latency_seconds_bucket{device=\"%s\",queue=\"%s\",le=\"%.9f\"} "
                    "%" PRIu64 "\n",
                    v[i].device, v[i].queue, (double)npv_stats_bucket_upper(b) / 1e9, cum);
        }
        fprintf(f,
                "npuvfio_queue_latency_seconds_bucket{device=\"%s\",queue=\"%s\",le=\"+Inf\"} "
                "%" PRIu64 "\n"
                "npuvfio_queue_latency_seconds_sum{device=\"%s\",queue=\"%s\"} %.9f\n"
                "npuvfio_queue_latency_seconds_count{device=\"%s\",queue=\"%s\"} %" PRIu64 "\n",
                v[i].device, v[i].queue, st->latency_count, v[i].device, v[i].queue,
                (double)st->latency_sum_ns / 1e9, v[i].device, v[i].queue, st->latency_count);
    }
    return prometheus_sources(f, samples);
}

int npv_stats_format(struct npv_ctx *ctx, enum npv_stats_format fmt, char **out, size_t *len)
{
    if (ctx == NULL || out == NULL || len == NULL ||
        (fmt != NPV_STATS_JSON && fmt != NPV_STATS_PROMETHEUS))
        return -EINVAL;
    struct snap *v;
    size_t n;
    struct npv_stats_samples samples;
    int rc = collect(ctx, &v, &n, &samples);
    if (rc < 0)
        return rc;
    struct npv_stats_ctx c;
    npv_stats_read_ctx(ctx, &c);
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (f == NULL) {
        npv_stats_samples_free(&samples);
        free(v);
        return -ENOMEM;
    }
    rc = 0;
    if (fmt == NPV_STATS_JSON)
        rc = format_json(f, &c, v, n, &samples);
    else
        rc = format_prometheus(f, &c, v, n, &samples);
    npv_stats_samples_free(&samples);
    int bad = ferror(f) || rc < 0;
    if (fclose(f) != 0 || bad) {
        free(buf);
        free(v);
        return -ENOMEM;
    }
    free(v);
    *out = buf;
    *len = size;
    return 0;
}
