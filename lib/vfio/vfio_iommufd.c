/* SPDX-License-Identifier: MIT */
/*
 * Kernel VFIO through iommufd: the device's cdev (/dev/vfio/devices/vfioN),
 * bound to the context's /dev/iommu, attached to the IOAS of its domain.
 *
 * One IOAS per domain, shared by all of the domain's iommufd devices: it is
 * the domain's IOMMU sink (found with npv_domain_find_sink), made by the
 * first device that attaches and destroyed only when the domain is freed (the
 * sink's release hook). Moving a device to another domain is one
 * VFIO_DEVICE_ATTACH_IOMMUFD_PT naming the target: the kernel replaces the
 * attachment, so no mapping is replayed for the device and a failed attach
 * leaves it where it was.
 *
 * The target is a HWPT the IOAS keeps, not the IOAS itself. Attached to an
 * IOAS id the kernel makes an automatic HWPT (an IOMMU page table) and frees
 * it when the last device leaves, and a page table is filled when it is made:
 * every switch back would then pin and map the domain's whole journal again
 * inside the attach ioctl. A HWPT from IOMMU_HWPT_ALLOC lives until we
 * destroy it, so the table stays filled and the pages stay pinned while no
 * device is on it, and a switch back costs the same whatever the mapping
 * count. That is the price: a domain's pins last as long as the domain. A
 * HWPT is made for the device that first attaches; a device it does not suit
 * (another IOMMU instance: EINVAL) falls back to the IOAS id.
 *
 * Faults: where the build and kernel allow, the kept HWPT gets a fault queue
 * (IOMMU_FAULT_QUEUE_ALLOC, IOMMU_HWPT_FAULT_ID_VALID), so the I/O page faults
 * of a PRI-capable device reach npv_dev_read_faults. A kernel that refuses
 * the queue on a kernel-managed HWPT (6.11, 6.12: EOPNOTSUPP) gets a plain
 * HWPT; a device whose IOMMU cannot enable I/O page faults fails the attach to
 * a HWPT with a queue, so the unused HWPT is made again without one. Either
 * way the domain then carries no queue.
 *
 * The IOAS lives in the context's /dev/iommu and holds a reference on it, so
 * the fd stays open while any domain has an IOAS, after its devices closed.
 *
 * Coherency: iommufd has no query like type1's VFIO_DMA_CC_IOMMU. The kernel
 * enforces coherency on a HWPT when the IOMMU driver can, but
 * it tells user space neither that nor the IOMMU capability behind it
 * (IOMMU_GET_HW_INFO returns raw, driver-specific registers, and none for
 * AMD or SMMUv3 on many kernels). So the library treats an iommufd IOMMU as
 * not enforcing coherency: the sink and the device report 0, and
 * npv_dev_finish_open clears the device's Enable No Snoop, which makes its DMA snoop on x86
 * whatever the IOMMU does. The cost is the rare device that gains from No Snoop; the gain is never
 * trusting a guess.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "ctx_internal.h"
#include "failpoint_internal.h"
#include "iommufd_fault.h"
#include "iova.h"
#include "npv_config.h"
#include "vfio_device_internal.h"

int npv_vfio_cdev_name_on(struct npv_ctx *ctx, const char *bus, const char *name, char *buf,
                          size_t len)
{
    char path[4096];
    int ret = npv_sysfs_path(ctx, path, sizeof(path), "bus/%s/devices/%s/vfio-dev", bus, name);
    if (ret < 0)
        return ret;
    DIR *d = opendir(path);
    if (d == NULL)
        return -ENOENT;
    ret = -ENOENT;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        const char *digits = e->d_name + 4;
        if (strncmp(e->d_name, "vfio", 4) != 0 || *digits == '\0' ||
            strspn(digits, "0123456789") != strlen(digits))
            continue;
        ret = snprintf(buf, len, "%s", e->d_name) < (int)len ? 0 : -ENAMETOOLONG;
        break;
    }
    closedir(d);
    return ret;
}

#if NPV_HAVE_IOMMUFD

#include <linux/iommufd.h>
#include <linux/vfio.h>

#include <npuvfio/dma.h>

/* The domain's IOAS, the IOMMU sink shared by its iommufd devices. */
struct ioas {
    struct npv_iommu_sink sink; /* sink.users counts the attached devices */
    struct npv_ctx *ctx;
    int iommufd; /* the context's, with a reference held for this IOAS */
    uint32_t id;
    uint32_t hwpt_id;  /* the kept page table, 0 until a device made one */
    bool hwpt_refused; /* IOMMU_HWPT_ALLOC failed once: attach to the IOAS from now on */
    int fault_fd;      /* the fault queue of hwpt_id, -1 when it has none */
    uint32_t fault_id;
    bool fault_refused; /* no fault queue for this IOAS's HWPT from now on */
    char name[24];      /* "ioas N", for messages */
};

