/* SPDX-License-Identifier: MIT */
/*
 * Issue 27's owner side of the RKNPU driver: a claimed domain whose address
 * layout the caller owns (npv_rknpu_domain_claim), caller memory placed at
 * the client's own IOVAs (npv_rknpu_mem_wrap_at), and jobs whose
 * register-command lists the client already laid out there, trailers and
 * all (npv_rknpu_submit_laid_out, the vendor's RKNPU_SUBMIT). A laid-out
 * matmul chain runs exact; a job addressing an IOVA mapped only in another
 * domain faults with -EIO and leaves that buffer alone; alternating domains
 * switch the device per job, back-to-back jobs of one domain do not; the
 * errors of the five calls.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dma.h>

#include "npv_test.h"
#include "regcmd.h"
#include "rk_drv.h"
#include "status_decode.h"

static struct rk t;

static const struct rknpu_sample_shape SHAPE = {
    .dtype = NPV_RKNPU_INT8, .m = 16, .k = 64, .n = 32, .bias = true, .relu = true};

#define CLIENT_BYTES (256u * 1024u)

static void setup(void)
{
    rk_open(&t, NULL);
}

static void teardown(void)
{
    rk_close(&t);
}

static struct npv_rknpu_counters counters(void)
{
    struct npv_rknpu_counters c;
    npv_rknpu_counters(t.npu, &c);
    return c;
}

/* A client's memory: an fd-backed buffer mapped into domain `dom` at the client's IOVA. */
struct client_mem {
    struct npv_dma *dma;
    struct npv_rknpu_mem *mem;
    uint8_t *va;
    npv_iova_t iova;
};

static void client_mem_new(struct client_mem *m, uint32_t dom, npv_iova_t iova, size_t size)
{
    const struct npv_dma_opts opts = {.page = NPV_DMA_PAGE_4K, .numa_node = -1};
    ck_assert_int_eq(npv_dma_alloc(t.ctx, size, &opts, &m->dma), 0);
    int r = npv_rknpu_mem_wrap_at(t.npu, m->dma, dom, iova, &m->mem);
    ck_assert_msg(r == 0, "wrap_at %#llx in domain %u: %s", (unsigned long long)iova, dom,
                  npv_strerror(r));
    ck_assert_uint_eq(npv_rknpu_mem_iova(m->mem), iova);
    ck_assert_uint_eq(npv_rknpu_mem_domain(m->mem), dom);
    m->va = npv_dma_vaddr(m->dma);
    m->iova = iova;
}

static void client_mem_free(struct client_mem *m)
{
    ck_assert_int_eq(npv_rknpu_mem_unwrap(m->mem), 0);
    npv_dma_free(m->dma);
}

/*
 * Where a laid-out matmul sits in client memory: the list(s) from 0, the
 * operands from 16 KiB, one C per task after them.
 */
struct laid_out_mm {
    struct rknpu_sample_mm *s; /* operands and reference, in a domain of the driver's */
    uint64_t off_a, off_b, off_bias, off_c[2];
    uint32_t words[2]; /* of each task's list, trailer included */
    uint64_t off_list[2];
};

/*
 * As a client's driver does it (rknpu.h, the vendor's RKNPU_SUBMIT): the
 * operands copied into its memory, each task's list built by the public
 * matmul builder, ended with the trailer and chained to the next task
 * (regcmd.h, the same trailer the driver appends). Returns the job.
 * c_iova_override, when non-zero, is where the first task writes C.
 */
