/* SPDX-License-Identifier: MIT */
#include "rknpu_harness.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rknpu/fp16.h"
#include "rknpu/model.h"

int64_t rknpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void serve_rknpu(const char *path, void *arg)
{
    (void)arg;
    int r = npv_rknpu_serve(path, false);
    if (r < 0)
        fprintf(stderr, "rknpu server: %s\n", npv_strerror(r));
}

void rknpu_server_start(struct vu_server *s)
{
    vu_server_start(s, serve_rknpu, NULL);
}

void rknpu_require_model(const char *why)
{
    const char *hw = getenv("NPUVFIO_TEST_RKNPU");
    if (hw != NULL && hw[0] != '\0') {
        printf("SKIPPED: %s; NPUVFIO_TEST_RKNPU=%s names a real NPU\n", why, hw);
        exit(77);
    }
}

static void open_common(struct rknpu_t *t, const char *hw, const char *path)
{
    ck_assert_int_eq(npv_ctx_new(&t->ctx), 0);
    /* The NPU's device addresses are 32 bits wide: one 4 GiB IOVA space per domain. */
    struct npv_domain_opts o = {.aperture_start = 0, .aperture_last = 0xffffffffull};
    ck_assert_int_eq(npv_domain_new(t->ctx, &o, &t->dom), 0);
    struct npv_dev_opts dopts = {.request_timeout_ns = RKNPU_GENEROUS_NS};
    int r = t->hardware ? npv_dev_open_pci(t->ctx, hw, t->dom, &dopts, &t->dev)
                        : npv_dev_open_vfio_user(t->ctx, path, t->dom, &dopts, &t->dev);
    ck_assert_msg(r == 0, "open device: %s", npv_strerror(r));
    ck_assert_int_eq(npv_bar_map(t->dev, RKNPU_BAR_INDEX, &t->regs), 0);
    if (!t->hardware)
        ck_assert_int_eq(npv_bar_map(t->dev, RKNPU_TP_BAR_INDEX, &t->port), 0);
    r = npv_irq_enable(t->dev, NPV_IRQ_MSIX, RKNPU_MSIX_VECTORS, &t->irq);
    ck_assert_msg(r == 0, "MSI-X: %s", npv_strerror(r));
}

void rknpu_open(struct rknpu_t *t)
{
    memset(t, 0, sizeof(*t));
    const char *hw = getenv("NPUVFIO_TEST_RKNPU");
    t->hardware = hw != NULL && hw[0] != '\0';
    if (!t->hardware)
        rknpu_server_start(&t->srv);
    open_common(t, hw, t->srv.path);
}

void rknpu_open_at(struct rknpu_t *t, const char *path)
{
    memset(t, 0, sizeof(*t));
    open_common(t, NULL, path);
}

void rknpu_close(struct rknpu_t *t)
{
    npv_irq_disable(t->irq);
    npv_bar_unmap(t->port);
    npv_bar_unmap(t->regs);
    npv_dev_close(t->dev);
    npv_domain_put(t->dom);
    npv_ctx_free(t->ctx);
    vu_server_kill(&t->srv);
    memset(t, 0, sizeof(*t));
}

uint32_t rknpu_rd(struct rknpu_t *t, unsigned core, uint32_t off)
{
    uint64_t v = 0;
    ck_assert_int_eq(npv_bar_read(t->regs, RKNPU_CORE_BASE(core) + off, 4, &v), 0);
    return (uint32_t)v;
}

void rknpu_wr(struct rknpu_t *t, unsigned core, uint32_t off, uint32_t v)
{
    ck_assert_int_eq(npv_bar_write(t->regs, RKNPU_CORE_BASE(core) + off, 4, v), 0);
}

uint32_t rknpu_port_rd(struct rknpu_t *t, uint32_t off)
{
    uint64_t v = 0;
    ck_assert_ptr_nonnull(t->port);
    ck_assert_int_eq(npv_bar_read(t->port, off, 4, &v), 0);
    return (uint32_t)v;
}

