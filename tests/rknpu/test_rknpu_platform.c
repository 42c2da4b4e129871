/* SPDX-License-Identifier: MIT */
/*
 * The driver on a platform device (issue 22 section 3), through a fake
 * vfio-platform transport below the library's device layer: the vendor
 * node's three 64 KiB core windows as regions 0..2 (each offered for mmap,
 * each holding its core's IOMMU pages at +0x9000/+0xa000 with a pattern in
 * them), one level-triggered line per core, VFIO_DEVICE_RESET only when the
 * case gives the device a reset handler. The fake's cores answer the PC
 * registers as the driver reads them (VERSION "FIRE", a started run
 * completes with DPU_0 and its task count, or holds, or stalls until a
 * reset); they compute nothing: the results are the model's suites' work.
 *
 * What is checked: no window is ever mapped and no access reaches an IOMMU
 * page or the model's soft-reset register; the line of a core wakes a
 * waiting driver, which unmasks it for the next run (vfio-platform masks a
 * level line when it fires); an interrupt line the kernel
 * refuses (-EBUSY, what vfio-platform's unshared request of the NPU's line
 * gets when the IOMMU holds it shared) falls back to polling with a warning,
 * or refuses to open under NPV_RKNPU_IRQ_ONLY; a stalled core without a
 * reset handler goes out of service while the others go on, and with one it
 * is reset by VFIO_DEVICE_RESET (the other cores' running jobs fail -EIO).
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/dev.h>
#include <npuvfio/domain.h>
#include <npuvfio/rknpu.h>

#include "dev_internal.h"
#include "npv_test.h"
#include "regs.h"
#include "windows.h"

#define CORES         3u
#define WIN           0x10000u
#define MS            1000000ull
#define IOMMU_PATTERN 0x10a10a10u

struct fake_core {
    uint32_t reg[WIN / 4u];
    bool running;
    bool stall; /* a started run never ends (until a reset) */
    bool hold;  /* a started run ends when the test releases it */
    unsigned npu_accesses, iommu_accesses, soft_reset_accesses;
};

struct fake {
    struct fake_core core[CORES];
    bool has_reset;  /* NPV_DEV_FLAG_RESET: a vfio-platform reset handler */
    bool refuse_irq; /* routing a line to an eventfd fails with -EBUSY */
    unsigned mmap_calls, resets, irq_routes;
    int irq_fd[CORES];
    /* A level line as vfio-platform hands it out: masked after it fires, until unmasked. */
    bool line_masked[CORES];
    unsigned fired[CORES], unmasks[CORES];
    bool write_failed;
    int memfd;
    /* The test's release thread and the driver both reach the cores. */
    pthread_mutex_t mu;
};

static struct fake *fk;

static void fake_core_clear(struct fake_core *c)
{
    memset(c->reg, 0, sizeof(c->reg));
    c->reg[RKNPU_PC_VERSION / 4u] = RKNPU_VERSION_VALUE;
    for (uint32_t off = RKNPU_IOMMU_PAGES_START; off < RKNPU_IOMMU_PAGES_END; off += 4u)
        c->reg[off / 4u] = IOMMU_PATTERN;
    c->running = c->stall = c->hold = false;
}

/* Core i's line is asserted while RAW & MASK; it fires when routed and not masked. */
static void fake_line(unsigned i)
{
    struct fake_core *c = &fk->core[i];
    bool asserted =
        (c->reg[RKNPU_PC_INTERRUPT_RAW_STATUS / 4u] & c->reg[RKNPU_PC_INTERRUPT_MASK / 4u]) != 0;
    if (!asserted || fk->irq_fd[i] < 0 || fk->line_masked[i])
        return;
    uint64_t one = 1;
    if (write(fk->irq_fd[i], &one, 8) != 8)
        fk->write_failed = true;
    fk->line_masked[i] = true; /* automasked */
    fk->fired[i]++;
}

/* A run ends as the PC ends it: DPU_0 raised, TASK_STATUS at the run's task count. */
static void fake_complete(unsigned i)
{
    struct fake_core *c = &fk->core[i];
    c->running = false;
    c->reg[RKNPU_PC_INTERRUPT_RAW_STATUS / 4u] |= RKNPU_INT_DPU_0;
    c->reg[RKNPU_PC_TASK_STATUS / 4u] =
        c->reg[RKNPU_PC_TASK_CON / 4u] & RKNPU_TASK_CON_TASK_NUMBER_MASK;
    fake_line(i);
}

