/* SPDX-License-Identifier: MIT */
/*
 * One NPU core's program controller and compute engine, in a thread of its
 * own: on an operation enable it fetches each task's register-command list by
 * DMA, applies the writes to the core's sub-block registers, executes at the
 * op-enable word, follows the trailer's chain to the next task, counts
 * completed tasks in TASK_STATUS and, after the last, raises the DPU done bit
 * and the core's vector (regs.h, "how the model completes a run").
 *
 * Memory is reached only through the client's DMA mappings (the domain the
 * device is attached to): anything else ends the run with a DMA error bit,
 * as the NPU's IOMMU would fault it. A reset bumps the core's generation; a
 * run of an older generation stops at its next step and changes nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model_internal.h"

#define PC_REG(c, off) ((c)->regs[(off) / 4u])

void rknpu_core_raise(struct rknpu_core *c, uint32_t bits)
{
    c->raw_status |= bits;
    /* The line is the OR of the unmasked bits; MSI-X turns its assertion into one message. */
    if (bits & PC_REG(c, RKNPU_PC_INTERRUPT_MASK))
        npv_vus_irq_raise(c->m->srv, RKNPU_MSIX_IRQ_INDEX, RKNPU_MSIX_VECTOR(c->index));
}

void rknpu_core_enter_reset(struct rknpu_core *c)
{
    if (c->m->forwarding && c->state == RKNPU_CORE_RUNNING && c->m->fwd.abandon != NULL)
        c->m->fwd.abandon(c->m->fwd.arg, c->index, c->gen);
    c->gen++;
    memset(c->regs, 0, sizeof(c->regs));
    c->raw_status = 0;
    c->task_status = 0;
    c->run_pending = false;
    c->state = RKNPU_CORE_IN_RESET;
    pthread_cond_broadcast(&c->cond);
}

/* The run is still the core's (no reset since it began). Under lock. */
static bool run_current(const struct rknpu_core *c, uint64_t gen)
{
    return c->gen == gen && !atomic_load(&c->m->stop);
}

/* End a run with a DMA error. Under lock. */
static void run_dma_error(struct rknpu_core *c, uint64_t gen, uint32_t bit, uint32_t iova)
{
    if (!run_current(c, gen))
        return;
    c->dma_faults++;
    c->fault_iova = iova;
    c->state = RKNPU_CORE_IDLE;
    rknpu_core_raise(c, bit);
}

/* End a run with a config error: the core stops as if stalled (only a reset restarts it). */
static void run_config_error(struct rknpu_core *c, uint64_t gen, uint64_t word)
{
    if (!run_current(c, gen))
        return;
    c->config_errors++;
    c->bad_word = word;
    c->state = RKNPU_CORE_STALLED;
}

/* A 32-bit device address range [iova, iova + len) that does not wrap past 4 GiB. */
static bool range_ok(uint32_t iova, uint64_t len)
{
    return (uint64_t)iova + len <= (1ull << 32);
}

/*
 * Apply one task's words. Returns 1 with *enable set at the op-enable word,
 * or 0 with *bad set to the offending word. Under lock.
 */
static int apply_words(struct rknpu_core *c, const uint64_t *words, uint32_t count,
                       uint32_t *enable, uint64_t *bad)
{
    for (uint32_t i = 0; i < count; i++) {
        uint64_t w = words[i];
        uint16_t tgt = rknpu_regcmd_target(w);
        uint16_t reg = rknpu_regcmd_reg(w);
        uint32_t val = rknpu_regcmd_value(w);
        *bad = w;
        if (tgt == 0)
            continue; /* padding */
        if (tgt == (RKNPU_TGT_BARRIER | RKNPU_TGT_WRITE))
            continue; /* the model applies writes in order: nothing is in flight to wait for */
        if (tgt == (RKNPU_TGT_OP_EN | RKNPU_TGT_WRITE)) {
            if (reg != RKNPU_PC_OPERATION_ENABLE)
                return 0;
            *enable = val;
            return 1;
        }
        if (!(tgt & RKNPU_TGT_WRITE))
            return 0;
        uint32_t blk;
        switch (tgt & ~RKNPU_TGT_WRITE) {
        case RKNPU_TGT_PC:
            /* A list may only chain: the next task's address and amount. */
            if (reg != RKNPU_PC_BASE_ADDRESS && reg != RKNPU_PC_REGISTER_AMOUNTS)
                return 0;
            blk = RKNPU_BLK_PC;
            break;
        case RKNPU_TGT_CNA:
            blk = RKNPU_BLK_CNA;
            break;
        case RKNPU_TGT_CMAC:
            blk = RKNPU_BLK_CMAC;
            break;
        case RKNPU_TGT_CORE:
            blk = RKNPU_BLK_CORE;
            break;
        case RKNPU_TGT_DPU:
            blk = RKNPU_BLK_DPU;
            break;
        case RKNPU_TGT_DPU_RDMA:
            blk = RKNPU_BLK_DPU_RDMA;
            break;
        case RKNPU_TGT_PPU:
            blk = RKNPU_BLK_PPU;
            break;
        case RKNPU_TGT_PPU_RDMA:
            blk = RKNPU_BLK_PPU_RDMA;
            break;
        default:
            return 0; /* several block bits, or none */
        }
        if (reg < blk || reg >= blk + RKNPU_BLK_SIZE || (reg & 3u))
            return 0;
        c->regs[reg / 4u] = val;
        c->written[reg / 128u] |= 1u << ((reg / 4u) % 32u);
    }
    return 0; /* no op-enable word: the task never starts */
}

/* Sleep the per-task delay, waking early for a reset or stop. Under lock. */
static void task_delay(struct rknpu_core *c, uint64_t gen)
{
    unsigned us = atomic_load(&c->m->task_delay_us);
    if (us == 0)
        return;
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += us / 1000000u;
    dl.tv_nsec += (long)(us % 1000000u) * 1000l;
    if (dl.tv_nsec >= 1000000000l) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000l;
    }
    while (run_current(c, gen) && pthread_cond_timedwait(&c->cond, &c->lock, &dl) != ETIMEDOUT)
        ;
}

/*
 * C's surfaces of four channels (M x 16 bytes each, dense in c_out) to the
 * addresses DST_SURF_STRIDE gives (model_matmul.c decode_dpu); the bytes
 * between surfaces are not written. 0, or < 0 when one is not writable.
 */
static int write_c(struct rknpu_core *c, const struct rknpu_matmul *mm, const uint8_t *c_out,
                   uint64_t nc)
{
    uint64_t surf = (uint64_t)mm->m * 16u, nsurf = nc / surf;
    if (mm->c_surface == surf)
        return range_ok(mm->c, nc) ? npv_vus_dma_write(c->m->srv, mm->c, c_out, nc) : -EFAULT;
    if (!range_ok(mm->c, (nsurf - 1u) * mm->c_surface + surf))
        return -EFAULT;
    for (uint64_t i = 0; i < nsurf; i++) {
        int r = npv_vus_dma_write(c->m->srv, (uint32_t)(mm->c + i * mm->c_surface),
                                  c_out + i * surf, surf);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Operands in, compute, C out. 0, or the DMA error bit with *iova. Without lock. */
static uint32_t execute(struct rknpu_core *c, const struct rknpu_matmul *mm, bool inject_dma_error,
                        uint32_t *iova)
{
    uint64_t na = rknpu_matmul_a_bytes(mm), nb = rknpu_matmul_b_bytes(mm);
    uint64_t nbias = rknpu_matmul_bias_bytes(mm), nc = rknpu_matmul_c_bytes(mm);
    uint32_t err = 0;
    /*
     * [model choice] Strides that spread A over more than 256 MiB are read
     * as a DMA read error at A rather than buffered (the model's own memory).
     */
    if (na > RKNPU_MODEL_MAX_A_SPAN) {
        *iova = mm->a;
        return RKNPU_INT_DMA_READ_ERROR;
    }
    uint8_t *a = malloc(na), *b = malloc(nb), *c_out = malloc(nc);
    uint8_t *bias = nbias ? malloc(nbias) : NULL;
    if (a == NULL || b == NULL || c_out == NULL || (nbias && bias == NULL)) {
        /* The model's own memory ran out: say so as a read that could not complete. */
        *iova = mm->a;
        err = RKNPU_INT_DMA_READ_ERROR;
        goto out;
    }
    struct {
        uint32_t iova;
        uint64_t len;
        void *buf;
    } in[] = {{mm->a, na, a}, {mm->b, nb, b}, {mm->bias, nbias, bias}};
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
        if (in[i].len == 0)
            continue;
        if (!range_ok(in[i].iova, in[i].len) ||
            npv_vus_dma_read(c->m->srv, in[i].iova, in[i].buf, in[i].len) < 0) {
            *iova = in[i].iova;
            err = RKNPU_INT_DMA_READ_ERROR;
            goto out;
        }
    }
    if (rknpu_matmul_compute(mm, a, b, bias, c_out) < 0) {
        /* The model's own memory ran out: say so as a read that could not complete. */
        *iova = mm->a;
        err = RKNPU_INT_DMA_READ_ERROR;
        goto out;
    }
    if (inject_dma_error || write_c(c, mm, c_out, nc) < 0) {
        *iova = mm->c;
        err = RKNPU_INT_DMA_WRITE_ERROR;
    }
out:
    free(a);
    free(b);
    free(c_out);
    free(bias);
    return err;
}

/*
 * Fetch and apply task t's list. 1 with *mm and *enable decoded, 0 when the run
 * ended (error recorded). Called and returns under lock.
 */
static int task_load(struct rknpu_core *c, uint64_t gen, uint32_t addr, uint32_t amount,
                     struct rknpu_matmul *mm)
{
    uint32_t count = rknpu_regcmd_fetch_words(amount);
    uint64_t bytes = (uint64_t)count * 8u;
    uint64_t *words = malloc(bytes);
    uint64_t bad = 0;
    uint32_t enable = 0;
    int r;

    pthread_mutex_unlock(&c->lock);
    r = words == NULL || !range_ok(addr, bytes) ? -EFAULT
                                                : npv_vus_dma_read(c->m->srv, addr, words, bytes);
    pthread_mutex_lock(&c->lock);
    if (r < 0) {
        run_dma_error(c, gen, RKNPU_INT_DMA_READ_ERROR, addr);
        free(words);
        return 0;
    }
    if (!run_current(c, gen)) {
        free(words);
        return 0;
    }
    memset(c->written, 0, sizeof(c->written));
    r = apply_words(c, words, count, &enable, &bad);
    free(words);
    if (r != 1 || rknpu_matmul_decode(c->regs, c->written, enable, mm) < 0) {
        run_config_error(c, gen, bad);
        return 0;
    }
    return 1;
}

/* One run: TASK_NUMBER tasks from the pending PC state. Called and returns under lock. */
static void run(struct rknpu_core *c, struct rknpu_run rn)
{
    uint64_t gen = c->gen;
    uint32_t fault = c->fault;
    if (fault == RKNPU_FAULT_STALL || fault == RKNPU_FAULT_WRONG_STATUS ||
        fault == RKNPU_FAULT_DMA_ERROR)
        c->fault = RKNPU_FAULT_NONE;
    c->runs++;
    if (fault == RKNPU_FAULT_STALL) {
        c->state = RKNPU_CORE_STALLED;
        return;
    }
    if (rn.tasks == 0) {
        run_config_error(c, gen, 0);
        return;
    }
    uint32_t addr = rn.base, amount = rn.amount, group = 0;
    for (uint32_t t = 0; t < rn.tasks; t++) {
        struct rknpu_matmul mm;
        if (addr == 0) {
            run_config_error(c, gen, 0); /* a chain that ends before TASK_NUMBER tasks */
            return;
        }
        if (!task_load(c, gen, addr, amount, &mm))
            return;
        /* The trailer named the next task; take it before the next list can overwrite it. */
        addr = PC_REG(c, RKNPU_PC_BASE_ADDRESS) & RKNPU_PC_BASE_ADDRESS_MASK;
        amount = PC_REG(c, RKNPU_PC_REGISTER_AMOUNTS) & RKNPU_PC_REGISTER_AMOUNTS_MASK;
        bool inject = fault == RKNPU_FAULT_DMA_ERROR && t == 0;

        pthread_mutex_unlock(&c->lock);
        uint32_t iova = 0;
        struct npv_model_compute *cc = atomic_load_explicit(&c->m->compute, memory_order_relaxed);
        uint64_t t0 = npv_model_compute_start(cc);
        uint32_t err = execute(c, &mm, inject, &iova);
        /* A task's compute: its operands in, the arithmetic, C out. */
        if (!err)
            npv_model_compute_add(cc, t0, 0);
        pthread_mutex_lock(&c->lock);
        if (err) {
            run_dma_error(c, gen, err, iova);
            return;
        }
        task_delay(c, gen);
        if (!run_current(c, gen))
            return;
        group = rn.pingpong ? t & 1u : 0u;
        c->task_status = (c->task_status + 1u) & RKNPU_TASK_STATUS_COUNT_MASK;
        c->tasks_executed++;
    }
    c->state = RKNPU_CORE_IDLE;
    if (fault == RKNPU_FAULT_WRONG_STATUS) {
        /* A status the driver did not ask for, on a vector it cannot ignore. */
        c->raw_status |= RKNPU_INT_PPU_0;
        npv_vus_irq_raise(c->m->srv, RKNPU_MSIX_IRQ_INDEX, RKNPU_MSIX_VECTOR(c->index));
    } else
        rknpu_core_raise(c, group ? RKNPU_INT_DPU_1 : RKNPU_INT_DPU_0);
}

void *rknpu_core_main(void *arg)
{
    struct rknpu_core *c = arg;
    pthread_mutex_lock(&c->lock);
    while (!atomic_load(&c->m->stop)) {
        if (c->run_pending) {
            c->run_pending = false;
            run(c, c->pending);
            continue;
        }
        pthread_cond_wait(&c->cond, &c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}
