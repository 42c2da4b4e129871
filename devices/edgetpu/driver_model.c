/* SPDX-License-Identifier: MIT */
/*
 * Compiled models on the chip (npuvfio/edgetpu_model.h: bind, invoke), as
 * libedgetpu's PCIe driver runs them:
 *  - every buffer the chip reaches is mapped through its page table and
 *    addressed by device VA (driver/device_buffer_mapper.cc: instructions,
 *    parameters, scratch, inputs, outputs), never by host address;
 *  - per run, the instruction chunk is copied and linked with those VAs
 *    (driver/instruction_buffers.cc LinkInstructionBuffers, our
 *    npv_edgetpu_model_link) and put on the instruction queue; the run is
 *    finished on the chip's two signals (status block and SC_HOST_0:
 *    npv_edgetpu_run's rule, edgetpu.h);
 *  - parameter caching (driver/driver.cc, driver.h
 *    current_parameter_caching_token_, currently_cached_refs_): the caching
 *    executable runs before an inference when its token is not the current
 *    one (then every other cached model is dropped) or this model has not
 *    cached under the current token yet; a reset drops everything.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/edgetpu_model.h>

#include "driver_internal.h"

struct bound_exe {
    const struct npv_edgetpu_model_exe *exe;
    struct npv_edgetpu_exe_info info;
    struct npv_edgetpu_chunk chunk;
    struct npv_dma *instr, *params, *scratch;
    uint64_t instr_va, params_va, scratch_va;
    size_t instr_len, params_len, scratch_len;
};

struct bound_buf {
    struct npv_dma *dma;
    uint64_t va;
    size_t len;
};

struct npv_edgetpu_bound {
    struct npv_edgetpu *tpu;
    const struct npv_edgetpu_model *m;
    struct bound_exe main, caching;
    bool has_caching;
    uint64_t cached_epoch; /* == tpu->pc_epoch while the chip holds this model's parameters */
    uint32_t nr_in, nr_out, batch;
    struct bound_buf *in, *out;
    uint64_t *in_va, *out_va; /* the driver's buffers, per layer and batch element */
};

static size_t round_page(size_t n)
{
    return (n + EDGETPU_PAGE_SIZE - 1) & ~(size_t)(EDGETPU_PAGE_SIZE - 1);
}

/* DMA memory of len bytes (src copied in when not NULL), mapped into the domain and the MMU. */
static int buf_new(struct npv_edgetpu *tpu, size_t len, const void *src, unsigned prot,
                   struct npv_dma **dma, uint64_t *va)
{
    npv_iova_t iova;
    int r = npv_dma_alloc(tpu->ctx, round_page(len), NULL, dma);
    if (r < 0)
        return r;
    memset(npv_dma_vaddr(*dma), 0, round_page(len));
    if (src != NULL)
        memcpy(npv_dma_vaddr(*dma), src, len);
    r = npv_dma_map(*dma, tpu->dom, prot, &iova);
    if (r == 0) {
        npv_dma_sync_for_device(*dma, 0, len);
        r = edgetpu_map_iova(tpu, iova, len, va);
        if (r < 0)
            (void)npv_dma_unmap(*dma, tpu->dom);
    }
    if (r < 0) {
        npv_dma_free(*dma);
        *dma = NULL;
    }
    return r;
}

static void buf_free(struct npv_edgetpu *tpu, struct npv_dma *dma, uint64_t va, size_t len)
{
    if (dma == NULL)
        return;
    (void)npv_edgetpu_unmap(tpu, va, len);
    (void)npv_dma_unmap(dma, tpu->dom);
    npv_dma_free(dma);
}

static void exe_free(struct npv_edgetpu *tpu, struct bound_exe *x)
{
    buf_free(tpu, x->instr, x->instr_va, x->instr_len);
    buf_free(tpu, x->params, x->params_va, x->params_len);
    buf_free(tpu, x->scratch, x->scratch_va, x->scratch_len);
    memset(x, 0, sizeof(*x));
}

static int exe_bind(struct npv_edgetpu *tpu, const struct npv_edgetpu_model_exe *exe,
                    struct bound_exe *x)
{
    x->exe = exe;
    npv_edgetpu_model_exe_info(exe, &x->info);
    /* Every real compiler output runs one chunk per executable (tests/edgetpu/data). */
    if (x->info.nr_chunks != 1)
        return -ENOTSUP;
    int r = npv_edgetpu_model_chunk(exe, 0, &x->chunk);
    if (r < 0)
        return r;
    if (x->chunk.size == 0 || x->chunk.size > UINT32_MAX)
        return -ENOTSUP;
    x->instr_len = x->chunk.size;
    r = buf_new(tpu, x->instr_len, NULL, NPV_DMA_READ, &x->instr, &x->instr_va);
    if (r == 0 && x->info.parameters_size != 0) {
        x->params_len = x->info.parameters_size;
        r = buf_new(tpu, x->params_len, x->info.parameters, NPV_DMA_READ, &x->params,
                    &x->params_va);
    }
    if (r == 0 && x->info.scratch_size != 0) {
        if (x->info.scratch_size > SIZE_MAX / 2)
            return -ENOMEM;
        x->scratch_len = (size_t)x->info.scratch_size;
        r = buf_new(tpu, x->scratch_len, NULL, NPV_DMA_RW, &x->scratch, &x->scratch_va);
    }
    return r;
}

