/* SPDX-License-Identifier: MIT */
/*
 * npv_dev: one opened device function, over any transport.
 *
 * A driver written against this header (and bar.h, irq.h, dma.h, ring.h)
 * never knows whether the device is behind kernel VFIO (legacy or iommufd)
 * or behind a vfio-user socket.
 *
 * A device is attached to exactly one domain at a time.
 *
 * Who holds whom: a device holds a reference on the domain it is attached
 * to (taken by the open or npv_dev_attach, moved by a later attach, dropped
 * by npv_dev_close). So the caller may npv_domain_put its own reference
 * right after the open: the domain, with its mappings (and on iommufd its
 * IOAS), lives until the device closes or moves to another domain. Nothing
 * holds the context or the device:
 *   1. npv_ring_free every ring (it uses the device's BAR, IRQ and DMA memory
 *      without holding them);
 *   2. npv_irq_disable and npv_bar_unmap the device's IRQs and BARs;
 *   3. npv_dev_close, npv_dma_free and npv_domain_put in any order: a DMA
 *      mapping holds its domain too, and a buffer is unmapped from every
 *      IOMMU behind the domain before its memory is released (closing the
 *      device first means it never DMAs to an address just unmapped);
 *   4. npv_ctx_free last.
 *
 * Thread-safety: control calls on one device are serialised by the device's
 * lock; region reads/writes through mmap are lock-free.
 */
#ifndef NPUVFIO_DEV_H
#define NPUVFIO_DEV_H

#include <stdbool.h>
#include <npuvfio/common.h>
#include <npuvfio/ctx.h>
#include <npuvfio/domain.h>

