/* SPDX-License-Identifier: MIT */
/*
 * What the two kernel VFIO transports (legacy group/container and iommufd
 * cdev) share: a VFIO device fd and the region, IRQ and reset calls made on
 * it, plus the parsers of the kernel's info capability chains and of the PCI
 * capability list.
 *
 * dev->priv of a kernel VFIO device points to a struct npv_vfio_device; the
 * backend keeps its own state in ->backend.
 */
#ifndef NPV_VFIO_DEVICE_INTERNAL_H
#define NPV_VFIO_DEVICE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dev_internal.h"

/* A region as GET_REGION_INFO reported it at open; flags 0 when the index is absent. */
struct npv_vfio_region {
    uint32_t flags; /* VFIO_REGION_INFO_FLAG_* */
    uint64_t size;
    uint64_t offset; /* of the region in the device fd */
};

struct npv_vfio_device {
    int fd;
    uint32_t flags; /* VFIO_DEVICE_FLAGS_* */
    uint32_t num_regions;
    uint32_t num_irqs;
    struct npv_vfio_region *regions; /* num_regions entries */
    void *backend;
};

/*
 * Read the device's info and its regions' placement from fd. On success vdev
 * owns fd; on failure fd is left open for the caller to close.
 */
int npv_vfio_device_init(struct npv_ctx *ctx, struct npv_vfio_device *vdev, int fd);
/* Close the fd and free the region table. Idempotent. */
void npv_vfio_device_release(struct npv_vfio_device *vdev);

/*
 * npv_dev_ops members shared by both kernel transports (dev->priv is the
 * npv_vfio_device); each transport adds its own attach and close.
 */
#define NPV_VFIO_DEVICE_OPS                                                                        \
    .get_info = npv_vfio_get_info, .region_info = npv_vfio_region_info,                            \
    .region_mmap_fd = npv_vfio_region_mmap_fd, .region_read = npv_vfio_region_read,                \
    .region_write = npv_vfio_region_write, .irq_info = npv_vfio_irq_info,                          \
    .set_irqs = npv_vfio_set_irqs, .reset = npv_vfio_reset

int npv_vfio_get_info(struct npv_dev *dev, struct npv_dev_info *info);
int npv_vfio_region_info(struct npv_dev *dev, uint32_t index, struct npv_region_info *info);
int npv_vfio_region_mmap_fd(struct npv_dev *dev, uint32_t index, uint64_t area_off, int *fd,
                            uint64_t *file_off);
/*
 * Whether vfio's region pread/pwrite performs an aligned 8-byte access as ONE
 * 8-byte access on the kernel named by release (uname -r) and machine (uname
 * -m); older kernels split it into two 4-byte accesses (vfio_pci_core_do_io_rw
 * fills 4 bytes at a time), which tears a 64-bit register. From the public
 * patch history: vfio-pci gained 8-byte accesses under #ifdef ioread64 in
 * Linux 6.10 ("vfio/pci: Support 8-byte PCI loads and stores"), which x86 did
 * not define (it selects GENERIC_IOMAP) until "vfio/pci: Enable iowrite64 and
 * ioread64 for vfio pci" in 6.14 (microsoft/openvmm issue 468 tracks the
 * second). override: NPUVFIO_VFIO_RW64's value, "whole" or "split" (for a
 * backport the version cannot show), or NULL. An unparsable release: false.
 */
bool npv_vfio_rw64_whole_for(const char *release, const char *machine, const char *override);
/* The running kernel's answer (uname, NPUVFIO_VFIO_RW64), decided once. */
bool npv_vfio_rw64_whole(void);
int npv_vfio_region_read(struct npv_dev *dev, uint32_t index, uint64_t off, void *buf, size_t len);
int npv_vfio_region_write(struct npv_dev *dev, uint32_t index, uint64_t off, const void *buf,
                          size_t len);
int npv_vfio_irq_info(struct npv_dev *dev, uint32_t index, struct npv_irq_info *info);
int npv_vfio_set_irqs(struct npv_dev *dev, uint32_t index, uint32_t flags, uint32_t start,
                      uint32_t count, const int32_t *fds);
int npv_vfio_reset(struct npv_dev *dev);

/*
 * Issue a VFIO *_GET_INFO ioctl whose struct starts with argsz and may carry a
 * capability chain: start with base_size bytes of *buf (already filled in),
 * grow the buffer to the argsz the kernel asks for and retry. *buf is
 * malloc'd and replaced; *len is the number of valid bytes in it.
 */
int npv_vfio_info_ioctl(struct npv_ctx *ctx, int fd, unsigned long request, void **buf,
                        size_t base_size, size_t *len);

/*
 * Walk a VFIO info capability chain in buf[0, len) starting at first (0 = no
 * chain). Capabilities may not overlap the fixed part (below min_off) and must
 * move forward, so a chain written by a confused or hostile kernel/server
 * cannot loop or read out of bounds. fn sees each capability with the bytes
 * available to it (up to the next one or the end of buf); a nonzero return
 * stops the walk and is returned. -EPROTO for a malformed chain.
 */