static void fake_release(unsigned i)
{
    pthread_mutex_lock(&fk->mu);
    fk->core[i].hold = false;
    if (fk->core[i].running)
        fake_complete(i);
    pthread_mutex_unlock(&fk->mu);
}

static int f_get_info(struct npv_dev *dev, struct npv_dev_info *info)
{
    (void)dev;
    memset(info, 0, sizeof(*info));
    info->flags = NPV_DEV_FLAG_PLATFORM | (fk->has_reset ? NPV_DEV_FLAG_RESET : 0u);
    info->num_regions = CORES;
    info->num_irqs = CORES;
    return 0;
}

/* Each window as vfio-platform reports an MMIO resource: readable, writable, mmappable. */
static int f_region_info(struct npv_dev *dev, uint32_t index, struct npv_region_info *info)
{
    (void)dev;
    if (index >= CORES)
        return -EINVAL;
    memset(info, 0, sizeof(*info));
    info->index = index;
    info->size = WIN;
    info->flags = NPV_REGION_READ | NPV_REGION_WRITE | NPV_REGION_MMAP;
    info->nr_mmap_areas = 1;
    info->mmap_areas[0].size = WIN;
    return 0;
}

static int f_mmap_fd(struct npv_dev *dev, uint32_t index, uint64_t area_off, int *fd,
                     uint64_t *file_off)
{
    (void)dev;
    (void)index;
    fk->mmap_calls++;
    *fd = fk->memfd;
    *file_off = area_off;
    return 0;
}

static struct fake_core *account(uint32_t index, uint64_t off, size_t len)
{
    ck_assert_uint_lt(index, CORES);
    ck_assert_msg(len == 4 && off % 4 == 0 && off < WIN, "access 0x%llx/%zu",
                  (unsigned long long)off, len);
    struct fake_core *c = &fk->core[index];
    if (off >= RKNPU_IOMMU_PAGES_START && off < RKNPU_IOMMU_PAGES_END)
        c->iommu_accesses++;
    else
        c->npu_accesses++;
    if (off == RKNPU_GLOBAL_SOFT_RESET)
        c->soft_reset_accesses++;
    return c;
}

static int f_read(struct npv_dev *dev, uint32_t index, uint64_t off, void *buf, size_t len)
{
    (void)dev;
    pthread_mutex_lock(&fk->mu);
    struct fake_core *c = account(index, off, len);
    uint32_t v = c->reg[off / 4u];
    if (off == RKNPU_PC_INTERRUPT_STATUS)
        v = c->reg[RKNPU_PC_INTERRUPT_RAW_STATUS / 4u] & c->reg[RKNPU_PC_INTERRUPT_MASK / 4u];
    pthread_mutex_unlock(&fk->mu);
    memcpy(buf, &v, 4);
    return 0;
}

static void core_write(unsigned index, struct fake_core *c, uint64_t off, uint32_t v);

static int f_write(struct npv_dev *dev, uint32_t index, uint64_t off, const void *buf, size_t len)
{
    (void)dev;
    uint32_t v;
    memcpy(&v, buf, 4);
    pthread_mutex_lock(&fk->mu);
    core_write(index, account(index, off, len), off, v);
    pthread_mutex_unlock(&fk->mu);
    return 0;
}

static void core_write(unsigned index, struct fake_core *c, uint64_t off, uint32_t v)
{
    uint32_t *r = &c->reg[off / 4u];
    switch (off) {
    case RKNPU_PC_INTERRUPT_CLEAR:
        c->reg[RKNPU_PC_INTERRUPT_RAW_STATUS / 4u] &= ~v;
        return;
    case RKNPU_PC_TASK_CON:
        if (v & RKNPU_TASK_CON_TASK_COUNT_CLEAR)
            c->reg[RKNPU_PC_TASK_STATUS / 4u] = 0;
        *r = v;
        return;
    case RKNPU_PC_OPERATION_ENABLE: {
        bool edge = (v & RKNPU_PC_OP_EN) && !(*r & RKNPU_PC_OP_EN);
        *r = v;
        if (edge && !c->running) {
            c->running = true;
            if (!c->stall && !c->hold)
                fake_complete(index);
        }
        return;
    }
    default:
        *r = v;
        return;
    }
}

