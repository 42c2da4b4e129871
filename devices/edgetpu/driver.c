/* SPDX-License-Identifier: MIT */
/*
 * The Edge TPU driver: bring-up, reset and close, following gasket's
 * apex_reset / probe / open and libedgetpu's MmioDriver::DoOpen and DoClose
 * (google/gasket-driver src/apex_driver.c apex_reset, apex_enter_reset,
 * apex_quit_reset; google-coral/libedgetpu driver/mmio_driver.cc), with a
 * deadline on every poll where the stock stack spins forever (libedgetpu's
 * Registers::Poll without a timeout is kInfiniteTimeout,
 * driver/registers/registers.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver_internal.h"
#include "status_decode.h"

#define DEFAULT_ENTRIES 256u
#define DEFAULT_SIMPLE  6144u
#define DEFAULT_INSTR   4096u
#define DEFAULT_TIMEOUT 1000000000ull
/* gasket's every reset and init poll: 120 tries 100 ms apart (apex_driver.c APEX_RESET_*). */
#define DEFAULT_POLL_TIMEOUT (120ull * 100000000ull)
#define QUEUE_BYTES          (2u * EDGETPU_PAGE_SIZE) /* ring page + status block page */
/*
 * Where libedgetpu's queue lands in simple space: device VA 0x1000000 (slot
 * 4096) for the ring, the status block one page up (HostQueue::MapAll in
 * libedgetpu driver/mmio/host_queue.h maps both with MappingTypeHint::kSimple;
 * gasket logs these two addresses in google-coral/edgetpu issue #280). So
 * device VAs and IOVAs differ and a base register written with the wrong one
 * faults.
 */
#define RING_SLOT 4096u

uint64_t edgetpu_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#define mono_ns edgetpu_mono_ns

int edgetpu_write64(struct npv_edgetpu *tpu, uint64_t off, uint64_t v)
{
    if ((tpu->cfg.test_hooks & NPV_EDGETPU_HOOK_SPLIT_64) && off >= EDGETPU_UHIB_WINDOW &&
        off < EDGETPU_UHIB_WINDOW + EDGETPU_WINDOW_SIZE) {
        /* The hook's deliberate bug: the register in halves, low first. */
        int r = npv_bar_write(tpu->bar, off, 4, (uint32_t)v);
        return r < 0 ? r : npv_bar_write(tpu->bar, off + 4, 4, v >> 32);
    }
    /* Every CSR takes one whole 8-byte access (libedgetpu mmio_driver.cc Write). */
    return npv_bar_write(tpu->bar, off, 8, v);
}

int edgetpu_read64(struct npv_edgetpu *tpu, uint64_t off, uint64_t *v)
{
    int r = npv_bar_read(tpu->bar, off, 8, v);
    return r < 0 ? r : edgetpu_decode_csr(*v);
}
#define read64 edgetpu_read64

static int scu_read(struct npv_edgetpu *tpu, uint64_t off, uint32_t *v)
{
    uint64_t x;
    int r = npv_bar_read(tpu->bar, off, 4, &x);
    if (r < 0)
        return r;
    *v = (uint32_t)x;
    return edgetpu_decode_scu(*v);
}

static int scu_write(struct npv_edgetpu *tpu, uint64_t off, uint32_t v)
{
    return npv_bar_write(tpu->bar, off, 4, v);
}

/* Poll until (reg & mask) == want; 64-bit CSR or (width 4) SCU register. */
static int poll_reg(struct npv_edgetpu *tpu, uint64_t off, unsigned width, uint64_t mask,
                    uint64_t want)
{
    uint64_t deadline = mono_ns() + tpu->cfg.poll_timeout_ns;
    for (;;) {
        uint64_t v = 0;
        int r;
        if (width == 4) {
            uint32_t v32;
            r = scu_read(tpu, off, &v32);
            v = v32;
        } else {
            r = read64(tpu, off, &v);
        }
        if (r < 0)
            return r;
        if (edgetpu_reg_settled(v, mask, want))
            return 0;
        if (mono_ns() >= deadline)
            return -ETIMEDOUT;
        struct timespec nap = {.tv_sec = 0, .tv_nsec = 10000};
        nanosleep(&nap, NULL);
    }
}

/* Poll until the register reads non-zero (and not the in-reset marker). */
static int poll_nonzero(struct npv_edgetpu *tpu, uint64_t off)
{
    uint64_t deadline = mono_ns() + tpu->cfg.poll_timeout_ns;
    for (;;) {
        uint64_t v;
        int r = read64(tpu, off, &v);
        if (r < 0)
            return r;
        if (edgetpu_reg_init_done(v))
            return 0;
        if (mono_ns() >= deadline)
            return -ETIMEDOUT;
        struct timespec nap = {.tv_sec = 0, .tv_nsec = 10000};
        nanosleep(&nap, NULL);
    }
}