static struct npv_rknpu_laid_out_job lay_out(struct laid_out_mm *l, struct client_mem *m,
                                             uint32_t dom, unsigned nr_tasks,
                                             npv_iova_t c_iova_override)
{
    struct npv_rknpu_matmul_sizes sz;
    ck_assert_int_eq(npv_rknpu_matmul_sizes(&l->s->mm, &sz), 0);
    l->off_a = 16384;
    l->off_b = (l->off_a + sz.a + 63) & ~63ull;
    l->off_bias = (l->off_b + sz.b + 63) & ~63ull;
    l->off_c[0] = (l->off_bias + sz.bias + 63) & ~63ull;
    l->off_c[1] = (l->off_c[0] + sz.c + 63) & ~63ull;
    ck_assert_uint_le(l->off_c[1] + sz.c, CLIENT_BYTES);
    memcpy(m->va + l->off_a, npv_rknpu_mem_vaddr(l->s->a), sz.a);
    memcpy(m->va + l->off_b, npv_rknpu_mem_vaddr(l->s->b), sz.b);
    memcpy(m->va + l->off_bias, npv_rknpu_mem_vaddr(l->s->bias), sz.bias);
    memset(m->va + l->off_c[0], 0x5a, sz.c);
    memset(m->va + l->off_c[1], 0x5a, sz.c);

    uint32_t enable = 0;
    l->off_list[0] = 0;
    for (unsigned i = 0; i < nr_tasks; i++) {
        struct npv_rknpu_matmul mm = l->s->mm;
        mm.a = m->iova + l->off_a;
        mm.b = m->iova + l->off_b;
        mm.bias = m->iova + l->off_bias;
        mm.c = i == 0 && c_iova_override != 0 ? c_iova_override : m->iova + l->off_c[i];
        uint64_t *list = (uint64_t *)(m->va + l->off_list[i]);
        struct npv_rknpu_task task;
        int n = npv_rknpu_matmul_task(&mm, list, NPV_RKNPU_MATMUL_MAX_WORDS, &task);
        ck_assert_int_gt(n, 0);
        uint32_t w = (uint32_t)n;
        if ((w + RKNPU_TRAILER_WORDS) % 2u != 0)
            list[w++] = 0; /* the PC fetches pairs of words */
        enable = task.enable_mask != 0 ? task.enable_mask : RKNPU_MM_ENABLE;
        rknpu_trailer_end(&list[w], enable);
        l->words[i] = w + RKNPU_TRAILER_WORDS;
        if (i + 1 < nr_tasks)
            l->off_list[i + 1] = (l->off_list[i] + (uint64_t)l->words[i] * 8u + 63) & ~63ull;
        if (i > 0) {
            uint64_t *prev = (uint64_t *)(m->va + l->off_list[i - 1]);
            rknpu_trailer_link(&prev[l->words[i - 1] - RKNPU_TRAILER_WORDS],
                               (uint32_t)(m->iova + l->off_list[i]),
                               rknpu_regcmd_amount(l->words[i]));
        }
    }
    ck_assert_uint_le(l->off_list[nr_tasks - 1] + (uint64_t)l->words[nr_tasks - 1] * 8u, l->off_a);
    /* As a client on a non-coherent host: everything the CPU wrote, out of its caches. */
    npv_dma_sync_for_device(m->dma, 0, CLIENT_BYTES);
    return (struct npv_rknpu_laid_out_job){
        .regcmd_iova = m->iova + l->off_list[0],
        .amount = rknpu_regcmd_amount(l->words[0]),
        .nr_tasks = nr_tasks,
        .done_mask = rknpu_done_mask(enable),
        .domain_id = dom,
        .timeout_ns = GENEROUS_NS,
    };
}

/* The C task i wrote, compared with the reference (copied into the sample's C). */
static uint64_t check_c(struct laid_out_mm *l, struct client_mem *m, unsigned i)
{
    struct npv_rknpu_matmul_sizes sz;
    ck_assert_int_eq(npv_rknpu_matmul_sizes(&l->s->mm, &sz), 0);
    npv_dma_sync_for_cpu(m->dma, l->off_c[i], sz.c);
    memcpy(npv_rknpu_mem_vaddr(l->s->c), m->va + l->off_c[i], sz.c);
    ck_assert_int_eq(npv_rknpu_mem_sync_for_device(l->s->c, 0, sz.c), 0);
    return rknpu_sample_mm_check(l->s);
}