static int f_irq_info(struct npv_dev *dev, uint32_t index, struct npv_irq_info *info)
{
    (void)dev;
    if (index >= CORES)
        return -EINVAL;
    info->index = index;
    info->count = 1;
    info->flags = NPV_IRQ_INFO_EVENTFD | NPV_IRQ_INFO_MASKABLE | NPV_IRQ_INFO_AUTOMASKED;
    return 0;
}

static int f_set_irqs(struct npv_dev *dev, uint32_t index, uint32_t flags, uint32_t start,
                      uint32_t count, const int32_t *fds)
{
    (void)dev;
    (void)start;
    if (index >= CORES)
        return -EINVAL;
    int r = 0;
    pthread_mutex_lock(&fk->mu);
    if ((flags & NPV_IRQ_SET_ACTION_TRIGGER) && (flags & NPV_IRQ_SET_DATA_EVENTFD) && count == 1) {
        /* vfio-platform requests the line unshared: taken shared by the IOMMU, it is -EBUSY. */
        if (fk->refuse_irq) {
            r = -EBUSY;
        } else {
            fk->irq_fd[index] = fds[0];
            fk->line_masked[index] = false;
            fk->irq_routes++;
        }
    } else if ((flags & NPV_IRQ_SET_ACTION_TRIGGER) && count == 0) {
        fk->irq_fd[index] = -1;
    } else if (flags & NPV_IRQ_SET_ACTION_MASK) {
        fk->line_masked[index] = true;
    } else if (flags & NPV_IRQ_SET_ACTION_UNMASK) {
        /* A level line still asserted fires again at once. */
        fk->line_masked[index] = false;
        fk->unmasks[index]++;
        fake_line(index);
    }
    pthread_mutex_unlock(&fk->mu);
    return r;
}

static int f_reset(struct npv_dev *dev)
{
    (void)dev;
    fk->resets++;
    for (unsigned i = 0; i < CORES; i++) {
        unsigned npu = fk->core[i].npu_accesses, iommu = fk->core[i].iommu_accesses;
        unsigned srst = fk->core[i].soft_reset_accesses;
        fake_core_clear(&fk->core[i]);
        fk->core[i].npu_accesses = npu;
        fk->core[i].iommu_accesses = iommu;
        fk->core[i].soft_reset_accesses = srst;
    }
    return 0;
}

static int f_attach(struct npv_dev *dev, struct npv_domain *dom)
{
    (void)dev;
    (void)dom;
    return 0;
}

static void f_close(struct npv_dev *dev)
{
    (void)dev;
}

static const struct npv_dev_ops fake_ops = {
    .get_info = f_get_info,
    .region_info = f_region_info,
    .region_mmap_fd = f_mmap_fd,
    .region_read = f_read,
    .region_write = f_write,
    .irq_info = f_irq_info,
    .set_irqs = f_set_irqs,
    .reset = f_reset,
    .attach = f_attach,
    .close = f_close,
};

static struct npv_ctx *ctx;
static struct npv_domain *dom;
static struct npv_dev *dev;
static struct npv_rknpu *npu;
static struct npv_rknpu_mem *abuf, *bbuf, *cbuf;
static uint64_t regcmd[NPV_RKNPU_MATMUL_MAX_WORDS];
static struct npv_rknpu_task task;
static char last_error[1024];
static unsigned warnings_polling;

static void keep_messages(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    if (level == NPV_LOG_ERROR)
        snprintf(last_error, sizeof(last_error), "%s", msg);
    if (level == NPV_LOG_WARN && strstr(msg, "polling") != NULL)
        warnings_polling++;
}

