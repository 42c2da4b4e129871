/* SPDX-License-Identifier: MIT */
/*
 * The RKNPU driver: finding the cores, starting a chain of tasks on a core's
 * program controller, reading its completion, and its soft reset. The PC
 * sequence follows the mainline rocket driver (rocket_job_hw_submit and
 * rocket_job_irq_handler in drivers/accel/rocket/rocket_job.c) and the
 * vendor driver (rknpu_job_subcore_commit_pc and rknpu_irq_handler in
 * drivers/rknpu/rknpu_job.c, rknpu_soft_reset in drivers/rknpu/rknpu_reset.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <npuvfio/dev.h>
#include <npuvfio/failpoint.h>

#include "driver_internal.h"
#include "status_decode.h"
#include "windows.h"

static_assert(NPV_RKNPU_NUM_CORES == RKNPU_NUM_CORES, "public and register-map core counts");
static_assert(NPV_RKNPU_ENABLE_CNA == RKNPU_ENABLE_CNA &&
                  NPV_RKNPU_ENABLE_CORE == RKNPU_ENABLE_CORE &&
                  NPV_RKNPU_ENABLE_DPU == RKNPU_ENABLE_DPU &&
                  NPV_RKNPU_ENABLE_DPU_RDMA == RKNPU_ENABLE_DPU_RDMA &&
                  NPV_RKNPU_ENABLE_PPU == RKNPU_ENABLE_PPU &&
                  NPV_RKNPU_ENABLE_PPU_RDMA == RKNPU_ENABLE_PPU_RDMA,
              "the public enable bits are the GLOBAL OPERATION_ENABLE layout");

#define DEFAULT_QUEUE_DEPTH   64u
#define MAX_QUEUE_DEPTH       1024u
#define DEFAULT_JOB_WORDS     4096u
#define MAX_JOB_WORDS         (1u << 20)
#define DEFAULT_JOB_TIMEOUT   1000000000ull
#define DEFAULT_RESET_TIMEOUT 100000000ull

uint32_t rknpu_reg_read(struct npv_rknpu *npu, unsigned c, uint32_t off)
{
    struct rknpu_core *core = &npu->cores[c];
    if (core->bar != NULL)
        return npv_bar_read32(core->bar, core->base + off);
    uint32_t v;
    if (!rknpu_window_reg_allowed(off) ||
        npv_dev_region_read(npu->dev, core->region, core->base + off, &v, 4) < 0)
        return UINT32_MAX;
    return v;
}

int rknpu_reg_write(struct npv_rknpu *npu, unsigned c, uint32_t off, uint32_t v)
{
    struct rknpu_core *core = &npu->cores[c];
    if (core->bar != NULL)
        return npv_bar_write(core->bar, core->base + off, 4, v);
    if (!rknpu_window_reg_allowed(off))
        return -EPERM; /* the core's IOMMU pages (windows.h) */
    return npv_dev_region_write(npu->dev, core->region, core->base + off, &v, 4);
}

static inline uint32_t core_read(struct npv_rknpu *npu, unsigned c, uint32_t off)
{
    return rknpu_reg_read(npu, c, off);
}

static inline void core_write(struct npv_rknpu *npu, unsigned c, uint32_t off, uint32_t v)
{
    (void)rknpu_reg_write(npu, c, off, v);
}

