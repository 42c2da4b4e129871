/* SPDX-License-Identifier: MIT */
/*
 * Kernel VFIO, legacy interface: a type1v2 container (/dev/vfio/vfio) holding
 * the device's IOMMU group (/dev/vfio/GROUP), the device fd taken from the
 * group.
 *
 * One container per device: the container is the device's private IOMMU sink
 * and follows it from domain to domain (the old domain's mappings are removed
 * from it, the new domain's journal is replayed into it). A type1 container
 * cannot be switched between address spaces in one step as an iommufd device
 * can, which is why a domain switch costs a replay here.
 *
 * A group can be opened once: the kernel refuses a second open with EBUSY,
 * also from this process. Two functions of one IOMMU group therefore cannot be
 * opened at the same time through this backend (the iommufd backend has no
 * such limit).
 *
 * TYPE1v2, not v1: v2 never unmaps more than asked, and it reports the valid
 * IOVA ranges, excluding reserved regions such as the x86 MSI window.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/vfio.h>

#include <npuvfio/dma.h>
#include "ctx_internal.h"
#include "failpoint_internal.h"
#include "vfio_device_internal.h"

struct legacy {
    struct npv_vfio_device vdev; /* dev->priv points here */
    struct npv_ctx *ctx;
    char name[128];
    const char *vfio_driver; /* for messages */
    int container;
    int group;
    int group_id;
    bool coherent;
    struct npv_iommu_sink sink;
};

struct type1_ranges {
    struct npv_iova_range *ranges;
    size_t n;
    bool seen;
};

static int type1_cap(void *arg, uint16_t id, uint16_t version, const uint8_t *cap, size_t avail)
{
    struct type1_ranges *st = arg;
    struct vfio_iommu_type1_info_cap_iova_range hdr;
    const size_t elem = sizeof(struct vfio_iova_range);

    (void)version; /* version 1 is the only one; later ones extend it at the end */
    if (id != VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE)
        return 0;
    if (st->seen || avail < sizeof(hdr))
        return -EPROTO;
    st->seen = true;
    memcpy(&hdr, cap, sizeof(hdr));
    /* The kernel leaves the capability out when nothing is known; zero ranges would mean no DMA. */
    if (hdr.nr_iovas == 0 || hdr.nr_iovas > (avail - sizeof(hdr)) / elem)
        return -EPROTO;
    struct npv_iova_range *r = calloc(hdr.nr_iovas, sizeof(*r));
    if (r == NULL)
        return -ENOMEM;
    for (uint32_t i = 0; i < hdr.nr_iovas; i++) {
        struct vfio_iova_range v;
        memcpy(&v, cap + sizeof(hdr) + (size_t)i * elem, sizeof(v));
        /* vfio_iova_range.end is inclusive, as npv_iova_range.last is. */
        if (v.start > v.end) {
            free(r);
            return -EPROTO;
        }
        r[i].start = v.start;
        r[i].last = v.end;
    }
    st->ranges = r;
    st->n = hdr.nr_iovas;
    return 0;
}

int npv_vfio_parse_type1_ranges(const void *buf, size_t len, struct npv_iova_range **out, size_t *n)
{
    struct vfio_iommu_type1_info info;
    struct type1_ranges st = {0};

    *out = NULL;
    *n = 0;
    if (buf == NULL || len < sizeof(info))
        return -EPROTO;
    memcpy(&info, buf, sizeof(info));
    if (!(info.flags & VFIO_IOMMU_INFO_CAPS) || info.cap_offset == 0)
        return 0;
    int ret = npv_vfio_cap_walk(buf, len, info.cap_offset, sizeof(info), type1_cap, &st);
    if (ret < 0) {
        free(st.ranges);
        return ret;
    }
    *out = st.ranges;
    *n = st.n;
    return 0;
}

