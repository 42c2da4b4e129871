/* SPDX-License-Identifier: MIT */
/*
 * Live counters per queue and per device, read without stopping the hot
 * path, and an opt-in Unix socket that serves them as JSON or as Prometheus
 * text exposition (as DPDK's telemetry socket does: a client connects, sends
 * one command, gets one reply).
 *
 * A queue is what one npv_inflight table tracks: the ring of a ring-shaped
 * device (testdev, Edge TPU: npv_ring) or one register-driven queue (an
 * RKNPU core, the AICore's runs). Every table registers itself with its
 * context when it is created, under a default name ("queueN" of device
 * "unnamed") that its driver replaces with npv_inflight_set_name /
 * npv_ring_set_name: the drivers here name theirs "testdev:<dev>" ("ring<q>"),
 * "edgetpu:<dev>" ("instr"), "rknpu:<dev>" ("core<c>"; "queue<c>" for a
 * core's queue, npv_rknpu_queue_open) and "aicore:<dev>" ("runs"), <dev>
 * being npv_dev_name. A device's counters are the sums of its
 * queues'.
 *
 * Cost and concurrency: each queue's counters are written only by the thread
 * that owns the queue at the time (the engine's own one-thread-at-a-time
 * rule, ring.h), with relaxed atomic stores, in the queue's own memory: no
 * lock, no read-modify-write bus lock, no system call on the hot path.
 * Readers (npv_stats_read, npv_stats_foreach, the socket's thread) load the
 * counters with relaxed atomic loads: a snapshot is exact per counter but
 * not one instant across counters (in_flight is clamped at 0).
 * The latency histogram costs one vDSO clock read per submitted batch and
 * one per collected batch, so it is off unless npv_stats_set_latency(ctx, 1)
 * was called before the queue was created.
 *
 * Beside the queues, a program adds sources of its own named counters
 * (npv_stats_add_source): npuvfio serve publishes each client's there.
 *
 * Thread-safety: every call here may be made from any thread at any time,
 * concurrently with the queues' hot paths; the registry of queues and
 * sources is guarded by a context lock taken only at queue creation and
 * destruction, at source addition and removal, and by readers.
 */
#ifndef NPUVFIO_STATS_H
#define NPUVFIO_STATS_H

#include <stddef.h>
#include <stdint.h>

#include <npuvfio/common.h>
#include <npuvfio/ctx.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Latency histogram buckets, log-linear as HDR histograms: values 0..7 ns
 * have a bucket each, then every power of two [2^e, 2^(e+1)) is split into 8
 * equal sub-buckets (3 significant bits, at most 12.5% relative width), up to
 * 2^36 ns (~68.7 s); larger values land in the last bucket.
 */
#define NPV_STATS_HIST_BUCKETS 272u

/*
 * One queue's counters, or a device's (the sums over its queues). Fields are
 * only ever appended: callers pass sizeof(struct npv_stats) and get what both
 * sides know.
 */
struct npv_stats {
    uint64_t requests;       /* jobs claimed (npv_ring_next, npv_inflight_add) */
    uint64_t ok;             /* completions reaped with status 0 */
    uint64_t dev_error;      /* ... with -EIO: the device's error word */
    uint64_t timeout;        /* ... with -ETIMEDOUT: the job's own deadline passed */
    uint64_t cancelled;      /* ... with -ECANCELED: failed with a neighbour, or npv_ring_reset */
    uint64_t fault;          /* ... with -NPV_EDEVFAULT or any other status */
    uint64_t in_flight;      /* requests not yet reaped (claimed, submitted or finished) */
    uint64_t resets;         /* device resets the queue's engine made (ring reset callback) */
    uint64_t latency_count;  /* jobs measured (device completions while latency is on) */
    uint64_t latency_sum_ns; /* their total latency, doorbell to collect */
    uint64_t latency[NPV_STATS_HIST_BUCKETS];
};

/* Counters of the whole context (not per queue: buffers and domains are shared). */
struct npv_stats_ctx {
    uint64_t dma_maps;        /* successful npv_dma_map / npv_dma_map_at */
    uint64_t dma_map_bytes;   /* bytes they mapped */
    uint64_t domain_switches; /* successful npv_dev_attach (a device moved to another domain) */
};

/* The bucket a latency of ns nanoseconds falls in. */
NPV_API unsigned npv_stats_bucket(uint64_t ns);
/* The smallest and largest latency (ns, inclusive) of bucket i (< NPV_STATS_HIST_BUCKETS). */
NPV_API uint64_t npv_stats_bucket_lower(unsigned i);
NPV_API uint64_t npv_stats_bucket_upper(unsigned i);

/*
 * Measure per-job latency (doorbell to collect) in queues created from now
 * on: 1 on, 0 off. Off by default (two vDSO clock reads per batch).
 */
