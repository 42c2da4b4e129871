/* SPDX-License-Identifier: MIT */
/*
 * The transport seam: every backend (kernel legacy, kernel iommufd,
 * vfio-user client) fills one npv_dev_ops. dev.c, bar.c and irq.c are written
 * against it only.
 */
#ifndef NPV_DEV_INTERNAL_H
#define NPV_DEV_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <npuvfio/dev.h>
#include "domain_internal.h"

/* VFIO_IRQ_SET_* values, repeated so this header does not need linux/vfio.h. */
enum {
    NPV_IRQ_SET_DATA_NONE = 1u << 0,
    NPV_IRQ_SET_DATA_BOOL = 1u << 1,
    NPV_IRQ_SET_DATA_EVENTFD = 1u << 2,
    NPV_IRQ_SET_ACTION_MASK = 1u << 3,
    NPV_IRQ_SET_ACTION_UNMASK = 1u << 4,
    NPV_IRQ_SET_ACTION_TRIGGER = 1u << 5,
};

struct npv_dev_ops {
    int (*get_info)(struct npv_dev *dev, struct npv_dev_info *info);
    int (*region_info)(struct npv_dev *dev, uint32_t index, struct npv_region_info *info);
    /*
     * The fd and file offset to mmap for the area of region index starting
     * at region offset area_off (one of region_info's mmap_areas). The fd
     * stays owned by the backend.
     */
    int (*region_mmap_fd)(struct npv_dev *dev, uint32_t index, uint64_t area_off, int *fd,
                          uint64_t *file_off);
    int (*region_read)(struct npv_dev *dev, uint32_t index, uint64_t off, void *buf, size_t len);
    int (*region_write)(struct npv_dev *dev, uint32_t index, uint64_t off, const void *buf,
                        size_t len);
    /*
     * Optional: a BAR write of 1, 2, 4 or 8 bytes that may be posted (sent
     * without waiting for the device), for npv_bar_write. A posted write's
     * failure is reported by the next synchronous call or flush. NULL: the
     * region_write above.
     */
    int (*region_write_posted)(struct npv_dev *dev, uint32_t index, uint64_t off, const void *buf,
                               size_t len);
    /*
     * Optional: wait until every posted write was carried out. take_error:
     * return (and forget) a failure of one; else leave it for the next
     * synchronous call and return only a transport failure.
     */
    int (*flush)(struct npv_dev *dev, bool take_error);
    /*
     * Optional: send the posted writes the backend holds back (a batch)
     * without waiting for them; called (through npv_dev_kick) before the
     * caller waits for the device, so it never sleeps on writes the device
     * has not been sent. A failure is left for the next synchronous call.
     */
    void (*kick)(struct npv_dev *dev);
    int (*irq_info)(struct npv_dev *dev, uint32_t index, struct npv_irq_info *info);
    /* VFIO_DEVICE_SET_IRQS semantics; fds holds count eventfds (-1 = unassign) for DATA_EVENTFD. */
    int (*set_irqs)(struct npv_dev *dev, uint32_t index, uint32_t flags, uint32_t start,
                    uint32_t count, const int32_t *fds);
    int (*reset)(struct npv_dev *dev);
    /*
     * Move the device's IOMMU from dev->domain (may be NULL at open) to dom.
     * On failure the old attachment is intact. dev.c updates dev->domain.
     */
    int (*attach)(struct npv_dev *dev, struct npv_domain *dom);
    /* Detach from dev->domain and release the backend's state. */
    void (*close)(struct npv_dev *dev);
    /* Optional (NULL: faults not visible, -EOPNOTSUPP): npv_dev_fault_fd / _read_faults. */
    int (*fault_fd)(struct npv_dev *dev);
    int (*read_faults)(struct npv_dev *dev, struct npv_dev_fault *out, size_t max);
};