static uint32_t field_set(uint32_t v, uint32_t mask, unsigned shift, uint32_t x)
{
    return (v & ~mask) | ((x << shift) & mask);
}

/*
 * gasket apex_enter_reset: force the GCB idle (idleRegister read-modify-write
 * clearing bit 32), pause DMA, force the GCB into reset, gate it, shut its
 * RAMs down.
 */
static int gcb_enter_reset(struct npv_edgetpu *tpu)
{
    uint32_t s2 = 0, s3 = 0;
    uint64_t idle;
    int r = npv_bar_read(tpu->bar, EDGETPU_IDLE_REGISTER, 8, &idle);
    if (r == 0 && idle == ~0ull)
        r = -ENODEV;
    if (r == 0)
        r = npv_bar_write(tpu->bar, EDGETPU_IDLE_REGISTER, 8, idle & ~(1ull << 32));
    if (r == 0)
        r = edgetpu_write64(tpu, EDGETPU_UHIB_DMA_PAUSE, 1);
    if (r == 0)
        r = poll_reg(tpu, EDGETPU_UHIB_DMA_PAUSED, 8, 1, 1);
    if (r == 0)
        r = scu_read(tpu, EDGETPU_SCU_CTRL_2, &s2);
    if (r < 0)
        return r;
    s2 = field_set(s2, EDGETPU_SCU2_RG_RST_GCB_MASK, EDGETPU_SCU2_RG_RST_GCB_SHIFT,
                   EDGETPU_RST_GCB_FORCE_RESET);
    s2 = field_set(s2, EDGETPU_SCU2_RG_GATED_GCB_MASK, EDGETPU_SCU2_RG_GATED_GCB_SHIFT, 1);
    r = scu_write(tpu, EDGETPU_SCU_CTRL_2, s2);
    if (r == 0)
        r = scu_read(tpu, EDGETPU_SCU_CTRL_3, &s3);
    if (r < 0)
        return r;
    s3 = field_set(s3 & ~EDGETPU_SCU3_RO_MASK, EDGETPU_SCU3_RG_FORCE_RAM_SD_MASK,
                   EDGETPU_SCU3_RG_FORCE_RAM_SD_SHIFT, 3);
    r = scu_write(tpu, EDGETPU_SCU_CTRL_3, s3);
    if (r == 0)
        r = poll_reg(tpu, EDGETPU_SCU_CTRL_3, 4, EDGETPU_SCU3_CUR_GCB_SRAM_SD,
                     EDGETPU_SCU3_CUR_GCB_SRAM_SD);
    return r;
}

/* gasket apex_quit_reset: RAMs on, clock ungated (HW-controlled), reset released. */
static int gcb_quit_reset(struct npv_edgetpu *tpu)
{
    uint32_t s2 = 0, s3 = 0;
    int r = scu_read(tpu, EDGETPU_SCU_CTRL_3, &s3);
    if (r < 0)
        return r;
    s3 = field_set(s3 & ~EDGETPU_SCU3_RO_MASK, EDGETPU_SCU3_RG_FORCE_RAM_SD_MASK,
                   EDGETPU_SCU3_RG_FORCE_RAM_SD_SHIFT, 0);
    r = scu_write(tpu, EDGETPU_SCU_CTRL_3, s3);
    if (r == 0)
        r = scu_read(tpu, EDGETPU_SCU_CTRL_2, &s2);
    if (r < 0)
        return r;
    s2 = field_set(s2, EDGETPU_SCU2_RG_GATED_GCB_MASK, EDGETPU_SCU2_RG_GATED_GCB_SHIFT, 0);
    s2 = field_set(s2, EDGETPU_SCU2_RG_RST_GCB_MASK, EDGETPU_SCU2_RG_RST_GCB_SHIFT,
                   EDGETPU_RST_GCB_FORCE_NOT_RESET);
    r = scu_write(tpu, EDGETPU_SCU_CTRL_2, s2);
    if (r == 0)
        r = poll_reg(tpu, EDGETPU_SCU_CTRL_3, 4, EDGETPU_SCU3_CUR_GCB_SRAM_SD, 0);
    if (r == 0)
        r = poll_reg(tpu, EDGETPU_SCU_CTRL_3, 4, EDGETPU_SCU3_CUR_RST_GCB, 0);
    if (r == 0)
        r = scu_read(tpu, EDGETPU_SCU_CTRL_3, &s3);
    if (r < 0)
        return r;
    /* "inactive allowed, sleep disabled": gasket's default with allow_hw_clock_gating. */
    s3 = field_set(s3 & ~EDGETPU_SCU3_RO_MASK, EDGETPU_SCU3_RG_PWR_STATE_OVR_MASK,
                   EDGETPU_SCU3_RG_PWR_STATE_OVR_SHIFT, 2);
    return scu_write(tpu, EDGETPU_SCU_CTRL_3, s3);
}

