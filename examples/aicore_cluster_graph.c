/* SPDX-License-Identifier: MIT */
/*
 * An AICore-class device: open it, print its topology (clusters, the
 * sub-cores fused off or powered down), then run a task graph over every
 * usable sub-core: per cluster the cube (AIC) multiplies two matrices and
 * one vector core (AIV) adds a bias to the product once the cube is done,
 * while the other AIV adds two vectors of its own. Runs go through the two
 * pipeline slots (the next one is prepared while the current one executes),
 * every output is checked against the CPU, and the time per run is printed.
 *
 *   npuvfio sim --device aicore --socket /tmp/aicore.sock &
 *   aicore_cluster_graph /tmp/aicore.sock     # the model, over vfio-user
 *   aicore_cluster_graph 0000:01:00.0         # a device bound to vfio-pci
 *
 *   cc aicore_cluster_graph.c $(pkg-config --cflags --libs npuvfio-aicore)
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <npuvfio/aicore.h>
#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>

#define MM_M    16u
#define MM_K    32u
#define MM_N    16u
#define VEC_N   1024u
#define RUNS    20u
#define WAIT_NS (10ull * 1000000000ull)

/* One cluster's operands in DMA memory: what the device reads and writes. */
struct cluster_io {
    float a[MM_M * MM_K], b[MM_K * MM_N], prod[MM_M * MM_N];
    float bias[MM_M * MM_N], out[MM_M * MM_N];
    float u[VEC_N], v[VEC_N], w[VEC_N];
};

/* A run's graph and which of its outputs exist (a sub-core may be fused off). */
struct graph {
    struct npv_dma *dma;
    npv_iova_t iova;
    struct cluster_io *io; /* [clusters] */
    uint32_t clusters;
    struct npv_aicore_task *tasks;
    struct npv_aicore_run_desc desc;
    bool *has_prod, *has_out, *has_w; /* [clusters] */
};

static int fail(const char *what, int err)
{
    fprintf(stderr, "aicore_cluster_graph: %s: %s\n", what, npv_strerror(err));
    return 1;
}