struct npv_dev {
    struct npv_ctx *ctx;
    const struct npv_dev_ops *ops;
    enum npv_transport transport;
    char name[256];
    struct npv_domain *domain; /* holds a reference */
    pthread_mutex_t lock;      /* serialises control calls */
    npv_reset_hook reset_hook;
    void *reset_arg;
    bool coherent;
    bool no_snoop_cleared;
    uint64_t request_timeout_ns;
    void *priv; /* the backend's state */
    /*
     * Nonzero while posted writes were sent that the device may not have
     * carried out yet: a mapped access flushes first (npv_bar__order), so
     * mapped and trapped accesses reach the device in program order.
     * Atomic; written by the backend.
     */
    uint32_t posted_pending;
    /*
     * Nonzero while the backend holds posted writes it has not sent yet (a
     * batch): npv_dev_kick sends them before anything waits for the device.
     * Atomic; written by the backend.
     */
    uint32_t batch_pending;
    /*
     * npv_dev_stats: [0] mapped reads, [1] mapped writes (bumped by the
     * inline accessors through npv_bar.mapped_count), [2] trapped reads,
     * [3] trapped writes, [4] posted writes, [5] fences (by the backend),
     * [6] messages sent to the device (vfio-user: every command, posted
     * write, batch and fence; by the backend). Relaxed atomics.
     */
    uint64_t reg_count[7];
};

/* Send the writes dev's backend holds back, if any (one atomic load when none). */
static inline void npv_dev_kick(struct npv_dev *dev)
{
    if (dev != NULL && __atomic_load_n(&dev->batch_pending, __ATOMIC_ACQUIRE) != 0 &&
        dev->ops->kick != NULL)
        dev->ops->kick(dev);
}

/* npv_bar_write's way: region_write_posted when the backend has it. */
int npv_dev_region_write_posted(struct npv_dev *dev, uint32_t index, uint64_t off, const void *buf,
                                size_t len);

/*
 * Shared by the backends: allocate a device with ctx, ops and name set, the
 * lock initialised, no domain. Then the backend fills priv and calls
 * npv_dev_finish_open(), which attaches dom and enables bus mastering.
 */
struct npv_dev *npv_dev_alloc(struct npv_ctx *ctx, const struct npv_dev_ops *ops,
                              enum npv_transport transport, const char *name,
                              const struct npv_dev_opts *opts);
int npv_dev_finish_open(struct npv_dev *dev, struct npv_domain *dom);
/*
 * For the public open calls: npv_dev_finish_open, then *out = dev; on its
 * failure the device is closed and *out left alone.
 */
int npv_dev_finish_open_or_close(struct npv_dev *dev, struct npv_domain *dom, struct npv_dev **out);
/* Free what npv_dev_alloc took (not priv). */
void npv_dev_free_shell(struct npv_dev *dev);

/*
 * On failure of npv_dev_finish_open the device is still open and unattached:
 * the caller releases it with npv_dev_close().
 *
 * Config-space offset of the first standard PCI capability with this id, 0
 * when there is none or the device is not PCI (bounded walk: the chain is
 * device-written input).
 */
int npv_dev_find_pci_cap(struct npv_dev *dev, uint8_t id, uint32_t *off);
/*
 * Whether the device is a PCI function with a config space region: only
 * then do config space, bus mastering, No Snoop and MSI-X mean anything.
 */
bool npv_dev_is_pci(struct npv_dev *dev);

/*
 * Attach helper for backends with one IOMMU sink per device (legacy
 * container, vfio-user connection): remove sink from the old domain with
 * unmapping, add it to dom with replay; on failure put it back.
 */
int npv_dev_move_private_sink(struct npv_dev *dev, struct npv_iommu_sink *sink,
                              struct npv_domain *dom);

/*
 * Transport constructors: open and return a device that is not yet attached
 * to a domain (npv_dev_finish_open does that).
 */
struct npv_vfio_target;
int npv_vfio_legacy_open(struct npv_ctx *ctx, const struct npv_vfio_target *t,
                         const struct npv_dev_opts *opts, struct npv_dev **out);
int npv_vfio_iommufd_open(struct npv_ctx *ctx, const struct npv_vfio_target *t,
                          const struct npv_dev_opts *opts, struct npv_dev **out);
int npv_vfio_user_open(struct npv_ctx *ctx, const char *socket_path,
                       const struct npv_dev_opts *opts, struct npv_dev **out);

#endif