/* gasket apex_reset, then the init flags its probe polls. */
static int gcb_reset(struct npv_edgetpu *tpu)
{
    uint32_t s2 = 0, s3 = 0;
    int r = scu_read(tpu, EDGETPU_SCU_CTRL_3, &s3);
    if (r == 0)
        r = scu_read(tpu, EDGETPU_SCU_CTRL_2, &s2);
    /*
     * A previous owner stopped half-way through gcb_enter_reset (killed, or
     * its close failed after forcing the reset): the read-only mirror in
     * SCU_CTRL_3 settles only after some reads, and while the GCB is held the
     * HIB answers no DMA-pause handshake. The forced reset or clock gate in
     * SCU_CTRL_2 says at once that the GCB is already held.
     */
    uint32_t rst = (s2 & EDGETPU_SCU2_RG_RST_GCB_MASK) >> EDGETPU_SCU2_RG_RST_GCB_SHIFT;
    bool held = (s3 & EDGETPU_SCU3_CUR_RST_GCB) || rst == EDGETPU_RST_GCB_FORCE_RESET ||
                (s2 & EDGETPU_SCU2_RG_GATED_GCB_MASK) != 0;
    if (r == 0 && !held)
        r = gcb_enter_reset(tpu);
    if (r == 0)
        r = gcb_quit_reset(tpu);
    if (r == 0)
        r = poll_nonzero(tpu, EDGETPU_KHIB_PAGE_TABLE_INIT);
    if (r == 0)
        r = poll_nonzero(tpu, EDGETPU_KHIB_MSIX_TABLE_INIT);
    return r;
}

static int program_intvecctl(struct npv_edgetpu *tpu)
{
    /* Vector i serves source i, as gasket programs it. */
    static const uint64_t unpacked[][2] = {
        {EDGETPU_KHIB_INSTR_QUEUE_INTVECCTL, EDGETPU_VEC_INSTR_QUEUE},
        {EDGETPU_KHIB_INPUT_ACTV_QUEUE_INTVECCTL, EDGETPU_VEC_INPUT_ACTV_QUEUE},
        {EDGETPU_KHIB_PARAM_QUEUE_INTVECCTL, EDGETPU_VEC_PARAM_QUEUE},
        {EDGETPU_KHIB_OUTPUT_ACTV_QUEUE_INTVECCTL, EDGETPU_VEC_OUTPUT_ACTV_QUEUE},
        {EDGETPU_KHIB_FATAL_ERR_INTVECCTL, EDGETPU_VEC_FATAL_ERR},
    };
    int r = 0;
    for (size_t i = 0; r == 0 && i < sizeof(unpacked) / sizeof(unpacked[0]); i++)
        r = edgetpu_write64(tpu, unpacked[i][0], unpacked[i][1]);
    uint64_t sc = 0, top = 0;
    for (unsigned f = 0; f < 4; f++) {
        sc |= (uint64_t)(EDGETPU_VEC_SC_HOST_0 + f) << (EDGETPU_INTVECCTL_FIELD_BITS * f);
        top |= (uint64_t)(EDGETPU_VEC_TOP_LEVEL_0 + f) << (EDGETPU_INTVECCTL_FIELD_BITS * f);
    }
    if (r == 0)
        r = edgetpu_write64(tpu, EDGETPU_KHIB_SC_HOST_INTVECCTL, sc);
    if (r == 0)
        r = edgetpu_write64(tpu, EDGETPU_KHIB_TOP_LEVEL_INTVECCTL, top);
    return r;
}