static struct npv_cpl wait_one(void)
{
    struct npv_cpl cpl;
    ck_assert_int_eq(npv_rknpu_wait(t.npu, 1, GENEROUS_NS, &cpl, 1), 1);
    return cpl;
}

START_TEST(a_laid_out_chain_at_the_clients_iovas_runs_exact_in_a_claimed_domain)
{
    struct npv_rknpu_counters before = counters();
    ck_assert_int_eq(npv_rknpu_domain_claim(t.npu, 3), 0);
    ck_assert_uint_eq(counters().domains_live, before.domains_live + 1);
    struct laid_out_mm l = {0};
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 7, &l.s), 0);
    struct client_mem m;
    /* The client's own IOVA: nothing of the driver's is in the domain to collide with it. */
    client_mem_new(&m, 3, 0x40000000u, CLIENT_BYTES);
    for (uint32_t mask = 0; mask <= 4; mask = mask == 0 ? 1 : mask << 1) {
        struct npv_rknpu_laid_out_job job = lay_out(&l, &m, 3, 2, 0);
        job.core_mask = mask;
        job.cookie = 100 + mask;
        ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &job), 0);
        struct npv_cpl cpl = wait_one();
        ck_assert_msg(cpl.status == 0, "mask %#x: %s (status %#x)", mask, npv_strerror(cpl.status),
                      cpl.dev_error);
        ck_assert_uint_eq(cpl.cookie, 100 + mask);
        /* Both tasks of the chain ran: the second only through the first's trailer. */
        ck_assert_uint_eq(check_c(&l, &m, 0), 0);
        ck_assert_uint_eq(check_c(&l, &m, 1), 0);
    }
    ck_assert_uint_eq(counters().jobs, before.jobs + 4);
    /* The buffer keeps the domain past the release; its unwrap frees it. */
    ck_assert_int_eq(npv_rknpu_domain_release(t.npu, 3), 0);
    ck_assert_uint_eq(counters().domains_live, before.domains_live + 2);
    client_mem_free(&m);
    rknpu_sample_mm_free(l.s);
    ck_assert_uint_eq(counters().domains_live, before.domains_live);
}
END_TEST

START_TEST(a_laid_out_job_addressing_another_domains_iova_faults_and_leaves_it_unchanged)
{
    rk_require_model("the DMA error status of an unmapped IOVA is the model's (its vfio-user "
                     "DMA is refused); the SoC's IOMMU fault path is not asserted here");
    ck_assert_int_eq(npv_rknpu_domain_claim(t.npu, 1), 0);
    ck_assert_int_eq(npv_rknpu_domain_claim(t.npu, 2), 0);
    struct laid_out_mm la = {0}, lb = {0};
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 11, &la.s), 0);
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 12, &lb.s), 0);
    struct client_mem a, b;
    client_mem_new(&a, 1, 0x10000000u, CLIENT_BYTES);
    client_mem_new(&b, 2, 0x20000000u, CLIENT_BYTES);
    /* B's job runs first: its mapping is what the device saw last. */
    struct npv_rknpu_laid_out_job jb = lay_out(&lb, &b, 2, 1, 0);
    ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &jb), 0);
    ck_assert_int_eq(wait_one().status, 0);
    ck_assert_uint_eq(check_c(&lb, &b, 0), 0);
    uint8_t *snapshot = malloc(CLIENT_BYTES);
    ck_assert_ptr_nonnull(snapshot);
    npv_dma_sync_for_cpu(b.dma, 0, CLIENT_BYTES);
    memcpy(snapshot, b.va, CLIENT_BYTES);
    /* A's job writes its C at B's C: an IOVA that exists only in domain 2. */
    struct npv_rknpu_laid_out_job ja = lay_out(&la, &a, 1, 1, b.iova + lb.off_c[0]);
    ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &ja), 0);
    struct npv_cpl cpl = wait_one();
    ck_assert_int_eq(cpl.status, -EIO);
    ck_assert_uint_ne(cpl.dev_error & RKNPU_INT_DMA_WRITE_ERROR, 0);
    npv_dma_sync_for_cpu(b.dma, 0, CLIENT_BYTES);
    ck_assert_int_eq(memcmp(snapshot, b.va, CLIENT_BYTES), 0);
    free(snapshot);
    /* Both domains go on: A's own job exact, B's too. */
    ja = lay_out(&la, &a, 1, 1, 0);
    ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &ja), 0);
    ck_assert_int_eq(wait_one().status, 0);
    ck_assert_uint_eq(check_c(&la, &a, 0), 0);
    ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &jb), 0);
    ck_assert_int_eq(wait_one().status, 0);
    client_mem_free(&a);
    client_mem_free(&b);
    ck_assert_int_eq(npv_rknpu_domain_release(t.npu, 1), 0);
    ck_assert_int_eq(npv_rknpu_domain_release(t.npu, 2), 0);
    rknpu_sample_mm_free(la.s);
    rknpu_sample_mm_free(lb.s);
    ck_assert_uint_eq(counters().domains_live, 0);
}
END_TEST