void rknpu_port_wr(struct rknpu_t *t, uint32_t off, uint32_t v)
{
    ck_assert_ptr_nonnull(t->port);
    ck_assert_int_eq(npv_bar_write(t->port, off, 4, v), 0);
}

void rknpu_fault(struct rknpu_t *t, unsigned core, enum rknpu_fault f)
{
    rknpu_port_wr(t, RKNPU_TP_CORE(core) + RKNPU_TP_FAULT, (uint32_t)f);
}

void rknpu_buf_alloc(struct rknpu_t *t, size_t size, struct rknpu_buf *b)
{
    npv_iova_t iova;
    memset(b, 0, sizeof(*b));
    ck_assert_int_eq(npv_dma_alloc(t->ctx, size, NULL, &b->dma), 0);
    ck_assert_int_eq(npv_dma_map(b->dma, t->dom, NPV_DMA_RW, &iova), 0);
    ck_assert_uint_lt(iova, 1ull << 32);
    b->iova = (uint32_t)iova;
    b->va = npv_dma_vaddr(b->dma);
    b->size = size;
}

void rknpu_buf_free(struct rknpu_buf *b)
{
    npv_dma_free(b->dma);
    memset(b, 0, sizeof(*b));
}

/* A small deterministic generator: tests are reproducible from their seed. */
static uint32_t next_rand(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static void fill_int8(struct rknpu_mm *mm, int8_t *a, int8_t *b, int32_t *bias, uint32_t *seed)
{
    const struct rknpu_matmul_desc *d = &mm->desc;
    int8_t *pa = mm->a.va, *pb = mm->b.va;
    for (uint32_t i = 0; i < d->m * d->k; i++)
        a[i] = (int8_t)(next_rand(seed) & 0xff);
    for (uint32_t i = 0; i < d->k * d->n; i++)
        b[i] = (int8_t)(next_rand(seed) & 0xff);
    for (uint32_t i = 0; bias && i < d->n; i++)
        bias[i] = (int32_t)(next_rand(seed) % 200001u) - 100000;
    for (uint32_t m = 0; m < d->m; m++)
        for (uint32_t k = 0; k < d->k; k++)
            pa[rknpu_a_index_int8(m, k, d->m)] = a[m * d->k + k];
    for (uint32_t k = 0; k < d->k; k++)
        for (uint32_t n = 0; n < d->n; n++)
            pb[rknpu_b_index_int8(k, n, d->k)] = b[k * d->n + n];
    int32_t *want = mm->want;
    for (uint32_t m = 0; m < d->m; m++)
        for (uint32_t n = 0; n < d->n; n++) {
            int64_t acc = bias ? bias[n] : 0;
            for (uint32_t k = 0; k < d->k; k++)
                acc += (int32_t)a[m * d->k + k] * (int32_t)b[k * d->n + n];
            if (d->relu && acc < 0)
                acc = 0;
            want[rknpu_c_index(m, n, d->m)] = (int32_t)acc;
        }
}

static void fill_fp16(struct rknpu_mm *mm, uint16_t *a, uint16_t *b, float *bias, uint32_t *seed)
{
    const struct rknpu_matmul_desc *d = &mm->desc;
    uint16_t *pa = mm->a.va, *pb = mm->b.va;
    for (uint32_t i = 0; i < d->m * d->k; i++)
        a[i] = rknpu_f32_to_f16((float)((int)(next_rand(seed) % 2001u) - 1000) / 500.0f);
    for (uint32_t i = 0; i < d->k * d->n; i++)
        b[i] = rknpu_f32_to_f16((float)((int)(next_rand(seed) % 2001u) - 1000) / 500.0f);
    for (uint32_t i = 0; bias && i < d->n; i++)
        bias[i] = (float)((int)(next_rand(seed) % 2001u) - 1000) / 100.0f;
    for (uint32_t m = 0; m < d->m; m++)
        for (uint32_t k = 0; k < d->k; k++)
            pa[rknpu_a_index_fp16(m, k, d->m)] = a[m * d->k + k];
    for (uint32_t k = 0; k < d->k; k++)
        for (uint32_t n = 0; n < d->n; n++)
            pb[rknpu_b_index_fp16(k, n, d->k)] = b[k * d->n + n];
    float *want = mm->want;
    for (uint32_t m = 0; m < d->m; m++)
        for (uint32_t n = 0; n < d->n; n++) {
            double acc = bias ? bias[n] : 0.0;
            for (uint32_t k = 0; k < d->k; k++)
                acc +=
                    (double)rknpu_f16_to_f32(a[m * d->k + k]) * rknpu_f16_to_f32(b[k * d->n + n]);
            if (d->relu && acc < 0)
                acc = 0;
            want[rknpu_c_index(m, n, d->m)] = (float)acc;
        }
}

void rknpu_mm_init(struct rknpu_t *t, struct rknpu_mm *mm, uint32_t prec, uint32_t m, uint32_t k,
                   uint32_t n, bool bias, bool relu, uint32_t seed)
{
    memset(mm, 0, sizeof(*mm));
    size_t es = prec == RKNPU_PREC_INT8 ? 1 : 2;
    size_t c_bytes = (size_t)m * n * 4;
    rknpu_buf_alloc(t, (size_t)m * k * es, &mm->a);
    rknpu_buf_alloc(t, (size_t)k * n * es, &mm->b);
    rknpu_buf_alloc(t, c_bytes, &mm->c);
    if (bias)
        rknpu_buf_alloc(t, (size_t)n * 4, &mm->bias);
    mm->desc = (struct rknpu_matmul_desc){.prec = prec,
                                          .m = m,
                                          .k = k,
                                          .n = n,
                                          .a = mm->a.iova,
                                          .b = mm->b.iova,
                                          .c = mm->c.iova,
                                          .bias = bias ? mm->bias.iova : 0,
                                          .relu = relu};
    mm->want = calloc(1, c_bytes);
    void *ra = malloc((size_t)m * k * es), *rb = malloc((size_t)k * n * es);
    ck_assert(mm->want != NULL && ra != NULL && rb != NULL);
    if (prec == RKNPU_PREC_INT8)
        fill_int8(mm, ra, rb, bias ? mm->bias.va : NULL, &seed);
    else
        fill_fp16(mm, ra, rb, bias ? mm->bias.va : NULL, &seed);
    free(ra);
    free(rb);
    rknpu_mm_poison(mm);
}

void rknpu_mm_free(struct rknpu_mm *mm)
{
    rknpu_buf_free(&mm->a);
    rknpu_buf_free(&mm->b);
    rknpu_buf_free(&mm->c);
    rknpu_buf_free(&mm->bias);
    rknpu_buf_free(&mm->prog);
    free(mm->want);
    memset(mm, 0, sizeof(*mm));
}

void rknpu_mm_program(struct rknpu_t *t, struct rknpu_mm *mm, uint32_t ntasks)
{
    const uint32_t stride = RKNPU_MATMUL_REGCMD_MAX * 8u; /* a multiple of the 64-byte alignment */
    uint64_t words[RKNPU_MATMUL_REGCMD_MAX];
    rknpu_buf_free(&mm->prog);
    rknpu_buf_alloc(t, (size_t)stride * ntasks, &mm->prog);
    uint32_t count = rknpu_matmul_regcmd(&mm->desc, words, 0, 0);
    /* Build back to front: each task's trailer names the next one. */
    for (uint32_t i = ntasks; i-- > 0;) {
        uint32_t next = i + 1 < ntasks ? mm->prog.iova + (i + 1) * stride : 0;
        count = rknpu_matmul_regcmd(&mm->desc, words, next, next ? rknpu_regcmd_amount(count) : 0);
        memcpy((uint8_t *)mm->prog.va + (size_t)i * stride, words, count * 8u);
    }
    mm->prog_words = count;
}

bool rknpu_mm_check(const struct rknpu_mm *mm)
{
    size_t n = (size_t)mm->desc.m * mm->desc.n;
    if (mm->desc.prec == RKNPU_PREC_INT8)
        return memcmp(mm->c.va, mm->want, n * 4) == 0;
    const float *got = mm->c.va, *want = mm->want;
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(got[i] - want[i]) <= 1e-3f * fmaxf(1.0f, fabsf(want[i]))))
            return false;
    return true;
}