static int open_queue(struct npv_edgetpu *tpu)
{
    uint64_t v;
    int r = read64(tpu, EDGETPU_IQ_DESCRIPTOR_SIZE, &v);
    if (r < 0)
        return r;
    r = edgetpu_decode_desc_size(v);
    if (r < 0)
        return r;
    memset(npv_dma_vaddr(tpu->queue_dma), 0, QUEUE_BYTES);
    npv_dma_sync_for_device(tpu->queue_dma, 0, QUEUE_BYTES);
    /* The tail is not reset by the hardware; the engine starts at index 0. */
    r = edgetpu_write64(tpu, EDGETPU_IQ_TAIL, 0);
    /*
     * The chip's own addresses for its queue: device VAs in simple space
     * (libedgetpu host_queue.h Open: the mapped device addresses), never the
     * IOVAs behind them.
     */
    bool host = (tpu->cfg.test_hooks & NPV_EDGETPU_HOOK_HOST_ADDR_QUEUE) != 0;
    if (r == 0)
        r = edgetpu_write64(tpu, EDGETPU_IQ_BASE, host ? tpu->queue_iova : tpu->ring_va);
    if (r == 0)
        r = edgetpu_write64(tpu, EDGETPU_IQ_STATUS_BLOCK_BASE,
                            host ? tpu->queue_iova + EDGETPU_PAGE_SIZE : tpu->sb_va);
    if (r == 0)
        r = edgetpu_write64(tpu, EDGETPU_IQ_SIZE, tpu->cfg.queue_entries);
    if (r == 0)
        r = edgetpu_write64(tpu, EDGETPU_IQ_CONTROL,
                            EDGETPU_IQ_CONTROL_ENABLE | EDGETPU_IQ_CONTROL_SB_WR_ENABLE);
    if (r == 0)
        r = poll_reg(tpu, EDGETPU_IQ_STATUS, 8, 1, 1);
    return r;
}

static int run_cores(struct npv_edgetpu *tpu, uint64_t ctl)
{
    static const uint32_t sc_regs[] = {
        EDGETPU_SC_SCALAR_CORE_RUN_CONTROL, EDGETPU_SC_AV_DATA_POP_RUN_CONTROL,
        EDGETPU_SC_PARAMETER_POP_RUN_CONTROL, EDGETPU_SC_INFEED_RUN_CONTROL,
        EDGETPU_SC_OUTFEED_RUN_CONTROL};
    static const uint32_t tile_regs[] = {
        EDGETPU_TILE_OP_RUN_CONTROL,      EDGETPU_TILE_NARROW_TO_WIDE,
        EDGETPU_TILE_WIDE_TO_NARROW,      EDGETPU_TILE_MESH_BUS_0,
        EDGETPU_TILE_MESH_BUS_1,          EDGETPU_TILE_MESH_BUS_2,
        EDGETPU_TILE_MESH_BUS_3,          EDGETPU_TILE_RING_BUS_CONSUMER_0,
        EDGETPU_TILE_RING_BUS_CONSUMER_1, EDGETPU_TILE_RING_BUS_PRODUCER};
    int r = 0;
    for (size_t i = 0; r == 0 && i < sizeof(sc_regs) / sizeof(sc_regs[0]); i++)
        r = edgetpu_write64(tpu, sc_regs[i], ctl);
    if (r == 0)
        r = edgetpu_write64(tpu, EDGETPU_TILECONFIG0, EDGETPU_TILECONFIG_BROADCAST);
    /* "HW does not guarantee ordering of later tile writes with the previous write." */
    if (r == 0)
        r = poll_reg(tpu, EDGETPU_TILECONFIG0, 8, ~0ull, EDGETPU_TILECONFIG_BROADCAST);
    for (size_t i = 0; r == 0 && i < sizeof(tile_regs) / sizeof(tile_regs[0]); i++)
        r = edgetpu_write64(tpu, tile_regs[i], ctl);
    return r;
}

/*
 * MSI-X after the GCB left reset, and again after every reset: the vector
 * table does not survive one (gasket_core.c gasket_reset ->
 * gasket_interrupt_reinit: a full MSI-X disable and enable, then INTVECCTL).
 */
static int irq_setup(struct npv_edgetpu *tpu)
{
    if (tpu->cfg.test_hooks & NPV_EDGETPU_HOOK_MSIX_ONCE)
        return 0; /* the hook's deliberate bug: enabled once at open, before the reset */
    npv_irq_waitset_free(tpu->ws);
    tpu->ws = NULL;
    npv_irq_disable(tpu->irq);
    tpu->irq = NULL;
    int r = npv_irq_enable(tpu->dev, NPV_IRQ_MSIX, EDGETPU_MSIX_VECTORS, &tpu->irq);
    /* The stock stack will not run without its 13 MSI-X vectors; polling mode can. */
    if (r < 0) {
        tpu->irq = NULL;
        return tpu->cfg.completion == NPV_EDGETPU_POLL ? 0 : r;
    }
    r = npv_irq_waitset_new(tpu->ctx, 3, &tpu->ws);
    if (r == 0 && tpu->cfg.completion == NPV_EDGETPU_IRQ)
        r = npv_irq_waitset_add(tpu->ws, tpu->irq, EDGETPU_VEC_INSTR_QUEUE,
                                EDGETPU_VEC_INSTR_QUEUE);
    if (r == 0)
        r = npv_irq_waitset_add(tpu->ws, tpu->irq, EDGETPU_VEC_SC_HOST_0, EDGETPU_VEC_SC_HOST_0);
    if (r == 0)
        r = npv_irq_waitset_add(tpu->ws, tpu->irq, EDGETPU_VEC_FATAL_ERR, EDGETPU_VEC_FATAL_ERR);
    if (r < 0 && tpu->cfg.completion == NPV_EDGETPU_POLL) {
        npv_irq_waitset_free(tpu->ws);
        tpu->ws = NULL;
        r = 0;
    }
    return r;
}

