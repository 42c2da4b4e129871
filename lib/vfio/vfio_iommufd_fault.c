/* SPDX-License-Identifier: MIT */
/* Records of an iommufd fault queue into npv_dev_fault, answered at once (iommufd_fault.h). */
#include "npv_config.h"

#if NPV_HAVE_IOMMUFD_FAULT

#include <errno.h>
#include <poll.h>
#include <unistd.h>
#include <linux/iommufd.h>

#include "iommufd_fault.h"

#define TAKE_BATCH 32

static uint32_t access_of(uint32_t perm)
{
    return ((perm & IOMMU_PGFAULT_PERM_READ) ? NPV_FAULT_READ : 0) |
           ((perm & IOMMU_PGFAULT_PERM_WRITE) ? NPV_FAULT_WRITE : 0) |
           ((perm & IOMMU_PGFAULT_PERM_EXEC) ? NPV_FAULT_EXEC : 0) |
           ((perm & IOMMU_PGFAULT_PERM_PRIV) ? NPV_FAULT_PRIV : 0);
}

/* The kernel hands out whole groups only: nothing read while the queue polls readable. */
static int group_too_big(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN) ? -ENOSPC : 0;
}

int npv_iommufd_fault_take(int fd, uint32_t devid, struct npv_dev_fault *out, size_t max)
{
    struct iommu_hwpt_pgfault rec[TAKE_BATCH];
    struct iommu_hwpt_page_response resp[TAKE_BATCH];
    size_t want = max < TAKE_BATCH ? max : TAKE_BATCH;

    if (want == 0)
        return group_too_big(fd);
    ssize_t got = read(fd, rec, want * sizeof(rec[0]));
    if (got < 0)
        return errno == EAGAIN ? 0 : -errno;
    if ((size_t)got % sizeof(rec[0]) != 0)
        return -EPROTO;
    size_t n = (size_t)got / sizeof(rec[0]), nresp = 0;
    if (n == 0)
        return group_too_big(fd);
    for (size_t i = 0; i < n; i++) {
        out[i] = (struct npv_dev_fault){
            .iova = rec[i].addr,
            .access = access_of(rec[i].perm),
            .pasid = (rec[i].flags & IOMMU_PGFAULT_FLAGS_PASID_VALID) ? rec[i].pasid
                                                                      : NPV_FAULT_NO_PASID,
            .other_device = rec[i].dev_id != devid,
        };
        /* One answer per group: its records come together and share the cookie. */
        if (i + 1 == n || rec[i + 1].cookie != rec[i].cookie)
            resp[nresp++] = (struct iommu_hwpt_page_response){.cookie = rec[i].cookie,
                                                              .code = IOMMUFD_PAGE_RESP_INVALID};
    }
    ssize_t put = write(fd, resp, nresp * sizeof(resp[0]));
    /* Unanswered groups wait until the queue is destroyed, which answers them. */
    if (put != (ssize_t)(nresp * sizeof(resp[0])))
        return put < 0 ? -errno : -EIO;
    return (int)n;
}

#endif
