/* SPDX-License-Identifier: MIT */
#include "aic_harness.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deadline.h"
#include "npv_test.h"

uint64_t aic_now_ns(void)
{
    return npv_now_ns();
}

static void serve_aicore(const char *path, void *arg)
{
    int r = npv_aicore_serve_config(path, false, arg);
    if (r < 0)
        fprintf(stderr, "aicore server: %s\n", npv_strerror(r));
}

void aic_server_start(struct vu_server *s, const struct npv_aicore_model_config *cfg)
{
    /* The child gets its own copy of *cfg with the fork. */
    vu_server_start(s, serve_aicore, (void *)cfg);
}

static const char *hardware_addr(void)
{
    const char *hw = getenv("NPUVFIO_TEST_AICORE");
    return hw != NULL && hw[0] != '\0' ? hw : NULL;
}

void aic_require_model(const char *why)
{
    const char *hw = hardware_addr();
    if (hw != NULL)
        exit(npv_test_skip("aicore", "%s; NPUVFIO_TEST_AICORE=%s names a real device", why, hw));
}

static void open_common(struct aic *t, const char *hw, const char *path)
{
    ck_assert_int_eq(npv_ctx_new(&t->ctx), 0);
    ck_assert_int_eq(npv_domain_new(t->ctx, NULL, &t->dom), 0);
    struct npv_dev_opts dopts = {.request_timeout_ns = AIC_GENEROUS_NS};
    int r = hw != NULL ? npv_dev_open_pci(t->ctx, hw, t->dom, &dopts, &t->dev)
                       : npv_dev_open_vfio_user(t->ctx, path, t->dom, &dopts, &t->dev);
    ck_assert_msg(r == 0, "open device: %s", npv_strerror(r));
    ck_assert_int_eq(npv_bar_map(t->dev, AICORE_BAR_GLOBAL, &t->global), 0);
    if (hw == NULL)
        ck_assert_int_eq(npv_bar_map(t->dev, AICORE_BAR_TESTPORT, &t->port), 0);
    ck_assert_int_eq(npv_bar_map(t->dev, AICORE_BAR_CTRL, &t->ctrl), 0);
    ck_assert_int_eq(npv_bar_map(t->dev, AICORE_BAR_PMU, &t->pmu), 0);
    aic_topology(t);
}

void aic_open(struct aic *t, const struct npv_aicore_model_config *cfg)
{
    memset(t, 0, sizeof(*t));
    const char *hw = hardware_addr();
    t->hardware = hw != NULL;
    if (!t->hardware)
        aic_server_start(&t->srv, cfg);
    open_common(t, hw, t->srv.path);
}

void aic_open_at(struct aic *t, const char *path)
{
    memset(t, 0, sizeof(*t));
    open_common(t, NULL, path);
}

void aic_close(struct aic *t)
{
    npv_bar_unmap(t->global);
    npv_bar_unmap(t->port);
    npv_bar_unmap(t->ctrl);
    npv_bar_unmap(t->pmu);
    npv_dev_close(t->dev);
    npv_domain_put(t->dom);
    npv_ctx_free(t->ctx);
    vu_server_kill(&t->srv);
    memset(t, 0, sizeof(*t));
}

/* ---- registers ---- */

uint64_t aic_rd(struct aic *t, uint64_t off)
{
    uint64_t v = 0;
    ck_assert_int_eq(npv_bar_read(t->global, off, 8, &v), 0);
    return v;
}

void aic_wr(struct aic *t, uint64_t off, uint64_t v)
{
    ck_assert_int_eq(npv_bar_write(t->global, off, 8, v), 0);
}

static uint64_t window(uint32_t phys, uint32_t reg)
{
    return (uint64_t)phys * AICORE_WINDOW_STRIDE + reg;
}

uint32_t aic_ctrl_rd(struct aic *t, uint32_t phys, uint32_t reg)
{
    uint64_t v = 0;
    ck_assert_int_eq(npv_bar_read(t->ctrl, window(phys, reg), 4, &v), 0);
    return (uint32_t)v;
}

void aic_ctrl_wr(struct aic *t, uint32_t phys, uint32_t reg, uint32_t v)
{
    ck_assert_int_eq(npv_bar_write(t->ctrl, window(phys, reg), 4, v), 0);
}

uint32_t aic_pmu_rd(struct aic *t, uint32_t phys, uint32_t reg)
{
    uint64_t v = 0;
    ck_assert_int_eq(npv_bar_read(t->pmu_in_ctrl ? t->ctrl : t->pmu, window(phys, reg), 4, &v), 0);
    return (uint32_t)v;
}

void aic_pmu_wr(struct aic *t, uint32_t phys, uint32_t reg, uint32_t v)
{
    ck_assert_int_eq(npv_bar_write(t->pmu_in_ctrl ? t->ctrl : t->pmu, window(phys, reg), 4, v), 0);
}