struct iommufd_dev {
    struct npv_vfio_device vdev; /* dev->priv points here */
    struct npv_ctx *ctx;
    char name[128];
    const char *bus, *vfio_driver;
    bool holds_iommufd;
    uint32_t devid;
    struct ioas *ioas; /* attached to, or NULL */
    bool on_hwpt;      /* attached to ioas->hwpt_id, not to the IOAS id */
};

/* ---- the context's /dev/iommu ---- */

static int iommufd_get(struct npv_ctx *ctx, int *fd)
{
    int ret = 0;
    pthread_mutex_lock(&ctx->iommufd_lock);
    if (ctx->iommufd_users == 0) {
        ctx->iommufd = open("/dev/iommu", O_RDWR | O_CLOEXEC);
        if (ctx->iommufd < 0)
            ret = -errno;
    }
    if (ret == 0) {
        ctx->iommufd_users++;
        *fd = ctx->iommufd;
    }
    pthread_mutex_unlock(&ctx->iommufd_lock);
    if (ret < 0)
        npv_vfio_node_open_error(ctx, NULL, "/dev/iommu", ret);
    return ret;
}

static void iommufd_put_locked(struct npv_ctx *ctx)
{
    if (ctx->iommufd_users > 0 && --ctx->iommufd_users == 0) {
        npv_debug(ctx, "/dev/iommu closed");
        close(ctx->iommufd);
        ctx->iommufd = -1;
    }
}

static void iommufd_put(struct npv_ctx *ctx)
{
    pthread_mutex_lock(&ctx->iommufd_lock);
    iommufd_put_locked(ctx);
    pthread_mutex_unlock(&ctx->iommufd_lock);
}

/* ---- the IOAS sink ---- */

static int ioas_map(struct npv_iommu_sink *sink, const struct npv_mapping *m)
{
    struct ioas *io = sink->priv;
    /* FIXED_IOVA: the domain's allocator chose the IOVA, and every sink must agree on it. */
    struct iommu_ioas_map map = {
        .size = sizeof(map),
        .flags = IOMMU_IOAS_MAP_FIXED_IOVA,
        .ioas_id = io->id,
        .user_va = (uintptr_t)m->vaddr,
        .length = m->len,
        .iova = m->iova,
    };

    if (m->prot & NPV_DMA_READ)
        map.flags |= IOMMU_IOAS_MAP_READABLE;
    if (m->prot & NPV_DMA_WRITE)
        map.flags |= IOMMU_IOAS_MAP_WRITEABLE;
    npv_debug(io->ctx, "%s: IOMMU_IOAS_MAP iova %#llx len %#llx", io->name,
              (unsigned long long)m->iova, (unsigned long long)m->len);
    return npv_vfio_dma_map_ioctl(io->ctx, io->name, io->iommufd, IOMMU_IOAS_MAP, "IOMMU_IOAS_MAP",
                                  &map, m);
}

static int ioas_unmap(struct npv_iommu_sink *sink, const struct npv_mapping *m)
{
    struct ioas *io = sink->priv;
    struct iommu_ioas_unmap unmap = {
        .size = sizeof(unmap),
        .ioas_id = io->id,
        .iova = m->iova,
        .length = m->len,
    };

    /* The kernel writes back the bytes it unmapped in length. */
    return npv_vfio_dma_unmap_ioctl(io->ctx, io->name, io->iommufd, IOMMU_IOAS_UNMAP,
                                    "IOMMU_IOAS_UNMAP", &unmap, &unmap.length, m);
}