static int legacy_map(struct npv_iommu_sink *sink, const struct npv_mapping *m)
{
    struct legacy *lg = sink->priv;
    struct vfio_iommu_type1_dma_map map = {
        .argsz = sizeof(map),
        .vaddr = (uintptr_t)m->vaddr,
        .iova = m->iova,
        .size = m->len,
    };

    if (m->prot & NPV_DMA_READ)
        map.flags |= VFIO_DMA_MAP_FLAG_READ;
    if (m->prot & NPV_DMA_WRITE)
        map.flags |= VFIO_DMA_MAP_FLAG_WRITE;
    if (map.flags == 0) /* type1 needs READ and/or WRITE */
        return -EINVAL;
    return npv_vfio_dma_map_ioctl(lg->ctx, lg->name, lg->container, VFIO_IOMMU_MAP_DMA,
                                  "VFIO_IOMMU_MAP_DMA", &map, m);
}

static int legacy_unmap(struct npv_iommu_sink *sink, const struct npv_mapping *m)
{
    struct legacy *lg = sink->priv;
    struct vfio_iommu_type1_dma_unmap unmap = {
        .argsz = sizeof(unmap),
        .iova = m->iova,
        .size = m->len,
    };

    return npv_vfio_dma_unmap_ioctl(lg->ctx, lg->name, lg->container, VFIO_IOMMU_UNMAP_DMA,
                                    "VFIO_IOMMU_UNMAP_DMA", &unmap, &unmap.size, m);
}

static const struct npv_iommu_sink_ops legacy_sink_ops = {
    .name = "vfio-type1v2",
    .map = legacy_map,
    .unmap = legacy_unmap,
};

static void legacy_free(struct legacy *lg)
{
    if (lg == NULL)
        return;
    /* Device first: the group and container stay pinned while it is open. */
    npv_vfio_device_release(&lg->vdev);
    if (lg->group >= 0)
        close(lg->group); /* detaches the group from the container */
    if (lg->container >= 0)
        close(lg->container); /* drops every mapping left in it */
    npv_iommu_sink_fini(&lg->sink);
    free(lg);
}

static int legacy_attach(struct npv_dev *dev, struct npv_domain *dom)
{
    struct legacy *lg = ((struct npv_vfio_device *)dev->priv)->backend;
    int ret = npv_dev_move_private_sink(dev, &lg->sink, dom);
    if (ret < 0)
        return ret;
    /* npv_dev_finish_open clears Enable No Snoop when this is false. */
    dev->coherent = lg->coherent;
    return 0;
}

static void legacy_close(struct npv_dev *dev)
{
    struct npv_vfio_device *vdev = dev->priv;
    if (vdev == NULL)
        return;
    struct legacy *lg = vdev->backend;
    /* No unmapping: closing the container removes its mappings in one go. */
    if (dev->domain != NULL)
        npv_domain_remove_sink(dev->domain, &lg->sink, false);
    legacy_free(lg);
    dev->priv = NULL;
}

static const struct npv_dev_ops legacy_ops = {
    NPV_VFIO_DEVICE_OPS,
    .attach = legacy_attach,
    .close = legacy_close,
};

static int open_container(struct legacy *lg)
{
    struct npv_ctx *ctx = lg->ctx;

    lg->container = open("/dev/vfio/vfio", O_RDWR | O_CLOEXEC);
    if (lg->container < 0) {
        int err = -errno;
        /* The function sits on a vfio driver, so vfio is loaded: the kernel lacks the container. */
        if (err == -ENOENT) {
            npv_err(ctx,
                    "%s: no /dev/vfio/vfio: the kernel has no legacy VFIO container "
                    "(CONFIG_VFIO_CONTAINER) or this /dev does not show it; try the iommufd "
                    "backend",
                    lg->name);
            return -NPV_ENOBACKEND;
        }
        npv_vfio_node_open_error(ctx, lg->name, "/dev/vfio/vfio", err);
        return err;
    }
    int v = npv_fp_ioctl(lg->ctx, lg->container, VFIO_GET_API_VERSION);
    if (v != VFIO_API_VERSION) {
        npv_err(ctx, "/dev/vfio/vfio: API version %d, expected %d", v, VFIO_API_VERSION);
        return -ENOTSUP;
    }
    if (npv_fp_ioctl(lg->ctx, lg->container, VFIO_CHECK_EXTENSION, VFIO_TYPE1v2_IOMMU) <= 0) {
        npv_err(ctx, "/dev/vfio/vfio: no type1v2 IOMMU (VFIO_TYPE1v2_IOMMU)");
        return -ENOTSUP;
    }
    return 0;
}

