/* SPDX-License-Identifier: MIT */
/*
 * The library context: logging, backend preferences and the sysfs root.
 * The library keeps no global state; everything hangs off a context.
 *
 * Thread-safety: every call here may run in any thread at any time, also
 * while other threads log or open devices through the context. A setter's
 * value is seen by calls that start after it returns; a call already under
 * way may still use the previous one (see npv_ctx_set_log_sink and
 * npv_ctx_sysfs_root). npv_ctx_free is the exception: nothing may use the
 * context during or after it.
 */
#ifndef NPUVFIO_CTX_H
#define NPUVFIO_CTX_H

#include <npuvfio/common.h>

#ifdef __cplusplus
extern "C" {
#endif

struct npv_ctx;

enum npv_log_level {
    NPV_LOG_ERROR = 0,
    NPV_LOG_WARN = 1,
    NPV_LOG_INFO = 2,
    NPV_LOG_DEBUG = 3,
};

/* A log sink. msg has no trailing newline. Called with no library lock held. */
typedef void (*npv_log_fn)(void *user, enum npv_log_level level, const char *msg);

/* Which kernel IOMMU interface to use for PCI devices. */
enum npv_iommu_backend {
    NPV_IOMMU_AUTO = 0, /* iommufd when /dev/iommu and the device's cdev exist, else legacy */
    NPV_IOMMU_LEGACY,   /* type1v2 container + group */
    NPV_IOMMU_IOMMUFD,  /* /dev/iommu + /dev/vfio/devices/vfioN */
};

/*
 * Create a context. The log level starts at NPV_LOG_WARN, or at the level
 * named by NPUVFIO_LOG=error|warn|info|debug; the backend at NPV_IOMMU_AUTO or
 * NPUVFIO_IOMMU=legacy|iommufd; the sysfs root at "/sys" or NPUVFIO_SYSFS_ROOT.
 * Returns 0 or -ENOMEM / -EINVAL (an environment value we cannot parse).
 */
NPV_API int npv_ctx_new(struct npv_ctx **out);
/* Free a context. Every object made from it must be released first. NULL is a no-op. */
NPV_API void npv_ctx_free(struct npv_ctx *ctx);

NPV_API void npv_ctx_set_log_level(struct npv_ctx *ctx, enum npv_log_level level);
NPV_API enum npv_log_level npv_ctx_log_level(const struct npv_ctx *ctx);
/*
 * fn NULL restores the stderr sink. A line being logged while this runs may
 * still reach the previous sink after it returns: keep the previous user data
 * valid until no thread can be logging through the context.
 */
NPV_API void npv_ctx_set_log_sink(struct npv_ctx *ctx, npv_log_fn fn, void *user);
/* Parse "error|warn|info|debug". Returns the level or -EINVAL. */
NPV_API int npv_log_level_parse(const char *name);
/*
 * Log through the context's sink when level is at or above the context's
 * level: for device drivers built on the library, so their messages reach
 * the same sink as the library's. Not for hot paths.
 */
NPV_API void npv_ctx_log(struct npv_ctx *ctx, enum npv_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

NPV_API void npv_ctx_set_iommu_backend(struct npv_ctx *ctx, enum npv_iommu_backend backend);
NPV_API enum npv_iommu_backend npv_ctx_iommu_backend(const struct npv_ctx *ctx);
/* Parse "auto|legacy|iommufd". Returns the backend or -EINVAL. */
NPV_API int npv_iommu_backend_parse(const char *name);

/*
 * The root under which "bus/pci", "kernel/iommu_groups" ... are read. The
 * string is copied. -EINVAL empty, -ENAMETOOLONG, -ENOMEM.
 */
NPV_API int npv_ctx_set_sysfs_root(struct npv_ctx *ctx, const char *root);
/*
 * The current sysfs root. The string stays valid until npv_ctx_free, also
 * after another thread sets a new root (the context keeps every distinct
 * root it was given until then), so it may be read while setters run.
 */
NPV_API const char *npv_ctx_sysfs_root(const struct npv_ctx *ctx);

/*
 * What the context's objects hold right now: for leak checks (a test, a
 * long-running server's health page). Counted whatever the build options.
 */
struct npv_ctx_resources {
    uint64_t devices;          /* opened, not yet closed */
    uint64_t domains;          /* not yet destroyed */
    uint64_t dma_buffers;      /* npv_dma objects (allocated or wrapped) not yet freed */
    uint64_t dma_bytes;        /* their sizes */
    uint64_t iova_allocations; /* IOVA ranges held in all domains (mappings, reservations) */
};
/* Copy the counters. Any thread; each field is read atomically, the set is not a snapshot. */
NPV_API void npv_ctx_resources(const struct npv_ctx *ctx, struct npv_ctx_resources *out);

/* Whether this build has iommufd support (uapi headers had it at configure time). */
NPV_API int npv_build_has_iommufd(void);
/* The library version, "MAJOR.MINOR.PATCH". */
NPV_API const char *npv_version(void);

#ifdef __cplusplus
}
#endif

#endif