static void print_topology(const struct npv_aicore_topology *t)
{
    printf("aicore_cluster_graph: %u clusters of %u AIC + %u AIV, %u of %u sub-cores usable, "
           "%llu MiB device memory\n",
           t->clusters, t->aic_per_cluster, t->aiv_per_cluster, t->nr_usable, t->nr_cores,
           (unsigned long long)(t->device_memory >> 20));
    for (uint32_t id = 0; id < t->nr_cores; id++) {
        bool present = (t->present[id / 64] >> (id % 64)) & 1u;
        bool powered = (t->powered[id / 64] >> (id % 64)) & 1u;
        if (present && powered)
            continue;
        printf("  sub-core %u (%s): %s\n", id,
               npv_aicore_core_type(t->clusters, id) == NPV_AICORE_AIC ? "AIC" : "AIV",
               !present ? "fused off" : "powered down");
    }
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* Offset of a field of cluster c's operands, as an IOVA. */
#define IO_IOVA(g, c, field)                                                                       \
    ((g)->iova + (uint64_t)(c) * sizeof(struct cluster_io) + offsetof(struct cluster_io, field))

static void add(struct graph *g, const struct npv_aicore_task *t)
{
    g->tasks[g->desc.nr_tasks++] = *t;
}

/* The tasks of cluster c on those of its sub-cores that are usable. */
static void build_cluster(struct graph *g, const struct npv_aicore_topology *t, uint32_t c)
{
    uint32_t aic = npv_aicore_phys_aic(t->clusters, c);
    uint32_t aiv0 = npv_aicore_phys_aiv(t->clusters, c, 0);
    uint32_t aiv1 = npv_aicore_phys_aiv(t->clusters, c, 1);
    uint32_t mm = NPV_AICORE_NO_DEP;
    if (npv_aicore_core_usable(t, aic)) {
        mm = g->desc.nr_tasks;
        add(g, &(struct npv_aicore_task){.op = NPV_AICORE_OP_MATMUL,
                                         .core = aic,
                                         .m = MM_M,
                                         .n = MM_N,
                                         .k = MM_K,
                                         .dep = NPV_AICORE_NO_DEP,
                                         .a = IO_IOVA(g, c, a),
                                         .b = IO_IOVA(g, c, b),
                                         .c = IO_IOVA(g, c, prod)});
        g->has_prod[c] = true;
    }
    /* The bias add reads the product: it waits for the cube's task (the dependency). */
    if (mm != NPV_AICORE_NO_DEP && npv_aicore_core_usable(t, aiv0)) {
        add(g, &(struct npv_aicore_task){.op = NPV_AICORE_OP_VADD,
                                         .core = aiv0,
                                         .n = MM_M * MM_N,
                                         .dep = mm,
                                         .a = IO_IOVA(g, c, prod),
                                         .b = IO_IOVA(g, c, bias),
                                         .c = IO_IOVA(g, c, out)});
        g->has_out[c] = true;
    }
    if (npv_aicore_core_usable(t, aiv1)) {
        add(g, &(struct npv_aicore_task){.op = NPV_AICORE_OP_VADD,
                                         .core = aiv1,
                                         .n = VEC_N,
                                         .dep = NPV_AICORE_NO_DEP,
                                         .a = IO_IOVA(g, c, u),
                                         .b = IO_IOVA(g, c, v),
                                         .c = IO_IOVA(g, c, w)});
        g->has_w[c] = true;
    }
}

static void graph_free(struct graph *g, struct npv_domain *dom)
{
    if (g->dma != NULL) {
        if (g->iova != 0)
            (void)npv_dma_unmap(g->dma, dom);
        npv_dma_free(g->dma);
    }
    free(g->tasks);
    free(g->has_prod);
    free(g->has_out);
    free(g->has_w);
    memset(g, 0, sizeof(*g));
}

static int graph_new(struct npv_ctx *ctx, struct npv_domain *dom,
                     const struct npv_aicore_topology *t, struct graph *g)
{
    memset(g, 0, sizeof(*g));
    g->clusters = t->clusters;
    g->tasks = calloc(3u * t->clusters, sizeof(*g->tasks));
    g->has_prod = calloc(t->clusters, sizeof(bool));
    g->has_out = calloc(t->clusters, sizeof(bool));
    g->has_w = calloc(t->clusters, sizeof(bool));
    int r = g->tasks && g->has_prod && g->has_out && g->has_w ? 0 : -ENOMEM;
    if (r == 0)
        r = npv_dma_alloc(ctx, (size_t)t->clusters * sizeof(struct cluster_io), NULL, &g->dma);
    if (r == 0)
        r = npv_dma_map(g->dma, dom, NPV_DMA_RW, &g->iova);
    if (r < 0) {
        graph_free(g, dom);
        return r;
    }
    g->io = npv_dma_vaddr(g->dma);
    for (uint32_t c = 0; c < t->clusters; c++)
        build_cluster(g, t, c);
    g->desc.tasks = g->tasks;
    return 0;
}

/*
 * Small integers: every product and sum below is exact in fp32, so the CPU's
 * result equals the device's whatever the order of additions or a fused
 * multiply-add (which a compiler may use for the reference on arm64).
 */
static void fill(struct graph *g, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1u;
#define NEXT() ((float)((int)((x = x * 1664525u + 1013904223u) >> 28) - 8))
    for (uint32_t c = 0; c < g->clusters; c++) {
        struct cluster_io *io = &g->io[c];
        for (uint32_t i = 0; i < MM_M * MM_K; i++)
            io->a[i] = NEXT();
        for (uint32_t i = 0; i < MM_K * MM_N; i++)
            io->b[i] = NEXT();
        for (uint32_t i = 0; i < MM_M * MM_N; i++)
            io->bias[i] = NEXT();
        for (uint32_t i = 0; i < VEC_N; i++) {
            io->u[i] = NEXT() * 1024.0f;
            io->v[i] = NEXT() / 8.0f;
        }
        /* NaN in every output: one the device never wrote cannot match. */
        memset(io->prod, 0xff, sizeof(io->prod));
        memset(io->out, 0xff, sizeof(io->out));
        memset(io->w, 0xff, sizeof(io->w));
    }
#undef NEXT
    /*
     * The device reads the inputs and writes the outputs by DMA: on a host
     * whose DMA does not snoop the caches, clean them (a no-op where it does).
     */
    npv_dma_sync_for_device(g->dma, 0, npv_dma_size(g->dma));
}

static uint32_t differ(const float *got, const float *want, uint32_t n)
{
    uint32_t bad = 0;
    for (uint32_t i = 0; i < n; i++)
        bad += memcmp(&got[i], &want[i], sizeof(float)) != 0;
    return bad;
}

/* Elements of the outputs that differ from the CPU's. */
static uint32_t check(const struct graph *g)
{
    float prod[MM_M * MM_N], out[MM_M * MM_N], w[VEC_N];
    uint32_t bad = 0;
    /* What the device wrote, past any line the CPU still caches. */
    npv_dma_sync_for_cpu(g->dma, 0, npv_dma_size(g->dma));
    for (uint32_t c = 0; c < g->clusters; c++) {
        const struct cluster_io *io = &g->io[c];
        for (uint32_t i = 0; i < MM_M; i++)
            for (uint32_t j = 0; j < MM_N; j++) {
                float acc = 0.0f;
                for (uint32_t p = 0; p < MM_K; p++)
                    acc += io->a[i * MM_K + p] * io->b[p * MM_N + j];
                prod[i * MM_N + j] = acc;
                out[i * MM_N + j] = acc + io->bias[i * MM_N + j];
            }
        for (uint32_t i = 0; i < VEC_N; i++)
            w[i] = io->u[i] + io->v[i];
        if (g->has_prod[c])
            bad += differ(io->prod, prod, MM_M * MM_N);
        if (g->has_out[c])
            bad += differ(io->out, out, MM_M * MM_N);
        if (g->has_w[c])
            bad += differ(io->w, w, VEC_N);
    }
    return bad;
}

static int prepare(struct npv_aicore *ac, struct graph *g, uint32_t i, struct npv_aicore_run **run)
{
    fill(g, i + 1);
    return npv_aicore_prepare(ac, i % NPV_AICORE_SLOTS, &g->desc, run);
}

/* Wait for a launched run, check it against the CPU, free its slot. */
static int finish(struct npv_aicore_run *run, const struct graph *g, uint64_t *device_ns)
{
    struct npv_aicore_result res;
    int r = npv_aicore_wait(run, WAIT_NS);
    if (r == -EINPROGRESS)
        r = -ETIMEDOUT;
    if (r == 0)
        r = npv_aicore_result(run, &res);
    if (r < 0)
        return fail("the run", r);
    *device_ns = res.elapsed_ns;
    uint32_t bad = check(g);
    if (bad != 0) {
        fprintf(stderr, "aicore_cluster_graph: epoch %llu: %u elements differ from the CPU\n",
                (unsigned long long)res.epoch, bad);
        return 1;
    }
    r = npv_aicore_release(run);
    return r < 0 ? fail("releasing the slot", r) : 0;
}

/* RUNS runs through both slots: run i executes while run i + 1 is prepared in the other. */
static int run_pipeline(struct npv_aicore *ac, struct graph g[NPV_AICORE_SLOTS],
                        uint64_t *device_ns)
{
    struct npv_aicore_run *run[NPV_AICORE_SLOTS] = {NULL, NULL};
    int r = prepare(ac, &g[0], 0, &run[0]);
    if (r == 0)
        r = npv_aicore_launch(run[0]);
    if (r < 0) {
        if (run[0] != NULL)
            (void)npv_aicore_release(run[0]);
        return fail("the first run", r);
    }
    /* The device finds each sub-core's registers through this table; the context keeps it. */
    struct npv_aicore_run_info info;
    npv_aicore_run_info(run[0], &info);
    printf("  Ctrl table (one window address per physical sub-core) at device address 0x%llx, "
           "shared by every run\n",
           (unsigned long long)info.ctrl_table);
    int ret = 0;
    for (uint32_t i = 0; i < RUNS && ret == 0; i++) {
        unsigned s = i % NPV_AICORE_SLOTS, next = (i + 1) % NPV_AICORE_SLOTS;
        if (i + 1 < RUNS && (r = prepare(ac, &g[next], i + 1, &run[next])) < 0)
            ret = fail("preparing the next run", r);
        if (ret == 0)
            ret = finish(run[s], &g[s], &device_ns[i]);
        if (ret == 0)
            run[s] = NULL;
        if (ret == 0 && i + 1 < RUNS && (r = npv_aicore_launch(run[next])) < 0)
            ret = fail("launching the next run", r);
    }
    /* After a failure: stop a run still executing, then free both slots. */
    for (unsigned s = 0; s < NPV_AICORE_SLOTS; s++)
        if (run[s] != NULL && npv_aicore_release(run[s]) == -EBUSY) {
            (void)npv_aicore_reset(ac);
            (void)npv_aicore_release(run[s]);
        }
    return ret;
}

static int run_all(struct npv_aicore *ac, struct npv_ctx *ctx, struct npv_domain *dom)
{
    struct npv_aicore_topology t;
    npv_aicore_topology(ac, &t);
    print_topology(&t);
    struct graph g[NPV_AICORE_SLOTS];
    uint64_t device_ns[RUNS];
    struct timespec t0, t1;
    int r = graph_new(ctx, dom, &t, &g[0]);
    if (r == 0) {
        r = graph_new(ctx, dom, &t, &g[1]);
        if (r < 0)
            graph_free(&g[0], dom);
    }
    if (r < 0)
        return fail("the operands' DMA memory", r);
    printf("aicore_cluster_graph: %u tasks per run: %ux%ux%u matmul on each AIC, bias add after "
           "it on AIV 0, %u-element add on AIV 1\n",
           g[0].desc.nr_tasks, MM_M, MM_K, MM_N, VEC_N);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int ret = g[0].desc.nr_tasks == 0 ? fail("the graph", -ENXIO) : run_pipeline(ac, g, device_ns);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    graph_free(&g[0], dom);
    graph_free(&g[1], dom);
    if (ret != 0)
        return ret;
    /* Host time covers the CPU's checks too; the device times one run from LAUNCH to its end. */
    double host_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    qsort(device_ns, RUNS, sizeof(device_ns[0]), cmp_u64);
    printf("  %u runs, pipelined, in %.1f ms (%.0f runs/s with every result checked); p50 %.1f us "
           "per run on the device's clock\n",
           RUNS, host_s * 1e3, RUNS / host_s, (double)device_ns[(RUNS - 1) / 2] / 1e3);
    struct npv_aicore_counters cnt;
    npv_aicore_counters(ac, &cnt);
    printf("aicore_cluster_graph: %llu runs, Ctrl table uploaded %llu time(s); every result "
           "matches the CPU reference bit for bit\n",
           (unsigned long long)cnt.runs, (unsigned long long)cnt.ctrl_uploads);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: aicore_cluster_graph DEVICE (a vfio-user socket of `npuvfio sim "
                        "--device aicore`, or a PCI address)\n");
        return 2;
    }
    struct npv_ctx *ctx = NULL;
    struct npv_domain *dom = NULL;
    struct npv_dev *dev = NULL;
    struct npv_aicore *ac = NULL;
    struct stat st;
    int r = npv_ctx_new(&ctx);
    if (r == 0)
        r = npv_domain_new(ctx, NULL, &dom);
    if (r == 0)
        r = stat(argv[1], &st) == 0 && S_ISSOCK(st.st_mode)
                ? npv_dev_open_vfio_user(ctx, argv[1], dom, NULL, &dev)
                : npv_dev_open_pci(ctx, argv[1], dom, NULL, &dev);
    int ret = 1;
    if (r < 0)
        fail(argv[1], r);
    else if ((r = npv_aicore_open(dev, NULL, &ac)) < 0)
        fail("opening the device", r);
    else
        ret = run_all(ac, ctx, dom);
    npv_aicore_close(ac);
    npv_dev_close(dev);
    npv_domain_put(dom);
    npv_ctx_free(ctx);
    return ret;
}