uint64_t aic_port_rd(struct aic *t, uint64_t off)
{
    uint64_t v = 0;
    ck_assert_ptr_nonnull(t->port);
    ck_assert_int_eq(npv_bar_read(t->port, off, 8, &v), 0);
    return v;
}

void aic_port_wr(struct aic *t, uint64_t off, uint64_t v)
{
    ck_assert_ptr_nonnull(t->port);
    ck_assert_int_eq(npv_bar_write(t->port, off, 8, v), 0);
}

void aic_fault(struct aic *t, uint32_t phys, uint64_t kind, uint64_t arg)
{
    aic_port_wr(t, AICORE_TP_FAULT_CORE, phys);
    aic_port_wr(t, AICORE_TP_FAULT_ARG, arg);
    aic_port_wr(t, AICORE_TP_FAULT, kind);
}

void aic_topology(struct aic *t)
{
    uint64_t caps = aic_rd(t, AICORE_REG_CAPS);
    t->clusters = AICORE_CAPS_CLUSTERS(caps);
    t->nsub = t->clusters * (AICORE_CAPS_AIC_PER_CLUSTER(caps) + AICORE_CAPS_AIV_PER_CLUSTER(caps));
    ck_assert_uint_le(t->nsub, AICORE_MAX_SUBCORES);
    t->pmu_in_ctrl = (caps & AICORE_CAPS_PMU_IN_CTRL) != 0;
    t->present[0] = aic_rd(t, AICORE_REG_PRESENT_LO);
    t->present[1] = aic_rd(t, AICORE_REG_PRESENT_HI);
    t->power_on[0] = aic_rd(t, AICORE_REG_POWER_ON_LO);
    t->power_on[1] = aic_rd(t, AICORE_REG_POWER_ON_HI);
}

bool aic_live(const struct aic *t, uint32_t phys)
{
    uint64_t bit = 1ull << (phys % 64u);
    return phys < t->nsub && (t->present[phys / 64u] & bit) && (t->power_on[phys / 64u] & bit);
}

/* ---- memory and the copy engine ---- */

void aic_buf_new(struct aic *t, size_t len, struct aic_buf *b)
{
    memset(b, 0, sizeof(*b));
    ck_assert_int_eq(npv_dma_alloc(t->ctx, len, NULL, &b->dma), 0);
    ck_assert_int_eq(npv_dma_map(b->dma, t->dom, NPV_DMA_RW, NULL), 0);
    npv_iova_t iova;
    ck_assert_int_eq(npv_dma_iova(b->dma, t->dom, &iova), 0);
    b->iova = iova;
    b->va = npv_dma_vaddr(b->dma);
    b->len = len;
    memset(b->va, 0, len);
}

void aic_buf_free(struct aic_buf *b)
{
    npv_dma_free(b->dma);
    memset(b, 0, sizeof(*b));
}

uint64_t aic_copy(struct aic *t, uint64_t dir, uint64_t iova, uint64_t dev, uint64_t len)
{
    aic_wr(t, AICORE_REG_COPY_HOST_IOVA, iova);
    aic_wr(t, AICORE_REG_COPY_DEV_ADDR, dev);
    aic_wr(t, AICORE_REG_COPY_LEN, len);
    aic_wr(t, AICORE_REG_COPY_DIR, dir);
    aic_wr(t, AICORE_REG_COPY_GO, AICORE_COPY_GO_VALUE);
    uint64_t deadline = aic_now_ns() + AIC_GENEROUS_NS, st;
    while ((st = aic_rd(t, AICORE_REG_COPY_STATUS)) == AICORE_COPY_BUSY)
        ck_assert_msg(aic_now_ns() < deadline, "copy never finished");
    return st;
}

void aic_upload_tables(struct aic *t, uint64_t ctrl_dev, uint64_t pmu_dev)
{
    uint64_t stride = aic_rd(t, AICORE_REG_WINDOW_STRIDE);
    uint64_t bases[2] = {aic_rd(t, AICORE_REG_CTRL_REG_BASE), aic_rd(t, AICORE_REG_PMU_REG_BASE)};
    uint64_t dests[2] = {ctrl_dev, pmu_dev};
    struct aic_buf b;
    aic_buf_new(t, (size_t)t->nsub * AICORE_TABLE_ENTRY_SIZE, &b);
    for (unsigned k = 0; k < 2; k++) {
        if (dests[k] == 0)
            continue;
        uint64_t *e = b.va;
        for (uint32_t i = 0; i < t->nsub; i++)
            e[i] = aic_live(t, i) ? bases[k] + i * stride : 0;
        ck_assert_uint_eq(aic_copy(t, AICORE_COPY_H2D, b.iova, dests[k], b.len), AICORE_COPY_DONE);
    }
    aic_buf_free(&b);
}

