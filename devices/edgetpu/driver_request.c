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

/*
 * A ring slot and a request entry for one chunk. *slot: the slot's index.
 * The request's deadline is budget_ns from now (cfg->request_timeout_ns but
 * for npv_edgetpu_submit_within); the same budget goes to the ring (a chunk
 * the chip never consumes) and to the request (a consumed chunk SC_HOST_0
 * never counts): expire() and the ring's deadline.
 */
static int claim(struct npv_edgetpu *tpu, uint64_t cookie, uint64_t budget_ns, void **slot_mem,
                 uint32_t *slot)
{
    /*
     * A request holds its slot's scratch until SC_HOST_0 counted it, after
     * the ring let go of it: the ring's capacity bounds what is uncollected.
     */
    if (tpu->req_n >= npv_ring_capacity(tpu->ring))
        return -EAGAIN;
    int r = npv_ring_next_timed(tpu->ring, cookie, budget_ns, slot_mem);
    if (r < 0)
        return r;
    uint64_t now = edgetpu_mono_ns();
    tpu->reqs[(tpu->req_head + tpu->req_n) % tpu->cfg.queue_entries] = (struct edgetpu_req){
        .deadline_ns = budget_ns > UINT64_MAX - now ? UINT64_MAX : now + budget_ns,
    };
    tpu->req_n++;
    *slot = (uint32_t)(((uint8_t *)*slot_mem - (uint8_t *)npv_dma_vaddr(tpu->queue_dma)) /
                       sizeof(struct edgetpu_desc));
    return 0;
}

