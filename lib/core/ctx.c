/* SPDX-License-Identifier: MIT */
/* The library context: settings from the environment, setters, sysfs paths. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx_internal.h"
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
        ctx->log_level = (enum npv_log_level)level;
    }
    v = getenv("NPUVFIO_IOMMU");
    if (v != NULL && *v != '\0') {
        int backend = npv_iommu_backend_parse(v);
        if (backend < 0) {
            npv_err(ctx, "NPUVFIO_IOMMU=%s: expected auto, legacy or iommufd", v);
            return -EINVAL;
        }
        ctx->iommu_backend = (enum npv_iommu_backend)backend;
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
    ctx->iommufd = -1;
    ctx->log_level = NPV_LOG_WARN;
    ctx->iommu_backend = NPV_IOMMU_AUTO;
    ctx->sysfs_root = strdup("/sys");
    int ret = ctx->sysfs_root ? apply_environment(ctx) : -ENOMEM;
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
    pthread_mutex_destroy(&ctx->lock);
    pthread_mutex_destroy(&ctx->iommufd_lock);
    free(ctx->sysfs_root);
    free(ctx);
}

void npv_ctx_set_log_level(struct npv_ctx *ctx, enum npv_log_level level)
{
    ctx->log_level = level;
}

enum npv_log_level npv_ctx_log_level(const struct npv_ctx *ctx)
{
    return ctx->log_level;
}

void npv_ctx_log(struct npv_ctx *ctx, enum npv_log_level level, const char *fmt, ...)
{
    if (ctx != NULL && level > ctx->log_level)
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
    ctx->iommu_backend = backend;
}

enum npv_iommu_backend npv_ctx_iommu_backend(const struct npv_ctx *ctx)
{
    return ctx->iommu_backend;
}

int npv_ctx_set_sysfs_root(struct npv_ctx *ctx, const char *root)
{
    if (root == NULL || *root == '\0')
        return -EINVAL;
    if (strlen(root) >= 4096)
        return -ENAMETOOLONG;
    char *copy = strdup(root);
    if (copy == NULL)
        return -ENOMEM;
    pthread_mutex_lock(&ctx->lock);
    free(ctx->sysfs_root);
    ctx->sysfs_root = copy;
    pthread_mutex_unlock(&ctx->lock);
    return 0;
}

const char *npv_ctx_sysfs_root(const struct npv_ctx *ctx)
{
    return ctx->sysfs_root;
}

int npv_sysfs_path(const struct npv_ctx *ctx, char *buf, size_t len, const char *fmt, ...)
{
    int n = snprintf(buf, len, "%s/", ctx->sysfs_root);
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

int npv_build_has_iommufd(void)
{
    return NPV_HAVE_IOMMUFD;
}

const char *npv_version(void)
{
    return NPV_VERSION;
}