/* ---- the hand-driven run ---- */

void aic_run_new(struct aic *t, struct aic_run *r)
{
    memset(r, 0, sizeof(*r));
    aic_buf_new(t, AICORE_MAX_SUBCORES * sizeof(struct aicore_handshake), &r->workers);
    aic_buf_new(t, AICORE_MAX_SUBCORES * AICORE_PAYLOAD_SLOTS * sizeof(struct aicore_task_payload),
                &r->payloads);
    aic_buf_new(t, sizeof(struct aicore_result), &r->result);
}

void aic_run_free(struct aic_run *r)
{
    aic_buf_free(&r->workers);
    aic_buf_free(&r->payloads);
    aic_buf_free(&r->result);
}

uint64_t aic_run_launch(struct aic *t, struct aic_run *r, uint64_t ctrl, uint64_t pmu,
                        uint64_t epoch)
{
    /* The workers region is reused across runs: a stale done must not pass for a fresh one. */
    memset(r->workers.va, 0, r->workers.len);
    memset(r->phys, 0xff, sizeof(r->phys));
    r->epoch = epoch;
    r->nr = 0;
    for (uint32_t i = 0; i < t->nsub; i++)
        r->nr += aic_live(t, i);
    aic_wr(t, AICORE_REG_RUN_CTRL_TABLE, ctrl);
    aic_wr(t, AICORE_REG_RUN_PMU_TABLE, pmu);
    aic_wr(t, AICORE_REG_RUN_WORKERS, r->workers.iova);
    aic_wr(t, AICORE_REG_RUN_WORKERS_COUNT, AICORE_MAX_SUBCORES);
    aic_wr(t, AICORE_REG_RUN_RESULT, r->result.iova);
    aic_wr(t, AICORE_REG_RUN_EPOCH, epoch);
    aic_wr(t, AICORE_REG_LAUNCH, AICORE_LAUNCH_VALUE);
    return aic_rd(t, AICORE_REG_LAUNCH_STATUS);
}

static volatile struct aicore_handshake *record(struct aic_run *r, uint32_t rank)
{
    return (volatile struct aicore_handshake *)r->workers.va + rank;
}

void aic_run_wait_ready(struct aic *t, struct aic_run *r, uint32_t n)
{
    uint64_t deadline = aic_now_ns() + AIC_GENEROUS_NS;
    for (uint32_t rank = 0; rank < n; rank++) {
        volatile struct aicore_handshake *h = record(r, rank);
        while (__atomic_load_n(&h->done, __ATOMIC_ACQUIRE) == 0)
            ck_assert_msg(aic_now_ns() < deadline, "sub-core of rank %u never got ready", rank);
        ck_assert_uint_eq(h->done, rank + 1);
        r->phys[rank] = h->physical_core_id;
        if (r->phys[rank] < t->nsub)
            ck_assert_uint_eq(h->core_type, aicore_core_type(t->clusters, r->phys[rank]));
    }
}

void aic_run_open(struct aic *t, struct aic_run *r, uint32_t rank)
{
    uint32_t phys = r->phys[rank];
    ck_assert_uint_lt(phys, t->nsub);
    record(r, rank)->task = r->payloads.iova + (uint64_t)rank * AICORE_PAYLOAD_SLOTS *
                                                   sizeof(struct aicore_task_payload);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    aic_ctrl_wr(t, phys, AICORE_CTRL_FAST_PATH, AICORE_FAST_PATH_OPEN);
    aic_ctrl_wr(t, phys, AICORE_CTRL_DMB, AICORE_DMB_IDLE);
    uint32_t last = 0;
    ck_assert_msg(aic_wait_cond(t, phys, AICORE_COND_IDLE, AIC_GENEROUS_NS, &last) == 0,
                  "sub-core %u: COND %#x, never IDLE", phys, last);
}

struct aicore_task_payload *aic_run_slot(struct aic_run *r, uint32_t rank, uint32_t token)
{
    struct aicore_task_payload *p = r->payloads.va;
    return &p[rank * AICORE_PAYLOAD_SLOTS + (token & 1u)];
}

void aic_dispatch(struct aic *t, uint32_t phys, uint32_t token)
{
    __atomic_thread_fence(__ATOMIC_RELEASE);
    aic_ctrl_wr(t, phys, AICORE_CTRL_DMB, token);
}

int aic_wait_cond(struct aic *t, uint32_t phys, uint32_t want, uint64_t ns, uint32_t *last)
{
    uint64_t deadline = aic_now_ns() + ns;
    uint32_t v;
    while ((v = aic_ctrl_rd(t, phys, AICORE_CTRL_COND)) != want) {
        if (aic_now_ns() >= deadline) {
            if (last != NULL)
                *last = v;
            return -ETIMEDOUT;
        }
    }
    if (last != NULL)
        *last = v;
    return 0;
}