static void ioas_release(struct npv_iommu_sink *sink);

static const struct npv_iommu_sink_ops ioas_sink_ops = {
    .name = "iommufd-ioas",
    .map = ioas_map,
    .unmap = ioas_unmap,
    .release = ioas_release,
};

/* The kernel's ranges r (normalised here), cut to the sink's present ones, become the sink's. */
static int ioas_narrow_to(struct ioas *io, struct npv_domain *dom, struct npv_iova_range *r,
                          size_t n)
{
    n = npv_ranges_normalize(r, n);
    /* They change only through here, under iommufd_lock, which we hold: no domain lock needed. */
    if (io->sink.ranges == NULL || io->sink.nr_ranges == 0)
        return npv_domain_set_sink_ranges(dom, &io->sink, r, n);
    struct npv_iova_range *cut = NULL;
    size_t ncut = 0;
    int ret = npv_ranges_intersect(io->sink.ranges, io->sink.nr_ranges, r, n, &cut, &ncut);
    if (ret == 0)
        ret = ncut == 0 ? -ERANGE : npv_domain_set_sink_ranges(dom, &io->sink, cut, ncut);
    free(cut);
    return ret;
}

/*
 * Read the IOAS's allowed ranges, keep no more than the sink already allows
 * (see ioas_leave for why they never widen), and give them to the sink
 * through the domain, which checks them against its mappings and swaps them
 * under its own lock: a device of another backend attaching to dom at the
 * same time reads either the old or the new array, never a freed one. dom is
 * NULL while the IOAS is in no domain yet.
 */
static int ioas_read_ranges(struct ioas *io, struct npv_domain *dom)
{
    struct iommu_ioas_iova_ranges q = {.size = sizeof(q), .ioas_id = io->id};
    struct npv_iova_range *r = NULL;

    /* EMSGSIZE hands back the count; the count may change in between, so loop a few times. */
    for (int tries = 0; tries < 4; tries++) {
        q.allowed_iovas = (uintptr_t)r;
        uint32_t cap = q.num_iovas;
        if (npv_fp_ioctl(io->ctx, io->iommufd, IOMMU_IOAS_IOVA_RANGES, &q) == 0) {
            int ret = 0;
            if (q.num_iovas > cap || q.num_iovas == 0)
                ret = -EPROTO;
            for (uint32_t i = 0; i < q.num_iovas && ret == 0; i++)
                if (r[i].start > r[i].last)
                    ret = -EPROTO;
            if (ret == 0)
                ret = ioas_narrow_to(io, dom, r, q.num_iovas);
            free(r);
            return ret;
        }
        int err = -errno;
        free(r);
        r = NULL;
        if (err != -EMSGSIZE)
            return err;
        if (q.num_iovas == 0 || q.num_iovas > 65536)
            return -EPROTO;
        /* struct iommu_iova_range and struct npv_iova_range are both {u64 start, u64 last}. */
        r = npv_fp_calloc(io->ctx, q.num_iovas, sizeof(*r));
        if (r == NULL)
            return -ENOMEM;
    }
    free(r);
    return -EAGAIN;
}
_Static_assert(sizeof(struct iommu_iova_range) == sizeof(struct npv_iova_range), "range layout");

static void iommufd_destroy(struct npv_ctx *ctx, int iommufd, const char *what, uint32_t id)
{
    struct iommu_destroy d = {.size = sizeof(d), .id = id};
    npv_debug(ctx, "IOMMU_DESTROY %s %u", what, id);
    /* EBUSY while a device is still on it: it then dies with the iommufd. */
    if (ioctl(iommufd, IOMMU_DESTROY, &d) < 0)
        npv_warn(ctx, "IOMMU_DESTROY %s %u: %s", what, id, npv_strerror(-errno));
}

/* Its fd holds the queue busy, as the HWPT does: both go first. */
static void fault_queue_destroy(struct ioas *io)
{
    if (io->fault_fd < 0)
        return;
    close(io->fault_fd);
    iommufd_destroy(io->ctx, io->iommufd, "fault queue", io->fault_id);
    io->fault_fd = -1;
    io->fault_id = 0;
}