START_TEST(claimed_domains_switch_per_alternating_job_and_not_between_jobs_of_one)
{
    ck_assert_int_eq(npv_rknpu_domain_claim(t.npu, 4), 0);
    ck_assert_int_eq(npv_rknpu_domain_claim(t.npu, 5), 0);
    struct laid_out_mm l4 = {0}, l5 = {0};
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 21, &l4.s), 0);
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 22, &l5.s), 0);
    struct client_mem m4, m5;
    /* The same IOVA in both: each client lays its memory out as it likes. */
    client_mem_new(&m4, 4, 0x08000000u, CLIENT_BYTES);
    client_mem_new(&m5, 5, 0x08000000u, CLIENT_BYTES);
    struct npv_rknpu_laid_out_job j4 = lay_out(&l4, &m4, 4, 1, 0);
    struct npv_rknpu_laid_out_job j5 = lay_out(&l5, &m5, 5, 1, 0);

    /* Alternating, all queued at once: every job is a switch. */
    uint64_t before = counters().domain_switches;
    const struct npv_rknpu_laid_out_job *alt[4] = {&j4, &j5, &j4, &j5};
    for (unsigned i = 0; i < 4; i++)
        ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, alt[i]), 0);
    struct npv_cpl cpl[4];
    unsigned got = 0;
    while (got < 4) {
        int r = npv_rknpu_wait(t.npu, 1, GENEROUS_NS, cpl + got, 4 - got);
        ck_assert_int_gt(r, 0);
        got += (unsigned)r;
    }
    for (unsigned i = 0; i < 4; i++)
        ck_assert_int_eq(cpl[i].status, 0);
    ck_assert_uint_eq(counters().domain_switches, before + 4);
    ck_assert_uint_eq(check_c(&l4, &m4, 0), 0);
    ck_assert_uint_eq(check_c(&l5, &m5, 0), 0);

    /*
     * Back to back in one domain, queued at once: one switch for all of
     * them. On one core, so that no two runs write the same C at once.
     */
    before = counters().domain_switches;
    struct npv_rknpu_laid_out_job j4_core0 = j4;
    j4_core0.core_mask = 0x1;
    for (unsigned i = 0; i < 6; i++)
        ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &j4_core0), 0);
    got = 0;
    while (got < 6) {
        struct npv_cpl c;
        ck_assert_int_eq(npv_rknpu_wait(t.npu, 1, GENEROUS_NS, &c, 1), 1);
        ck_assert_int_eq(c.status, 0);
        got++;
    }
    ck_assert_uint_eq(counters().domain_switches, before + 1);
    ck_assert_uint_eq(check_c(&l4, &m4, 0), 0);
    /* Then domain 5 twice (one core again): one more switch. */
    j5.core_mask = 0x2;
    ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &j5), 0);
    ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &j5), 0);
    ck_assert_int_eq(wait_one().status, 0);
    ck_assert_int_eq(wait_one().status, 0);
    ck_assert_uint_eq(counters().domain_switches, before + 2);
    ck_assert_uint_eq(check_c(&l5, &m5, 0), 0);

    client_mem_free(&m4);
    client_mem_free(&m5);
    ck_assert_int_eq(npv_rknpu_domain_release(t.npu, 4), 0);
    ck_assert_int_eq(npv_rknpu_domain_release(t.npu, 5), 0);
    rknpu_sample_mm_free(l4.s);
    rknpu_sample_mm_free(l5.s);
}
END_TEST