int aic_wait_result(struct aic *t, struct aic_run *r, uint64_t ns)
{
    (void)t;
    uint64_t deadline = aic_now_ns() + ns;
    volatile struct aicore_result *res = r->result.va;
    while (__atomic_load_n(&res->epoch, __ATOMIC_ACQUIRE) != r->epoch) {
        if (aic_now_ns() >= deadline)
            return -ETIMEDOUT;
        usleep(100);
    }
    return 0;
}

void aic_exit_all(struct aic *t, struct aic_run *r)
{
    for (uint32_t rank = 0; rank < r->nr; rank++) {
        uint32_t phys = r->phys[rank];
        ck_assert_uint_lt(phys, t->nsub);
        aic_ctrl_wr(t, phys, AICORE_CTRL_FAST_PATH, AICORE_FAST_PATH_OPEN);
        aic_ctrl_wr(t, phys, AICORE_CTRL_DMB, AICORE_DMB_EXIT);
    }
    for (uint32_t rank = 0; rank < r->nr; rank++) {
        uint32_t last = 0;
        ck_assert_msg(aic_wait_cond(t, r->phys[rank], AICORE_COND_EXITED, AIC_GENEROUS_NS, &last) ==
                          0,
                      "sub-core %u never exited (COND %#x)", r->phys[rank], last);
    }
}

/* ---- kernels and their CPU reference ---- */

static float operand(uint32_t seed, uint64_t i)
{
    /* Multiples of 1/64 in [-15.6, 15.6]: every value distinct enough that a wrong operand, index
     * or slot shows, and the device and the reference agree bit for bit. */
    uint32_t x = (uint32_t)(i * 2654435761u) ^ (seed * 40503u);
    return (float)((int32_t)(x % 2001u) - 1000) / 64.0f;
}

void aic_task_new(struct aic *t, struct aic_task *k, uint32_t kernel, uint32_t m, uint32_t n,
                  uint32_t kk, uint32_t seed)
{
    memset(k, 0, sizeof(*k));
    k->kernel = kernel;
    k->m = m;
    k->n = n;
    k->k = kk;
    uint64_t na = kernel == AICORE_KERNEL_VADD ? n : (uint64_t)m * kk;
    uint64_t nb = kernel == AICORE_KERNEL_VADD ? n : (uint64_t)kk * n;
    uint64_t nc = kernel == AICORE_KERNEL_VADD ? n : (uint64_t)m * n;
    aic_buf_new(t, na * sizeof(float), &k->a);
    aic_buf_new(t, nb * sizeof(float), &k->b);
    aic_buf_new(t, nc * sizeof(float), &k->c);
    float *a = k->a.va, *b = k->b.va, *c = k->c.va;
    for (uint64_t i = 0; i < na; i++)
        a[i] = operand(seed, i);
    for (uint64_t i = 0; i < nb; i++)
        b[i] = operand(seed + 1u, i);
    /* A stale result must not pass for a fresh one. */
    for (uint64_t i = 0; i < nc; i++)
        c[i] = -12345.0f;
}

void aic_task_free(struct aic_task *k)
{
    aic_buf_free(&k->a);
    aic_buf_free(&k->b);
    aic_buf_free(&k->c);
}

void aic_task_fill(struct aic_run *r, uint32_t rank, uint32_t token, const struct aic_task *k,
                   uint32_t work)
{
    struct aicore_task_payload *p = aic_run_slot(r, rank, token);
    *p = (struct aicore_task_payload){
        .token = token,
        .kernel = k->kernel,
        .m = k->kernel == AICORE_KERNEL_VADD ? 0 : k->m,
        .n = k->n,
        .k = k->kernel == AICORE_KERNEL_VADD ? 0 : k->k,
        .work_cycles = work,
        .a = k->a.iova,
        .b = k->b.iova,
        .c = k->c.iova,
    };
}

bool aic_task_exact(const struct aic_task *k)
{
    const float *a = k->a.va, *b = k->b.va, *c = k->c.va;
    if (k->kernel == AICORE_KERNEL_VADD) {
        for (uint32_t i = 0; i < k->n; i++) {
            float want = a[i] + b[i];
            if (memcmp(&want, &c[i], sizeof(float)) != 0)
                return false;
        }
        return true;
    }
    for (uint32_t i = 0; i < k->m; i++)
        for (uint32_t j = 0; j < k->n; j++) {
            float acc = 0.0f;
            for (uint32_t q = 0; q < k->k; q++) {
                float prod = a[(uint64_t)i * k->k + q] * b[(uint64_t)q * k->n + j];
                acc = acc + prod;
            }
            if (memcmp(&acc, &c[(uint64_t)i * k->n + j], sizeof(float)) != 0)
                return false;
        }
    return true;
}