/* Everything after a GCB reset exit, up to a running queue with interrupts on. */
static int chip_init(struct npv_edgetpu *tpu)
{
    uint64_t err;
    int r = irq_setup(tpu);
    if (r == 0)
        r = program_intvecctl(tpu);
    /*
     * gasket_page_table.c gasket_page_table_reset, at open and after every
     * reset (apex_driver.c): every slot zeroed, extended_table restored; then
     * libedgetpu's partition. The chip keeps its table across a reset.
     */
    if (r == 0 && !(tpu->cfg.test_hooks & NPV_EDGETPU_HOOK_KEEP_PAGE_TABLE))
        r = edgetpu_mmu_clear(tpu);
    if (r == 0)
        r = edgetpu_write64(tpu, EDGETPU_KHIB_EXTENDED_TABLE, tpu->cfg.simple_entries);
    if (r == 0)
        r = read64(tpu, EDGETPU_HIB_ERROR_STATUS, &err);
    if (r == 0)
        r = edgetpu_decode_bringup_error(err);
    if (r < 0)
        return r;
    r = edgetpu_write64(tpu, EDGETPU_DMA_BURST_LIMITER, 0);
    if (r == 0)
        r = edgetpu_mmu_program(tpu);
    if (r == 0)
        r = open_queue(tpu);
    uint64_t count = 0;
    if (r == 0)
        r = read64(tpu, EDGETPU_SC_HOST_INT_COUNT, &count);
    tpu->sc_host_base = (uint32_t)(count & 0xffff);
    tpu->sc_host_reaped = 0;
    if (r == 0)
        r = run_cores(tpu, EDGETPU_RUN_CONTROL_RUN);
    if (r == 0)
        r = edgetpu_write64(tpu, EDGETPU_STATUS_BLOCK_UPDATE, 0);
    if (r == 0)
        r = edgetpu_write64(tpu, EDGETPU_SC_HOST_INT_CONTROL, 0xf);
    if (r == 0)
        r = edgetpu_write64(tpu, EDGETPU_IQ_INT_CONTROL, 1);
    if (r == 0)
        r = edgetpu_write64(tpu, EDGETPU_FATAL_ERR_INT_CONTROL, 1);
    return r;
}

/* What the chip says about its error, read before a reset clears it. True if it reports one. */
static bool snapshot_error(struct npv_edgetpu *tpu)
{
    struct npv_edgetpu_error e = {0};
    const struct edgetpu_status_block *sb =
        (const void *)((uint8_t *)npv_dma_vaddr(tpu->queue_dma) + EDGETPU_PAGE_SIZE);
    npv_dma_sync_for_cpu(tpu->queue_dma, EDGETPU_PAGE_SIZE, sizeof(*sb));
    e.fatal_word = __atomic_load_n(&sb->fatal_error, __ATOMIC_ACQUIRE);
    if (read64(tpu, EDGETPU_HIB_ERROR_STATUS, &e.hib_error_status) < 0)
        e.hib_error_status = 0;
    (void)read64(tpu, EDGETPU_HIB_FIRST_ERROR_STATUS, &e.hib_first_error_status);
    (void)read64(tpu, EDGETPU_PAGE_FAULT_ADDRESS, &e.page_fault_address);
    (void)read64(tpu, EDGETPU_SC_ERROR_SCALAR_CORE, &e.scalar_core_error);
    if (!edgetpu_decode_error(&e))
        return false;
    tpu->last_error = e;
    return true;
}

static int recover(void *arg)
{
    struct npv_edgetpu *tpu = arg;
    bool chip_error = snapshot_error(tpu);
    edgetpu_reqs_at_reset(tpu, chip_error);
    /* The chip's memory does not keep cached parameters across a reset (libedgetpu driver.cc). */
    tpu->pc_token = 0;
    tpu->pc_epoch++;
    int r = gcb_reset(tpu);
    if (r == 0)
        r = chip_init(tpu);
    if (r == -ENODEV)
        tpu->gone = true;
    return r;
}