int rknpu_core_start(struct npv_rknpu *npu, unsigned c, npv_iova_t regcmd, uint32_t amount,
                     uint32_t nr_tasks, uint32_t done_mask)
{
    if (regcmd > UINT32_MAX || (regcmd & ~(npv_iova_t)RKNPU_PC_BASE_ADDRESS_MASK) != 0)
        return -ERANGE; /* BASE_ADDRESS holds IOVA[31:4] */
    /*
     * Ping-pong pointers of the CNA and CORE groups, with the core index in
     * the "reserved" bits 28+, as both stock drivers write them.
     */
    uint32_t pointer = RKNPU_S_POINTER_PP_DEFAULT | (uint32_t)c << 28;
    /*
     * INTERRUPT_MASK: the last task's done pair, as the vendor's
     * rknpu_job_subcore_commit_pc unmasks last_task.int_mask; DMA errors end
     * a run without a done bit: unmasked so the vector fires for them too.
     */
    const struct {
        uint32_t off, val;
    } setup[] = {
        /*
         * BASE_ADDRESS <- 1 first: rocket_job_hw_submit writes it before the
         * pointers, the vendor's rknpu_job_subcore_commit_pc as "switch to
         * slave mode" (PC_SEL) before anything else.
         */
        {RKNPU_PC_BASE_ADDRESS, RKNPU_PC_SEL},
        {RKNPU_CNA_S_POINTER, pointer},
        {RKNPU_CORE_S_POINTER, pointer},
        {RKNPU_PC_BASE_ADDRESS, (uint32_t)regcmd},
        {RKNPU_PC_REGISTER_AMOUNTS, amount & RKNPU_PC_REGISTER_AMOUNTS_MASK},
        {RKNPU_PC_INTERRUPT_MASK, done_mask | RKNPU_INT_DMA_ERROR},
        {RKNPU_PC_INTERRUPT_CLEAR, RKNPU_INT_CLEAR_ALL},
        {RKNPU_PC_TASK_CON, RKNPU_TASK_CON_RESERVED14 | RKNPU_TASK_CON_TASK_COUNT_CLEAR |
                                RKNPU_TASK_CON_TASK_PP_EN |
                                (nr_tasks & RKNPU_TASK_CON_TASK_NUMBER_MASK)},
        {RKNPU_PC_TASK_DMA_BASE_ADDR, 0},
        {RKNPU_PC_OPERATION_ENABLE, 0},
    };
    /*
     * Over vfio-user a register write is a message that can fail: a lost
     * setup write would start the core on the previous job's command list
     * (a wrong result that completes), so each is checked and the job fails
     * unstarted. The leading enable 0 is written only when the last pulse's
     * 0 was lost, so that this start's 1 is a rising edge again.
     */
    size_t nr_setup = sizeof(setup) / sizeof(setup[0]) - (npu->cores[c].enable_high ? 0 : 1);
    for (size_t i = 0; i < nr_setup; i++) {
        int r = rknpu_reg_write(npu, c, setup[i].off, setup[i].val);
        if (r < 0)
            return r;
    }
    npu->cores[c].enable_high = false;
    /*
     * The release orders the laid-out command list before the start. The PC
     * starts on the enable's rising edge: pulse it (1 then 0, as the vendor
     * driver does) so the next job's write of 1 is an edge again.
     */
    npv_dma_wmb();
    int r = rknpu_reg_write(npu, c, RKNPU_PC_OPERATION_ENABLE, RKNPU_PC_OP_EN);
    if (r < 0)
        return r;
    /* The job runs either way; a lost 0 is written before the next start. */
    if (rknpu_reg_write(npu, c, RKNPU_PC_OPERATION_ENABLE, 0) < 0)
        npu->cores[c].enable_high = true;
    return 0;
}

/* Completion is decided by status_decode.c from the two values the core writes. */
int rknpu_core_check(struct npv_rknpu *npu, unsigned c, uint32_t nr_tasks, uint32_t done_mask,
                     uint32_t *status)
{
    uint32_t raw = core_read(npu, c, RKNPU_PC_INTERRUPT_RAW_STATUS);
    *status = raw;
    int r = rknpu_decode_irq_status(raw, done_mask);
    if (r != 1)
        return r;
    r = rknpu_decode_task_status(core_read(npu, c, RKNPU_PC_TASK_STATUS), nr_tasks);
    if (r == 1)
        core_write(npu, c, RKNPU_PC_INTERRUPT_CLEAR, RKNPU_INT_CLEAR_ALL);
    return r;
}

/*
 * A core's reset is its two CRU lines (SRST_A, SRST_H): asserted, held
 * briefly, released, as the stock drivers do (assert, 10 us, deassert).
 * The core must then leave reset within reset_timeout_ns; one that does not
 * is -EIO and the caller retries.
 */
