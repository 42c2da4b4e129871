/* SPDX-License-Identifier: MIT */
/* The RKNPU model's state, shared by its files (registers, core engine, matmul). */
#ifndef NPV_RKNPU_MODEL_INTERNAL_H
#define NPV_RKNPU_MODEL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../model_compute.h"
#include "model.h"
#include "regs.h"

/* VFIO's IRQ index of MSI-X. */
#define RKNPU_MSIX_IRQ_INDEX 2u

struct rknpu_core {
    struct npv_rknpu_model *m;
    unsigned index;

    /* Everything below, under lock; cond wakes the core thread (a run, a reset, stop). */
    pthread_mutex_t lock;
    pthread_cond_t cond;

    /* The window's registers as last written (PC and sub-blocks), by offset / 4. */
    uint32_t regs[RKNPU_CORE_WINDOW_SIZE / 4];
    uint32_t written[RKNPU_CORE_WINDOW_SIZE / 4 / 32]; /* by the running task's list */
    uint32_t raw_status;                               /* INTERRUPT_RAW_STATUS */
    uint32_t task_status;                              /* TASK_STATUS counter */

    uint32_t reset_lines; /* RKNPU_SOFT_RESET_LINES asserted */
    bool held_in_reset;   /* a failed reset: the core did not come out */
    uint64_t gen;         /* bumped by every reset: a run of an older gen is abandoned */
    enum rknpu_core_state state;
    bool run_pending;
    struct rknpu_run pending;

    /* test port */
    uint32_t fault;
    uint32_t tasks_executed, dma_faults, resets, config_errors, runs, reset_failures;
    uint32_t fault_iova;
    uint64_t bad_word;

    pthread_t thread;
    bool thread_started;
};

struct npv_rknpu_model {
    struct npv_vus *srv;
    struct rknpu_core cores[RKNPU_NUM_CORES];
    atomic_uint task_delay_us;
    atomic_bool soft_reset_absent; /* RKNPU_TP_SOFT_RESET_ABSENT */
    atomic_uint version_num;       /* RKNPU_TP_VERSION_NUM: what PC_VERSION_NUM reads */
    atomic_bool stop;
    /* A forwarding model (npv_rknpu_model_new_forwarding): runs go to fwd.start. */
    bool forwarding;
    struct rknpu_forward fwd;
    /* Where the cores add each task's compute time (npv_rknpu_model_count_compute); NULL: nowhere.
     */
    _Atomic(struct npv_model_compute *) compute;
};

/* model_core.c: the core thread, and what the register side asks of it. */
void *rknpu_core_main(void *arg);
/* Under core lock: hold the core in reset (lines asserted), abandoning any run. */
void rknpu_core_enter_reset(struct rknpu_core *c);
/* Under core lock: raise RAW_STATUS bits and the core's vector when they are unmasked. */
void rknpu_core_raise(struct rknpu_core *c, uint32_t bits);

/*
 * model_matmul.c: the 1x1-convolution matmul a task's registers describe
 * (regs.h lists the registers and layouts).
 */
struct rknpu_matmul {
    uint32_t prec; /* RKNPU_PREC_INT8 or RKNPU_PREC_FP16 */
    uint32_t m, k, n;
    uint32_t a, b, c, bias; /* IOVAs; bias 0 when has_bias is false */
    bool has_bias, relu;
    bool a_unsigned;    /* CNA CVT_CON0 DATA_SIGN clear: int8 A read as unsigned */
    uint64_t a_group;   /* CNA DMA_CON1: bytes from one group of four lines of A to the next */
    uint64_t a_surface; /* CNA DMA_CON1 + DMA_CON2: bytes from one surface of A to the next */
    uint64_t c_surface; /* DPU DST_SURF_STRIDE: bytes from one surface of C to the next */
};

/* The convolution buffer the CBUF_CON0 split divides (mtx512 npu_hw.h, Mesa). */
#define RKNPU_MODEL_CBUF_BANKS     12u
#define RKNPU_MODEL_CBUF_BANK_SIZE 32768u
/* The most of A's span (strides included) the model buffers (model_core.c execute). */
#define RKNPU_MODEL_MAX_A_SPAN (256ull << 20)

/*
 * Decode and check the task's configuration (regs by offset / 4; wr: the
 * bitmap, by offset / 4, of the registers this task's list wrote) against the
 * op-enable mask. 0, or -EINVAL for anything the model does not execute.
 */
int rknpu_matmul_decode(const uint32_t *regs, const uint32_t *wr, uint32_t enable,
                        struct rknpu_matmul *mm);
/* Bytes of A (the span its strides reach), B and the bias, and of C dense (M x 16 surfaces). */
uint64_t rknpu_matmul_a_bytes(const struct rknpu_matmul *mm);
uint64_t rknpu_matmul_b_bytes(const struct rknpu_matmul *mm);
uint64_t rknpu_matmul_bias_bytes(const struct rknpu_matmul *mm);
uint64_t rknpu_matmul_c_bytes(const struct rknpu_matmul *mm);
/*
 * C, dense (surfaces of M x 16 bytes), from A as read over its span, B and
 * the bias (NULL without), little-endian. 0 or -ENOMEM.
 */
int rknpu_matmul_compute(const struct rknpu_matmul *mm, const void *a, const void *b,
                         const void *bias, void *c);

#endif