static int layers_bind(struct npv_edgetpu_bound *b)
{
    const struct npv_edgetpu_model_exe *exe = b->main.exe;
    size_t nin = (size_t)b->nr_in * b->batch, nout = (size_t)b->nr_out * b->batch;
    b->in = calloc(b->nr_in + 1, sizeof(*b->in));
    b->out = calloc(b->nr_out + 1, sizeof(*b->out));
    b->in_va = calloc(nin + 1, sizeof(uint64_t));
    b->out_va = calloc(nout + 1, sizeof(uint64_t));
    if (b->in == NULL || b->out == NULL || b->in_va == NULL || b->out_va == NULL)
        return -ENOMEM;
    for (uint32_t dir = 0; dir < 2; dir++) {
        uint32_t n = dir == 0 ? b->nr_in : b->nr_out;
        for (uint32_t i = 0; i < n; i++) {
            struct npv_edgetpu_layer l;
            int r = dir == 0 ? npv_edgetpu_model_input(exe, i, &l)
                             : npv_edgetpu_model_output(exe, i, &l);
            if (r < 0)
                return r;
            struct bound_buf *u = dir == 0 ? &b->in[i] : &b->out[i];
            u->len = (size_t)l.size_bytes * b->batch;
            /* The chip reads inputs and writes outputs: mapped in that direction only. */
            r = buf_new(b->tpu, u->len, NULL, dir == 0 ? NPV_DMA_READ : NPV_DMA_WRITE, &u->dma,
                        &u->va);
            if (r < 0)
                return r;
            uint64_t *vas = dir == 0 ? b->in_va : b->out_va;
            for (uint32_t k = 0; k < b->batch; k++)
                vas[(size_t)i * b->batch + k] = u->va + (uint64_t)k * l.size_bytes;
        }
    }
    return 0;
}

int npv_edgetpu_model_bind(struct npv_edgetpu *tpu, const struct npv_edgetpu_model *m,
                           struct npv_edgetpu_bound **out)
{
    if (tpu == NULL || m == NULL || out == NULL)
        return -EINVAL;
    struct npv_edgetpu_bound *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return -ENOMEM;
    b->tpu = tpu;
    b->m = m;
    b->cached_epoch = UINT64_MAX;
    int r = exe_bind(tpu, npv_edgetpu_model_main(m), &b->main);
    const struct npv_edgetpu_model_exe *pc = npv_edgetpu_model_caching(m);
    if (r == 0 && pc != NULL) {
        b->has_caching = true;
        r = exe_bind(tpu, pc, &b->caching);
    }
    b->nr_in = b->main.info.nr_inputs;
    b->nr_out = b->main.info.nr_outputs;
    b->batch = b->main.info.batch_size;
    if (r == 0)
        r = layers_bind(b);
    if (r < 0) {
        npv_edgetpu_model_unbind(b);
        return r;
    }
    *out = b;
    return 0;
}

void npv_edgetpu_model_unbind(struct npv_edgetpu_bound *b)
{
    if (b == NULL)
        return;
    for (uint32_t i = 0; b->in != NULL && i < b->nr_in; i++)
        buf_free(b->tpu, b->in[i].dma, b->in[i].va, b->in[i].len);
    for (uint32_t i = 0; b->out != NULL && i < b->nr_out; i++)
        buf_free(b->tpu, b->out[i].dma, b->out[i].va, b->out[i].len);
    exe_free(b->tpu, &b->main);
    exe_free(b->tpu, &b->caching);
    free(b->in);
    free(b->out);
    free(b->in_va);
    free(b->out_va);
    free(b);
}

static void *layer_buf(struct bound_buf *bufs, uint32_t n, uint32_t i, uint64_t *va, size_t *len)
{
    if (bufs == NULL || i >= n)
        return NULL;
    if (va != NULL)
        *va = bufs[i].va;
    if (len != NULL)
        *len = bufs[i].len;
    return npv_dma_vaddr(bufs[i].dma);
}

void *npv_edgetpu_bound_input(struct npv_edgetpu_bound *b, uint32_t i, uint64_t *device_va,
                              size_t *len)
{
    return b == NULL ? NULL : layer_buf(b->in, b->nr_in, i, device_va, len);
}

void *npv_edgetpu_bound_output(struct npv_edgetpu_bound *b, uint32_t i, uint64_t *device_va,
                               size_t *len)
{
    return b == NULL ? NULL : layer_buf(b->out, b->nr_out, i, device_va, len);
}