static int open_group(struct legacy *lg)
{
    struct npv_ctx *ctx = lg->ctx;
    char path[64];

    snprintf(path, sizeof(path), "/dev/vfio/%d", lg->group_id);
    lg->group = open(path, O_RDWR | O_CLOEXEC);
    if (lg->group < 0) {
        int err = -errno;
        if (err == -EBUSY)
            npv_err(ctx,
                    "%s: %s is already open, by another process or by this one (the "
                    "kernel allows one open of a group, so the legacy backend opens one "
                    "function per IOMMU group)",
                    lg->name, path);
        else if (err == -ENOENT)
            npv_err(ctx, "%s: %s does not exist: is the device bound to %s?", lg->name, path,
                    lg->vfio_driver);
        else
            npv_vfio_node_open_error(ctx, lg->name, path, err);
        return err == -ENOENT ? -ENODEV : err;
    }
    struct vfio_group_status status = {.argsz = sizeof(status)};
    if (npv_fp_ioctl(lg->ctx, lg->group, VFIO_GROUP_GET_STATUS, &status) < 0) {
        int err = -errno;
        npv_err(ctx, "%s: VFIO_GROUP_GET_STATUS: %s", lg->name, npv_strerror(err));
        return err;
    }
    if (!(status.flags & VFIO_GROUP_FLAGS_VIABLE)) {
        npv_err(ctx,
                "%s: IOMMU group %d is not viable: a device of it is bound to a host "
                "driver",
                lg->name, lg->group_id);
        return -NPV_ENOTVIABLE;
    }
    if (npv_fp_ioctl(lg->ctx, lg->group, VFIO_GROUP_SET_CONTAINER, &lg->container) < 0) {
        int err = -errno;
        npv_err(ctx, "%s: VFIO_GROUP_SET_CONTAINER: %s", lg->name, npv_strerror(err));
        return err;
    }
    return 0;
}

/*
 * The domain's allocator aligns IOVAs to the CPU page size at least; an IOMMU
 * whose smallest page is larger (64 KiB SMMU granules) refuses such maps.
 */
static void check_page_sizes(struct legacy *lg, const void *buf)
{
    struct vfio_iommu_type1_info info;
    memcpy(&info, buf, sizeof(info));
    if (!(info.flags & VFIO_IOMMU_INFO_PGSIZES) || info.iova_pgsizes == 0)
        return;
    uint64_t smallest = info.iova_pgsizes & -info.iova_pgsizes;
    long cpu_page = sysconf(_SC_PAGESIZE);
    npv_debug(lg->ctx, "%s: IOMMU page sizes %#llx", lg->name,
              (unsigned long long)info.iova_pgsizes);
    if (cpu_page > 0 && smallest > (uint64_t)cpu_page)
        npv_warn(lg->ctx,
                 "%s: the IOMMU's smallest page is %llu bytes, larger than the CPU's %ld: "
                 "buffers smaller than that or not aligned to it cannot be mapped",
                 lg->name, (unsigned long long)smallest, cpu_page);
}