static int make_ring(struct npv_edgetpu *tpu)
{
    uint8_t *q = npv_dma_vaddr(tpu->queue_dma);
    struct npv_ring_config rc = {
        .entries = tpu->cfg.queue_entries,
        .desc_size = sizeof(struct edgetpu_desc),
        .desc_vaddr = q,
        .desc_iova = tpu->ring_va, /* the device's own addresses: simple space */
        .status_vaddr = q + EDGETPU_PAGE_SIZE,
        .status_iova = tpu->sb_va,
        .status_size = sizeof(struct edgetpu_status_block),
        .fields = {.head = offsetof(struct edgetpu_status_block, completed_head_pointer),
                   .error = offsetof(struct edgetpu_status_block, fatal_error),
                   .error_index = NPV_RING_NO_FIELD},
        .desc_dma = tpu->queue_dma,
        .status_dma = tpu->queue_dma,
        .db_bar = tpu->bar,
        .db_off = EDGETPU_IQ_TAIL,
        .db_width = (tpu->cfg.test_hooks & NPV_EDGETPU_HOOK_SPLIT_64) ? 4 : 8,
        .db_format = NPV_RING_DB_SLOT,
        .head_format = NPV_RING_HEAD_SLOT,
        .error_format = NPV_RING_ERROR_FATAL,
        /*
         * No interrupt: npv_edgetpu_wait sleeps on vectors 0, 4 and 12 itself
         * (the completion rule needs both signals), and MSI-X is set up again
         * after every reset.
         */
        .irq = NULL,
        /* A request's deadline: the ring fails it with -ETIMEDOUT and resets the chip. */
        .job_timeout_ns = tpu->cfg.request_timeout_ns,
        .reset = recover,
        .reset_arg = tpu,
    };
    int r = npv_ring_new(tpu->ctx, &rc, &tpu->ring);
    if (r < 0)
        return r;
    /* Its counters in lib/stats (stats.h): device "edgetpu:<device name>", queue "instr" (the
     * chip's one instruction queue). */
    char name[64];
    snprintf(name, sizeof(name), "edgetpu:%s", npv_dev_name(tpu->dev));
    npv_ring_set_name(tpu->ring, name, "instr");
    return 0;
}

/*
 * Every CSR is 64 bits wide and takes one 8-byte access (libedgetpu
 * driver/kernel/kernel_registers.cc KernelRegisters::Read/Write refuse any
 * offset not 8-aligned; split accesses give HIB errors: google-coral/edgetpu
 * issue #280, geerlingguy/raspberry-pi-pcie-devices issue #44). Where a page
 * is trapped through a kernel that splits 8-byte region accesses (vfio-pci
 * before its ioread64 support; the kernel-HIB page holds the MSI-X table, so
 * vfio-pci may refuse to mmap it), refuse rather than tear registers.
 */
static int check_whole64(struct npv_edgetpu *tpu)
{
    static const uint32_t pages[] = {EDGETPU_TILE_WINDOW, EDGETPU_SC_WINDOW, EDGETPU_UHIB_WINDOW,
                                     EDGETPU_KHIB_PAGE, EDGETPU_IDLE_REGISTER};
    int r = 0;
    for (size_t i = 0; r == 0 && i < sizeof(pages) / sizeof(pages[0]); i++)
        r = edgetpu_decode_whole64(npv_bar_whole64(tpu->bar, pages[i]));
    for (uint32_t off = 0; r == 0 && off < 8u * EDGETPU_PAGE_TABLE_ENTRIES;
         off += EDGETPU_PAGE_SIZE)
        r = edgetpu_decode_whole64(npv_bar_whole64(tpu->bar, EDGETPU_PAGE_TABLE + off));
    return r;
}

static int check_config(struct npv_edgetpu_config *c)
{
    if (c->queue_entries == 0)
        c->queue_entries = DEFAULT_ENTRIES;
    if (c->simple_entries == 0)
        c->simple_entries = DEFAULT_SIMPLE;
    if (c->max_instr_bytes == 0)
        c->max_instr_bytes = DEFAULT_INSTR;
    if (c->request_timeout_ns == 0)
        c->request_timeout_ns = DEFAULT_TIMEOUT;
    if (c->poll_timeout_ns == 0)
        c->poll_timeout_ns = DEFAULT_POLL_TIMEOUT;
    if (c->queue_entries < 4 || c->queue_entries > 256 ||
        (c->queue_entries & (c->queue_entries - 1)) || c->simple_entries < 256 ||
        c->simple_entries >= EDGETPU_PAGE_TABLE_ENTRIES ||
        c->max_instr_bytes % NPV_EDGETPU_INSN_SIZE || c->max_instr_bytes > NPV_EDGETPU_CHUNK_MAX ||
        (c->completion != NPV_EDGETPU_POLL && c->completion != NPV_EDGETPU_IRQ &&
         c->completion != NPV_EDGETPU_IRQ_SC_HOST))
        return -EINVAL;
    return 0;
}

