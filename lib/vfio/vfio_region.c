/* SPDX-License-Identifier: MIT */
/*
 * The kernel VFIO device fd, shared by the legacy and iommufd transports:
 * device and region info (with the capability chains the kernel appends),
 * region reads and writes at the region's offset in the fd, IRQ set-up and
 * reset. Every value the kernel returns in a capability chain is
 * bounds-checked against the argsz it reported before it is used.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <linux/vfio.h>

#include "ctx_internal.h"
#include "failpoint_internal.h"
#include "vfio_device_internal.h"

/*
 * The kernel sizes info buffers by their capability chains; a few KiB covers
 * every chain it builds today. A larger request is refused rather than
 * allocated blindly.
 */
#define NPV_VFIO_INFO_MAX (64u * 1024u)
/* vfio-pci exposes 9 fixed regions plus a few device-specific ones. */
#define NPV_VFIO_MAX_REGIONS 1024u
/* MSI-X allows 2048 vectors per function. */
#define NPV_VFIO_MAX_IRQ_COUNT 2048u

static struct npv_vfio_device *vdev_of(struct npv_dev *dev)
{
    return dev->priv;
}

int npv_vfio_info_ioctl(struct npv_ctx *ctx, int fd, unsigned long request, void **buf,
                        size_t base_size, size_t *len)
{
    if (base_size < sizeof(uint32_t) || base_size > NPV_VFIO_INFO_MAX)
        return -EINVAL;
    size_t size = base_size;
    /* The chain may grow between two calls (a device added to a container); retry a few times. */
    for (int tries = 0; tries < 4; tries++) {
        uint8_t *b = npv_fp_calloc(ctx, 1, size);
        if (b == NULL)
            return -ENOMEM;
        memcpy(b, *buf, base_size);
        uint32_t argsz = (uint32_t)size;
        memcpy(b, &argsz, sizeof(argsz));
        if (npv_fp_ioctl(ctx, fd, request, b) < 0) {
            int err = -errno;
            free(b);
            return err;
        }
        memcpy(&argsz, b, sizeof(argsz));
        if (argsz <= size) {
            free(*buf);
            *buf = b;
            *len = argsz < base_size ? base_size : argsz;
            return 0;
        }
        free(b);
        if (argsz > NPV_VFIO_INFO_MAX)
            return -E2BIG;
        size = argsz;
    }
    return -EAGAIN;
}

int npv_vfio_cap_walk(const void *buf, size_t len, uint32_t first, size_t min_off,
                      npv_vfio_cap_fn fn, void *arg)
{
    const uint8_t *b = buf;
    struct vfio_info_cap_header h;
    size_t off = first;

    if (off == 0)
        return 0;
    /* next must move forward by at least one header: the walk ends in len / 8 steps. */
    for (;;) {
        if (off < min_off || off > len || len - off < sizeof(h))
            return -EPROTO;
        memcpy(&h, b + off, sizeof(h));
        size_t end = len;
        if (h.next != 0) {
            if (h.next < off + sizeof(h) || h.next > len)
                return -EPROTO;
            end = h.next;
        }
        int ret = fn(arg, h.id, h.version, b + off, end - off);
        if (ret != 0)
            return ret;
        if (h.next == 0)
            return 0;
        off = h.next;
    }
}

struct region_caps {
    struct npv_region_info *info;
    bool sparse_seen;
    bool sparse_unknown_version;
    bool truncated;
};

