/* SPDX-License-Identifier: MIT */
/*
 * What the driver concludes from the values an RKNPU core writes (its PC
 * interrupt status, task counter, soft-reset and version registers). Pure
 * functions: the driver calls exactly these, and tests/fuzz feeds them
 * arbitrary values.
 */
#ifndef NPV_RKNPU_STATUS_DECODE_H
#define NPV_RKNPU_STATUS_DECODE_H

#include <stdint.h>

/*
 * PC_INTERRUPT_RAW_STATUS of a chain whose last task ends in the block whose
 * done pair is done_mask (rknpu_done_mask: DPU 0x300, PPU 0xc00): < 0 a fault,
 * 0 still running, 1 a task ended (read TASK_STATUS).
 */
int rknpu_decode_irq_status(uint32_t raw, uint32_t done_mask);
/*
 * The done pair of a chain whose last task has block-enable mask enable: the
 * PPU's (0xc00) when it enables the PPU, else the DPU's (0x300) -- the
 * int_mask the vendor's tasks carry (mtx512 tests 0x300; PPU tasks 0xc00).
 */
uint32_t rknpu_done_mask(uint32_t enable);
/* PC_TASK_STATUS once a task ended: 1 the chain of nr_tasks finished, 0 not yet, < 0 a fault. */
int rknpu_decode_task_status(uint32_t task_status, uint32_t nr_tasks);
/* GLOBAL_SOFT_RESET read back after the release: 1 still in reset, 0 out, -ENODEV gone. */
int rknpu_decode_reset_state(uint32_t v);
/*
 * PC_VERSION + (PC_VERSION_NUM & 0xffff) of a core out of reset (the value
 * rocket_core_init computes): 0, -ENODEV (all-ones) or -EPROTO (not an RK3588 core).
 */
int rknpu_decode_version(uint32_t v);

#endif