/* The HWPT first: it holds the IOAS busy. Does not drop the iommufd reference. */
static void ioas_destroy(struct ioas *io)
{
    if (io->hwpt_id != 0)
        iommufd_destroy(io->ctx, io->iommufd, "hwpt", io->hwpt_id);
    fault_queue_destroy(io);
    iommufd_destroy(io->ctx, io->iommufd, "ioas", io->id);
    npv_iommu_sink_fini(&io->sink);
    free(io);
}

/* An IOAS that never joined a domain, or just left it: destroy it and drop its reference. */
static void ioas_discard_locked(struct ioas *io)
{
    struct npv_ctx *ctx = io->ctx;
    ioas_destroy(io);
    iommufd_put_locked(ctx);
}

/* The domain is being freed and no device is on io. Not under iommufd_lock. */
static void ioas_release(struct npv_iommu_sink *sink)
{
    struct ioas *io = sink->priv;
    struct npv_ctx *ctx = io->ctx;
    ioas_destroy(io);
    iommufd_put(ctx);
}

/* Under iommufd_lock, with the iommufd open (the attaching device holds it). */
static int ioas_new(struct npv_ctx *ctx, struct ioas **out)
{
    int iommufd = ctx->iommufd;
    struct iommu_ioas_alloc a = {.size = sizeof(a)};
    if (npv_fp_ioctl(ctx, iommufd, IOMMU_IOAS_ALLOC, &a) < 0) {
        int err = -errno;
        npv_err(ctx, "IOMMU_IOAS_ALLOC: %s", npv_strerror(err));
        return err;
    }
    npv_debug(ctx, "IOMMU_IOAS_ALLOC: ioas %u", a.out_ioas_id);
    struct ioas *io = npv_fp_calloc(ctx, 1, sizeof(*io));
    if (io == NULL) {
        iommufd_destroy(ctx, iommufd, "ioas", a.out_ioas_id);
        return -ENOMEM;
    }
    ctx->iommufd_users++;
    io->ctx = ctx;
    io->iommufd = iommufd;
    io->fault_fd = -1;
    io->id = a.out_ioas_id;
    snprintf(io->name, sizeof(io->name), "ioas %u", io->id);
    io->sink.ops = &ioas_sink_ops;
    io->sink.priv = io;
    io->sink.coherent = 0; /* see the top of this file */
    int ret = ioas_read_ranges(io, NULL);
    if (ret < 0) {
        npv_err(ctx, "IOMMU_IOAS_IOVA_RANGES ioas %u: %s", io->id, npv_strerror(ret));
        ioas_discard_locked(io);
        return ret;
    }
    *out = io;
    return 0;
}

/* After a device joined io: re-read its ranges and let dom narrow. */
static void ioas_ranges_changed(struct ioas *io, struct npv_domain *dom)
{
    int ret = ioas_read_ranges(io, dom);
    if (ret < 0)
        npv_warn(io->ctx, "ioas %u: IOVA ranges not refreshed: %s", io->id, npv_strerror(ret));
}

/*
 * A device left io. io stays with its domain, mapped, for the next device (or
 * the same one switching back); the domain's free releases it. Its ranges are
 * not re-read: the kernel would widen them by the leaving device's reserved
 * regions (the MSI window), the allocator could place a mapping there, and
 * the device's switch back would then fail with EADDRINUSE. So a domain's
 * IOVA space only narrows while it lives. Under iommufd_lock.
 */
static void ioas_leave(struct ioas *io)
{
    if (io->sink.users > 0)
        io->sink.users--;
}

#if NPV_HAVE_IOMMUFD_FAULT
/* A fault queue for the HWPT about to be made; false when the kernel has none. */
static bool fault_queue_new(struct ioas *io, const char *dev_name)
{
    struct iommu_fault_alloc f = {.size = sizeof(f)};
    if (npv_fp_ioctl(io->ctx, io->iommufd, IOMMU_FAULT_QUEUE_ALLOC, &f) < 0) {
        npv_debug(io->ctx, "%s: IOMMU_FAULT_QUEUE_ALLOC: %s; no fault reporting", dev_name,
                  npv_strerror(-errno));
        io->fault_refused = true;
        return false;
    }
    io->fault_fd = (int)f.out_fault_fd;
    io->fault_id = f.out_fault_id;
    return true;
}