START_TEST(wrap_at_refuses_overlap_misalignment_and_places_outside_the_space)
{
    ck_assert_int_eq(npv_rknpu_domain_claim(t.npu, 6), 0);
    struct client_mem m;
    client_mem_new(&m, 6, 0x100000u, 65536);
    const struct npv_dma_opts opts = {.page = NPV_DMA_PAGE_4K, .numa_node = -1};
    struct npv_dma *other;
    ck_assert_int_eq(npv_dma_alloc(t.ctx, 65536, &opts, &other), 0);
    struct npv_rknpu_mem *mem = NULL;
    struct npv_rknpu_counters before = counters();
    /* Overlapping the first mapping, at its start, inside it, across its end. */
    ck_assert_int_eq(npv_rknpu_mem_wrap_at(t.npu, other, 6, 0x100000u, &mem), -EEXIST);
    ck_assert_int_eq(npv_rknpu_mem_wrap_at(t.npu, other, 6, 0x104000u, &mem), -EEXIST);
    ck_assert_int_eq(npv_rknpu_mem_wrap_at(t.npu, other, 6, 0x0f8000u, &mem), -EEXIST);
    /* The same memory twice in one domain. */
    ck_assert_int_eq(npv_rknpu_mem_wrap_at(t.npu, m.dma, 6, 0x200000u, &mem), -EEXIST);
    /* Not on a 4 KiB page; in the guard page; past 4 GiB, wholly or in part. */
    ck_assert_int_eq(npv_rknpu_mem_wrap_at(t.npu, other, 6, 0x200010u, &mem), -EINVAL);
    ck_assert_int_eq(npv_rknpu_mem_wrap_at(t.npu, other, 6, 0, &mem), -EINVAL);
    ck_assert_int_eq(npv_rknpu_mem_wrap_at(t.npu, other, 6, NPV_RKNPU_DOMAIN_SIZE, &mem), -EINVAL);
    ck_assert_int_eq(npv_rknpu_mem_wrap_at(t.npu, other, 6, NPV_RKNPU_DOMAIN_SIZE - 32768, &mem),
                     -EINVAL);
    ck_assert_int_eq(npv_rknpu_mem_wrap_at(t.npu, other, NPV_RKNPU_MAX_DOMAINS, 0x200000u, &mem),
                     -EINVAL);
    ck_assert_ptr_null(mem);
    struct npv_rknpu_counters after = counters();
    ck_assert_uint_eq(after.mems_live, before.mems_live);
    ck_assert_uint_eq(after.domains_live, before.domains_live);
    /* Right after it and at the very top of the space it fits. */
    ck_assert_int_eq(npv_rknpu_mem_wrap_at(t.npu, other, 6, 0x110000u, &mem), 0);
    ck_assert_int_eq(npv_rknpu_mem_unwrap(mem), 0);
    ck_assert_int_eq(npv_rknpu_mem_wrap_at(t.npu, other, 6, NPV_RKNPU_DOMAIN_SIZE - 65536, &mem),
                     0);
    ck_assert_int_eq(npv_rknpu_mem_unwrap(mem), 0);
    npv_dma_free(other);
    client_mem_free(&m);
    ck_assert_int_eq(npv_rknpu_domain_release(t.npu, 6), 0);
    ck_assert_uint_eq(counters().domains_live, 0);
}
END_TEST