static int setup_iommu(struct legacy *lg)
{
    struct npv_ctx *ctx = lg->ctx;

    if (npv_fp_ioctl(lg->ctx, lg->container, VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU) < 0) {
        int err = -errno;
        if (err == -EPERM)
            npv_err(ctx,
                    "%s: VFIO_SET_IOMMU: EPERM: the platform cannot isolate MSI (no "
                    "interrupt remapping); vfio_iommu_type1.allow_unsafe_interrupts=1 "
                    "overrides this at your own risk",
                    lg->name);
        else
            npv_err(ctx, "%s: VFIO_SET_IOMMU(TYPE1v2): %s", lg->name, npv_strerror(err));
        return err;
    }

    void *buf = npv_fp_calloc(lg->ctx, 1, sizeof(struct vfio_iommu_type1_info));
    size_t len = 0, nr_ranges = 0;
    struct npv_iova_range *ranges = NULL;
    if (buf == NULL)
        return -ENOMEM;
    int ret = npv_vfio_info_ioctl(lg->ctx, lg->container, VFIO_IOMMU_GET_INFO, &buf,
                                  sizeof(struct vfio_iommu_type1_info), &len);
    if (ret == 0)
        ret = npv_vfio_parse_type1_ranges(buf, len, &ranges, &nr_ranges);
    /* The container is in no domain yet: the sink's ranges are ours alone to set. */
    if (ret == 0)
        ret = npv_domain_set_sink_ranges(NULL, &lg->sink, ranges, nr_ranges);
    if (ret == 0)
        check_page_sizes(lg, buf);
    free(ranges);
    free(buf);
    if (ret < 0) {
        npv_err(ctx, "%s: VFIO_IOMMU_GET_INFO: %s", lg->name, npv_strerror(ret));
        return ret;
    }
    if (nr_ranges == 0)
        npv_warn(ctx, "%s: the kernel reports no IOVA ranges; reserved regions are unknown",
                 lg->name);

    /* Asked after SET_IOMMU: the answer belongs to the IOMMU domains the group now sits in. */
    lg->coherent =
        npv_fp_ioctl(lg->ctx, lg->container, VFIO_CHECK_EXTENSION, VFIO_DMA_CC_IOMMU) > 0;
    npv_debug(ctx, "%s: type1v2 container: %zu IOVA ranges, %scache-coherent IOMMU", lg->name,
              nr_ranges, lg->coherent ? "" : "not ");
    return 0;
}

static int open_device(struct legacy *lg)
{
    int fd = npv_fp_ioctl(lg->ctx, lg->group, VFIO_GROUP_GET_DEVICE_FD, lg->name);
    if (fd < 0) {
        int err = -errno;
        npv_err(lg->ctx, "%s: VFIO_GROUP_GET_DEVICE_FD: %s", lg->name, npv_strerror(err));
        return err;
    }
    int ret = npv_vfio_device_init(lg->ctx, &lg->vdev, fd);
    if (ret < 0)
        close(fd);
    return ret;
}

int npv_vfio_legacy_open(struct npv_ctx *ctx, const struct npv_vfio_target *t,
                         const struct npv_dev_opts *opts, struct npv_dev **out)
{
    struct npv_dev *dev;
    int ret;

    *out = NULL;
    if (t->iommu_group < 0) {
        npv_err(ctx, "%s: no IOMMU group (is the IOMMU enabled, e.g. intel_iommu=on?)", t->name);
        return -ENODEV;
    }
    ret = npv_vfio_check_viable_target(ctx, t);
    if (ret < 0)
        return ret;

    struct legacy *lg = npv_fp_calloc(ctx, 1, sizeof(*lg));
    if (lg == NULL)
        return -ENOMEM;
    lg->ctx = ctx;
    lg->container = -1;
    lg->group = -1;
    lg->vdev.fd = -1;
    lg->vdev.backend = lg;
    lg->group_id = t->iommu_group;
    lg->vfio_driver = t->vfio_driver;
    snprintf(lg->name, sizeof(lg->name), "%s", t->name);

    ret = open_container(lg);
    if (ret < 0)
        goto err_free;
    ret = open_group(lg);
    if (ret < 0)
        goto err_free;
    ret = setup_iommu(lg);
    if (ret < 0)
        goto err_free;
    ret = open_device(lg);
    if (ret < 0)
        goto err_free;

    lg->sink.ops = &legacy_sink_ops;
    lg->sink.priv = lg;
    lg->sink.coherent = lg->coherent ? 1 : 0;

    dev = npv_dev_alloc(ctx, &legacy_ops, NPV_TRANSPORT_LEGACY, lg->name, opts);
    if (dev == NULL) {
        ret = errno > 0 ? -errno : -ENOMEM;
        goto err_free;
    }
    dev->priv = &lg->vdev;
    *out = dev;
    return 0;

err_free:
    legacy_free(lg);
    return ret;
}