/* IOMMU_HWPT_ALLOC with io's fault queue; false (queue gone) when the kernel refuses it. */
static bool hwpt_alloc_with_faults(struct ioas *io, uint32_t devid, const char *dev_name)
{
    if (io->fault_refused || !fault_queue_new(io, dev_name))
        return false;
    struct iommu_hwpt_alloc h = {.size = sizeof(h),
                                 .flags = IOMMU_HWPT_FAULT_ID_VALID,
                                 .dev_id = devid,
                                 .pt_id = io->id,
                                 .fault_id = io->fault_id};
    if (npv_fp_ioctl(io->ctx, io->iommufd, IOMMU_HWPT_ALLOC, &h) < 0) {
        npv_debug(io->ctx, "%s: IOMMU_HWPT_ALLOC with a fault queue: %s; no fault reporting",
                  dev_name, npv_strerror(-errno));
        fault_queue_destroy(io);
        io->fault_refused = true;
        return false;
    }
    io->hwpt_id = h.out_hwpt_id;
    npv_debug(io->ctx, "%s: IOMMU_HWPT_ALLOC: hwpt %u with fault queue %u on ioas %u", dev_name,
              io->hwpt_id, io->fault_id, io->id);
    return true;
}
#else
static bool hwpt_alloc_with_faults(struct ioas *io, uint32_t devid, const char *dev_name)
{
    (void)io;
    (void)devid;
    (void)dev_name;
    return false;
}
#endif

/* The page table io keeps, made on the first attach (see the top of this file). */
static void ioas_make_hwpt(struct ioas *io, uint32_t devid, const char *dev_name)
{
    if (hwpt_alloc_with_faults(io, devid, dev_name))
        return;
    struct iommu_hwpt_alloc h = {.size = sizeof(h), .dev_id = devid, .pt_id = io->id};
    if (npv_fp_ioctl(io->ctx, io->iommufd, IOMMU_HWPT_ALLOC, &h) < 0) {
        io->hwpt_refused = true;
        npv_debug(io->ctx, "%s: IOMMU_HWPT_ALLOC on ioas %u: %s; attaching to the IOAS", dev_name,
                  io->id, npv_strerror(-errno));
        return;
    }
    io->hwpt_id = h.out_hwpt_id;
    npv_debug(io->ctx, "%s: IOMMU_HWPT_ALLOC: hwpt %u on ioas %u", dev_name, io->hwpt_id, io->id);
}

static int attach_pt(struct iommufd_dev *fd_dev, uint32_t pt_id)
{
    struct vfio_device_attach_iommufd_pt at = {.argsz = sizeof(at), .pt_id = pt_id};
    return npv_fp_ioctl(fd_dev->ctx, fd_dev->vdev.fd, VFIO_DEVICE_ATTACH_IOMMUFD_PT, &at) < 0
               ? -errno
               : 0;
}

/*
 * The attach to a HWPT with a fault queue failed: the device's IOMMU cannot
 * enable I/O page faults. While no device uses the HWPT, make it again
 * without the queue; true when there is a new one to try.
 */
static bool hwpt_drop_fault_queue(struct ioas *io, uint32_t devid, const char *dev_name, int err)
{
    if (io->fault_fd < 0 || io->sink.users != 0)
        return false;
    npv_debug(io->ctx, "%s: attach to hwpt %u with a fault queue: %s; making it without", dev_name,
              io->hwpt_id, npv_strerror(err));
    iommufd_destroy(io->ctx, io->iommufd, "hwpt", io->hwpt_id);
    io->hwpt_id = 0;
    fault_queue_destroy(io);
    io->fault_refused = true;
    ioas_make_hwpt(io, devid, dev_name);
    return io->hwpt_id != 0;
}

