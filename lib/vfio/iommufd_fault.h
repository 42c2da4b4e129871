/* SPDX-License-Identifier: MIT */
/*
 * Reading an iommufd fault queue (IOMMU_FAULT_QUEUE_ALLOC's fd): the kernel's
 * struct iommu_hwpt_pgfault records become npv_dev_fault, and every fault
 * group read is answered at once (see npv_dev_read_faults in dev.h).
 */
#ifndef NPV_IOMMUFD_FAULT_H
#define NPV_IOMMUFD_FAULT_H

#include <stddef.h>
#include <stdint.h>
#include <npuvfio/dev.h>

/*
 * Take up to max faults (at most 32 a call) from fault queue fd; devid is the
 * iommufd device id of the asking device, for other_device. Answers each
 * group with Invalid Request. Returns the count, -ENOSPC when the next group
 * does not fit in max, -EPROTO for a record of the wrong size, -EIO or -errno
 * when the answer could not be written. Logs nothing (callers hold a lock).
 */
int npv_iommufd_fault_take(int fd, uint32_t devid, struct npv_dev_fault *out, size_t max);

#endif
