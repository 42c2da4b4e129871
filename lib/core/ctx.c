/* SPDX-License-Identifier: MIT */
/* The library context: settings from the environment, setters, sysfs paths. */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx_internal.h"
#include "failpoint_internal.h"
#include "npv_config.h"

static const char *const log_level_names[] = {"error", "warn", "info", "debug"};
static const char *const backend_names[] = {"auto", "legacy", "iommufd"};

static int parse_name(const char *name, const char *const *names, int count)
{
    if (name == NULL)
        return -EINVAL;
    for (int i = 0; i < count; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -EINVAL;
}

int npv_log_level_parse(const char *name)
{
    return parse_name(name, log_level_names, 4);
}

int npv_iommu_backend_parse(const char *name)
{
    return parse_name(name, backend_names, 3);
}

static int apply_environment(struct npv_ctx *ctx)
{
    const char *v = getenv("NPUVFIO_LOG");
    if (v != NULL && *v != '\0') {
        int level = npv_log_level_parse(v);
        if (level < 0) {
            npv_err(ctx, "NPUVFIO_LOG=%s: expected error, warn, info or debug", v);
            return -EINVAL;
        }
        atomic_store_explicit(&ctx->log_level, level, memory_order_relaxed);
    }
    v = getenv("NPUVFIO_IOMMU");
    if (v != NULL && *v != '\0') {
        int backend = npv_iommu_backend_parse(v);
        if (backend < 0) {
            npv_err(ctx, "NPUVFIO_IOMMU=%s: expected auto, legacy or iommufd", v);
            return -EINVAL;
        }
        atomic_store_explicit(&ctx->iommu_backend, backend, memory_order_relaxed);
    }
    v = getenv("NPUVFIO_SYSFS_ROOT");
    if (v != NULL && *v != '\0')
        return npv_ctx_set_sysfs_root(ctx, v);
    return 0;
}

int npv_ctx_new(struct npv_ctx **out)
{
    struct npv_ctx *ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return -ENOMEM;
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_mutex_init(&ctx->iommufd_lock, NULL);
    pthread_mutex_init(&ctx->stats_lock, NULL);
    ctx->iommufd = -1;
    atomic_init(&ctx->log_level, NPV_LOG_WARN);
    atomic_init(&ctx->iommu_backend, NPV_IOMMU_AUTO);
    atomic_init(&ctx->sysfs_root, NULL);
    atomic_init(&ctx->fail_armed_class, -1);
    int ret = npv_ctx_set_sysfs_root(ctx, "/sys");
    if (ret == 0)
        ret = apply_environment(ctx);
    if (ret < 0) {
        npv_ctx_free(ctx);
        return ret;
    }
    *out = ctx;
    return 0;
}

void npv_ctx_free(struct npv_ctx *ctx)
{
    if (ctx == NULL)
        return;
    /* Devices and domains with an IOAS hold it: one left is a caller's bug (and a leaked fd). */
    if (ctx->iommufd_users != 0)
        npv_err(ctx,
                "context freed with /dev/iommu still held %u times: a device or a domain "
                "was not released",
                ctx->iommufd_users);
    npv_stats_sources_free(ctx);
    pthread_mutex_destroy(&ctx->lock);
    pthread_mutex_destroy(&ctx->iommufd_lock);
    pthread_mutex_destroy(&ctx->stats_lock);
    while (ctx->roots != NULL) {
        struct npv_sysfs_root *r = ctx->roots;
        ctx->roots = r->next;
        free(r);
    }
    free(ctx);
}

void npv_ctx_set_log_level(struct npv_ctx *ctx, enum npv_log_level level)
{
    atomic_store_explicit(&ctx->log_level, (int)level, memory_order_relaxed);
}

enum npv_log_level npv_ctx_log_level(const struct npv_ctx *ctx)
{
    return (enum npv_log_level)atomic_load_explicit(&ctx->log_level, memory_order_relaxed);
}

void npv_ctx_log(struct npv_ctx *ctx, enum npv_log_level level, const char *fmt, ...)
{
    if (ctx != NULL && level > npv_ctx_log_level(ctx))
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    npv__log(ctx, level, "%s", msg);
}

void npv_ctx_set_log_sink(struct npv_ctx *ctx, npv_log_fn fn, void *user)
{
    pthread_mutex_lock(&ctx->lock);
    ctx->log_fn = fn;
    ctx->log_user = user;
    pthread_mutex_unlock(&ctx->lock);
}

void npv_ctx_set_iommu_backend(struct npv_ctx *ctx, enum npv_iommu_backend backend)
{
    atomic_store_explicit(&ctx->iommu_backend, (int)backend, memory_order_relaxed);
}

enum npv_iommu_backend npv_ctx_iommu_backend(const struct npv_ctx *ctx)
{
    return (enum npv_iommu_backend)atomic_load_explicit(&ctx->iommu_backend, memory_order_relaxed);
}

/* A root set before is reused: a program switching between two trees keeps two strings. */
static const char *keep_root_locked(struct npv_ctx *ctx, const char *root, size_t len)
{
    for (struct npv_sysfs_root *r = ctx->roots; r != NULL; r = r->next)
        if (strcmp(r->path, root) == 0)
            return r->path;
    struct npv_sysfs_root *r = npv_fp_malloc(ctx, sizeof(*r) + len + 1);
    if (r == NULL)
        return NULL;
    memcpy(r->path, root, len + 1);
    r->next = ctx->roots;
    ctx->roots = r;
    return r->path;
}

int npv_ctx_set_sysfs_root(struct npv_ctx *ctx, const char *root)
{
    if (root == NULL || *root == '\0')
        return -EINVAL;
    size_t len = strlen(root);
    if (len >= 4096)
        return -ENAMETOOLONG;
    pthread_mutex_lock(&ctx->lock);
    const char *kept = keep_root_locked(ctx, root, len);
    /* Release: a reader that loads the pointer sees the string's bytes. */
    if (kept != NULL)
        atomic_store_explicit(&ctx->sysfs_root, kept, memory_order_release);
    pthread_mutex_unlock(&ctx->lock);
    return kept != NULL ? 0 : -ENOMEM;
}

const char *npv_ctx_sysfs_root(const struct npv_ctx *ctx)
{
    return atomic_load_explicit(&ctx->sysfs_root, memory_order_acquire);
}

int npv_sysfs_path(const struct npv_ctx *ctx, char *buf, size_t len, const char *fmt, ...)
{
    /* One load: the whole path uses one root even while another thread sets a new one. */
    int n = snprintf(buf, len, "%s/", npv_ctx_sysfs_root(ctx));
    if (n < 0 || (size_t)n >= len)
        return -ENAMETOOLONG;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, len - (size_t)n, fmt, ap);
    va_end(ap);
    if (m < 0 || (size_t)m >= len - (size_t)n)
        return -ENAMETOOLONG;
    return 0;
}

static uint64_t live_value(const struct npv_ctx *ctx, enum npv_live which)
{
    int64_t v = atomic_load_explicit(&ctx->live[which], memory_order_relaxed);
    return v < 0 ? 0 : (uint64_t)v;
}

void npv_ctx_resources(const struct npv_ctx *ctx, struct npv_ctx_resources *out)
{
    *out = (struct npv_ctx_resources){
        .devices = live_value(ctx, NPV_LIVE_DEVICES),
        .domains = live_value(ctx, NPV_LIVE_DOMAINS),
        .dma_buffers = live_value(ctx, NPV_LIVE_DMA_BUFFERS),
        .dma_bytes = live_value(ctx, NPV_LIVE_DMA_BYTES),
        .iova_allocations = live_value(ctx, NPV_LIVE_IOVAS),
    };
}

int npv_build_has_iommufd(void)
{
    return NPV_HAVE_IOMMUFD;
}

const char *npv_version(void)
{
    return NPV_VERSION;
}