#ifdef __cplusplus
extern "C" {
#endif

struct npv_dev;

/* Region indexes of a PCI function, as VFIO numbers them. */
enum {
    NPV_PCI_BAR0_REGION = 0,
    NPV_PCI_BAR5_REGION = 5,
    NPV_PCI_ROM_REGION = 6,
    NPV_PCI_CONFIG_REGION = 7,
    NPV_PCI_VGA_REGION = 8,
};

enum npv_transport {
    NPV_TRANSPORT_LEGACY = 1,
    NPV_TRANSPORT_IOMMUFD,
    NPV_TRANSPORT_VFIO_USER,
};

enum {
    NPV_DEV_FLAG_RESET = 1u << 0, /* the device supports VFIO_DEVICE_RESET */
    NPV_DEV_FLAG_PCI = 1u << 1,
    NPV_DEV_FLAG_PLATFORM = 1u << 2, /* a platform device: no config space, no MSI */
};

/* Region n of a platform device: its n-th MMIO resource (device-tree `reg` order). */
#define NPV_PLATFORM_REGION(n) ((uint32_t)(n))

struct npv_dev_info {
    uint32_t flags;
    uint32_t num_regions;
    uint32_t num_irqs;
    uint16_t vendor_id, device_id; /* from config space; 0 if unreadable */
    uint32_t class_code;           /* 24 bits */
};

enum {
    NPV_REGION_READ = 1u << 0,
    NPV_REGION_WRITE = 1u << 1,
    NPV_REGION_MMAP = 1u << 2,
};

#define NPV_REGION_MAX_SPARSE 16

struct npv_region_area {
    uint64_t offset;
    uint64_t size;
};

struct npv_region_info {
    uint32_t index;
    uint32_t flags;
    uint64_t size;
    /*
     * Areas that may be mmapped. When the region has MMAP and no sparse
     * capability this is one area covering the whole region.
     */
    uint32_t nr_mmap_areas;
    struct npv_region_area mmap_areas[NPV_REGION_MAX_SPARSE];
    bool msix_mappable; /* VFIO_REGION_INFO_CAP_MSIX_MAPPABLE */
};

enum {
    NPV_IRQ_INFO_EVENTFD = 1u << 0,
    NPV_IRQ_INFO_MASKABLE = 1u << 1,
    NPV_IRQ_INFO_AUTOMASKED = 1u << 2,
    NPV_IRQ_INFO_NORESIZE = 1u << 3,
};

struct npv_irq_info {
    uint32_t index;
    uint32_t flags;
    uint32_t count;
};

struct npv_dev_opts {
    /*
     * Deadline for one control request (vfio-user round trip); 0 = 5 s. A
     * vfio-user request that misses it fails with -ETIMEDOUT and ends the
     * connection (the server may still act on it): every later call of the
     * device fails with -ENOTCONN; close it and open it again.
     */
    uint64_t request_timeout_ns;
};

/*
 * Open a PCI function bound to vfio-pci, by address ("0000:01:00.0"), and
 * attach it to dom. The backend is the context's choice (auto, legacy,
 * iommufd). Enables bus mastering; clears Enable No Snoop when the IOMMU
 * does not enforce coherency. Errors: -EINVAL malformed address, -ENODEV no
 * such device (or not on a vfio driver), -NPV_ENOTVIABLE when another
 * function of the group is on a host driver (logged by name),
 * -NPV_ENOBACKEND when the kernel or this build lacks the backend chosen
 * (forced by NPUVFIO_IOMMU / npv_ctx_set_iommu_backend, or the legacy
 * fallback of auto), -EACCES, -EBUSY.
 */
NPV_API int npv_dev_open_pci(struct npv_ctx *ctx, const char *bdf, struct npv_domain *dom,
                             const struct npv_dev_opts *opts, struct npv_dev **out);

/*
 * Open a platform device bound to vfio-platform, by its sysfs name
 * ("fdab0000.npu", see platform.h for its region and IRQ indexes), and
 * attach it to dom, through the same backends as npv_dev_open_pci. No PCI
 * set-up is done. Errors: -EINVAL malformed name, -ENODEV no such device, not
 * on vfio-platform or without an IOMMU group, -ENOTVIABLE as for PCI,
 * -EACCES, -EBUSY.
 */
NPV_API int npv_dev_open_platform(struct npv_ctx *ctx, const char *name, struct npv_domain *dom,
                                  const struct npv_dev_opts *opts, struct npv_dev **out);

/*
 * Connect to a vfio-user device server at socket_path, negotiate the
 * protocol, and attach to dom (its mappings are sent to the server).
 */
NPV_API int npv_dev_open_vfio_user(struct npv_ctx *ctx, const char *socket_path,
                                   struct npv_domain *dom, const struct npv_dev_opts *opts,
                                   struct npv_dev **out);

/* Disable IRQs, detach, close. Every npv_bar/npv_irq of the device must be released first. */
NPV_API void npv_dev_close(struct npv_dev *dev);

/*
 * Move the device to dom. iommufd: one ATTACH_IOMMUFD_PT (replace); the first
 * attach to a domain also makes its IOAS and fills it from the journal, later
 * ones cost the same whatever the mapping count. Legacy and vfio-user: the
 * old domain's mappings are removed from the device's IOMMU and dom's
 * journal is replayed into it. A no-op when dom is already attached. On
 * failure the device stays attached to its old domain.
 *
 * On iommufd a domain keeps its IOAS and pins until the domain is freed: the
 * pages of its mappings stay pinned (and charged to RLIMIT_MEMLOCK) after the
 * device moved away or closed, which is what makes the switch back hitless.
 * Free a domain no device will come back to (npv_domain_put) to unpin them.
 */
NPV_API int npv_dev_attach(struct npv_dev *dev, struct npv_domain *dom);
NPV_API struct npv_domain *npv_dev_domain(const struct npv_dev *dev);

NPV_API enum npv_transport npv_dev_transport(const struct npv_dev *dev);
NPV_API const char *npv_transport_name(enum npv_transport t);
NPV_API struct npv_ctx *npv_dev_ctx(const struct npv_dev *dev);
/* "0000:01:00.0" for PCI, "fdab0000.npu" for a platform device, the socket path for vfio-user. */
NPV_API const char *npv_dev_name(const struct npv_dev *dev);

NPV_API int npv_dev_info(struct npv_dev *dev, struct npv_dev_info *info);
NPV_API int npv_dev_region_info(struct npv_dev *dev, uint32_t index, struct npv_region_info *info);
NPV_API int npv_dev_irq_info(struct npv_dev *dev, uint32_t index, struct npv_irq_info *info);

/*
 * Read or write len bytes of a region at off through the transport (pread /
 * pwrite or a REGION_READ/WRITE message), as one access when len is 1, 2, 4
 * or 8. Returns 0 or a negative errno; a short transfer is -EIO.
 */
NPV_API int npv_dev_region_read(struct npv_dev *dev, uint32_t index, uint64_t off, void *buf,
                                size_t len);
NPV_API int npv_dev_region_write(struct npv_dev *dev, uint32_t index, uint64_t off, const void *buf,
                                 size_t len);

/*
 * Wait until every BAR write npv_bar_write (or npv_bar_writeN) has posted
 * was carried out by the device, and report the first that failed since the
 * last report: 0 or its negative errno. Over vfio-user, when the server
 * negotiated "write_multiple", trapped BAR writes are posted (sent without
 * waiting for a reply, as a CPU's MMIO write on PCIe); any read, any other
 * call to the device, and a mapped access order them as a PCIe read does,
 * and the next synchronous call reports a failure. Other transports write
 * synchronously and return 0 here.
 *
 * Consecutive posted writes are gathered and leave as one
 * REGION_WRITE_MULTI (NPUVFIO_VU_BATCH=0 sends each on its own): in front
 * of the next read, command, flush or mapped access, and before the
 * library waits for the device (npv_irq_wait, npv_irq_waitset_wait,
 * npv_ring_wait) or rings a ring's doorbell. A caller that sleeps on an
 * interrupt eventfd itself (npv_irq_fd in its own poll or epoll) after
 * writing registers with npv_bar_* calls npv_dev_flush first, or the device
 * may never see those writes.
 */
NPV_API int npv_dev_flush(struct npv_dev *dev);

/*
 * Register accesses made through npv_bar_* on dev since it was opened, by
 * the way they went: mapped (a plain load or store) or trapped (a message or
 * pread/pwrite through the transport; posted ones are among the trapped
 * writes). Counted per device by the BAR layer with relaxed atomics: exact
 * from one thread, approximate when several threads access one device.
 */
struct npv_dev_stats {
    uint64_t reads_mapped;
    uint64_t writes_mapped;
    uint64_t reads_trapped;
    uint64_t writes_trapped;
    uint64_t writes_posted; /* trapped writes sent without waiting (npv_dev_flush) */
    uint64_t flushes;       /* fences sent to order posted writes */
    /*
     * Messages sent to the device over its transport (vfio-user: every
     * command, each posted write or batch of them, each fence; 0 on the
     * kernel's vfio). Consecutive posted writes leave as one batch.
     */
    uint64_t messages;
    uint64_t reserved[1];
};
NPV_API int npv_dev_stats(struct npv_dev *dev, struct npv_dev_stats *st);

/*
 * Config space helpers (region NPV_PCI_CONFIG_REGION), little-endian values.
 * -ENOTSUP on a device that is not PCI (a platform device's region 7 is an
 * MMIO resource like any other).
 */
NPV_API int npv_dev_config_read(struct npv_dev *dev, uint32_t off, void *buf, size_t len);
NPV_API int npv_dev_config_write(struct npv_dev *dev, uint32_t off, const void *buf, size_t len);

/*
 * A device-specific reset, used when the transport has no reset for the
 * device, and by the ring engine after a missed deadline.
 */
typedef int (*npv_reset_hook)(struct npv_dev *dev, void *arg);
NPV_API void npv_dev_set_reset_hook(struct npv_dev *dev, npv_reset_hook hook, void *arg);

/*
 * Reset: VFIO_DEVICE_RESET (or the vfio-user DEVICE_RESET) when the device
 * advertises it, else the reset hook, else -ENOTSUP.
 */
NPV_API int npv_dev_reset(struct npv_dev *dev);

/*
 * Whether DMA of this device is cache coherent, and whether the library
 * cleared Enable No Snoop at open (1 yes, 0 no).
 */
NPV_API bool npv_dev_coherent(const struct npv_dev *dev);
NPV_API bool npv_dev_no_snoop_cleared(const struct npv_dev *dev);

/*
 * IOMMU faults of the device, as far as the kernel lets user space see them.
 *
 * Visible: over iommufd, I/O page faults only, that is the page requests of
 * a device that takes recoverable faults (PCIe PRI, or an SMMU stall). The
 * library gives each domain's page table a fault queue (IOMMU_FAULT_QUEUE_ALLOC,
 * then IOMMU_HWPT_ALLOC with IOMMU_HWPT_FAULT_ID_VALID) when the build has
 * the uapi (6.11+ headers) and the kernel accepts a fault queue on a
 * kernel-managed page table (6.11 and 6.12 accept it only on nested ones),
 * and keeps it for a device whose IOMMU driver enables I/O page faults.
 *
 * Not visible, so the calls below return -EOPNOTSUPP:
 * - legacy type1: VFIO reports no IOMMU fault to user space;
 * - iommufd otherwise: a DMA to an unmapped IOVA by a device without PRI is
 *   an unrecoverable fault; the IOMMU driver writes it to the kernel log
 *   (e.g. "DMAR: [DMA Read] ... fault reason") and the access fails at the
 *   device. iommufd's vEVENTQ (6.15+) reports such faults only for nested
 *   (VMM) translation, which the library does not use;
 * - vfio-user: the protocol has no fault message.
 */
enum {
    NPV_FAULT_READ = 1u << 0, /* the access asked for: read, write, execute, privileged */
    NPV_FAULT_WRITE = 1u << 1,
    NPV_FAULT_EXEC = 1u << 2,
    NPV_FAULT_PRIV = 1u << 3,
};

#define NPV_FAULT_NO_PASID UINT32_MAX

struct npv_dev_fault {
    npv_iova_t iova;   /* the page the device asked for */
    uint32_t access;   /* NPV_FAULT_* */
    uint32_t pasid;    /* NPV_FAULT_NO_PASID when the request carried none */
    bool other_device; /* raised by another device sharing the domain's page table */
};

/*
 * An fd that polls readable (POLLIN) while faults wait; owned by the library,
 * valid while the device stays attached to its domain. -EOPNOTSUPP.
 */
NPV_API int npv_dev_fault_fd(struct npv_dev *dev);
/*
 * Take up to max waiting faults without blocking. Returns how many (0: none),
 * -EOPNOTSUPP (see above), -ENOSPC when the next group of faults (a PRI page
 * request group) holds more than max. Each group taken is answered at once
 * with Invalid Request (PCIe 6.0 §10.4.2.1): a domain's memory is mapped
 * before the device uses it, so a page request is a DMA outside the mappings,
 * and the device must fail that access rather than wait for a page.
 */
NPV_API int npv_dev_read_faults(struct npv_dev *dev, struct npv_dev_fault *out, size_t max);

#ifdef __cplusplus
}
#endif

#endif