static int parse_sparse(struct region_caps *st, uint16_t version, const uint8_t *cap, size_t avail)
{
    struct vfio_region_info_cap_sparse_mmap sp;
    struct npv_region_info *info = st->info;

    if (st->sparse_seen)
        return -EPROTO;
    st->sparse_seen = true;
    /* Only version 1's layout is known; map nothing rather than guess at another. */
    if (version != 1) {
        st->sparse_unknown_version = true;
        return 0;
    }
    if (avail < sizeof(sp))
        return -EPROTO;
    memcpy(&sp, cap, sizeof(sp));
    const size_t area_size = sizeof(struct vfio_region_sparse_mmap_area);
    if (sp.nr_areas > (avail - sizeof(sp)) / area_size)
        return -EPROTO;
    for (uint32_t i = 0; i < sp.nr_areas; i++) {
        struct vfio_region_sparse_mmap_area a;
        memcpy(&a, cap + sizeof(sp) + (size_t)i * area_size, sizeof(a));
        if (a.offset > info->size || a.size > info->size - a.offset)
            return -EPROTO;
        if (a.size == 0)
            continue;
        if (info->nr_mmap_areas == NPV_REGION_MAX_SPARSE) {
            st->truncated = true;
            continue;
        }
        info->mmap_areas[info->nr_mmap_areas].offset = a.offset;
        info->mmap_areas[info->nr_mmap_areas].size = a.size;
        info->nr_mmap_areas++;
    }
    return 0;
}

static int region_cap(void *arg, uint16_t id, uint16_t version, const uint8_t *cap, size_t avail)
{
    struct region_caps *st = arg;

    switch (id) {
    case VFIO_REGION_INFO_CAP_SPARSE_MMAP:
        return parse_sparse(st, version, cap, avail);
    case VFIO_REGION_INFO_CAP_MSIX_MAPPABLE:
        st->info->msix_mappable = true;
        return 0;
    default:
        return 0; /* type, nvlink, ...: not ours to use */
    }
}

int npv_vfio_parse_region_info(const void *buf, size_t len, struct npv_region_info *info,
                               bool *truncated)
{
    struct vfio_region_info ri;
    struct region_caps st = {.info = info};

    memset(info, 0, sizeof(*info));
    *truncated = false;
    if (buf == NULL || len < sizeof(ri))
        return -EPROTO;
    memcpy(&ri, buf, sizeof(ri));
    info->index = ri.index;
    info->size = ri.size;
    if (ri.flags & VFIO_REGION_INFO_FLAG_READ)
        info->flags |= NPV_REGION_READ;
    if (ri.flags & VFIO_REGION_INFO_FLAG_WRITE)
        info->flags |= NPV_REGION_WRITE;
    if (ri.flags & VFIO_REGION_INFO_FLAG_MMAP)
        info->flags |= NPV_REGION_MMAP;
    if ((ri.flags & VFIO_REGION_INFO_FLAG_CAPS) && ri.cap_offset != 0) {
        int ret = npv_vfio_cap_walk(buf, len, ri.cap_offset, sizeof(ri), region_cap, &st);
        if (ret < 0) {
            memset(info, 0, sizeof(*info));
            return ret;
        }
    }
    *truncated = st.truncated;
    if (!(info->flags & NPV_REGION_MMAP) || st.sparse_unknown_version) {
        info->nr_mmap_areas = 0;
        info->flags &= ~(uint32_t)NPV_REGION_MMAP;
    } else if (!st.sparse_seen && info->size != 0) {
        info->nr_mmap_areas = 1;
        info->mmap_areas[0].offset = 0;
        info->mmap_areas[0].size = info->size;
    }
    return 0;
}

int npv_vfio_device_init(struct npv_ctx *ctx, struct npv_vfio_device *vdev, int fd)
{
    struct vfio_device_info di = {.argsz = sizeof(di)};

    if (npv_fp_ioctl(ctx, fd, VFIO_DEVICE_GET_INFO, &di) < 0) {
        int err = -errno;
        npv_err(ctx, "VFIO_DEVICE_GET_INFO: %s", npv_strerror(err));
        return err;
    }
    if (di.num_regions > NPV_VFIO_MAX_REGIONS) {
        npv_err(ctx, "VFIO_DEVICE_GET_INFO: %u regions is more than we accept", di.num_regions);
        return -EPROTO;
    }
    struct npv_vfio_region *regions =
        npv_fp_calloc(ctx, di.num_regions ? di.num_regions : 1, sizeof(*regions));
    if (regions == NULL)
        return -ENOMEM;
    /*
     * Region offsets are looked up on every pread/pwrite; reading them once here
     * keeps config and BAR accesses to one system call. Absent regions (no VGA,
     * unimplemented BARs) answer EINVAL and stay flagless.
     */
    for (uint32_t i = 0; i < di.num_regions; i++) {
        struct vfio_region_info ri = {.argsz = sizeof(ri), .index = i};
        if (npv_fp_ioctl(ctx, fd, VFIO_DEVICE_GET_REGION_INFO, &ri) < 0)
            continue;
        regions[i].flags = ri.flags;
        regions[i].size = ri.size;
        regions[i].offset = ri.offset;
    }
    vdev->fd = fd;
    vdev->flags = di.flags;
    vdev->num_regions = di.num_regions;
    vdev->num_irqs = di.num_irqs;
    vdev->regions = regions;
    return 0;
}

