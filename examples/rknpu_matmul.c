/* SPDX-License-Identifier: MIT */
/*
 * The RK3588 NPU: open it, give two tenants their own buffers in two of the
 * NPU's IOMMU domains, build an int8 matmul with the driver's matmul helper,
 * run it on each core alone and split over all cores at once (core mask
 * 0x7), check every result against the CPU, print the time per job.
 *
 *   npuvfio sim --device rknpu --socket /tmp/rknpu.sock &
 *   rknpu_matmul /tmp/rknpu.sock          # the model, over vfio-user
 *   rknpu_matmul fdab0000.npu             # the NPU, bound to vfio-platform
 *
 *   cc rknpu_matmul.c $(pkg-config --cflags --libs npuvfio-rknpu)
 *
 * DEVICE is a vfio-user socket (an existing socket file), a PCI address
 * (it has a ':') or a platform device name: on the SoC the NPU is a platform
 * device named after its device-tree node.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/domain.h>
#include <npuvfio/rknpu.h>

/* N is split into one 32-column slice per core for the multi-core job. */
#define M       64u
#define K       128u
#define N       96u
#define REPEATS 25u
#define TENANTS 2u

struct tenant {
    uint32_t domain_id;
    struct npv_rknpu_mem *a, *b, *c, *bias;
    int8_t a_rows[M][K], b_rows[K][N]; /* plain row-major copies for the CPU */
    int32_t bias_host[N];
    int32_t want[M][N];
};