/* Attach to io's kept HWPT, or to the IOAS when there is none or it does not suit the device. */
static int ioas_attach_device(struct ioas *io, struct iommufd_dev *fd_dev, const char *dev_name,
                              bool *on_hwpt)
{
    if (io->hwpt_id == 0 && !io->hwpt_refused)
        ioas_make_hwpt(io, fd_dev->devid, dev_name);
    int ret = -EINVAL;
    *on_hwpt = false;
    if (io->hwpt_id != 0) {
        ret = attach_pt(fd_dev, io->hwpt_id);
        if (ret < 0 && hwpt_drop_fault_queue(io, fd_dev->devid, dev_name, ret))
            ret = attach_pt(fd_dev, io->hwpt_id);
        /* Another device holds a HWPT with a queue this one cannot take: the IOAS then. */
        if (ret < 0 && io->fault_fd >= 0)
            ret = -EINVAL;
        *on_hwpt = ret == 0;
        if (ret == 0)
            npv_debug(io->ctx, "%s: VFIO_DEVICE_ATTACH_IOMMUFD_PT hwpt %u of ioas %u%s", dev_name,
                      io->hwpt_id, io->id,
                      fd_dev->ioas != NULL ? " (replaces the old attachment)" : "");
        else if (ret == -EINVAL)
            npv_debug(io->ctx, "%s: hwpt %u of ioas %u does not suit it; attaching to the IOAS",
                      dev_name, io->hwpt_id, io->id);
    }
    if (ret == -EINVAL) {
        ret = attach_pt(fd_dev, io->id);
        if (ret == 0)
            npv_debug(io->ctx, "%s: VFIO_DEVICE_ATTACH_IOMMUFD_PT ioas %u%s", dev_name, io->id,
                      fd_dev->ioas != NULL ? " (replaces the old attachment)" : "");
    }
    return ret;
}

/* ---- the device ---- */

static int iommufd_attach(struct npv_dev *dev, struct npv_domain *dom)
{
    struct iommufd_dev *fd_dev = ((struct npv_vfio_device *)dev->priv)->backend;
    struct npv_ctx *ctx = dev->ctx;
    struct ioas *target = NULL;
    bool created = false;
    int ret = 0;

    pthread_mutex_lock(&ctx->iommufd_lock);
    struct npv_iommu_sink *s = npv_domain_find_sink(dom, &ioas_sink_ops);
    if (s != NULL) {
        target = s->priv;
        if (target == fd_dev->ioas)
            goto out;
    } else {
        /* A new IOAS gets the domain's journal before the device moves onto it. */
        ret = ioas_new(ctx, &target);
        if (ret < 0)
            goto out;
        ret = npv_domain_add_sink(dom, &target->sink);
        if (ret < 0) {
            ioas_discard_locked(target);
            goto out;
        }
        created = true;
    }

    bool on_hwpt;
    ret = ioas_attach_device(target, fd_dev, dev->name, &on_hwpt);
    if (ret < 0) {
        if (ret == -EADDRINUSE)
            npv_err(ctx,
                    "%s: VFIO_DEVICE_ATTACH_IOMMUFD_PT ioas %u: a mapping of the domain "
                    "lies in a region the device reserves (e.g. the MSI window)",
                    dev->name, target->id);
        else
            npv_err(ctx, "%s: VFIO_DEVICE_ATTACH_IOMMUFD_PT ioas %u: %s", dev->name, target->id,
                    npv_strerror(ret));
        /* A failed attach leaves no trace: an IOAS made for it goes again. */
        if (created) {
            npv_domain_remove_sink(dom, &target->sink, false);
            ioas_discard_locked(target);
        }
        goto out;
    }
    target->sink.users++;
    ioas_ranges_changed(target, dom);
    if (fd_dev->ioas != NULL)
        ioas_leave(fd_dev->ioas);
    fd_dev->ioas = target;
    fd_dev->on_hwpt = on_hwpt;
out:
    pthread_mutex_unlock(&ctx->iommufd_lock);
    if (ret == 0)
        dev->coherent = false; /* see the top of this file */
    return ret;
}

static void iommufd_dev_free(struct iommufd_dev *fd_dev)
{
    /* Closing the cdev unbinds it from the iommufd; only then may the iommufd go. */
    npv_vfio_device_release(&fd_dev->vdev);
    if (fd_dev->holds_iommufd)
        iommufd_put(fd_dev->ctx);
    free(fd_dev);
}

