/* SPDX-License-Identifier: MIT */
/*
 * Shared vocabulary of the public API: export macro, the IOVA type, error
 * codes beyond errno.
 *
 * Every call that can fail returns 0 (or a count) on success and a negative
 * errno on failure, or NULL with errno set for constructors that return a
 * pointer.
 */
#ifndef NPUVFIO_COMMON_H
#define NPUVFIO_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(NPUVFIO_BUILDING_LIBRARY)
#define NPV_API __attribute__((visibility("default")))
#else
#define NPV_API
#endif

/*
 * An I/O virtual address: what the device puts on the bus. A distinct name so
 * an IOVA is never mistaken for a host pointer in an interface.
 */
typedef uint64_t npv_iova_t;

/* An inclusive IOVA range [start, last], as the kernel reports them. */
struct npv_iova_range {
    npv_iova_t start;
    npv_iova_t last;
};

/*
 * Error codes of our own, returned negated like errno values. They start far
 * above the errno range so they never collide with one.
 */
enum npv_error {
    NPV_ERROR_BASE = 0x10000,
    /* The device wrote a value that cannot be true (head beyond tail, bad status). */
    NPV_EDEVFAULT,
    /* An IOMMU group holds a function still bound to a host driver. */
    NPV_ENOTVIABLE,
    /* The peer spoke the protocol wrongly (vfio-user). */
    NPV_EPEERPROTO,
    /*
     * Memory without a file behind it (anonymous private) cannot reach a
     * device server in another process (vfio-user shares memory by fd).
     */
    NPV_ENOTSHARED,
    /*
     * The kernel IOMMU interface the open needs is not there: no
     * /dev/vfio/vfio for the legacy backend, no /dev/iommu (or a build
     * without iommufd) for the iommufd one. Unlike -ENODEV, the device may
     * well exist: another backend (NPUVFIO_IOMMU) or kernel may open it.
     */
    NPV_ENOBACKEND,
    NPV_ERROR_END,
};

/* Words for a negative or positive errno or npv_error. Never NULL; thread-safe. */
NPV_API const char *npv_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif
