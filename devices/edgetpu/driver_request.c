/* SPDX-License-Identifier: MIT */
/*
 * Edge TPU executables and requests. As libedgetpu does: parameters are
 * mapped once per executable; per request the instruction chunk is copied
 * into a buffer, its address fields patched (bit-granular, LSB first, as
 * MOVI immediates are), and only then is the descriptor written and the
 * doorbell rung. Each ring slot owns one instruction buffer and one scratch
 * area, so a slot's memory is never reused while the chip may read it.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver_internal.h"
#include "status_decode.h"

static size_t page_round(size_t n)
{
    return (n + EDGETPU_PAGE_SIZE - 1) & ~(size_t)(EDGETPU_PAGE_SIZE - 1);
}

static int check_desc(const struct npv_edgetpu *tpu, const struct npv_edgetpu_executable_desc *d)
{
    if (d->instructions == NULL || d->instructions_size == 0 ||
        d->instructions_size % NPV_EDGETPU_INSN_SIZE ||
        d->instructions_size > tpu->cfg.max_instr_bytes ||
        (d->nr_fields > 0 && d->fields == NULL) ||
        (d->parameters_size > 0 && d->parameters == NULL))
        return -EINVAL;
    for (uint32_t i = 0; i < d->nr_fields; i++) {
        const struct npv_edgetpu_field *f = &d->fields[i];
        if ((uint64_t)f->bit_offset + 32 > (uint64_t)d->instructions_size * 8 ||
            f->half > NPV_EDGETPU_UPPER_32BIT)
            return -EINVAL;
        switch (f->base) {
        case NPV_EDGETPU_BASE_INPUT:
            if (f->index >= d->nr_inputs)
                return -EINVAL;
            break;
        case NPV_EDGETPU_BASE_OUTPUT:
            if (f->index >= d->nr_outputs)
                return -EINVAL;
            break;
        case NPV_EDGETPU_BASE_PARAMETER:
            if (f->offset > d->parameters_size)
                return -EINVAL;
            break;
        case NPV_EDGETPU_BASE_SCRATCH:
            if (f->offset > d->scratch_size)
                return -EINVAL;
            break;
        default:
            return -EINVAL;
        }
    }
    return 0;
}

/* Copy into DMA memory, map into the domain and the chip's extended space. */
static int map_new(struct npv_edgetpu *tpu, size_t size, const void *src, unsigned prot,
                   struct npv_dma **dma, uint64_t *va)
{
    int r = npv_dma_alloc(tpu->ctx, page_round(size), NULL, dma);
    if (r < 0)
        return r;
    if (src != NULL)
        memcpy(npv_dma_vaddr(*dma), src, size);
    npv_iova_t iova;
    r = npv_dma_map(*dma, tpu->dom, prot, &iova);
    if (r == 0) {
        npv_dma_sync_for_device(*dma, 0, size);
        r = edgetpu_map_iova(tpu, iova, size, va);
        if (r < 0)
            (void)npv_dma_unmap(*dma, tpu->dom);
    }
    if (r < 0) {
        npv_dma_free(*dma);
        *dma = NULL;
    }
    return r;
}

static void unmap_free(struct npv_edgetpu *tpu, struct npv_dma *dma, uint64_t va, size_t size)
{
    if (dma == NULL)
        return;
    (void)npv_edgetpu_unmap(tpu, va, size);
    (void)npv_dma_unmap(dma, tpu->dom);
    npv_dma_free(dma);
}

int npv_edgetpu_load(struct npv_edgetpu *tpu, const struct npv_edgetpu_executable_desc *d,
                     struct npv_edgetpu_executable **out)
{
    if (tpu == NULL || d == NULL || out == NULL || check_desc(tpu, d) < 0)
        return -EINVAL;
    struct npv_edgetpu_executable *x = calloc(1, sizeof(*x));
    int r = -ENOMEM;
    if (x == NULL)
        return -ENOMEM;
    x->tpu = tpu;
    x->d = *d;
    x->instructions = malloc(d->instructions_size);
    x->fields = calloc(d->nr_fields ? d->nr_fields : 1, sizeof(*x->fields));
    if (x->instructions == NULL || x->fields == NULL)
        goto err;
    memcpy(x->instructions, d->instructions, d->instructions_size);
    if (d->nr_fields)
        memcpy(x->fields, d->fields, d->nr_fields * sizeof(*x->fields));
    x->d.instructions = x->instructions;
    x->d.fields = x->fields;
    x->d.parameters = NULL;
    if (d->parameters_size > 0) {
        x->params_len = d->parameters_size;
        r = map_new(tpu, d->parameters_size, d->parameters, NPV_DMA_READ, &x->params_dma,
                    &x->params_va);
        if (r < 0)
            goto err;
    }
    if (d->scratch_size > 0) {
        x->scratch_stride = page_round(d->scratch_size);
        r = map_new(tpu, x->scratch_stride * tpu->cfg.queue_entries, NULL, NPV_DMA_RW,
                    &x->scratch_dma, &x->scratch_va);
        if (r < 0)
            goto err;
    }
    *out = x;
    return 0;
err:
    npv_edgetpu_unload(x);
    return r;
}

void npv_edgetpu_unload(struct npv_edgetpu_executable *x)
{
    if (x == NULL)
        return;
    unmap_free(x->tpu, x->params_dma, x->params_va, x->params_len);
    unmap_free(x->tpu, x->scratch_dma, x->scratch_va,
               x->scratch_stride * x->tpu->cfg.queue_entries);
    free(x->instructions);
    free(x->fields);
    free(x);
}

/* Bits [bit, bit + 32) of buf get v, LSB first within bytes (libedgetpu's field copy). */
void edgetpu_patch32(uint8_t *buf, uint32_t bit, uint32_t v)
{
    if ((bit & 7) == 0) {
        memcpy(buf + bit / 8, &v, 4);
        return;
    }
    for (uint32_t i = 0; i < 32; i++) {
        uint32_t b = bit + i;
        uint8_t m = (uint8_t)(1u << (b & 7));
        if ((v >> i) & 1)
            buf[b / 8] |= m;
        else
            buf[b / 8] &= (uint8_t)~m;
    }
}

static void patch(const struct npv_edgetpu_executable *x, uint8_t *buf, uint32_t slot,
                  const uint64_t *in, const uint64_t *outv)
{
    for (uint32_t i = 0; i < x->d.nr_fields; i++) {
        const struct npv_edgetpu_field *f = &x->fields[i];
        uint64_t base;
        switch (f->base) {
        case NPV_EDGETPU_BASE_INPUT:
            base = in[f->index];
            break;
        case NPV_EDGETPU_BASE_OUTPUT:
            base = outv[f->index];
            break;
        case NPV_EDGETPU_BASE_PARAMETER:
            base = x->params_va;
            break;
        default:
            base = x->scratch_va + (uint64_t)slot * x->scratch_stride;
            break;
        }
        uint64_t va = base + f->offset;
        edgetpu_patch32(buf, f->bit_offset,
                        f->half == NPV_EDGETPU_UPPER_32BIT ? (uint32_t)(va >> 32) : (uint32_t)va);
    }
}

/* The hook's deliberate bug: the doorbell first; the descriptor once the chip has fetched. */
static int desc_after_doorbell(struct npv_edgetpu *tpu, void *slot_mem,
                               const struct edgetpu_desc *d, uint32_t slot)
{
    uint32_t want = (slot + 1) & (tpu->cfg.queue_entries - 1);
    npv_ring_submit(tpu->ring);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        uint64_t fetched = npv_bar_read64(tpu->bar, EDGETPU_IQ_FETCHED_HEAD);
        if (fetched == want)
            break;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)t.tv_nsec -
                (uint64_t)t0.tv_nsec >
            tpu->cfg.poll_timeout_ns)
            break;
    }
    memcpy(slot_mem, d, sizeof(*d));
    return 0;
}

int npv_edgetpu_submit(struct npv_edgetpu *tpu, const struct npv_edgetpu_executable *x,
                       const uint64_t *input_va, const uint64_t *output_va, uint64_t cookie)
{
    if (tpu->gone)
        return -ENODEV;
    if (x == NULL || x->tpu != tpu || (x->d.nr_inputs && input_va == NULL) ||
        (x->d.nr_outputs && output_va == NULL))
        return -EINVAL;
    void *slot_mem;
    int r = npv_ring_next(tpu->ring, cookie, &slot_mem);
    if (r < 0)
        return r;
    uint32_t slot = (uint32_t)(((uint8_t *)slot_mem - (uint8_t *)npv_dma_vaddr(tpu->queue_dma)) /
                               sizeof(struct edgetpu_desc));
    size_t off = (size_t)slot * tpu->cfg.max_instr_bytes;
    uint8_t *buf = (uint8_t *)npv_dma_vaddr(tpu->instr_dma) + off;
    memcpy(buf, x->instructions, x->d.instructions_size);
    patch(x, buf, slot, input_va, output_va);
    npv_dma_sync_for_device(tpu->instr_dma, off, x->d.instructions_size);
    struct edgetpu_desc d = {
        .address = tpu->instr_va + off,
        .size_in_bytes = x->d.instructions_size,
    };
    if (tpu->cfg.test_hooks & NPV_EDGETPU_HOOK_DESC_AFTER_DOORBELL)
        return desc_after_doorbell(tpu, slot_mem, &d, slot);
    memcpy(slot_mem, &d, sizeof(d));
    npv_ring_submit(tpu->ring);
    return 0;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * SC_HOST_0 mode. The counter runs ahead of the status block: a request the
 * counter calls finished has its completion on the way, so the status block
 * is polled for it, not slept on. Sleeps are capped so an executable that
 * raises no SC_HOST_0 still completes by its status block.
 */
#define SC_HOST_RECHECK_NS 1000000ull

static int wait_sc_host(struct npv_edgetpu *tpu, unsigned min, uint64_t timeout_ns,
                        struct npv_cpl *cpl, unsigned max)
{
    uint64_t start = mono_ns();
    uint64_t deadline = timeout_ns > UINT64_MAX - start ? UINT64_MAX : start + timeout_ns;
    unsigned got = 0;
    if (min == 0 || min > max)
        return -EINVAL;
    for (;;) {
        int r = npv_ring_poll(tpu->ring, cpl + got, max - got);
        if (r < 0)
            return got > 0 ? (int)got : r;
        got += (unsigned)r;
        tpu->sc_host_reaped += (uint32_t)r;
        if (got >= min)
            return (int)got;
        uint64_t now = mono_ns();
        if (now >= deadline)
            return (int)got;
        if (edgetpu_sc_host_pending(npv_bar_read64(tpu->bar, EDGETPU_SC_HOST_INT_COUNT),
                                    tpu->sc_host_base, &tpu->sc_host_reaped) > 0) {
            /*
             * Finished on the chip, its status block still on the way. The
             * interrupt woke us on the CPU of whoever raised it (a model's
             * thread on a small host): give that CPU back while we wait.
             */
            sched_yield();
            continue;
        }
        uint64_t left = deadline - now;
        int64_t w = npv_irq_wait(tpu->irq, EDGETPU_VEC_SC_HOST_0,
                                 left < SC_HOST_RECHECK_NS ? left : SC_HOST_RECHECK_NS);
        if (w < 0 && w != -ETIMEDOUT)
            return got > 0 ? (int)got : (int)w;
    }
}

int npv_edgetpu_wait(struct npv_edgetpu *tpu, unsigned min, uint64_t timeout_ns,
                     struct npv_cpl *cpl, unsigned max)
{
    int r;
    if (tpu->cfg.completion == NPV_EDGETPU_IRQ_SC_HOST) {
        r = wait_sc_host(tpu, min, timeout_ns, cpl, max);
    } else {
        enum npv_ring_wait_mode mode =
            tpu->cfg.completion == NPV_EDGETPU_IRQ ? NPV_RING_WAIT_IRQ : NPV_RING_WAIT_POLL;
        r = npv_ring_wait(tpu->ring, mode, min, timeout_ns, cpl, max);
    }
    /* The ring zeroes the status block before the reset: the fatal word comes with the job. */
    for (int i = 0; i < r; i++)
        if (cpl[i].status == -EIO && cpl[i].dev_error != 0)
            tpu->last_error.fatal_word = cpl[i].dev_error;
    return r;
}

int npv_edgetpu_run(struct npv_edgetpu *tpu, const struct npv_edgetpu_executable *x,
                    const uint64_t *input_va, const uint64_t *output_va)
{
    if (npv_ring_in_flight(tpu->ring) != 0)
        return -EBUSY;
    int r = npv_edgetpu_submit(tpu, x, input_va, output_va, 0);
    if (r < 0)
        return r;
    struct npv_cpl c;
    /* The request's own deadline (the ring's job timeout) decides; the wait only bounds it. */
    uint64_t t = tpu->cfg.request_timeout_ns;
    r = npv_edgetpu_wait(tpu, 1, t > UINT64_MAX / 2 ? UINT64_MAX : 2 * t, &c, 1);
    if (r == 0) {
        /*
         * Only a request without a deadline of its own gets here: run owns
         * it and returns, so it fails it and resets the chip rather than
         * leave it in flight.
         */
        (void)npv_ring_reset(tpu->ring);
        r = -ETIMEDOUT;
    }
    if (r < 0) {
        /* The failed request is returned by the next poll: take it off the table. */
        while (npv_ring_poll(tpu->ring, &c, 1) > 0)
            ;
        return tpu->gone ? -ENODEV : r;
    }
    if (c.status != 0 && tpu->gone)
        return -ENODEV;
    return c.status;
}
