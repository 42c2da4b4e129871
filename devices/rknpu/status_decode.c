/* SPDX-License-Identifier: MIT */
/*
 * The interrupt status and task counter are values the device writes: bits
 * that do not exist, a completion bit of a block the task does not end with
 * (PPU for our DPU-ending tasks), a counter beyond the chain's length or an
 * all-ones read (the device is gone: outside the valid bits) are a device
 * fault, never taken as completion.
 */
#include <errno.h>

#include <npuvfio/common.h>

#include "regs.h"
#include "status_decode.h"

int rknpu_decode_irq_status(uint32_t raw)
{
    if ((raw & ~RKNPU_INT_VALID_MASK) != 0)
        return -NPV_EDEVFAULT;
    if (raw & RKNPU_INT_DMA_ERROR)
        return -EIO;
    if (raw & (RKNPU_INT_PPU_0 | RKNPU_INT_PPU_1))
        return -NPV_EDEVFAULT;
    return (raw & RKNPU_INT_DPU_DONE) != 0 ? 1 : 0;
}

int rknpu_decode_task_status(uint32_t task_status, uint32_t nr_tasks)
{
    uint32_t done = task_status & RKNPU_TASK_STATUS_COUNT_MASK;
    if (done > nr_tasks)
        return -NPV_EDEVFAULT;
    /* Fewer: an earlier task of the chain raised its DPU bit. */
    return done == nr_tasks ? 1 : 0;
}

int rknpu_decode_reset_state(uint32_t v)
{
    if (v == UINT32_MAX)
        return -ENODEV;
    return (v & RKNPU_SOFT_RESET_IN_RESET) != 0 ? 1 : 0;
}

int rknpu_decode_version(uint32_t v)
{
    if (v == UINT32_MAX)
        return -ENODEV;
    return v == RKNPU_VERSION_VALUE ? 0 : -EPROTO;
}