NPV_API void npv_stats_set_latency(struct npv_ctx *ctx, int on);

/*
 * Sum the counters of every queue of device (NULL: every queue) into *out,
 * size bytes of it (sizeof(struct npv_stats)). Returns how many queues were
 * summed, or -EINVAL.
 */
NPV_API int npv_stats_read(struct npv_ctx *ctx, const char *device, struct npv_stats *out,
                           size_t size);
NPV_API void npv_stats_read_ctx(struct npv_ctx *ctx, struct npv_stats_ctx *out);

/*
 * Call fn for each queue, in creation order, with a snapshot of its counters
 * (valid during the call), under the registry lock: fn must not create or free
 * queues of ctx nor call other npv_stats_* functions of ctx. Returns
 * how many queues were visited.
 */
typedef void (*npv_stats_fn)(void *user, const char *device, const char *queue,
                             const struct npv_stats *st);
NPV_API int npv_stats_foreach(struct npv_ctx *ctx, npv_stats_fn fn, void *user);

enum npv_stats_format {
    NPV_STATS_JSON = 0,   /* one JSON object: context, devices, queues, sources */
    NPV_STATS_PROMETHEUS, /* Prometheus text exposition format 0.0.4 */
};

/*
 * Format every counter of ctx, calling every source's fn once (JSON: a
 * member "sources": {"<name>": {"<entity>": {"<counter>": value, ...}, ...},
 * ...}, an empty object when there is no source). *out: a NUL-terminated
 * malloc'd string the caller frees, *len its length. 0, -EINVAL, -ENOMEM
 * (also when a source's emitted counters could not be kept).
 */
NPV_API int npv_stats_format(struct npv_ctx *ctx, enum npv_stats_format fmt, char **out,
                             size_t *len);

/*
 * A source of named counters the stats endpoint serves beside the queues'
 * (npuvfio serve publishes each client's). fn is called at every
 * npv_stats_format (and so every socket request), under the registry lock
 * (it must not call npv_stats_* of ctx), and calls emit once per counter:
 * entity names what the counter belongs to ("client3"), counter the
 * counter ("runs_ok"); both are sanitised as queue names are
 * ([A-Za-z0-9_-.:/], others become '_'). fn must return promptly and may
 * take its own locks.
 *
 * Names (source, entity, counter) keep their first 63 characters; a NULL
 * entity or counter is "". Emit a counter once per entity: the JSON groups
 * an entity's counters under it in emit order (an entity emitted in several
 * runs is merged at its first place), so a repeated counter is a repeated
 * key. In Prometheus text each counter is the gauge
 * npuvfio_<name>_<counter>{entity="<entity>"}, with '-', '.' and '/' of the
 * metric name as '_' (the metric alphabet); samples are grouped per metric
 * name across sources, so two sources whose names make the same metric name
 * share one TYPE line: choose names that do not collide (nor with the
 * built-in npuvfio_queue_* and npuvfio_dma_* metrics).
 *
 * Lock order: fn runs with the registry lock held, so a thread must not call
 * npv_stats_remove_source (nor any npv_stats_* of ctx) while it holds a lock
 * that fn takes.
 */
typedef void (*npv_stats_emit_fn)(void *emit_arg, const char *entity, const char *counter,
                                  uint64_t value);
typedef void (*npv_stats_source_fn)(void *user, npv_stats_emit_fn emit, void *emit_arg);
/*
 * Register source name (unique per ctx: -EEXIST; sanitised likewise) with
 * fn and user until npv_stats_remove_source. -EINVAL (NULL name or fn),
 * -ENOMEM. Thread-safe.
 */
NPV_API int npv_stats_add_source(struct npv_ctx *ctx, const char *name, npv_stats_source_fn fn,
                                 void *user);
/* Remove it; when this returns, fn is not running and will not be called again. -ENOENT. */
NPV_API int npv_stats_remove_source(struct npv_ctx *ctx, const char *name);

struct npv_stats_server;

/*
 * Serve ctx's counters on a Unix stream socket at path (created; an existing
 * socket file there is replaced). Protocol: the client sends one line,
 * "json" or "prometheus" (or "/" for json, as curl-free scripts like), and
 * reads the reply until the server closes; an unknown command gets
 * {"error": ...}. One thread serves, one client at a time, each with a 1 s
 * deadline; it only reads the queues' counters. -EINVAL (path too long),
 * -ENOMEM, or the errno of socket/bind/listen/pthread_create.
 */
NPV_API int npv_stats_serve(struct npv_ctx *ctx, const char *path, struct npv_stats_server **out);
/* Stop the thread, close and unlink the socket. NULL is a no-op. Call before npv_ctx_free. */
NPV_API void npv_stats_server_stop(struct npv_stats_server *s);

#ifdef __cplusplus
}
#endif

#endif