static void setup(void)
{
    fk = calloc(1, sizeof(*fk));
    ck_assert_ptr_nonnull(fk);
    for (unsigned i = 0; i < CORES; i++) {
        fake_core_clear(&fk->core[i]);
        fk->irq_fd[i] = -1;
    }
    ck_assert_int_eq(pthread_mutex_init(&fk->mu, NULL), 0);
    fk->memfd = memfd_create("fake-rknpu-window", MFD_CLOEXEC);
    ck_assert_int_ge(fk->memfd, 0);
    ck_assert_int_eq(ftruncate(fk->memfd, WIN), 0);
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    last_error[0] = '\0';
    warnings_polling = 0;
    npv_ctx_set_log_sink(ctx, keep_messages, NULL);
    struct npv_domain_opts o = {.aperture_start = 0, .aperture_last = 0xffffffffull};
    ck_assert_int_eq(npv_domain_new(ctx, &o, &dom), 0);
    dev = npv_dev_alloc(ctx, &fake_ops, NPV_TRANSPORT_LEGACY, "fdab0000.npu", NULL);
    ck_assert_ptr_nonnull(dev);
    dev->priv = fk;
    ck_assert_int_eq(npv_dev_finish_open(dev, dom), 0);
    npu = NULL;
}

/* The buffers first: they belong to the driver's domains. */
static void close_npu(void)
{
    npv_rknpu_mem_destroy(abuf);
    npv_rknpu_mem_destroy(bbuf);
    npv_rknpu_mem_destroy(cbuf);
    abuf = bbuf = cbuf = NULL;
    npv_rknpu_close(npu);
    npu = NULL;
}

static void teardown(void)
{
    close_npu();
    npv_dev_close(dev);
    npv_domain_put(dom);
    npv_ctx_free(ctx);
    close(fk->memfd);
    pthread_mutex_destroy(&fk->mu);
    free(fk);
}

static void open_npu(enum npv_rknpu_completion completion)
{
    const struct npv_rknpu_config cfg = {
        .job_timeout_ns = 200 * MS, .reset_timeout_ns = 50 * MS, .completion = completion};
    ck_assert_int_eq(npv_rknpu_open(dev, &cfg, &npu), 0);
    ck_assert_uint_eq(npv_rknpu_num_cores(npu), CORES);
    /* An int8 matmul's list in domain 0 (the fake runs no list; the driver lays it out). */
    struct npv_rknpu_matmul mm = {.dtype = NPV_RKNPU_INT8, .m = 4, .k = 32, .n = 32};
    struct npv_rknpu_matmul_sizes sz;
    ck_assert_int_eq(npv_rknpu_matmul_sizes(&mm, &sz), 0);
    ck_assert_int_eq(npv_rknpu_mem_create(npu, sz.a, 0, 0, &abuf), 0);
    ck_assert_int_eq(npv_rknpu_mem_create(npu, sz.b, 0, 0, &bbuf), 0);
    ck_assert_int_eq(npv_rknpu_mem_create(npu, sz.c, 0, 0, &cbuf), 0);
    mm.a = npv_rknpu_mem_iova(abuf);
    mm.b = npv_rknpu_mem_iova(bbuf);
    mm.c = npv_rknpu_mem_iova(cbuf);
    ck_assert_int_gt(npv_rknpu_matmul_task(&mm, regcmd, NPV_RKNPU_MATMUL_MAX_WORDS, &task), 0);
}

static void submit(uint32_t mask, uint32_t nr_tasks, uint64_t cookie, uint64_t timeout_ns)
{
    static struct npv_rknpu_task tasks[5];
    for (unsigned i = 0; i < 5; i++)
        tasks[i] = task;
    struct npv_rknpu_job job = {.tasks = tasks,
                                .nr_tasks = nr_tasks,
                                .core_mask = mask,
                                .domain_id = 0,
                                .timeout_ns = timeout_ns,
                                .cookie = cookie};
    ck_assert_int_eq(npv_rknpu_submit(npu, &job), 0);
}

static void collect(struct npv_cpl *by_cookie, unsigned n)
{
    struct npv_cpl cpl[8];
    for (unsigned got = 0; got < n;) {
        int r = npv_rknpu_wait(npu, 1, 10000 * MS, cpl, 8);
        ck_assert_int_gt(r, 0);
        for (int k = 0; k < r; k++)
            by_cookie[cpl[k].cookie] = cpl[k];
        got += (unsigned)r;
    }
}

static void run_every_mask(void)
{
    static const uint32_t MASKS[6] = {0x1, 0x2, 0x4, 0x3, 0x7, 0x0};
    for (unsigned i = 0; i < 6; i++) {
        submit(MASKS[i], 1 + i % 3, 0, 10000 * MS);
        struct npv_cpl cpl[1];
        collect(cpl, 1);
        ck_assert_msg(cpl[0].status == 0, "mask 0x%x: %s", MASKS[i], npv_strerror(cpl[0].status));
    }
}