void rknpu_mm_poison(struct rknpu_mm *mm)
{
    memset(mm->c.va, 0xcc, mm->c.size);
}

void rknpu_run(struct rknpu_t *t, unsigned core, const struct rknpu_buf *prog, uint32_t words,
               uint32_t ntasks, uint32_t int_mask)
{
    /* The vendor's order: slave mode first, pointers, the program, the mask, then the pulse. */
    rknpu_wr(t, core, RKNPU_PC_BASE_ADDRESS, RKNPU_PC_SEL);
    rknpu_wr(t, core, RKNPU_CNA_S_POINTER, RKNPU_S_POINTER_PP_DEFAULT + 0x10000000u * core);
    rknpu_wr(t, core, RKNPU_CORE_S_POINTER, RKNPU_S_POINTER_PP_DEFAULT + 0x10000000u * core);
    rknpu_wr(t, core, RKNPU_PC_BASE_ADDRESS, prog->iova);
    rknpu_wr(t, core, RKNPU_PC_REGISTER_AMOUNTS, rknpu_regcmd_amount(words));
    rknpu_wr(t, core, RKNPU_PC_INTERRUPT_MASK, int_mask);
    rknpu_wr(t, core, RKNPU_PC_INTERRUPT_CLEAR, RKNPU_INT_CLEAR_ALL);
    rknpu_wr(t, core, RKNPU_PC_TASK_CON,
             RKNPU_TASK_CON_RESERVED14 | RKNPU_TASK_CON_TASK_COUNT_CLEAR |
                 RKNPU_TASK_CON_TASK_PP_EN | ntasks);
    rknpu_wr(t, core, RKNPU_PC_TASK_DMA_BASE_ADDR, 0);
    rknpu_wr(t, core, RKNPU_PC_OPERATION_ENABLE, RKNPU_PC_OP_EN);
    rknpu_wr(t, core, RKNPU_PC_OPERATION_ENABLE, 0);
}