static int fail(const char *what, int err)
{
    fprintf(stderr, "rknpu_matmul: %s: %s\n", what, npv_strerror(err));
    return 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/*
 * On the SoC the NPU is a platform device ("fdab0000.npu") bound to
 * vfio-platform; a PCI address has a ':'; the model serves a socket.
 */
static int open_device(struct npv_ctx *ctx, const char *where, struct npv_domain *dom,
                       struct npv_dev **dev)
{
    struct stat st;
    if (stat(where, &st) == 0 && S_ISSOCK(st.st_mode))
        return npv_dev_open_vfio_user(ctx, where, dom, NULL, dev);
    if (strchr(where, ':') != NULL)
        return npv_dev_open_pci(ctx, where, dom, NULL, dev);
    return npv_dev_open_platform(ctx, where, dom, NULL, dev);
}

static void draw_inputs(struct tenant *t, uint32_t seed)
{
    uint32_t x = seed;
    for (uint32_t i = 0; i < M; i++)
        for (uint32_t k = 0; k < K; k++) {
            x = x * 1664525u + 1013904223u;
            t->a_rows[i][k] = (int8_t)(x >> 24);
        }
    for (uint32_t k = 0; k < K; k++)
        for (uint32_t j = 0; j < N; j++) {
            x = x * 1664525u + 1013904223u;
            t->b_rows[k][j] = (int8_t)(x >> 24);
        }
    for (uint32_t j = 0; j < N; j++)
        t->bias_host[j] = (int32_t)(j * 1000u) - 40000;
}

/* int8 x int8 summed in int32 plus the bias: what the NPU computes exactly. */
static void cpu_reference(struct tenant *t)
{
    for (uint32_t i = 0; i < M; i++)
        for (uint32_t j = 0; j < N; j++) {
            int32_t acc = t->bias_host[j];
            for (uint32_t k = 0; k < K; k++)
                acc += (int32_t)t->a_rows[i][k] * t->b_rows[k][j];
            t->want[i][j] = acc;
        }
}

/* The NPU reads A and B in its native layouts: the index helpers say where each element goes. */
static void pack(struct tenant *t)
{
    int8_t *a = npv_rknpu_mem_vaddr(t->a), *b = npv_rknpu_mem_vaddr(t->b);
    for (uint32_t i = 0; i < M; i++)
        for (uint32_t k = 0; k < K; k++)
            a[npv_rknpu_matmul_a_index(NPV_RKNPU_INT8, M, K, i, k)] = t->a_rows[i][k];
    for (uint32_t k = 0; k < K; k++)
        for (uint32_t j = 0; j < N; j++)
            b[npv_rknpu_matmul_b_index(NPV_RKNPU_INT8, K, N, k, j)] = t->b_rows[k][j];
    memcpy(npv_rknpu_mem_vaddr(t->bias), t->bias_host, sizeof(t->bias_host));
    /*
     * Out of the CPU's caches before the NPU reads them: the RK3588's NPU
     * does not snoop them (no-ops on a coherent host).
     */
    npv_rknpu_mem_sync_for_device(t->a, 0, npv_rknpu_mem_size(t->a));
    npv_rknpu_mem_sync_for_device(t->b, 0, npv_rknpu_mem_size(t->b));
    npv_rknpu_mem_sync_for_device(t->bias, 0, npv_rknpu_mem_size(t->bias));
}

static int tenant_setup(struct npv_rknpu *npu, struct tenant *t)
{
    struct npv_rknpu_matmul mm = {.dtype = NPV_RKNPU_INT8, .m = M, .k = K, .n = N};
    struct npv_rknpu_matmul_sizes sz;
    int r = npv_rknpu_matmul_sizes(&mm, &sz);
    /* Each buffer lands in the tenant's domain; the first one creates the domain. */
    if (r == 0)
        r = npv_rknpu_mem_create(npu, sz.a, t->domain_id, 0, &t->a);
    if (r == 0)
        r = npv_rknpu_mem_create(npu, sz.b, t->domain_id, 0, &t->b);
    if (r == 0)
        r = npv_rknpu_mem_create(npu, sz.c, t->domain_id, 0, &t->c);
    if (r == 0)
        r = npv_rknpu_mem_create(npu, sz.bias, t->domain_id, 0, &t->bias);
    if (r < 0)
        return r;
    draw_inputs(t, 0x5eed0000u + t->domain_id);
    cpu_reference(t);
    pack(t);
    return 0;
}

static void tenant_teardown(struct tenant *t)
{
    npv_rknpu_mem_destroy(t->a);
    npv_rknpu_mem_destroy(t->b);
    npv_rknpu_mem_destroy(t->c);
    npv_rknpu_mem_destroy(t->bias);
}

/*
 * The matmul restricted to columns [j0, j0 + n). Both B ([N/32][K/32][32][32])
 * and C ([N/4][M][4]) keep whole column blocks contiguous, so a slice of
 * 32 columns is a full matmul of its own at an offset into B, C and bias.
 */
static int slice_task(const struct tenant *t, uint32_t j0, uint32_t n, uint64_t *regcmd,
                      struct npv_rknpu_task *task)
{
    struct npv_rknpu_matmul mm = {
        .dtype = NPV_RKNPU_INT8,
        .m = M,
        .k = K,
        .n = n,
        .a = npv_rknpu_mem_iova(t->a),
        .b = npv_rknpu_mem_iova(t->b) + npv_rknpu_matmul_b_index(NPV_RKNPU_INT8, K, N, 0, j0),
        .c = npv_rknpu_mem_iova(t->c) + 4u * npv_rknpu_matmul_c_index(M, N, 0, j0),
        .bias = npv_rknpu_mem_iova(t->bias) + 4u * j0,
    };
    int r = npv_rknpu_matmul_task(&mm, regcmd, NPV_RKNPU_MATMUL_MAX_WORDS, task);
    return r < 0 ? r : 0;
}

/* Elements of C that differ from the CPU's result. */
static uint32_t check(const struct tenant *t)
{
    /* The NPU's writes, not lines the CPU still caches, once the job completed. */
    npv_rknpu_mem_sync_for_cpu(t->c, 0, npv_rknpu_mem_size(t->c));
    const int32_t *c = npv_rknpu_mem_vaddr(t->c);
    uint32_t bad = 0;
    for (uint32_t i = 0; i < M; i++)
        for (uint32_t j = 0; j < N; j++)
            bad += c[npv_rknpu_matmul_c_index(M, N, i, j)] != t->want[i][j];
    return bad;
}

struct plan {
    uint32_t core_mask;
    uint32_t nr_tasks;
    uint64_t regcmd[NPV_RKNPU_NUM_CORES][NPV_RKNPU_MATMUL_MAX_WORDS];
    struct npv_rknpu_task tasks[NPV_RKNPU_NUM_CORES];
};

/* One core: the whole matmul in one task. Several: one column slice per core. */
static int plan_job(const struct tenant *t, uint32_t core_mask, unsigned cores, struct plan *p)
{
    p->core_mask = core_mask;
    p->nr_tasks = (core_mask & (core_mask - 1u)) == 0 ? 1u : cores;
    uint32_t width = N / p->nr_tasks;
    for (uint32_t s = 0; s < p->nr_tasks; s++) {
        int r = slice_task(t, s * width, width, p->regcmd[s], &p->tasks[s]);
        if (r < 0)
            return r;
    }
    return 0;
}

/*
 * REPEATS jobs of this mask, alternating the tenants: each job runs in its
 * tenant's domain, so the driver switches the NPU's IOMMU between jobs.
 */
static int run_mask(struct npv_rknpu *npu, struct tenant *tenants, uint32_t core_mask,
                    unsigned cores, uint64_t *p50_ns)
{
    struct plan plans[TENANTS];
    uint64_t lat[REPEATS * TENANTS];
    for (uint32_t i = 0; i < TENANTS; i++) {
        int r = plan_job(&tenants[i], core_mask, cores, &plans[i]);
        if (r < 0)
            return fail("building the matmul's register commands", r);
    }
    for (uint32_t it = 0; it < REPEATS * TENANTS; it++) {
        struct tenant *t = &tenants[it % TENANTS];
        const struct plan *p = &plans[it % TENANTS];
        /* A job that did nothing must not pass on the previous job's result. */
        memset(npv_rknpu_mem_vaddr(t->c), 0x5a, npv_rknpu_mem_size(t->c));
        /* Cleaned, or the invalidate after the job writes the fill back over the result. */
        npv_rknpu_mem_sync_for_device(t->c, 0, npv_rknpu_mem_size(t->c));
        struct npv_rknpu_job job = {
            .tasks = p->tasks,
            .nr_tasks = p->nr_tasks,
            .core_mask = core_mask,
            .domain_id = t->domain_id,
            .cookie = it,
        };
        uint64_t t0 = now_ns();
        int r = npv_rknpu_run(npu, &job);
        lat[it] = now_ns() - t0;
        if (r < 0)
            return fail("running the matmul", r);
        uint32_t bad = check(t);
        if (bad != 0) {
            fprintf(stderr, "rknpu_matmul: mask 0x%x, domain %u: %u of %u elements differ\n",
                    core_mask, t->domain_id, bad, M * N);
            return 1;
        }
    }
    qsort(lat, REPEATS * TENANTS, sizeof(lat[0]), cmp_u64);
    *p50_ns = lat[(REPEATS * TENANTS - 1) / 2];
    return 0;
}

static int run_all(struct npv_rknpu *npu, struct tenant *tenants)
{
    unsigned cores = npv_rknpu_num_cores(npu);
    printf("rknpu_matmul: %s over %s, %u cores; int8 %ux%ux%u + bias, domains 0 and 1\n",
           npv_dev_name(npv_rknpu_dev(npu)),
           npv_transport_name(npv_dev_transport(npv_rknpu_dev(npu))), cores, M, K, N);
    if (N % cores != 0 || (N / cores) % 32u != 0) {
        fprintf(stderr,
                "rknpu_matmul: %u columns do not split into 32-column slices over %u "
                "cores\n",
                N, cores);
        return 1;
    }
    for (unsigned m = 0; m <= cores; m++) {
        /* Each core alone, then all of them together (0x7 on RK3588). */
        uint32_t mask = m < cores ? 1u << m : (1u << cores) - 1u;
        uint64_t p50;
        int ret = run_mask(npu, tenants, mask, cores, &p50);
        if (ret != 0)
            return ret;
        printf("  core mask 0x%x: %u jobs, p50 %.1f us per job (each after a domain switch), all "
               "match the CPU\n",
               mask, REPEATS * TENANTS, (double)p50 / 1e3);
    }
    struct npv_rknpu_counters cnt;
    npv_rknpu_counters(npu, &cnt);
    printf("rknpu_matmul: %llu jobs, %llu domain switches, %u domains live; every result "
           "matches the CPU reference bit for bit\n",
           (unsigned long long)cnt.jobs, (unsigned long long)cnt.domain_switches, cnt.domains_live);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: rknpu_matmul DEVICE (a vfio-user socket of `npuvfio sim --device "
                        "rknpu`, a PCI address, or a platform device such as fdab0000.npu)\n");
        return 2;
    }
    /* The NPU's device addresses are 32 bits: the opening domain stays below 4 GiB too. */
    struct npv_domain_opts below_4g = {.aperture_last = 0xffffffffull};
    struct npv_ctx *ctx = NULL;
    struct npv_domain *dom = NULL;
    struct npv_dev *dev = NULL;
    struct npv_rknpu *npu = NULL;
    struct tenant *tenants = calloc(TENANTS, sizeof(*tenants));
    int r = tenants == NULL ? -ENOMEM : npv_ctx_new(&ctx);
    if (r == 0)
        r = npv_domain_new(ctx, &below_4g, &dom);
    if (r == 0)
        r = open_device(ctx, argv[1], dom, &dev);
    if (r < 0) {
        fail(argv[1], r);
    } else {
        r = npv_rknpu_open(dev, NULL, &npu);
        if (r < 0)
            fail("opening the NPU", r);
    }
    for (uint32_t i = 0; i < TENANTS && r == 0; i++) {
        tenants[i].domain_id = i;
        r = tenant_setup(npu, &tenants[i]);
        if (r < 0)
            fail("allocating a tenant's buffers", r);
    }
    int ret = r < 0 ? 1 : run_all(npu, tenants);
    for (uint32_t i = 0; tenants != NULL && i < TENANTS; i++)
        tenant_teardown(&tenants[i]);
    npv_rknpu_close(npu);
    npv_dev_close(dev);
    npv_domain_put(dom);
    npv_ctx_free(ctx);
    free(tenants);
    return ret;
}