/* No window mapped, no IOMMU page and no soft-reset register touched, the NPU pages reached. */
static void assert_isolated(void)
{
    ck_assert_uint_eq(fk->mmap_calls, 0);
    for (unsigned i = 0; i < CORES; i++) {
        ck_assert_msg(fk->core[i].iommu_accesses == 0, "core %u: %u accesses to its IOMMU pages", i,
                      fk->core[i].iommu_accesses);
        ck_assert_uint_eq(fk->core[i].soft_reset_accesses, 0);
        ck_assert_uint_gt(fk->core[i].npu_accesses, 0);
        for (uint32_t off = RKNPU_IOMMU_PAGES_START; off < RKNPU_IOMMU_PAGES_END; off += 4u)
            ck_assert_uint_eq(fk->core[i].reg[off / 4u], IOMMU_PATTERN);
    }
}

START_TEST(a_platform_npu_maps_no_window_and_never_reaches_the_iommu_pages)
{
    open_npu(NPV_RKNPU_POLL);
    run_every_mask();
    struct npv_rknpu_counters c;
    npv_rknpu_counters(npu, &c);
    ck_assert_uint_eq(c.jobs, 6);
    /* Nothing on this transport resets a core: the reset only cancels, no register is written. */
    ck_assert_int_eq(npv_rknpu_reset(npu), 0);
    ck_assert_uint_eq(fk->resets, 0);
    close_npu();
    assert_isolated();
}
END_TEST

START_TEST(each_core_gets_its_platform_line_when_the_kernel_gives_it)
{
    open_npu(NPV_RKNPU_IRQ);
    ck_assert_uint_eq(fk->irq_routes, CORES); /* IRQ index c = core c's line */
    ck_assert_uint_eq(warnings_polling, 0);
    run_every_mask();
    assert_isolated();
}
END_TEST

static void *release_later(void *arg)
{
    struct timespec pause = {.tv_sec = 0, .tv_nsec = 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
    fake_release((unsigned)(uintptr_t)arg);
    return NULL;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * The driver sleeps on the line: a run that ends 50 ms after its start wakes
 * the waiter long before the job's 10 s deadline (the only other wake-up),
 * and a level line vfio-platform masked when it fired must be unmasked by
 * the driver for the next run on that core to wake it again.
 */
START_TEST(the_platform_line_wakes_the_waiter_and_is_unmasked_for_the_next_run)
{
    open_npu(NPV_RKNPU_IRQ);
    for (unsigned round = 0; round < 6; round++) {
        unsigned core = round % 2 ? 2u : 0u;
        pthread_mutex_lock(&fk->mu);
        fk->core[core].hold = true;
        pthread_mutex_unlock(&fk->mu);
        submit(1u << core, 1, 0, 10000 * MS);
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, release_later, (void *)(uintptr_t)core), 0);
        uint64_t t0 = now_ns();
        struct npv_cpl cpl[1];
        ck_assert_int_eq(npv_rknpu_wait(npu, 1, 10000 * MS, cpl, 1), 1);
        uint64_t took = now_ns() - t0;
        ck_assert_int_eq(pthread_join(th, NULL), 0);
        ck_assert_int_eq(cpl[0].status, 0);
        ck_assert_msg(took < 5000 * MS, "round %u: woken after %llu ms, not by the line", round,
                      (unsigned long long)(took / MS));
    }
    ck_assert(!fk->write_failed);
    ck_assert_uint_ge(fk->fired[0], 3);
    ck_assert_uint_ge(fk->fired[2], 3);
    ck_assert_uint_ge(fk->unmasks[0], 2);
    assert_isolated();
}
END_TEST

START_TEST(a_refused_line_falls_back_to_polling_or_refuses_to_open_by_option)
{
    fk->refuse_irq = true;
    open_npu(NPV_RKNPU_IRQ);
    ck_assert_uint_eq(warnings_polling, 1);
    ck_assert_uint_eq(fk->irq_routes, 0);
    run_every_mask();
    close_npu();

    const struct npv_rknpu_config only = {.completion = NPV_RKNPU_IRQ_ONLY};
    ck_assert_int_eq(npv_rknpu_open(dev, &only, &npu), -EBUSY);
    ck_assert_ptr_null(npu);
    ck_assert_msg(strstr(last_error, "interrupts cannot be had") != NULL, "no reason given: %s",
                  last_error);
    for (unsigned i = 0; i < CORES; i++)
        ck_assert_int_eq(fk->irq_fd[i], -1);
    assert_isolated();
}
END_TEST