/* The hook's deliberate bug: flip the first bit of the chunk that no field covers. */
static void flip_a_bit(struct bound_exe *x)
{
    uint8_t *p = npv_dma_vaddr(x->instr);
    for (uint64_t bit = 0; bit < (uint64_t)x->instr_len * 8; bit++) {
        bool in_field = false;
        for (uint32_t k = 0; k < x->chunk.nr_fields && !in_field; k++)
            in_field = bit >= x->chunk.fields[k].offset_bit &&
                       bit < (uint64_t)x->chunk.fields[k].offset_bit + 32;
        if (!in_field) {
            p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            return;
        }
    }
}

/* Link chunk 0 of x with these addresses into its buffer and run it to its end on the chip. */
static int run_exe(struct npv_edgetpu_bound *b, struct bound_exe *x, const uint64_t *in,
                   const uint64_t *out)
{
    struct npv_edgetpu *tpu = b->tpu;
    uint64_t *wrong = NULL;
    if (tpu->cfg.test_hooks & NPV_EDGETPU_HOOK_PKG_WRONG_ADDR) {
        /* The hook's deliberate bug: every input and output address one page off. */
        size_t nin = (size_t)x->info.nr_inputs * x->info.batch_size;
        size_t nout = (size_t)x->info.nr_outputs * x->info.batch_size;
        wrong = calloc(nin + nout + 1, sizeof(uint64_t));
        if (wrong == NULL)
            return -ENOMEM;
        for (size_t i = 0; i < nin; i++)
            wrong[i] = in[i] + EDGETPU_PAGE_SIZE;
        for (size_t i = 0; i < nout; i++)
            wrong[nin + i] = out[i] + EDGETPU_PAGE_SIZE;
        in = wrong;
        out = wrong + nin;
    }
    struct npv_edgetpu_link addrs = {
        .inputs = in,
        .outputs = out,
        .parameters = x->params_va,
        .scratch = x->scratch_va,
    };
    int r = npv_edgetpu_model_link(x->exe, 0, &addrs, npv_dma_vaddr(x->instr), x->instr_len);
    free(wrong);
    if (r < 0)
        return r;
    if (tpu->cfg.test_hooks & NPV_EDGETPU_HOOK_PKG_FLIP_BIT)
        flip_a_bit(x);
    npv_dma_sync_for_device(x->instr, 0, x->instr_len);
    r = edgetpu_submit_chunk(tpu, x->instr_va, (uint32_t)x->instr_len, 0);
    if (r < 0)
        return r;
    return edgetpu_wait_one(tpu);
}

/* Whether the chip must cache this model's parameters before its inference (driver.cc). */
static bool needs_caching(struct npv_edgetpu_bound *b)
{
    struct npv_edgetpu *tpu = b->tpu;
    if (!b->has_caching || (tpu->cfg.test_hooks & NPV_EDGETPU_HOOK_PKG_NO_CACHING))
        return false;
    if (tpu->cfg.test_hooks & NPV_EDGETPU_HOOK_PKG_CACHE_ONCE)
        return b->cached_epoch == UINT64_MAX; /* the hook's deliberate bug */
    return tpu->pc_token != b->caching.info.caching_token || b->cached_epoch != tpu->pc_epoch;
}

int npv_edgetpu_model_invoke(struct npv_edgetpu_bound *b, const uint64_t *input_va,
                             const uint64_t *output_va)
{
    if (b == NULL)
        return -EINVAL;
    struct npv_edgetpu *tpu = b->tpu;
    if (tpu->gone)
        return -ENODEV;
    if (tpu->req_n != 0)
        return -EBUSY;
    int cached = 0, r;
    if (needs_caching(b)) {
        uint64_t token = b->caching.info.caching_token;
        if (tpu->pc_token != token) {
            /* Another token's parameters leave the chip: every model's stamp is stale now. */
            tpu->pc_epoch++;
            tpu->pc_token = token;
        }
        r = run_exe(b, &b->caching, NULL, NULL);
        if (r < 0)
            return r; /* a failed run reset the chip: pc_epoch moved on with it */
        b->cached_epoch = tpu->pc_epoch;
        cached = 1;
    }
    bool own_in = input_va == NULL, own_out = output_va == NULL;
    for (uint32_t i = 0; own_in && i < b->nr_in; i++)
        npv_dma_sync_for_device(b->in[i].dma, 0, b->in[i].len);
    /*
     * The outputs are cleaned too: the caller may have written them (a fill),
     * and the CPU-side sync after the run is a clean+invalidate on arm64 (EL0
     * has no invalidate alone: lib/memory/dma.c), which would write dirty
     * lines back over what the chip wrote. Linux cleans a DMA_FROM_DEVICE
     * buffer for the device the same way (arch/arm64/mm/dma-mapping.c
     * arch_sync_dma_for_device).
     */
    for (uint32_t i = 0; own_out && i < b->nr_out; i++)
        npv_dma_sync_for_device(b->out[i].dma, 0, b->out[i].len);
    r = run_exe(b, &b->main, own_in ? b->in_va : input_va, own_out ? b->out_va : output_va);
    for (uint32_t i = 0; own_out && i < b->nr_out; i++)
        npv_dma_sync_for_cpu(b->out[i].dma, 0, b->out[i].len);
    return r < 0 ? r : cached;
}