static void iommufd_close(struct npv_dev *dev)
{
    struct npv_vfio_device *vdev = dev->priv;
    if (vdev == NULL)
        return;
    struct iommufd_dev *fd_dev = vdev->backend;
    struct npv_ctx *ctx = dev->ctx;

    pthread_mutex_lock(&ctx->iommufd_lock);
    if (fd_dev->ioas != NULL) {
        /* Detach now: the IOAS stays with the domain, and the domain's free destroys it. */
        struct vfio_device_detach_iommufd_pt dt = {.argsz = sizeof(dt)};
        npv_debug(ctx, "%s: VFIO_DEVICE_DETACH_IOMMUFD_PT", dev->name);
        if (ioctl(vdev->fd, VFIO_DEVICE_DETACH_IOMMUFD_PT, &dt) < 0)
            npv_warn(ctx, "%s: VFIO_DEVICE_DETACH_IOMMUFD_PT: %s", dev->name, npv_strerror(-errno));
        ioas_leave(fd_dev->ioas);
        fd_dev->ioas = NULL;
        fd_dev->on_hwpt = false;
    }
    pthread_mutex_unlock(&ctx->iommufd_lock);
    iommufd_dev_free(fd_dev);
    dev->priv = NULL;
}

/* The queue of the HWPT the device is on, -1 when it has none. Under iommufd_lock. */
static int fault_fd_locked(struct iommufd_dev *fd_dev)
{
    return fd_dev->ioas != NULL && fd_dev->on_hwpt ? fd_dev->ioas->fault_fd : -1;
}

static int iommufd_fault_fd(struct npv_dev *dev)
{
    struct iommufd_dev *fd_dev = ((struct npv_vfio_device *)dev->priv)->backend;
    pthread_mutex_lock(&dev->ctx->iommufd_lock);
    int fd = fault_fd_locked(fd_dev);
    pthread_mutex_unlock(&dev->ctx->iommufd_lock);
    return fd >= 0 ? fd : -EOPNOTSUPP;
}

static int iommufd_read_faults(struct npv_dev *dev, struct npv_dev_fault *out, size_t max)
{
    struct iommufd_dev *fd_dev = ((struct npv_vfio_device *)dev->priv)->backend;
    int ret = -EOPNOTSUPP;
    /* Held across the read: a device moving away must not see the queue destroyed under it. */
    pthread_mutex_lock(&dev->ctx->iommufd_lock);
    int fd = fault_fd_locked(fd_dev);
#if NPV_HAVE_IOMMUFD_FAULT
    if (fd >= 0)
        ret = npv_iommufd_fault_take(fd, fd_dev->devid, out, max);
#else
    (void)fd;
    (void)out;
    (void)max;
#endif
    pthread_mutex_unlock(&dev->ctx->iommufd_lock);
    /* Logged unlocked (ctx.h): groups left unanswered wait until the queue is destroyed. */
    if (ret < 0 && ret != -EOPNOTSUPP && ret != -ENOSPC)
        npv_err(dev->ctx, "%s: reading or answering I/O page faults: %s", dev->name,
                npv_strerror(ret));
    return ret;
}

// clang-format off
static const struct npv_dev_ops iommufd_ops = {
    NPV_VFIO_DEVICE_OPS,
    .attach = iommufd_attach,
    .close = iommufd_close,
    .fault_fd = iommufd_fault_fd,
    .read_faults = iommufd_read_faults,
};
// clang-format on

/* Words for a failed VFIO_DEVICE_BIND_IOMMUFD, and the errno the caller should see. */
static int bind_error(struct npv_ctx *ctx, const char *name, int err)
{
    switch (err) {
    case -EPERM:
        npv_err(ctx,
                "%s: VFIO_DEVICE_BIND_IOMMUFD: EPERM: the platform cannot isolate MSI (no "
                "interrupt remapping); iommufd.allow_unsafe_interrupts=1 overrides this at "
                "your own risk",
                name);
        return err;
    case -EINVAL:
        /* vfio_df_open: a device already open through its cdev cannot be bound again. */
        npv_err(ctx,
                "%s: VFIO_DEVICE_BIND_IOMMUFD: EINVAL: the device is already open (in this "
                "process or another); the kernel allows one open per device",
                name);
        return -EBUSY;
    case -EBUSY:
        npv_err(ctx,
                "%s: VFIO_DEVICE_BIND_IOMMUFD: EBUSY: the device is in use, or another "
                "member of its IOMMU group is on a host driver",
                name);
        return err;
    default:
        npv_err(ctx, "%s: VFIO_DEVICE_BIND_IOMMUFD: %s", name, npv_strerror(err));
        return err;
    }
}