static int alloc_queue_memory(struct npv_edgetpu *tpu)
{
    struct npv_dma_opts o = {.page = NPV_DMA_PAGE_4K, .numa_node = -1};
    int r = npv_dma_alloc(tpu->ctx, QUEUE_BYTES, &o, &tpu->queue_dma);
    if (r == 0)
        r = npv_dma_map(tpu->queue_dma, tpu->dom, NPV_DMA_RW, &tpu->queue_iova);
    if (r == 0 && tpu->queue_iova + QUEUE_BYTES > FOUR_GIB)
        r = -ERANGE;
    if (r < 0)
        return r;
    size_t bytes = (size_t)tpu->cfg.queue_entries * tpu->cfg.max_instr_bytes;
    r = npv_dma_alloc(tpu->ctx, bytes, NULL, &tpu->instr_dma);
    if (r == 0)
        r = npv_dma_map(tpu->instr_dma, tpu->dom, NPV_DMA_READ, NULL);
    return r;
}

static void free_memory(struct npv_edgetpu *tpu)
{
    if (tpu->instr_dma != NULL) {
        (void)npv_dma_unmap(tpu->instr_dma, tpu->dom);
        npv_dma_free(tpu->instr_dma);
    }
    edgetpu_mmu_fini(tpu);
    if (tpu->queue_dma != NULL) {
        (void)npv_dma_unmap(tpu->queue_dma, tpu->dom);
        npv_dma_free(tpu->queue_dma);
    }
    tpu->instr_dma = tpu->queue_dma = NULL;
}

int npv_edgetpu_open(struct npv_dev *dev, const struct npv_edgetpu_config *cfg,
                     struct npv_edgetpu **out)
{
    if (dev == NULL || out == NULL || npv_dev_domain(dev) == NULL)
        return -EINVAL;
    struct npv_edgetpu *tpu = calloc(1, sizeof(*tpu));
    if (tpu == NULL)
        return -ENOMEM;
    tpu->dev = dev;
    tpu->ctx = npv_dev_ctx(dev);
    tpu->dom = npv_dev_domain(dev);
    if (cfg != NULL)
        tpu->cfg = *cfg;
    int r = check_config(&tpu->cfg);
    if (r < 0)
        goto err_free;
    r = npv_bar_map(dev, EDGETPU_BAR_INDEX, &tpu->bar);
    if (r < 0)
        goto err_free;
    r = check_whole64(tpu);
    if (r < 0)
        goto err_bar;
    r = edgetpu_mmu_init(tpu);
    if (r < 0)
        goto err_bar;
    uint32_t ring_slot =
        tpu->cfg.simple_entries - 2 < RING_SLOT ? tpu->cfg.simple_entries - 2 : RING_SLOT;
    tpu->ring_va = (uint64_t)ring_slot << EDGETPU_PAGE_SHIFT;
    tpu->sb_va = tpu->ring_va + EDGETPU_PAGE_SIZE;
    tpu->reqs = calloc(tpu->cfg.queue_entries, sizeof(*tpu->reqs));
    r = tpu->reqs == NULL ? -ENOMEM : alloc_queue_memory(tpu);
    if (r < 0)
        goto err_mem;
    if (tpu->cfg.test_hooks & NPV_EDGETPU_HOOK_MSIX_ONCE) {
        /* The hook's deliberate bug: MSI-X before the GCB reset, never again. */
        r = npv_irq_enable(dev, NPV_IRQ_MSIX, EDGETPU_MSIX_VECTORS, &tpu->irq);
        if (r == 0)
            r = npv_irq_waitset_new(tpu->ctx, 3, &tpu->ws);
        for (uint32_t v = 0; r == 0 && v < EDGETPU_MSIX_VECTORS; v++)
            if (v == EDGETPU_VEC_INSTR_QUEUE || v == EDGETPU_VEC_SC_HOST_0 ||
                v == EDGETPU_VEC_FATAL_ERR)
                r = npv_irq_waitset_add(tpu->ws, tpu->irq, v, v);
        if (r < 0)
            goto err_irq;
    }
    r = gcb_reset(tpu);
    if (r == 0)
        r = chip_init(tpu);
    if (r < 0)
        goto err_irq;
    npv_iova_t instr_iova;
    r = npv_dma_iova(tpu->instr_dma, tpu->dom, &instr_iova);
    if (r == 0)
        r = edgetpu_map_iova(tpu, instr_iova, npv_dma_size(tpu->instr_dma), &tpu->instr_va);
    if (r == 0)
        r = make_ring(tpu);
    if (r < 0)
        goto err_reset;
    *out = tpu;
    return 0;

err_reset:
    (void)gcb_enter_reset(tpu);
err_irq:
    npv_irq_waitset_free(tpu->ws);
    npv_irq_disable(tpu->irq);
err_mem:
    free_memory(tpu);
err_bar:
    npv_bar_unmap(tpu->bar);
err_free:
    free(tpu->reqs);
    free(tpu);
    return r;
}

