/* SPDX-License-Identifier: MIT */
/*
 * The kernel's DMA map and unmap calls, as both kernel transports issue them
 * (VFIO_IOMMU_MAP_DMA/UNMAP_DMA on a type1 container, IOMMU_IOAS_MAP/UNMAP on
 * an iommufd IOAS): one place for the RLIMIT_MEMLOCK check before a pin,
 * for the words of their failures and for the check of the length the
 * kernel says it unmapped.
 */
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <linux/vfio.h>

#include "ctx_internal.h"
#include "failpoint_internal.h"
#include "memlock.h"
#include "vfio_device_internal.h"

/* Both interfaces pin the pages they map against RLIMIT_MEMLOCK: ENOMEM mostly means that. */
static void log_map_enomem(struct npv_ctx *ctx, const char *who, const char *call, uint64_t len)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        npv_err(ctx,
                "%s: %s of %llu bytes: ENOMEM: the kernel pins DMA memory against "
                "RLIMIT_MEMLOCK (now %llu bytes); raise it (ulimit -l, LimitMEMLOCK=) or run "
                "with CAP_IPC_LOCK",
                who, call, (unsigned long long)len, (unsigned long long)rl.rlim_cur);
    else
        npv_err(ctx,
                "%s: %s of %llu bytes: ENOMEM: out of memory or RLIMIT_MEMLOCK exhausted (the "
                "kernel pins DMA memory against it)",
                who, call, (unsigned long long)len);
}

int npv_vfio_dma_map_ioctl(struct npv_ctx *ctx, const char *who, int fd, unsigned long request,
                           const char *call, void *arg, const struct npv_mapping *m)
{
    /*
     * Both pin every page they map, and this is the only place memory is
     * pinned: the RLIMIT_MEMLOCK check belongs here, not at allocation
     * (vfio-user pins nothing). type1 charges the process's locked_vm,
     * iommufd the user's (the process's share shows as VmPin).
     */
    int ret = npv_memlock_check_pin(
        ctx, who, m->len, request == VFIO_IOMMU_MAP_DMA ? NPV_PIN_LOCKED_VM : NPV_PIN_PINNED_VM);
    if (ret < 0)
        return ret;
    if (npv_fp_ioctl(ctx, fd, request, arg) == 0)
        return 0;
    int err = -errno;
    if (err == -ENOMEM)
        log_map_enomem(ctx, who, call, m->len);
    else
        npv_err(ctx, "%s: %s iova %#llx len %#llx: %s", who, call, (unsigned long long)m->iova,
                (unsigned long long)m->len, npv_strerror(err));
    return err;
}

int npv_vfio_dma_unmap_ioctl(struct npv_ctx *ctx, const char *who, int fd, unsigned long request,
                             const char *call, void *arg, const void *unmapped,
                             const struct npv_mapping *m)
{
    if (npv_fp_ioctl(ctx, fd, request, arg) < 0) {
        int err = -errno;
        npv_err(ctx, "%s: %s iova %#llx len %#llx: %s", who, call, (unsigned long long)m->iova,
                (unsigned long long)m->len, npv_strerror(err));
        return err;
    }
    /* A __u64 in the uapi struct, which is not uint64_t's type on every ABI. */
    uint64_t done;
    memcpy(&done, unmapped, sizeof(done));
    /* Anything but the whole mapping means the journal and the IOMMU disagree. */
    if (done != m->len) {
        npv_err(ctx, "%s: %s iova %#llx: unmapped %#llx of %#llx bytes", who, call,
                (unsigned long long)m->iova, (unsigned long long)done, (unsigned long long)m->len);
        return -EIO;
    }
    return 0;
}