void npv_vfio_device_release(struct npv_vfio_device *vdev)
{
    if (vdev->fd >= 0)
        close(vdev->fd);
    vdev->fd = -1;
    free(vdev->regions);
    vdev->regions = NULL;
    vdev->num_regions = 0;
}

/* The file position of [off, off+len) of region index, when the region allows the access. */
static int region_pos(struct npv_vfio_device *vdev, uint32_t index, uint64_t off, size_t len,
                      uint32_t need, uint64_t *pos)
{
    if (index >= vdev->num_regions)
        return -EINVAL;
    const struct npv_vfio_region *r = &vdev->regions[index];
    if ((r->flags & need) != need)
        return r->flags == 0 ? -ENOENT : -EACCES;
    if (off > r->size || len > r->size - off)
        return -ERANGE;
    if (r->offset > UINT64_MAX - off)
        return -ERANGE;
    *pos = r->offset + off;
    return 0;
}

bool npv_vfio_rw64_whole_for(const char *release, const char *machine, const char *override)
{
    if (override != NULL && strcmp(override, "whole") == 0)
        return true;
    if (override != NULL && strcmp(override, "split") == 0)
        return false;
    unsigned major = 0, minor = 0;
    if (release == NULL || sscanf(release, "%u.%u", &major, &minor) != 2)
        return false; /* unknown: say split rather than risk a torn register */
    bool x86 = machine != NULL && (strcmp(machine, "x86_64") == 0 || machine[0] == 'i');
    unsigned need_minor = x86 ? 14 : 10;
    return major > 6 || (major == 6 && minor >= need_minor);
}

static bool rw64_whole;
static pthread_once_t rw64_once = PTHREAD_ONCE_INIT;

static void rw64_decide(void)
{
    struct utsname u;
    if (uname(&u) == 0)
        rw64_whole = npv_vfio_rw64_whole_for(u.release, u.machine, getenv("NPUVFIO_VFIO_RW64"));
}

bool npv_vfio_rw64_whole(void)
{
    pthread_once(&rw64_once, rw64_decide);
    return rw64_whole;
}

int npv_vfio_region_read(struct npv_dev *dev, uint32_t index, uint64_t off, void *buf, size_t len)
{
    struct npv_vfio_device *vdev = vdev_of(dev);
    uint64_t pos;
    int ret = region_pos(vdev, index, off, len, VFIO_REGION_INFO_FLAG_READ, &pos);
    if (ret < 0)
        return ret;
    if (pos > INT64_MAX)
        return -ERANGE;
    /*
     * One pread: vfio-pci turns an aligned 1/2/4-byte read into one access of
     * that width, and an 8-byte one only where npv_vfio_rw64_whole() says so
     * (npv_bar_whole64 lets a driver refuse rather than tear a register).
     */
    ssize_t n = pread(vdev->fd, buf, len, (off_t)pos);
    if (n < 0)
        return -errno;
    return (size_t)n == len ? 0 : -EIO;
}

int npv_vfio_region_write(struct npv_dev *dev, uint32_t index, uint64_t off, const void *buf,
                          size_t len)
{
    struct npv_vfio_device *vdev = vdev_of(dev);
    uint64_t pos;
    int ret = region_pos(vdev, index, off, len, VFIO_REGION_INFO_FLAG_WRITE, &pos);
    if (ret < 0)
        return ret;
    if (pos > INT64_MAX)
        return -ERANGE;
    ssize_t n = pwrite(vdev->fd, buf, len, (off_t)pos);
    if (n < 0)
        return -errno;
    return (size_t)n == len ? 0 : -EIO;
}