int rknpu_core_reset(struct npv_rknpu *npu, unsigned c)
{
    if (npu->reset_kind == RKNPU_RESET_NONE)
        return -EOPNOTSUPP;
    if (npu->reset_kind == RKNPU_RESET_DEVICE) {
        /*
         * vfio-platform's reset handler of the node (none exists for the
         * RK3588 NPU in mainline; a board that adds one reports it): it
         * resets all three cores.
         */
        int r = npv_dev_reset(npu->dev);
        if (r < 0)
            return r;
        core_write(npu, c, RKNPU_PC_INTERRUPT_MASK, 0);
        core_write(npu, c, RKNPU_PC_INTERRUPT_CLEAR, RKNPU_INT_CLEAR_ALL);
        return 0;
    }
    core_write(npu, c, RKNPU_GLOBAL_SOFT_RESET, RKNPU_SOFT_RESET_LINES);
    struct timespec hold = {.tv_sec = 0, .tv_nsec = 10000};
    nanosleep(&hold, NULL);
    core_write(npu, c, RKNPU_GLOBAL_SOFT_RESET, 0);
    uint64_t deadline = rknpu_now_ns() + npu->cfg.reset_timeout_ns;
    for (;;) {
        int state = rknpu_decode_reset_state(core_read(npu, c, RKNPU_GLOBAL_SOFT_RESET));
        if (state < 0)
            return state;
        if (state == 0)
            break;
        if (rknpu_now_ns() >= deadline)
            return -EIO;
        struct timespec nap = {.tv_sec = 0, .tv_nsec = 10000};
        nanosleep(&nap, NULL);
    }
    core_write(npu, c, RKNPU_PC_INTERRUPT_MASK, 0);
    core_write(npu, c, RKNPU_PC_INTERRUPT_CLEAR, RKNPU_INT_CLEAR_ALL);
    return 0;
}

static int find_cores(struct npv_rknpu *npu)
{
    struct npv_dev_info info;
    int r = npv_dev_info(npu->dev, &info);
    if (r < 0)
        return r;
    struct npv_region_info ri;
    /*
     * The vendor device-tree node has three `reg` windows of 64 KiB (a
     * platform device: regions 0..2); the model puts them back to back in
     * BAR0. Either way each core is one 64 KiB window.
     */
    /* A platform window holds the core's IOMMU pages: never mapped (windows.h). */
    bool map =
        rknpu_window_access((info.flags & NPV_DEV_FLAG_PLATFORM) != 0) == RKNPU_WINDOW_MAPPED;
    if (info.num_regions > 0 && npv_dev_region_info(npu->dev, 0, &ri) == 0 &&
        ri.size >= (uint64_t)NPV_RKNPU_NUM_CORES * RKNPU_CORE_WINDOW_SIZE) {
        if (map) {
            r = npv_bar_map(npu->dev, 0, &npu->bars[0]);
            if (r < 0)
                return r;
            npu->nr_bars = 1;
        }
        for (unsigned c = 0; c < NPV_RKNPU_NUM_CORES; c++) {
            npu->cores[c].bar = map ? npu->bars[0] : NULL;
            npu->cores[c].region = 0;
            npu->cores[c].base = (uint64_t)c * RKNPU_CORE_WINDOW_SIZE;
        }
        npu->nr_cores = NPV_RKNPU_NUM_CORES;
        return 0;
    }
    for (unsigned c = 0; c < NPV_RKNPU_NUM_CORES && c < info.num_regions; c++) {
        if (npv_dev_region_info(npu->dev, c, &ri) < 0 || ri.size < RKNPU_CORE_WINDOW_SIZE)
            break;
        if (map) {
            r = npv_bar_map(npu->dev, c, &npu->bars[c]);
            if (r < 0)
                return r;
            npu->nr_bars++;
        }
        npu->cores[c].bar = map ? npu->bars[c] : NULL;
        npu->cores[c].region = c;
        npu->cores[c].base = 0;
        npu->nr_cores++;
    }
    return npu->nr_cores != 0 ? 0 : -ENODEV;
}

/*
 * The version both stock drivers compare: rocket_core_init and the vendor's
 * rknpu_get_hw_version read PC_VERSION + (PC_VERSION_NUM & 0xffff) (RK3576
 * parts report a nonzero VERSION_NUM). A gone device reads all-ones in both.
 */
static uint32_t rknpu_core_version(struct npv_rknpu *npu, unsigned c)
{
    uint32_t v = core_read(npu, c, RKNPU_PC_VERSION);
    if (v == UINT32_MAX || v == 0)
        return v;
    return v + (core_read(npu, c, RKNPU_PC_VERSION_NUM) & 0xffffu);
}