START_TEST(claim_and_release_refuse_what_they_cannot_do)
{
    ck_assert_int_eq(npv_rknpu_domain_claim(t.npu, NPV_RKNPU_MAX_DOMAINS), -EINVAL);
    ck_assert_int_eq(npv_rknpu_domain_release(t.npu, NPV_RKNPU_MAX_DOMAINS), -EINVAL);
    ck_assert_int_eq(npv_rknpu_domain_release(t.npu, 2), -ENOENT);
    ck_assert_int_eq(npv_rknpu_domain_claim(t.npu, 2), 0);
    ck_assert_int_eq(npv_rknpu_domain_claim(t.npu, 2), -EEXIST);
    /* A domain of the driver's (a buffer made it) is not claimed, nor claimable. */
    struct npv_rknpu_mem *own;
    ck_assert_int_eq(npv_rknpu_mem_create(t.npu, 4096, 3, 0, &own), 0);
    ck_assert_int_eq(npv_rknpu_domain_claim(t.npu, 3), -EEXIST);
    ck_assert_int_eq(npv_rknpu_domain_release(t.npu, 3), -ENOENT);
    npv_rknpu_mem_destroy(own);
    /* A claimed domain has no command memory: submit and queues are refused. */
    uint64_t word = 0;
    struct npv_rknpu_task task = {.regcmd = &word, .regcmd_count = 1};
    struct npv_rknpu_job job = {.tasks = &task, .nr_tasks = 1, .core_mask = 1, .domain_id = 2};
    ck_assert_int_eq(npv_rknpu_submit(t.npu, &job), -EOPNOTSUPP);
    ck_assert_int_eq(npv_rknpu_submit_within(t.npu, &job, GENEROUS_NS), -EOPNOTSUPP);
    struct npv_rknpu_queue *q = NULL;
    ck_assert_int_eq(npv_rknpu_queue_open(t.npu, 0, 2, &q), -EOPNOTSUPP);
    ck_assert_ptr_null(q);
    ck_assert_int_eq(npv_rknpu_domain_release(t.npu, 2), 0);
    ck_assert_int_eq(npv_rknpu_domain_release(t.npu, 2), -ENOENT);
    ck_assert_uint_eq(counters().domains_live, 0);
    /* Released and freed: the id may be claimed again. */
    ck_assert_int_eq(npv_rknpu_domain_claim(t.npu, 2), 0);
    ck_assert_int_eq(npv_rknpu_domain_release(t.npu, 2), 0);
}
END_TEST

START_TEST(submit_laid_out_refuses_bad_jobs_and_missing_domains)
{
    ck_assert_int_eq(npv_rknpu_domain_claim(t.npu, 1), 0);
    const struct npv_rknpu_laid_out_job good = {.regcmd_iova = 0x100000u,
                                                .amount = 63,
                                                .nr_tasks = 1,
                                                .done_mask = RKNPU_INT_DPU_DONE,
                                                .domain_id = 1};
    struct npv_rknpu_laid_out_job j;
    ck_assert_int_eq(npv_rknpu_submit_laid_out(NULL, &good), -EINVAL);
    ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, NULL), -EINVAL);
    const uint32_t bad_masks[] = {0x3, 0x5, 0x6, 0x7, 0x8};
    for (unsigned i = 0; i < sizeof(bad_masks) / sizeof(bad_masks[0]); i++) {
        j = good;
        j.core_mask = bad_masks[i];
        ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &j), -EINVAL);
    }
    j = good;
    j.nr_tasks = 0;
    ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &j), -EINVAL);
    j.nr_tasks = 4096;
    ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &j), -EINVAL);
    j = good;
    j.done_mask = 0;
    ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &j), -EINVAL);
    j.done_mask = RKNPU_INT_DMA_ERROR; /* no done bit among them */
    ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &j), -EINVAL);
    j = good;
    j.regcmd_iova = 0x100008u;
    ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &j), -EINVAL);
    j.regcmd_iova = NPV_RKNPU_DOMAIN_SIZE;
    ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &j), -EINVAL);
    j.regcmd_iova = 0;
    ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &j), -EINVAL);
    j = good;
    j.domain_id = NPV_RKNPU_MAX_DOMAINS;
    ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &j), -EINVAL);
    j.domain_id = 9; /* never made */
    ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &j), -ENOENT);
    ck_assert_uint_eq(counters().domains_live, 1);
    /* Nothing was queued by any of them. */
    struct npv_cpl cpl;
    ck_assert_int_eq(npv_rknpu_poll(t.npu, &cpl, 1), 0);
    ck_assert_int_eq(npv_rknpu_domain_release(t.npu, 1), 0);
    /* Released and freed: the domain is missing again. */
    ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &good), -ENOENT);
}
END_TEST

