/* SPDX-License-Identifier: MIT */
/*
 * The interrupt status and task counter are values the device writes: bits
 * that do not exist, a completion bit of a block the chain does not enable
 * (PPU for a DPU-ending chain), a counter beyond the chain's length or an
 * all-ones read (the device is gone: outside the valid bits) are a device
 * fault, never taken as completion.
 */
#include <errno.h>

#include <npuvfio/common.h>

#include "regs.h"
#include "status_decode.h"

uint32_t rknpu_done_mask(uint32_t enable)
{
    return enable & (RKNPU_ENABLE_PPU | RKNPU_ENABLE_PPU_RDMA) ? RKNPU_INT_PPU_DONE
                                                               : RKNPU_INT_DPU_DONE;
}

int rknpu_decode_irq_status(uint32_t raw, uint32_t done_mask)
{
    if ((raw & ~RKNPU_INT_VALID_MASK) != 0)
        return -NPV_EDEVFAULT;
    if (raw & RKNPU_INT_DMA_ERROR)
        return -EIO;
    /*
     * A PPU-ending chain passes through the DPU first: its DPU bits are no
     * completion and no fault. The vendor's rknpu_job.c rknpu_irq_handler
     * completes a job when rknpu_fuzz_status(INT_STATUS) equals the last
     * task's int_mask, unmasked at the start (rknpu_job_subcore_commit_pc):
     * 0xc00 (PPU_0|PPU_1) for a PPU-ending task, so its DPU bits are masked
     * out there. A DPU-ending chain enables no PPU: a PPU bit is the device's
     * fault.
     */
    if (done_mask == RKNPU_INT_DPU_DONE && (raw & RKNPU_INT_PPU_DONE))
        return -NPV_EDEVFAULT;
    return (raw & done_mask) != 0 ? 1 : 0;
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