/*
 * The reset this transport has (enum rknpu_reset_kind). The SoC has no
 * register-level reset: rocket (rocket_reset) and the vendor
 * (rknpu_soft_reset) assert the CRU lines SRST_A/SRST_H, outside the NPU's
 * window and out of user space's reach. GLOBAL_SOFT_RESET is the PCI
 * stand-in's (regs.h), read only there (PRESENT bit); on a platform device
 * VFIO_DEVICE_RESET exists only where vfio-platform has a reset handler for
 * the node.
 */
static void choose_reset(struct npv_rknpu *npu)
{
    struct npv_dev_info info = {0};
    npu->reset_kind = RKNPU_RESET_NONE;
    if (npv_dev_info(npu->dev, &info) < 0)
        return;
    if (info.flags & NPV_DEV_FLAG_PCI) {
        uint32_t v = core_read(npu, 0, RKNPU_GLOBAL_SOFT_RESET);
        if (v != UINT32_MAX && (v & RKNPU_SOFT_RESET_PRESENT))
            npu->reset_kind = RKNPU_RESET_MODEL_LINES;
    } else if ((info.flags & NPV_DEV_FLAG_PLATFORM) && (info.flags & NPV_DEV_FLAG_RESET)) {
        npu->reset_kind = RKNPU_RESET_DEVICE;
    }
    if (npu->reset_kind == RKNPU_RESET_NONE)
        npv_ctx_log(npu->ctx, NPV_LOG_WARN,
                    "rknpu: %s offers no reset of the NPU cores: a core that stalls will be "
                    "taken out of service",
                    npv_dev_name(npu->dev));
}

/* Without a reset: quiet the core as far as registers go (mask, clear, enable low). */
static void quiet_core(struct npv_rknpu *npu, unsigned c)
{
    core_write(npu, c, RKNPU_PC_INTERRUPT_MASK, 0);
    core_write(npu, c, RKNPU_PC_INTERRUPT_CLEAR, RKNPU_INT_CLEAR_ALL);
    core_write(npu, c, RKNPU_PC_OPERATION_ENABLE, 0);
}

static int bring_up_cores(struct npv_rknpu *npu)
{
    choose_reset(npu);
    for (unsigned c = 0; c < npu->nr_cores; c++) {
        if (npu->reset_kind == RKNPU_RESET_NONE) {
            int r = rknpu_decode_version(rknpu_core_version(npu, c));
            if (r < 0)
                return r;
            quiet_core(npu, c);
            continue;
        }
        /*
         * A previous owner may have died mid-run, between the enable's 1 and
         * 0 (the next 1 would be no edge and nothing would start), or with
         * the core held in reset (it then reads 0): every core starts from a
         * soft reset, as after power-on.
         */
        uint32_t version = rknpu_core_version(npu, c);
        bool was_reset = false;
        if (version == 0) {
            rknpu_core_recover(npu, c);
            if (npu->dead)
                return -EIO; /* never left reset: not a wrong version */
            was_reset = true;
            version = rknpu_core_version(npu, c);
        }
        int r = rknpu_decode_version(version);
        if (r == -EPROTO)
            npv_ctx_log(npu->ctx, NPV_LOG_ERROR,
                        "rknpu: core %u reports version 0x%08x, not the RK3588's 0x%08x", c,
                        version, RKNPU_VERSION_VALUE);
        if (r < 0)
            return r;
        if (!was_reset)
            rknpu_core_recover(npu, c);
        if (npu->dead)
            return -EIO;
    }
    /* The bring-up resets are not recoveries. */
    npu->counters = (struct npv_rknpu_counters){0};
    return 0;
}