START_TEST(a_claim_is_not_released_while_a_job_of_its_domain_is_queued)
{
    rk_require_model("the task delay is the model's test port");
    ck_assert_int_eq(npv_rknpu_domain_claim(t.npu, 7), 0);
    struct laid_out_mm l = {0};
    ck_assert_int_eq(rknpu_sample_mm_new(t.npu, &SHAPE, 0, 0, 31, &l.s), 0);
    struct client_mem m;
    client_mem_new(&m, 7, 0x300000u, CLIENT_BYTES);
    struct npv_rknpu_laid_out_job j = lay_out(&l, &m, 7, 1, 0);
    j.core_mask = 0x2;
    ck_assert_int_eq(npv_bar_write(t.port, RKNPU_TP_TASK_DELAY_US, 4, 200000), 0);
    ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &j), 0); /* running */
    ck_assert_int_eq(npv_rknpu_submit_laid_out(t.npu, &j), 0); /* queued behind it */
    ck_assert_int_eq(npv_rknpu_domain_release(t.npu, 7), -EBUSY);
    ck_assert_int_eq(npv_rknpu_mem_unwrap(m.mem), -EBUSY);
    struct npv_cpl cpl;
    ck_assert_int_eq(npv_rknpu_wait(t.npu, 1, GENEROUS_NS, &cpl, 1), 1);
    ck_assert_int_eq(cpl.status, 0);
    /* One still in flight. */
    ck_assert_int_eq(npv_rknpu_domain_release(t.npu, 7), -EBUSY);
    ck_assert_int_eq(npv_rknpu_wait(t.npu, 1, GENEROUS_NS, &cpl, 1), 1);
    ck_assert_int_eq(cpl.status, 0);
    ck_assert_int_eq(npv_bar_write(t.port, RKNPU_TP_TASK_DELAY_US, 4, 0), 0);
    ck_assert_uint_eq(check_c(&l, &m, 0), 0);
    client_mem_free(&m);
    ck_assert_int_eq(npv_rknpu_domain_release(t.npu, 7), 0);
    rknpu_sample_mm_free(l.s);
    ck_assert_uint_eq(counters().domains_live, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rknpu_driver_laid_out");
    TCase *tc = tcase_create("laid_out");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_laid_out_chain_at_the_clients_iovas_runs_exact_in_a_claimed_domain);
    tcase_add_test(tc,
                   a_laid_out_job_addressing_another_domains_iova_faults_and_leaves_it_unchanged);
    tcase_add_test(tc, claimed_domains_switch_per_alternating_job_and_not_between_jobs_of_one);
    tcase_add_test(tc, wrap_at_refuses_overlap_misalignment_and_places_outside_the_space);
    tcase_add_test(tc, claim_and_release_refuse_what_they_cannot_do);
    tcase_add_test(tc, submit_laid_out_refuses_bad_jobs_and_missing_domains);
    tcase_add_test(tc, a_claim_is_not_released_while_a_job_of_its_domain_is_queued);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}