static int open_cdev(struct iommufd_dev *fd_dev)
{
    struct npv_ctx *ctx = fd_dev->ctx;
    char cdev[64], path[96];

    int ret = npv_vfio_cdev_name_on(ctx, fd_dev->bus, fd_dev->name, cdev, sizeof(cdev));
    if (ret < 0) {
        npv_err(ctx,
                "%s: no VFIO device cdev in sysfs (vfio-dev/): not bound to %s, or a "
                "kernel without CONFIG_VFIO_DEVICE_CDEV",
                fd_dev->name, fd_dev->vfio_driver);
        return -ENODEV;
    }
    snprintf(path, sizeof(path), "/dev/vfio/devices/%s", cdev);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        ret = -errno;
        npv_vfio_node_open_error(ctx, fd_dev->name, path, ret);
        return ret == -ENOENT ? -ENODEV : ret;
    }
    int iommufd = -1;
    ret = iommufd_get(ctx, &iommufd);
    if (ret < 0)
        goto err_close;
    fd_dev->holds_iommufd = true;

    struct vfio_device_bind_iommufd bind = {.argsz = sizeof(bind), .iommufd = iommufd};
    if (npv_fp_ioctl(fd_dev->ctx, fd, VFIO_DEVICE_BIND_IOMMUFD, &bind) < 0) {
        ret = bind_error(ctx, fd_dev->name, -errno);
        goto err_close;
    }
    fd_dev->devid = bind.out_devid;
    ret = npv_vfio_device_init(ctx, &fd_dev->vdev, fd);
    if (ret < 0)
        goto err_close;
    return 0;

err_close:
    close(fd);
    return ret;
}

int npv_vfio_iommufd_open(struct npv_ctx *ctx, const struct npv_vfio_target *t,
                          const struct npv_dev_opts *opts, struct npv_dev **out)
{
    int ret;

    *out = NULL;
    if (access("/dev/iommu", F_OK) != 0) {
        npv_err(ctx, "%s: no /dev/iommu: the kernel has no iommufd (CONFIG_IOMMUFD)", t->name);
        return -NPV_ENOBACKEND;
    }
    ret = npv_vfio_check_viable_target(ctx, t);
    if (ret < 0)
        return ret;

    struct iommufd_dev *fd_dev = npv_fp_calloc(ctx, 1, sizeof(*fd_dev));
    if (fd_dev == NULL)
        return -ENOMEM;
    fd_dev->ctx = ctx;
    fd_dev->vdev.fd = -1;
    fd_dev->vdev.backend = fd_dev;
    fd_dev->bus = t->bus;
    fd_dev->vfio_driver = t->vfio_driver;
    snprintf(fd_dev->name, sizeof(fd_dev->name), "%s", t->name);

    ret = open_cdev(fd_dev);
    if (ret < 0)
        goto err_free;
    struct npv_dev *dev =
        npv_dev_alloc(ctx, &iommufd_ops, NPV_TRANSPORT_IOMMUFD, fd_dev->name, opts);
    if (dev == NULL) {
        ret = errno > 0 ? -errno : -ENOMEM;
        goto err_free;
    }
    dev->priv = &fd_dev->vdev;
    *out = dev;
    return 0;

err_free:
    iommufd_dev_free(fd_dev);
    return ret;
}

#else /* !NPV_HAVE_IOMMUFD */

int npv_vfio_iommufd_open(struct npv_ctx *ctx, const struct npv_vfio_target *t,
                          const struct npv_dev_opts *opts, struct npv_dev **out)
{
    (void)opts;
    *out = NULL;
    npv_err(ctx,
            "%s: this build of npuvfio has no iommufd support (built against uapi headers "
            "without linux/iommufd.h); use the legacy backend",
            t->name);
    return -NPV_ENOBACKEND;
}

#endif