typedef int (*npv_vfio_cap_fn)(void *arg, uint16_t id, uint16_t version, const uint8_t *cap,
                               size_t avail);
int npv_vfio_cap_walk(const void *buf, size_t len, uint32_t first, size_t min_off,
                      npv_vfio_cap_fn fn, void *arg);

/*
 * Fill info's mmap areas and msix_mappable from a struct vfio_region_info
 * buffer of len bytes (the fixed part and its capability chain). Sparse areas
 * are checked against the region's size. *truncated is set when the region
 * has more sparse areas than NPV_REGION_MAX_SPARSE (the rest are left to
 * region reads/writes). -EPROTO for a malformed buffer.
 */
int npv_vfio_parse_region_info(const void *buf, size_t len, struct npv_region_info *info,
                               bool *truncated);

/*
 * The IOVA ranges of a struct vfio_iommu_type1_info buffer of len bytes, from
 * its VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE capability, malloc'd into *out.
 * *n = 0 and *out = NULL when the capability is absent (no limit known).
 * -EPROTO for a malformed buffer or range.
 */
int npv_vfio_parse_type1_ranges(const void *buf, size_t len, struct npv_iova_range **out,
                                size_t *n);

/* The kernel device a VFIO open names: its bus, its sysfs name, its IOMMU group. */
struct npv_vfio_target {
    const char *bus;         /* "pci" or "platform": its sysfs directory is bus/BUS/devices/NAME */
    const char *vfio_driver; /* "vfio-pci" or "vfio-platform", for messages */
    char name[128];          /* the name VFIO_GROUP_GET_DEVICE_FD takes: dev_name() */
    int iommu_group;         /* -1 without one */
};

/*
 * Refuse with -NPV_ENOTVIABLE, naming the blocking devices, when another
 * member of the target's IOMMU group is on a host driver (both backends need
 * the group free of host DMA users). 0 when viable or when sysfs cannot tell
 * (the kernel then has the last word).
 */
int npv_vfio_check_viable_target(struct npv_ctx *ctx, const struct npv_vfio_target *t);
/* The same for a PCI function by canonical address. */
int npv_vfio_check_viable(struct npv_ctx *ctx, const char *bdf);

/*
 * The name of a device's VFIO cdev ("vfio3" for /dev/vfio/devices/vfio3)
 * from sysfs (bus/BUS/devices/NAME/vfio-dev/). -ENOENT when it has none (not
 * on a vfio driver, or a kernel without CONFIG_VFIO_DEVICE_CDEV: the platform
 * bus has it since Linux 6.6 as PCI does).
 */
int npv_vfio_cdev_name_on(struct npv_ctx *ctx, const char *bus, const char *name, char *buf,
                          size_t len);
/* npv_vfio_cdev_name_on for a PCI function. */
int npv_vfio_cdev_name(struct npv_ctx *ctx, const char *bdf, char *buf, size_t len);

/*
 * Log why a VFIO or iommufd node (path) could not be opened for who (NULL:
 * none), err a negative errno. EACCES and EPERM name the missing permission
 * and its fix (the udev rule giving the node's group access, or root), so a
 * non-root CI runner reads what to change; other errors are logged as they are.
 */
void npv_vfio_node_open_error(struct npv_ctx *ctx, const char *who, const char *path, int err);

/*
 * Open the target through the context's backend choice (auto: iommufd when
 * the build, /dev/iommu and the device's cdev allow it, else legacy) and
 * attach it to dom. The caller checked the device is on its VFIO driver.
 */
int npv_vfio_open_target(struct npv_ctx *ctx, const struct npv_vfio_target *t,
                         struct npv_domain *dom, const struct npv_dev_opts *opts,
                         struct npv_dev **out);

/*
 * A kernel DMA map ioctl (call names it in messages; who is the device or IOAS)
 * for m, with error words: ENOMEM names RLIMIT_MEMLOCK and its value. Before
 * it, the pin is checked against RLIMIT_MEMLOCK (-ENOMEM, naming the limit
 * that would do): type1 when request is VFIO_IOMMU_MAP_DMA, else iommufd.
 */
int npv_vfio_dma_map_ioctl(struct npv_ctx *ctx, const char *who, int fd, unsigned long request,
                           const char *call, void *arg, const struct npv_mapping *m);
/*
 * The unmap counterpart. unmapped points at the __u64 length field of arg the
 * kernel writes back: less than m->len is -EIO (journal and IOMMU disagree).
 */
int npv_vfio_dma_unmap_ioctl(struct npv_ctx *ctx, const char *who, int fd, unsigned long request,
                             const char *call, void *arg, const void *unmapped,
                             const struct npv_mapping *m);

#endif