int npv_vfio_get_info(struct npv_dev *dev, struct npv_dev_info *info)
{
    struct npv_vfio_device *vdev = vdev_of(dev);
    uint8_t id[12];

    memset(info, 0, sizeof(*info));
    if (vdev->flags & VFIO_DEVICE_FLAGS_RESET)
        info->flags |= NPV_DEV_FLAG_RESET;
    if (vdev->flags & VFIO_DEVICE_FLAGS_PCI)
        info->flags |= NPV_DEV_FLAG_PCI;
    if (vdev->flags & VFIO_DEVICE_FLAGS_PLATFORM)
        info->flags |= NPV_DEV_FLAG_PLATFORM;
    info->num_regions = vdev->num_regions;
    info->num_irqs = vdev->num_irqs;
    if (!(vdev->flags & VFIO_DEVICE_FLAGS_PCI))
        return 0;
    /* Vendor, device, revision and class code: the first 12 bytes of config space, little-endian.
     */
    if (npv_vfio_region_read(dev, VFIO_PCI_CONFIG_REGION_INDEX, 0, id, sizeof(id)) == 0) {
        info->vendor_id = (uint16_t)(id[0] | id[1] << 8);
        info->device_id = (uint16_t)(id[2] | id[3] << 8);
        info->class_code = (uint32_t)id[9] | (uint32_t)id[10] << 8 | (uint32_t)id[11] << 16;
    }
    return 0;
}

int npv_vfio_region_info(struct npv_dev *dev, uint32_t index, struct npv_region_info *info)
{
    struct npv_vfio_device *vdev = vdev_of(dev);
    struct vfio_region_info *ri;
    size_t len = 0;
    bool truncated;

    if (index >= vdev->num_regions)
        return -EINVAL;
    ri = npv_fp_calloc(dev->ctx, 1, sizeof(*ri));
    if (ri == NULL)
        return -ENOMEM;
    ri->index = index;
    void *buf = ri;
    int ret = npv_vfio_info_ioctl(dev->ctx, vdev->fd, VFIO_DEVICE_GET_REGION_INFO, &buf,
                                  sizeof(*ri), &len);
    if (ret < 0) {
        free(buf);
        return ret;
    }
    ret = npv_vfio_parse_region_info(buf, len, info, &truncated);
    free(buf);
    if (ret < 0) {
        npv_err(dev->ctx, "%s: region %u: malformed capability chain from the kernel", dev->name,
                index);
        return ret;
    }
    if (truncated)
        npv_warn(dev->ctx,
                 "%s: region %u has more than %d mmap areas; the rest is reached by "
                 "read/write",
                 dev->name, index, NPV_REGION_MAX_SPARSE);
    return 0;
}

int npv_vfio_region_mmap_fd(struct npv_dev *dev, uint32_t index, uint64_t area_off, int *fd,
                            uint64_t *file_off)
{
    struct npv_vfio_device *vdev = vdev_of(dev);
    uint64_t pos;
    int ret = region_pos(vdev, index, area_off, 1, VFIO_REGION_INFO_FLAG_MMAP, &pos);
    if (ret < 0)
        return ret;
    *fd = vdev->fd;
    *file_off = pos;
    return 0;
}

int npv_vfio_irq_info(struct npv_dev *dev, uint32_t index, struct npv_irq_info *info)
{
    struct npv_vfio_device *vdev = vdev_of(dev);
    struct vfio_irq_info ii = {.argsz = sizeof(ii), .index = index};

    if (index >= vdev->num_irqs)
        return -EINVAL;
    if (npv_fp_ioctl(dev->ctx, vdev->fd, VFIO_DEVICE_GET_IRQ_INFO, &ii) < 0)
        return -errno;
    memset(info, 0, sizeof(*info));
    info->index = index;
    info->count = ii.count;
    if (ii.flags & VFIO_IRQ_INFO_EVENTFD)
        info->flags |= NPV_IRQ_INFO_EVENTFD;
    if (ii.flags & VFIO_IRQ_INFO_MASKABLE)
        info->flags |= NPV_IRQ_INFO_MASKABLE;
    if (ii.flags & VFIO_IRQ_INFO_AUTOMASKED)
        info->flags |= NPV_IRQ_INFO_AUTOMASKED;
    if (ii.flags & VFIO_IRQ_INFO_NORESIZE)
        info->flags |= NPV_IRQ_INFO_NORESIZE;
    return 0;
}

