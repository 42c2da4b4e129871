/* SPDX-License-Identifier: MIT */
/*
 * The RKNPU driver's reading of what a core writes (devices/rknpu/
 * status_decode.c, called by rknpu_core_check, rknpu_core_reset and the
 * bring-up): PC_INTERRUPT_RAW_STATUS, PC_TASK_STATUS, GLOBAL_SOFT_RESET and
 * PC_VERSION. Bytes 0-1: the chain's length (1..4095 tasks); then 8-byte
 * steps, a raw interrupt status and a task counter, decided in the driver's
 * order (the counter only once a task ended). A job ends at its first
 * non-zero answer; the next step starts the next job. The same two values
 * also go through the reset and version decoders.
 * Aborts when a job completes without DPU_DONE, with a bit that does not
 * exist, a DMA error or PPU bit, with a counter other than its length, when
 * an all-ones read (device gone) is anything but an error, or on an answer
 * outside the documented set.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include <npuvfio/common.h>

#include "regs.h"
#include "status_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One poll of a running job, as rknpu_core_check makes it. */
static int core_check(uint32_t raw, uint32_t task_status, uint32_t nr_tasks, uint32_t done)
{
    int r = rknpu_decode_irq_status(raw, done);
    require(r == 1 || r == 0 || r == -EIO || r == -NPV_EDEVFAULT, "undocumented irq answer", r);
    if ((raw & ~RKNPU_INT_VALID_MASK) != 0)
        require(r == -NPV_EDEVFAULT, "a bit that does not exist is no fault", raw);
    else if (raw & RKNPU_INT_DMA_ERROR)
        require(r == -EIO, "a DMA error is not -EIO", raw);
    else if (r == 1)
        require((raw & done) != 0, "done without the chain's done bits", raw);
    if (r != 1)
        return r;
    r = rknpu_decode_task_status(task_status, nr_tasks);
    require(r == 1 || r == 0 || r == -NPV_EDEVFAULT, "undocumented task answer", r);
    if ((task_status & RKNPU_TASK_STATUS_COUNT_MASK) > nr_tasks)
        require(r == -NPV_EDEVFAULT, "more tasks done than the chain has", task_status);
    return r;
}

static void check_reset_and_version(uint32_t v)
{
    int s = rknpu_decode_reset_state(v);
    require(s == 0 || s == 1 || s == -ENODEV, "undocumented reset answer", v);
    if (v == UINT32_MAX)
        require(s == -ENODEV, "an all-ones reset register is not a gone device", v);
    if (s == 0)
        require((v & RKNPU_SOFT_RESET_IN_RESET) == 0, "out of reset while IN_RESET", v);
    int ver = rknpu_decode_version(v);
    require(ver == 0 || ver == -ENODEV || ver == -EPROTO, "undocumented version answer", v);
    require(ver != 0 || v == RKNPU_VERSION_VALUE, "a foreign version accepted", v);
    if (v == UINT32_MAX)
        require(ver == -ENODEV, "an all-ones version is not a gone device", v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint32_t nr_tasks = 1u + (uint32_t)(data[0] | data[1] << 8) % RKNPU_MAX_TASKS_PER_RUN;
    /* Bit 15 of the first two bytes: the chain ends in the PPU instead of the DPU. */
    uint32_t done = rknpu_done_mask(data[1] & 0x80 ? RKNPU_ENABLE_PPU : RKNPU_MM_ENABLE);
    uint64_t jobs = 1, completed = 0, failed = 0;
    for (size_t at = 2; at + 8 <= size; at += 8) {
        uint32_t raw = fuzz_rd32(data + at), task_status = fuzz_rd32(data + at + 4);
        check_reset_and_version(raw);
        check_reset_and_version(task_status);
        int r = core_check(raw, task_status, nr_tasks, done);
        if (raw == UINT32_MAX)
            require(r < 0, "an all-ones status (device gone) is no error", raw);
        if (r == 1) {
            require((raw & ~RKNPU_INT_VALID_MASK) == 0 && (raw & done) != 0 &&
                        (raw & RKNPU_INT_DMA_ERROR) == 0 &&
                        (done == RKNPU_INT_PPU_DONE || (raw & RKNPU_INT_PPU_DONE) == 0),
                    "completed on a status that does not say so", raw);
            require((task_status & RKNPU_TASK_STATUS_COUNT_MASK) == nr_tasks,
                    "completed before the chain's last task", task_status);
            completed++;
        } else if (r < 0) {
            failed++;
        }
        if (r != 0)
            jobs++; /* the job ended: the next step polls the next one */
        require(completed + failed < jobs, "more jobs ended than started", completed + failed);
    }
    return 0;
}