void npv_edgetpu_close(struct npv_edgetpu *tpu)
{
    if (tpu == NULL)
        return;
    /* libedgetpu close: pause DMA, halt, interrupts off, queue off; then gasket's power save. */
    if (!tpu->gone) {
        int r = edgetpu_write64(tpu, EDGETPU_UHIB_DMA_PAUSE, 1);
        if (r == 0)
            r = poll_reg(tpu, EDGETPU_UHIB_DMA_PAUSED, 8, 1, 1);
        if (r == 0)
            r = run_cores(tpu, EDGETPU_RUN_CONTROL_HALT);
        (void)edgetpu_write64(tpu, EDGETPU_FATAL_ERR_INT_CONTROL, 0);
        (void)edgetpu_write64(tpu, EDGETPU_IQ_INT_CONTROL, 0);
        (void)edgetpu_write64(tpu, EDGETPU_SC_HOST_INT_CONTROL, 0);
        if (edgetpu_write64(tpu, EDGETPU_IQ_CONTROL, 0) == 0 && r == 0)
            (void)poll_reg(tpu, EDGETPU_IQ_STATUS, 8, 1, 0);
        (void)edgetpu_write64(tpu, EDGETPU_IQ_TAIL, 0);
        (void)edgetpu_write64(tpu, EDGETPU_IQ_BASE, 0);
        (void)edgetpu_write64(tpu, EDGETPU_IQ_STATUS_BLOCK_BASE, 0);
        (void)gcb_enter_reset(tpu);
    }
    npv_ring_free(tpu->ring);
    npv_irq_waitset_free(tpu->ws);
    npv_irq_disable(tpu->irq);
    free_memory(tpu);
    npv_bar_unmap(tpu->bar);
    free(tpu->reqs);
    free(tpu);
}

int npv_edgetpu_reset(struct npv_edgetpu *tpu)
{
    if (tpu->gone)
        return -ENODEV;
    int r = npv_ring_reset(tpu->ring);
    return tpu->gone ? -ENODEV : r;
}

struct npv_dev *npv_edgetpu_dev(const struct npv_edgetpu *tpu)
{
    return tpu->dev;
}

void npv_edgetpu_last_error(const struct npv_edgetpu *tpu, struct npv_edgetpu_error *err)
{
    *err = tpu->last_error;
}

const char *npv_edgetpu_hib_error_name(unsigned bit)
{
    /* libedgetpu's HibError field names, in bit order (driver/config/common_csr_helper.h). */
    static const char *const names[] = {
        "inbound_page_fault",
        "extended_page_fault",
        "csr_parity_error",
        "axi_slave_b_error",
        "axi_slave_r_error",
        "instruction_queue_bad_configuration",
        "input_actv_queue_bad_configuration",
        "param_queue_bad_configuration",
        "output_actv_queue_bad_configuration",
        "instruction_queue_invalid",
        "input_actv_queue_invalid",
        "param_queue_invalid",
        "output_actv_queue_invalid",
        "length_0_dma",
        "virt_table_rdata_uncorr",
    };
    return bit < sizeof(names) / sizeof(names[0]) ? names[bit] : NULL;
}

void npv_edgetpu_layout(const struct npv_edgetpu *tpu, struct npv_edgetpu_layout *out)
{
    memset(out, 0, sizeof(*out));
    out->ring_iova = tpu->queue_iova;
    out->status_block_iova = tpu->queue_iova + EDGETPU_PAGE_SIZE;
    out->ring_va = tpu->ring_va;
    out->status_block_va = tpu->sb_va;
    for (uint32_t i = 0; i < tpu->nr_l0; i++) {
        if (tpu->l1[i].dma == NULL)
            continue;
        out->nr_l1_tables++;
        if (tpu->l1[i].iova > out->l1_iova_max)
            out->l1_iova_max = tpu->l1[i].iova;
    }
}