_Static_assert(NPV_IRQ_SET_DATA_NONE == VFIO_IRQ_SET_DATA_NONE, "irq set flags");
_Static_assert(NPV_IRQ_SET_DATA_BOOL == VFIO_IRQ_SET_DATA_BOOL, "irq set flags");
_Static_assert(NPV_IRQ_SET_DATA_EVENTFD == VFIO_IRQ_SET_DATA_EVENTFD, "irq set flags");
_Static_assert(NPV_IRQ_SET_ACTION_MASK == VFIO_IRQ_SET_ACTION_MASK, "irq set flags");
_Static_assert(NPV_IRQ_SET_ACTION_UNMASK == VFIO_IRQ_SET_ACTION_UNMASK, "irq set flags");
_Static_assert(NPV_IRQ_SET_ACTION_TRIGGER == VFIO_IRQ_SET_ACTION_TRIGGER, "irq set flags");

int npv_vfio_set_irqs(struct npv_dev *dev, uint32_t index, uint32_t flags, uint32_t start,
                      uint32_t count, const int32_t *fds)
{
    struct npv_vfio_device *vdev = vdev_of(dev);
    const uint32_t data = flags & VFIO_IRQ_SET_DATA_TYPE_MASK;
    const uint32_t action = flags & VFIO_IRQ_SET_ACTION_TYPE_MASK;
    size_t elem;

    if (index >= vdev->num_irqs || count > NPV_VFIO_MAX_IRQ_COUNT ||
        (flags & ~(VFIO_IRQ_SET_DATA_TYPE_MASK | VFIO_IRQ_SET_ACTION_TYPE_MASK)) != 0 ||
        __builtin_popcount(data) != 1 || __builtin_popcount(action) != 1)
        return -EINVAL;
    switch (data) {
    case VFIO_IRQ_SET_DATA_EVENTFD:
        elem = sizeof(int32_t);
        break;
    case VFIO_IRQ_SET_DATA_BOOL:
        elem = sizeof(uint8_t);
        break;
    default:
        elem = 0;
        break;
    }
    if (elem != 0 && count != 0 && fds == NULL)
        return -EINVAL;

    size_t size = sizeof(struct vfio_irq_set) + elem * count;
    struct vfio_irq_set *set = npv_fp_calloc(dev->ctx, 1, size);
    if (set == NULL)
        return -ENOMEM;
    set->argsz = (uint32_t)size;
    set->flags = flags;
    set->index = index;
    set->start = start;
    set->count = count;
    if (data == VFIO_IRQ_SET_DATA_EVENTFD) {
        memcpy(set->data, fds, elem * count);
    } else if (data == VFIO_IRQ_SET_DATA_BOOL) {
        for (uint32_t i = 0; i < count; i++)
            set->data[i] = fds[i] != 0;
    }
    int ret = npv_fp_ioctl(dev->ctx, vdev->fd, VFIO_DEVICE_SET_IRQS, set) < 0 ? -errno : 0;
    free(set);
    if (ret < 0)
        npv_debug(dev->ctx, "%s: VFIO_DEVICE_SET_IRQS index %u flags %#x start %u count %u: %s",
                  dev->name, index, flags, start, count, npv_strerror(ret));
    return ret;
}

int npv_vfio_reset(struct npv_dev *dev)
{
    struct npv_vfio_device *vdev = vdev_of(dev);

    if (!(vdev->flags & VFIO_DEVICE_FLAGS_RESET))
        return -ENOTSUP;
    if (npv_fp_ioctl(dev->ctx, vdev->fd, VFIO_DEVICE_RESET) < 0) {
        int err = -errno;
        npv_err(dev->ctx, "%s: VFIO_DEVICE_RESET: %s", dev->name, npv_strerror(err));
        return err;
    }
    return 0;
}