uint32_t rknpu_wait(struct rknpu_t *t, unsigned core, uint64_t timeout_ns)
{
    if (npv_irq_wait(t->irq, RKNPU_MSIX_VECTOR(core), timeout_ns) < 1)
        return 0;
    return rknpu_rd(t, core, RKNPU_PC_INTERRUPT_STATUS);
}

void rknpu_finish(struct rknpu_t *t, unsigned core)
{
    rknpu_wr(t, core, RKNPU_PC_INTERRUPT_CLEAR, RKNPU_INT_CLEAR_ALL);
    rknpu_wr(t, core, RKNPU_PC_OPERATION_ENABLE, 0);
}

uint32_t rknpu_soft_reset(struct rknpu_t *t, unsigned core)
{
    rknpu_wr(t, core, RKNPU_GLOBAL_SOFT_RESET, RKNPU_SOFT_RESET_LINES);
    rknpu_wr(t, core, RKNPU_GLOBAL_SOFT_RESET, 0);
    uint32_t v = rknpu_rd(t, core, RKNPU_GLOBAL_SOFT_RESET);
    /* The stand-in's register says it is there; the lines and IN_RESET are the answer. */
    ck_assert_msg(t->hardware || (v & RKNPU_SOFT_RESET_PRESENT), "no PRESENT bit: 0x%x", v);
    return v & ~RKNPU_SOFT_RESET_PRESENT;
}