static int config_apply(struct npv_rknpu *npu, const struct npv_rknpu_config *cfg)
{
    struct npv_rknpu_config c = cfg != NULL ? *cfg : (struct npv_rknpu_config){0};
    if (c.queue_depth == 0)
        c.queue_depth = DEFAULT_QUEUE_DEPTH;
    if (c.max_job_words == 0)
        c.max_job_words = DEFAULT_JOB_WORDS;
    if (c.job_timeout_ns == 0)
        c.job_timeout_ns = DEFAULT_JOB_TIMEOUT;
    if (c.reset_timeout_ns == 0)
        c.reset_timeout_ns = DEFAULT_RESET_TIMEOUT;
    if (c.completion != NPV_RKNPU_POLL && c.completion != NPV_RKNPU_IRQ &&
        c.completion != NPV_RKNPU_IRQ_ONLY)
        return -EINVAL;
    if (c.queue_depth > MAX_QUEUE_DEPTH || (c.queue_depth & (c.queue_depth - 1)) != 0 ||
        c.max_job_words < 8 || c.max_job_words > MAX_JOB_WORDS)
        return -EINVAL;
    npu->cfg = c;
    /* Command memory of one job, whole pages so a job's list never shares one with the next. */
    npu->slot_bytes = ((uint64_t)c.max_job_words * 8u + 4095u) & ~4095ull;
    return 0;
}

static void unmap_bars(struct npv_rknpu *npu)
{
    for (unsigned i = 0; i < npu->nr_bars; i++)
        npv_bar_unmap(npu->bars[i]);
    npu->nr_bars = 0;
}

int npv_rknpu_open(struct npv_dev *dev, const struct npv_rknpu_config *cfg, struct npv_rknpu **out)
{
    if (dev == NULL || out == NULL)
        return -EINVAL;
    int r = npv_failpoint_check(npv_dev_ctx(dev), NPV_FAIL_ALLOC);
    if (r < 0)
        return r;
    /* Aligned for the queues' per-core switch counts (a cache line each). */
    struct npv_rknpu *npu = aligned_alloc(_Alignof(struct npv_rknpu), sizeof(*npu));
    if (npu == NULL)
        return -ENOMEM;
    memset(npu, 0, sizeof(*npu));
    npu->dev = dev;
    npu->ctx = npv_dev_ctx(dev);
    r = config_apply(npu, cfg);
    if (r < 0)
        goto err_free;
    r = find_cores(npu);
    if (r < 0)
        goto err_bars;
    r = bring_up_cores(npu);
    if (r < 0)
        goto err_bars;
    r = rknpu_jobs_init(npu);
    if (r < 0)
        goto err_bars;
    r = rknpu_irq_init(npu);
    if (r < 0 && npu->cfg.completion == NPV_RKNPU_IRQ) {
        /* The set-up released what it took: poll instead, and say why. */
        npv_ctx_log(npu->ctx, NPV_LOG_WARN,
                    "rknpu: the cores' interrupts cannot be had on %s (%s; on the RK3588 the "
                    "NPU's line is shared with its IOMMU and vfio-platform requests it "
                    "unshared): polling instead (NPV_RKNPU_IRQ_ONLY refuses)",
                    npv_dev_name(dev), npv_strerror(r));
        npu->cfg.completion = NPV_RKNPU_POLL;
        r = 0;
    }
    if (r < 0) {
        npv_ctx_log(npu->ctx, NPV_LOG_ERROR,
                    "rknpu: the cores' interrupts cannot be had on %s (%s) and "
                    "NPV_RKNPU_IRQ_ONLY was asked: not opened",
                    npv_dev_name(dev), npv_strerror(r));
        goto err_jobs;
    }
    *out = npu;
    return 0;

err_jobs:
    rknpu_jobs_fini(npu);
err_bars:
    unmap_bars(npu);
err_free:
    free(npu);
    return r;
}

void npv_rknpu_close(struct npv_rknpu *npu)
{
    if (npu == NULL)
        return;
    rknpu_queues_close_all(npu);
    for (unsigned c = 0; c < npu->nr_cores; c++) {
        core_write(npu, c, RKNPU_PC_INTERRUPT_MASK, 0);
        if (npu->cores[c].running != RKNPU_NO_JOB && npu->reset_kind != RKNPU_RESET_NONE)
            rknpu_core_reset(npu, c);
    }
    rknpu_irq_fini(npu);
    rknpu_jobs_fini(npu);
    rknpu_domains_release(npu);
    unmap_bars(npu);
    free(npu);
}

struct npv_dev *npv_rknpu_dev(const struct npv_rknpu *npu)
{
    return npu->dev;
}

unsigned npv_rknpu_num_cores(const struct npv_rknpu *npu)
{
    return npu->nr_cores;
}