START_TEST(without_a_reset_handler_a_stalled_core_goes_out_of_service_and_the_others_go_on)
{
    open_npu(NPV_RKNPU_POLL);
    fk->core[1].stall = true;
    submit(0x2, 1, 0, 200 * MS); /* stalls */
    submit(0x2, 1, 1, 0);        /* queued behind it */
    submit(0x1, 1, 2, 0);
    submit(0x4, 1, 3, 0);
    struct npv_cpl cpl[4];
    collect(cpl, 4);
    ck_assert_int_eq(cpl[0].status, -ETIMEDOUT);
    ck_assert_int_eq(cpl[1].status, -EIO);
    ck_assert_int_eq(cpl[2].status, 0);
    ck_assert_int_eq(cpl[3].status, 0);
    ck_assert_msg(strstr(last_error, "core 1 is out of service") != NULL &&
                      strstr(last_error, "rebind the NPU") != NULL,
                  "the error names neither the state nor the fix: %s", last_error);
    ck_assert_uint_eq(fk->resets, 0);
    struct npv_rknpu_job job = {.tasks = &task, .nr_tasks = 1, .core_mask = 0x2};
    ck_assert_int_eq(npv_rknpu_submit(npu, &job), -EIO);
    job.core_mask = 0x7;
    ck_assert_int_eq(npv_rknpu_submit(npu, &job), -EIO);
    /* Mask 0 picks a core in service; 0x1 and 0x4 go on. */
    static const uint32_t GOOD[3] = {0x0, 0x1, 0x4};
    for (unsigned i = 0; i < 3; i++) {
        submit(GOOD[i], 2, 0, 0);
        collect(cpl, 1);
        ck_assert_int_eq(cpl[0].status, 0);
    }
    ck_assert_int_eq(npv_rknpu_reset(npu), -EOPNOTSUPP);
    assert_isolated();
}
END_TEST

START_TEST(with_a_reset_handler_a_stalled_core_is_reset_by_vfio_device_reset)
{
    fk->has_reset = true;
    open_npu(NPV_RKNPU_POLL);
    unsigned resets_at_open = fk->resets; /* every core starts from a reset, as after power-on */
    fk->core[0].hold = true;
    fk->core[1].stall = true;
    submit(0x1, 1, 0, 10000 * MS); /* running on core 0 when core 1 is reset */
    submit(0x2, 1, 1, 200 * MS);   /* stalls */
    submit(0x2, 1, 2, 0);          /* queued behind the stall: runs after the reset */
    struct npv_cpl cpl[3];
    collect(cpl, 3);
    ck_assert_int_eq(cpl[0].status, -EIO); /* the device reset stopped core 0's run as well */
    ck_assert_int_eq(cpl[1].status, -ETIMEDOUT);
    ck_assert_int_eq(cpl[2].status, 0);
    ck_assert_uint_eq(fk->resets - resets_at_open, 1);
    struct npv_rknpu_counters c;
    npv_rknpu_counters(npu, &c);
    ck_assert_uint_eq(c.resets, 1);
    fake_release(0); /* nothing runs on core 0 any more: a no-op */
    run_every_mask();
    assert_isolated();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rknpu_platform");
    TCase *tc = tcase_create("platform");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_platform_npu_maps_no_window_and_never_reaches_the_iommu_pages);
    tcase_add_test(tc, each_core_gets_its_platform_line_when_the_kernel_gives_it);
    tcase_add_test(tc, the_platform_line_wakes_the_waiter_and_is_unmasked_for_the_next_run);
    tcase_add_test(tc, a_refused_line_falls_back_to_polling_or_refuses_to_open_by_option);
    tcase_add_test(tc,
                   without_a_reset_handler_a_stalled_core_goes_out_of_service_and_the_others_go_on);
    tcase_add_test(tc, with_a_reset_handler_a_stalled_core_is_reset_by_vfio_device_reset);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}