static int submit_within(struct npv_edgetpu *tpu, const struct npv_edgetpu_executable *x,
                         const uint64_t *input_va, const uint64_t *output_va, uint64_t cookie,
                         uint64_t budget_ns)
{
    if (tpu->gone)
        return -ENODEV;
    if (x == NULL || x->tpu != tpu || (x->d.nr_inputs && input_va == NULL) ||
        (x->d.nr_outputs && output_va == NULL))
        return -EINVAL;
    void *slot_mem;
    uint32_t slot;
    int r = claim(tpu, cookie, budget_ns, &slot_mem, &slot);
    if (r < 0)
        return r;
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

int npv_edgetpu_submit(struct npv_edgetpu *tpu, const struct npv_edgetpu_executable *x,
                       const uint64_t *input_va, const uint64_t *output_va, uint64_t cookie)
{
    return submit_within(tpu, x, input_va, output_va, cookie, tpu->cfg.request_timeout_ns);
}

int npv_edgetpu_submit_within(struct npv_edgetpu *tpu, const struct npv_edgetpu_executable *x,
                              const uint64_t *input_va, const uint64_t *output_va, uint64_t cookie,
                              uint64_t budget_ns)
{
    if (budget_ns == 0)
        return -EINVAL;
    return submit_within(tpu, x, input_va, output_va, cookie, budget_ns);
}

/* ---- many threads: the calls an npv_share makes (npuvfio/share.h) ---- */

static int share_submit(void *drv, const void *req, uint64_t cookie)
{
    const struct npv_edgetpu_request *q = req;
    struct npv_edgetpu *tpu = drv;
    return submit_within(tpu, q->exe, q->input_va, q->output_va, cookie,
                         q->budget_ns != 0 ? q->budget_ns : tpu->cfg.request_timeout_ns);
}

static int share_poll(void *drv, struct npv_cpl *cpl, unsigned max)
{
    return npv_edgetpu_wait(drv, 1, 0, cpl, max);
}

const struct npv_share_ops *npv_edgetpu_share_ops(void)
{
    static const struct npv_share_ops ops = {.submit = share_submit, .poll = share_poll};
    return &ops;
}

int edgetpu_submit_chunk(struct npv_edgetpu *tpu, uint64_t va, uint32_t size, uint64_t cookie)
{
    if (tpu->gone)
        return -ENODEV;
    void *slot_mem;
    uint32_t slot;
    int r = claim(tpu, cookie, tpu->cfg.request_timeout_ns, &slot_mem, &slot);
    if (r < 0)
        return r;
    /* The chunk is in memory (cleaned by the caller) before the descriptor and its doorbell. */
    struct edgetpu_desc d = {.address = va, .size_in_bytes = size};
    memcpy(slot_mem, &d, sizeof(d));
    npv_ring_submit(tpu->ring);
    return 0;
}

/*
 * Completion: the chip's two signals (libedgetpu driver/mmio_driver.cc:
 * MmioDriver::TryIssueDmas's queue callback and HandleExecutionCompletion,
 * over single_queue_dma_scheduler.cc): the status block (through the ring)
 * says a request's chunk was consumed; SC_HOST_0's counter says a request
 * finished, FIFO. A request is handed back when both happened, or when it
 * failed.
 */

#define MAX_REQ_DEADLINE UINT64_MAX

static struct edgetpu_req *req_at(struct npv_edgetpu *tpu, uint32_t i)
{
    return &tpu->reqs[(tpu->req_head + i) % tpu->cfg.queue_entries];
}

/* Take the ring's completions (chunks consumed, or failed requests) in order. */
static int pump(struct npv_edgetpu *tpu)
{
    while (tpu->held_n < tpu->req_n) {
        struct npv_cpl c[16];
        uint32_t want = tpu->req_n - tpu->held_n;
        int n = npv_ring_poll(tpu->ring, c, want < 16 ? want : 16);
        if (n <= 0)
            return n;
        for (int i = 0; i < n; i++) {
            struct edgetpu_req *q = req_at(tpu, tpu->held_n++);
            q->c = c[i];
            /* A chip error reset the ring under it: failed by the error, not cancelled. */
            if (tpu->eio_left > 0) {
                tpu->eio_left--;
                if (q->c.status == -ECANCELED)
                    q->c.status = -EIO;
            }
            q->consumed = true;
            q->done = tpu->cfg.test_hooks & NPV_EDGETPU_HOOK_STATUS_BLOCK_ONLY;
        }
        if ((uint32_t)n < (want < 16 ? want : 16))
            return 0;
    }
    return 0;
}

/*
 * Requests SC_HOST_0 counted that are not handed back yet, from the
 * counter's field 0 (16 bits, wrapping; baseline read at open and after every
 * reset: libedgetpu's SC_HOST_0 handler in driver/mmio_driver.cc
 * MmioDriver::RegisterAndEnableAllInterrupts clears the status first, then
 * takes ScalarCoreController::CheckInterruptCounts).
 * -ENODEV when the chip reads all-ones.
 */
static int sc_host_credit(struct npv_edgetpu *tpu, uint32_t *credit)
{
    uint64_t v = npv_bar_read64(tpu->bar, EDGETPU_SC_HOST_INT_COUNT);
    if (v == ~0ull)
        return -ENODEV;
    int ahead = edgetpu_sc_host_pending(v, tpu->sc_host_base, &tpu->sc_host_reaped);
    *credit = ahead > 0 ? (uint32_t)ahead : 0;
    return 0;
}

/* Hand back finished or failed requests, oldest first. How many, or -ENODEV. */
static int release(struct npv_edgetpu *tpu, struct npv_cpl *cpl, unsigned max)
{
    unsigned got = 0;
    uint32_t credit = 0;
    bool counted = false;
    while (tpu->held_n > 0 && got < max) {
        struct edgetpu_req *q = req_at(tpu, 0);
        if (q->c.status == 0 && !q->done) {
            if (!counted) {
                int r = sc_host_credit(tpu, &credit);
                if (r < 0)
                    return got > 0 ? (int)got : r;
                counted = true;
            }
            if (credit == 0)
                break;
            credit--;
            tpu->sc_host_reaped = (tpu->sc_host_reaped + 1) & 0xffff;
        }
        cpl[got++] = q->c;
        tpu->req_head = (tpu->req_head + 1) % tpu->cfg.queue_entries;
        tpu->req_n--;
        tpu->held_n--;
    }
    return (int)got;
}

void edgetpu_reqs_at_reset(struct npv_edgetpu *tpu, bool chip_error)
{
    uint32_t credit = 0;
    if (!tpu->gone && sc_host_credit(tpu, &credit) < 0)
        credit = 0;
    /* A deadline names only the request it expired (held_fail_at); a chip error all of them. */
    int other = chip_error ? -EIO : -ECANCELED;
    for (uint32_t i = 0; i < tpu->held_n; i++) {
        struct edgetpu_req *q = req_at(tpu, i);
        if (q->c.status != 0 || q->done)
            continue;
        if (credit > 0) {
            credit--; /* finished before the reset: its outputs are there */
            q->done = true;
            continue;
        }
        q->c.status = tpu->held_fail != 0 && i == tpu->held_fail_at ? tpu->held_fail : other;
    }
    tpu->held_fail = 0;
    /* chip_init reads the counter's new baseline */
}

/*
 * A consumed request SC_HOST_0 never counted by its deadline: fail it, reset
 * the chip. Deadlines are per request (npv_edgetpu_submit_within), so any
 * consumed request may be the one past its own, not only the oldest.
 */
static int expire(struct npv_edgetpu *tpu, uint64_t now)
{
    uint32_t i = 0;
    for (; i < tpu->held_n; i++) {
        const struct edgetpu_req *q = req_at(tpu, i);
        if (q->c.status == 0 && !q->done && now >= q->deadline_ns)
            break;
    }
    if (i == tpu->held_n)
        return 0;
    tpu->held_fail = -ETIMEDOUT;
    tpu->held_fail_at = i;
    (void)npv_ring_reset(tpu->ring); /* a failed reset leaves the ring dead: its jobs come back */
    tpu->held_fail = 0;
    return 1;
}

void edgetpu_ack(struct npv_edgetpu *tpu)
{
    if (tpu->cfg.test_hooks & NPV_EDGETPU_HOOK_NO_ACK)
        return; /* the hook's deliberate bug */
    /*
     * Cleared before the status block and the counter are read, so an event
     * in between sets its bit again and raises its vector: the queue's
     * status is simply written 0; SC_HOST's is write-0-to-clear per bit, so
     * all ones but bit 0 (libedgetpu interrupt_controller.cc; its SC_HOST_0
     * handler clears first, then reads the count).
     */
    if (tpu->cfg.completion == NPV_EDGETPU_IRQ)
        (void)edgetpu_write64(tpu, EDGETPU_IQ_INT_STATUS, 0);
    (void)edgetpu_write64(tpu, EDGETPU_SC_HOST_INT_STATUS, 0xeull);
    /*
     * The clears are posted writes: read back before looking for work, or a
     * clear still on its way lands after the next event set the bit again,
     * that event raises no vector (its bit was never seen clear) and the
     * wait sleeps to its deadline. A read does not pass a posted write (PCIe
     * ordering; over vfio-user a trapped read first waits for the posted
     * writes), as libedgetpu's SC_HOST_0 handler reads the count right after
     * its clear (interrupt_controller.cc, host_queue.h).
     */
    (void)npv_bar_read64(tpu->bar, EDGETPU_SC_HOST_INT_STATUS);
}

/*
 * Fatal errors, watched during every wait (libedgetpu's fatal handler:
 * disable the fatal interrupt, clear its status, read hib_error_status; the
 * queue's fatal word alone misses the program's errors). from_irq: vector 12
 * fired. 1 when the chip was reset for one, 0 when none, or -ENODEV.
 */
static int fatal_check(struct npv_edgetpu *tpu, bool from_irq)
{
    if (tpu->cfg.test_hooks & NPV_EDGETPU_HOOK_NO_FATAL_WATCH)
        return 0; /* the hook's deliberate bug */
    uint64_t st = npv_bar_read64(tpu->bar, EDGETPU_FATAL_ERR_INT_STATUS);
    uint64_t hib = npv_bar_read64(tpu->bar, EDGETPU_HIB_ERROR_STATUS);
    if (st == ~0ull && hib == ~0ull) {
        /* Gone (or its peer died): the reset finds out; the ring hands back what it failed. */
        (void)npv_ring_reset(tpu->ring);
        return 1;
    }
    if (!(st & 1) && hib == 0 && !from_irq)
        return 0;
    if (!(st & 1) && hib == 0)
        return 0; /* a vector left over from before the last reset */
    (void)edgetpu_write64(tpu, EDGETPU_FATAL_ERR_INT_CONTROL, 0);
    (void)edgetpu_write64(tpu, EDGETPU_FATAL_ERR_INT_STATUS, 0);
    /* What the chip consumed before the error is failed by it, not cancelled. */
    (void)pump(tpu);
    /* recover() snapshots the error registers and fails what the chip had consumed */
    tpu->eio_left = tpu->req_n - tpu->held_n;
    (void)npv_ring_reset(tpu->ring); /* a failed reset leaves the ring dead: its jobs come back */
    return 1;
}

/*
 * The soonest deadline of a request not handed back, or MAX_REQ_DEADLINE:
 * budgets are per request, so a later request may be due first.
 */
static uint64_t next_deadline(struct npv_edgetpu *tpu)
{
    uint64_t soonest = MAX_REQ_DEADLINE;
    for (uint32_t i = 0; i < tpu->req_n; i++)
        if (req_at(tpu, i)->deadline_ns < soonest)
            soonest = req_at(tpu, i)->deadline_ns;
    return soonest;
}

#define FATAL_POLL_EVERY 32u

int npv_edgetpu_wait(struct npv_edgetpu *tpu, unsigned min, uint64_t timeout_ns,
                     struct npv_cpl *cpl, unsigned max)
{
    if (min == 0 || min > max || cpl == NULL)
        return -EINVAL;
    bool irq = tpu->cfg.completion != NPV_EDGETPU_POLL && tpu->ws != NULL;
    if (tpu->cfg.completion != NPV_EDGETPU_POLL && !irq &&
        !(tpu->cfg.test_hooks & NPV_EDGETPU_HOOK_MSIX_ONCE))
        return tpu->gone ? -ENODEV : -EINVAL;
    uint64_t start = edgetpu_mono_ns();
    uint64_t deadline = timeout_ns > UINT64_MAX - start ? UINT64_MAX : start + timeout_ns;
    unsigned got = 0, looks = 0;
    int r;
    for (;;) {
        if (irq)
            edgetpu_ack(tpu);
        r = pump(tpu);
        if (r == 0)
            r = release(tpu, cpl + got, max - got);
        if (r < 0)
            break;
        got += (unsigned)r;
        if (got >= min || tpu->req_n == 0)
            break;
        uint64_t now = edgetpu_mono_ns();
        r = expire(tpu, now);
        if (r < 0)
            break;
        if (r > 0)
            continue;
        if (!irq) {
            if (++looks % FATAL_POLL_EVERY == 0) {
                r = fatal_check(tpu, false);
                if (r < 0)
                    break;
            }
            if (now >= deadline)
                break;
            /*
             * The model's threads may share our CPU: yield now and then, and
             * every 8 looks while a consumed request waits for SC_HOST_0
             * (each of those looks is an MMIO read the device must answer).
             */
            if (looks % 1024 == 0 || (tpu->held_n > 0 && looks % 8 == 0))
                sched_yield();
            continue;
        }
        if (now >= deadline)
            break;
        /* Sleep until an interrupt, the wait's end, or the oldest request's deadline. */
        uint64_t until = next_deadline(tpu);
        if (until > deadline)
            until = deadline;
        if (until <= now)
            continue; /* the ring reads its clock every few polls: let it see the deadline */
        uint64_t fired[3];
        int n = npv_irq_waitset_wait(tpu->ws, until - now, fired, 3);
        if (n == -ETIMEDOUT)
            continue;
        if (n < 0) {
            r = n;
            break;
        }
        for (int i = 0; i < n; i++)
            if (fired[i] == EDGETPU_VEC_FATAL_ERR && (r = fatal_check(tpu, true)) < 0)
                break;
        if (r < 0)
            break;
    }
    if (r < 0 && got == 0)
        return tpu->gone ? -ENODEV : r;
    /* The ring zeroes the status block before the reset: the fatal word comes with the job. */
    for (unsigned i = 0; i < got; i++)
        if (cpl[i].status == -EIO && cpl[i].dev_error != 0)
            tpu->last_error.fatal_word = cpl[i].dev_error;
    return (int)got;
}

int edgetpu_wait_one(struct npv_edgetpu *tpu)
{
    struct npv_cpl c;
    /* The request's own deadline decides; the wait only bounds it. */
    uint64_t t = tpu->cfg.request_timeout_ns;
    int r = npv_edgetpu_wait(tpu, 1, t > UINT64_MAX / 2 ? UINT64_MAX : 2 * t, &c, 1);
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
        /* The failed request is returned by the next looks: take it off the table. */
        for (int k = 0; k < 4 && tpu->req_n > 0; k++) {
            struct npv_cpl d;
            if (pump(tpu) < 0 || release(tpu, &d, 1) <= 0)
                break;
        }
        return tpu->gone ? -ENODEV : r;
    }
    if (c.status != 0 && tpu->gone)
        return -ENODEV;
    return c.status;
}

int npv_edgetpu_run(struct npv_edgetpu *tpu, const struct npv_edgetpu_executable *x,
                    const uint64_t *input_va, const uint64_t *output_va)
{
    if (tpu->req_n != 0)
        return -EBUSY;
    int r = npv_edgetpu_submit(tpu, x, input_va, output_va, 0);
    if (r < 0)
        return r;
    return edgetpu_wait_one(tpu);
}
