/* SPDX-License-Identifier: MIT */
/* The context's fields and the logging calls every module uses. */
#ifndef NPV_CTX_INTERNAL_H
#define NPV_CTX_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <npuvfio/ctx.h>
#include <npuvfio/failpoint.h>

/* A sysfs root once set: kept until npv_ctx_free, so a pointer handed out never dangles. */
struct npv_sysfs_root {
    struct npv_sysfs_root *next;
    char path[];
};

struct npv_ctx {
    /* Guards log_fn/log_user (read as a pair), the roots list and warned_small_pages. */
    pthread_mutex_t lock;
    /* Atomic: every log call reads it without the lock, and a setter may run meanwhile. */
    _Atomic int log_level;
    npv_log_fn log_fn;
    void *log_user;
    _Atomic int iommu_backend;
    /* The current root, one of roots; read without the lock. */
    _Atomic(const char *) sysfs_root;
    struct npv_sysfs_root *roots;
    /* The 4 KiB fallback of DMA memory is worth one warning per context, not one per buffer. */
    bool warned_small_pages;
    /*
     * The iommufd shared by the context's iommufd devices. A device stays bound
     * to one iommufd while its fd is open and an IOAS belongs to one iommufd,
     * so every domain's IOAS lives in this one for devices to move between
     * domains. Opened by the first iommufd device; every open device and every
     * domain's IOAS holds a reference (iommufd_users), so it closes when the
     * last device has closed and the last domain with an IOAS is freed.
     * iommufd_lock also serialises the bookkeeping of the per-domain IOAS
     * sinks (lock order: device, iommufd_lock, domain).
     */
    pthread_mutex_t iommufd_lock;
    int iommufd; /* -1 while closed */
    unsigned iommufd_users;
    /*
     * Failure injection (failpoint.c): calls counted per class since the last
     * arm, and the one armed call. armed_class is -1 when nothing is armed; a
     * firing call swaps it to -1 so the failure happens once.
     */
    _Atomic uint64_t fail_calls[NPV_FAIL_CLASS_COUNT];
    _Atomic int fail_armed_class;
    _Atomic uint64_t fail_armed_nth;
    /* What the context's objects hold right now (npv_ctx_resources), by enum npv_live. */
    _Atomic int64_t live[5];
    /*
     * Stats (lib/stats): the registry of queues (a list in creation order,
     * guarded by stats_lock, taken at queue creation/free and by readers
     * only), the programs' counter sources (a list in addition order, under
     * stats_lock too: a source's fn runs with it held, so a removal that
     * takes it knows fn is not running), whether new queues measure latency,
     * and the context-wide counters.
     */
    pthread_mutex_t stats_lock;
    struct npv_stats_queue *stats_first, *stats_last;
    struct npv_stats_source *stats_sources;
    unsigned stats_queue_seq;
    _Atomic int stats_latency;
    _Atomic uint64_t stats_dma_maps, stats_dma_map_bytes, stats_domain_switches;
};

/* Free the sources left registered (lib/stats/stats_source.c), without calling them. */
void npv_stats_sources_free(struct npv_ctx *ctx);

/* The counters of npv_ctx_resources: every acquisition adds, its release subtracts. */
enum npv_live {
    NPV_LIVE_DEVICES,
    NPV_LIVE_DOMAINS,
    NPV_LIVE_DMA_BUFFERS,
    NPV_LIVE_DMA_BYTES,
    NPV_LIVE_IOVAS,
};

static inline void npv_live_add(struct npv_ctx *ctx, enum npv_live which, int64_t delta)
{
    if (ctx != NULL)
        atomic_fetch_add_explicit(&ctx->live[which], delta, memory_order_relaxed);
}

void npv__log(struct npv_ctx *ctx, enum npv_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The level test is inline so a suppressed debug line costs one load and a branch. */
#define npv_log(ctx, level, ...)                                                                   \
    do {                                                                                           \
        if ((ctx) == NULL ||                                                                       \
            (int)(level) <= atomic_load_explicit(&(ctx)->log_level, memory_order_relaxed))         \
            npv__log((ctx), (level), __VA_ARGS__);                                                 \
    } while (0)

#define npv_err(ctx, ...)   npv_log(ctx, NPV_LOG_ERROR, __VA_ARGS__)
#define npv_warn(ctx, ...)  npv_log(ctx, NPV_LOG_WARN, __VA_ARGS__)
#define npv_info(ctx, ...)  npv_log(ctx, NPV_LOG_INFO, __VA_ARGS__)
#define npv_debug(ctx, ...) npv_log(ctx, NPV_LOG_DEBUG, __VA_ARGS__)

/* Join the context's sysfs root and a relative path. -ENAMETOOLONG when it does not fit. */
int npv_sysfs_path(const struct npv_ctx *ctx, char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
