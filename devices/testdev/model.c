/* SPDX-License-Identifier: MIT */
/*
 * The generic test device, as a vfio-user server: control registers trapped
 * in BAR0 page 0, a doorbell page shared with the client and polled by a
 * thread, descriptors and data read from the client's DMA memory, a status
 * block written back with completed_head stored last (release), MSI-X vector 0
 * per descriptor with TESTDEV_DESC_IRQ.
 *
 * The client's ring contents and register values are untrusted: every IOVA
 * goes through the server's mapping table (an unmapped one is a device fault,
 * as an IOMMU would make it), every length and index is bounded.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model.h"
#include "regs.h"

/* A copy bounded so one descriptor cannot keep the engine busy for long. */
#define TESTDEV_MAX_LEN (16u << 20)
/* An IOVA no client maps (top of the 64-bit space), for TESTDEV_FAULT_DMA_UNMAPPED. */
#define TESTDEV_WILD_IOVA 0xfffffffffff00000ull
/* Spin this long on an idle doorbell before napping. */
#define TESTDEV_SPIN_NS 1000000ll
#define TESTDEV_NAP_NS  50000l

struct npv_testdev_model {
    struct npv_vus *srv;
    volatile uint32_t *doorbell;

    /* Registers and engine state; the poller holds it while it works a batch. */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint32_t ctrl;
    uint32_t status;
    uint64_t ring_base;
    uint32_t ring_entries;
    uint64_t status_base;
    uint32_t fault_armed;
    bool fail_reset;
    bool hung;
    uint64_t fault_iova;
    uint64_t scratch;
    uint32_t last_width;
    uint32_t head;      /* descriptors consumed since enable */
    uint32_t completed; /* descriptors completed since enable */
    uint32_t err, err_index;
    uint64_t err_iova;

    pthread_t poller;
    bool poller_started;
    atomic_bool stop;
    atomic_bool running;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Stop fetching and forget the ring state (CTRL.RESET, DEVICE_RESET, disconnect). Under lock. */
static void engine_reset(struct npv_testdev_model *td)
{
    td->ctrl = 0;
    td->status = 0;
    td->ring_base = 0;
    td->ring_entries = 0;
    td->status_base = 0;
    td->fault_armed = TESTDEV_FAULT_NONE;
    td->hung = false;
    td->fault_iova = 0;
    td->head = td->completed = 0;
    td->err = td->err_index = 0;
    td->err_iova = 0;
    atomic_store(&td->running, false);
    __atomic_store_n(td->doorbell, 0, __ATOMIC_RELEASE);
}

static bool ring_valid(uint32_t entries)
{
    return entries >= 2 && entries <= 65536 && (entries & (entries - 1)) == 0;
}

static void engine_enable(struct npv_testdev_model *td)
{
    if (!ring_valid(td->ring_entries)) {
        td->status |= TESTDEV_STATUS_FAULT;
        td->err = TESTDEV_ERR_BAD_DESC;
        return;
    }
    td->head = td->completed = 0;
    td->err = td->err_index = 0;
    td->err_iova = 0;
    td->hung = false;
    td->status = TESTDEV_STATUS_RUNNING;
    __atomic_store_n(td->doorbell, 0, __ATOMIC_RELEASE);
    atomic_store(&td->running, true);
    pthread_cond_broadcast(&td->cond);
}

/* Write the status block: fields first, completed_head last with release order. */
static int write_status(struct npv_testdev_model *td, uint32_t head)
{
    struct npv_vus *srv = td->srv;
    void *p;
    int r;

    npv_vus_dma_begin(srv);
    r = npv_vus_dma_ptr(srv, td->status_base, sizeof(struct testdev_status), 2, &p);
    if (r == 0) {
        struct testdev_status *st = p;
        __atomic_store_n(&st->error, td->err, __ATOMIC_RELAXED);
        __atomic_store_n(&st->error_index, td->err_index, __ATOMIC_RELAXED);
        __atomic_store_n(&st->fault_iova, td->err_iova, __ATOMIC_RELAXED);
        __atomic_store_n(&st->completed_head, head, __ATOMIC_RELEASE);
    }
    npv_vus_dma_end(srv);
    if (r == -ENOTSUP) {
        /* A mapping without fd: message DMA, the fields in one write, head last. */
        struct testdev_status st = {
            .error = td->err, .error_index = td->err_index, .fault_iova = td->err_iova};
        r = npv_vus_dma_write(srv, td->status_base + 4, &st.error, 20);
        if (r == 0)
            r = npv_vus_dma_write(srv, td->status_base, &head, sizeof(head));
    }
    return r;
}

static void dma_fault(struct npv_testdev_model *td, uint64_t iova)
{
    td->status |= TESTDEV_STATUS_FAULT;
    td->status &= ~TESTDEV_STATUS_RUNNING;
    td->fault_iova = iova;
    atomic_store(&td->running, false);
}

/* Run one descriptor's DMA. Returns TESTDEV_ERR_*; *bad_iova names a refused address. */
static uint32_t execute(struct npv_testdev_model *td, const struct testdev_desc *d,
                        uint64_t *bad_iova)
{
    struct npv_vus *srv = td->srv;
    uint64_t src = d->src, dst = d->dst;
    int r;

    if (d->opcode == TESTDEV_OP_NOP)
        return TESTDEV_ERR_NONE;
    if ((d->opcode != TESTDEV_OP_COPY && d->opcode != TESTDEV_OP_FILL) || d->len == 0 ||
        d->len > TESTDEV_MAX_LEN)
        return TESTDEV_ERR_BAD_DESC;
    if (td->fault_armed == TESTDEV_FAULT_DMA_UNMAPPED) {
        td->fault_armed = TESTDEV_FAULT_NONE;
        dst = TESTDEV_WILD_IOVA;
    }
    void *s = NULL, *t = NULL;
    npv_vus_dma_begin(srv);
    r = npv_vus_dma_ptr(srv, dst, d->len, 2, &t);
    if (r == -EFAULT) {
        *bad_iova = dst;
    } else if (r == 0 && d->opcode == TESTDEV_OP_COPY) {
        r = npv_vus_dma_ptr(srv, src, d->len, 1, &s);
        if (r == -EFAULT)
            *bad_iova = src;
    }
    if (r == 0) {
        if (d->opcode == TESTDEV_OP_COPY)
            memmove(t, s, d->len);
        else
            memset(t, (int)(d->pattern & 0xff), d->len);
    }
    npv_vus_dma_end(srv);
    if (r == 0)
        return TESTDEV_ERR_NONE;
    if (r != -ENOTSUP)
        return TESTDEV_ERR_DMA;

    /* Message DMA (client memory without fd): bounce through a buffer. */
    uint8_t *buf = malloc(d->len);
    if (buf == NULL)
        return TESTDEV_ERR_DMA;
    if (d->opcode == TESTDEV_OP_COPY) {
        r = npv_vus_dma_read(srv, src, buf, d->len);
        if (r < 0)
            *bad_iova = src;
    } else {
        memset(buf, (int)(d->pattern & 0xff), d->len);
    }
    if (r == 0 || r == -ENOTSUP) {
        r = npv_vus_dma_write(srv, dst, buf, d->len);
        if (r < 0)
            *bad_iova = dst;
    }
    free(buf);
    return r == 0 ? TESTDEV_ERR_NONE : TESTDEV_ERR_DMA;
}

/* Work the ring up to the doorbell. Under lock. Returns whether anything was done. */
static bool process(struct npv_testdev_model *td)
{
    uint32_t tail = __atomic_load_n(td->doorbell, __ATOMIC_ACQUIRE);
    uint32_t avail = tail - td->head;
    bool irq = false;

    if (avail == 0 || td->hung)
        return false;
    /* A producer index more than a ring ahead names descriptors that do not exist. */
    if (avail > td->ring_entries) {
        td->err = TESTDEV_ERR_BAD_DESC;
        td->err_index = td->head;
        td->status |= TESTDEV_STATUS_FAULT;
        td->status &= ~TESTDEV_STATUS_RUNNING;
        atomic_store(&td->running, false);
        write_status(td, td->completed);
        return true;
    }
    while (td->head != tail && atomic_load(&td->running)) {
        uint32_t armed = td->fault_armed;
        if (armed == TESTDEV_FAULT_HANG) {
            td->fault_armed = TESTDEV_FAULT_NONE;
            td->hung = true;
            break;
        }
        if (armed == TESTDEV_FAULT_DISCONNECT) {
            td->fault_armed = TESTDEV_FAULT_NONE;
            npv_vus_disconnect(td->srv);
            break;
        }
        struct testdev_desc d;
        uint64_t slot = td->ring_base + (uint64_t)(td->head & (td->ring_entries - 1)) * sizeof(d);
        uint64_t bad = 0;
        uint32_t e;
        if (npv_vus_dma_read(td->srv, slot, &d, sizeof(d)) < 0) {
            e = TESTDEV_ERR_DMA;
            bad = slot;
            memset(&d, 0, sizeof(d));
        } else {
            e = execute(td, &d, &bad);
        }
        td->head++;
        td->completed++;
        if (e != TESTDEV_ERR_NONE) {
            td->err = e;
            td->err_index = td->head - 1;
            td->err_iova = bad;
            if (e == TESTDEV_ERR_DMA)
                dma_fault(td, bad);
            else
                td->status |= TESTDEV_STATUS_FAULT;
        }
        if (d.flags & TESTDEV_DESC_IRQ)
            irq = true;
        if (e != TESTDEV_ERR_NONE)
            break; /* the engine stops at the first failed descriptor */
    }
    uint32_t head = td->completed;
    if (td->fault_armed == TESTDEV_FAULT_WILD_HEAD) {
        td->fault_armed = TESTDEV_FAULT_NONE;
        head = tail + td->ring_entries + 7; /* beyond anything the driver submitted */
    }
    if (write_status(td, head) < 0)
        dma_fault(td, td->status_base);
    if (irq && (td->ctrl & TESTDEV_CTRL_IRQ_ENABLE))
        npv_vus_irq_raise(td->srv, 2 /* MSI-X */, 0);
    return true;
}

static void *poller_main(void *arg)
{
    struct npv_testdev_model *td = arg;
    int64_t idle_since = now_ns();

    pthread_mutex_lock(&td->lock);
    while (!atomic_load(&td->stop)) {
        if (!atomic_load(&td->running) || td->hung) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 10000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&td->cond, &td->lock, &ts);
            idle_since = now_ns();
            continue;
        }
        if (process(td)) {
            idle_since = now_ns();
            continue;
        }
        pthread_mutex_unlock(&td->lock);
        /* Spin first (a doorbell answered in ns), then nap so an idle model leaves the CPU. */
        if (now_ns() - idle_since < TESTDEV_SPIN_NS) {
            for (int i = 0; i < 64; i++)
                cpu_relax();
        } else {
            struct timespec nap = {.tv_sec = 0, .tv_nsec = TESTDEV_NAP_NS};
            nanosleep(&nap, NULL);
        }
        pthread_mutex_lock(&td->lock);
    }
    pthread_mutex_unlock(&td->lock);
    return NULL;
}

static int reg_access64(uint64_t *reg, uint64_t off, uint64_t base, void *buf, size_t len,
                        bool is_write)
{
    uint64_t v = 0;
    if (len == 8 && off == base) {
        if (is_write)
            memcpy(reg, buf, 8);
        else
            memcpy(buf, reg, 8);
        return 0;
    }
    if (len == 4 && (off == base || off == base + 4)) {
        unsigned shift = off == base ? 0 : 32;
        if (is_write) {
            uint32_t h;
            memcpy(&h, buf, 4);
            *reg = (*reg & ~(0xffffffffull << shift)) | ((uint64_t)h << shift);
        } else {
            v = *reg >> shift;
            uint32_t h = (uint32_t)v;
            memcpy(buf, &h, 4);
        }
        return 0;
    }
    return -EINVAL;
}

static int ctrl_write(struct npv_testdev_model *td, uint32_t v)
{
    if (v & TESTDEV_CTRL_RESET) {
        if (td->fail_reset) {
            td->fail_reset = false;
            td->status |= TESTDEV_STATUS_FAULT;
            return 0; /* the reset did not happen: the driver sees the device still as it was */
        }
        engine_reset(td);
        return 0;
    }
    uint32_t old = td->ctrl;
    td->ctrl = v & (TESTDEV_CTRL_ENABLE | TESTDEV_CTRL_IRQ_ENABLE);
    if ((td->ctrl & TESTDEV_CTRL_ENABLE) && !(old & TESTDEV_CTRL_ENABLE))
        engine_enable(td);
    else if (!(td->ctrl & TESTDEV_CTRL_ENABLE) && (old & TESTDEV_CTRL_ENABLE)) {
        atomic_store(&td->running, false);
        td->status &= ~TESTDEV_STATUS_RUNNING;
    }
    return 0;
}

static int regs_access(void *arg, uint32_t index, uint64_t off, void *buf, size_t len,
                       bool is_write)
{
    struct npv_testdev_model *td = arg;
    uint32_t v32 = 0;
    int r = 0;

    if (index != 0)
        return -EINVAL;
    if (off >= 0x1000) {
        if (!is_write)
            memset(buf, 0, len);
        return 0;
    }
    pthread_mutex_lock(&td->lock);
    switch (off & ~7ull) {
    case TESTDEV_REG_RING_BASE:
        r = reg_access64(&td->ring_base, off, TESTDEV_REG_RING_BASE, buf, len, is_write);
        goto out;
    case TESTDEV_REG_STATUS_BASE:
        r = reg_access64(&td->status_base, off, TESTDEV_REG_STATUS_BASE, buf, len, is_write);
        goto out;
    case TESTDEV_REG_SCRATCH64:
        r = reg_access64(&td->scratch, off, TESTDEV_REG_SCRATCH64, buf, len, is_write);
        if (r == 0)
            td->last_width = (uint32_t)len;
        goto out;
    case TESTDEV_REG_FAULT_IOVA:
        if (is_write)
            goto out; /* read-only */
        r = reg_access64(&td->fault_iova, off, TESTDEV_REG_FAULT_IOVA, buf, len, false);
        goto out;
    default:
        break;
    }
    if (len != 4 || (off & 3)) {
        r = -EINVAL; /* 32-bit registers take 32-bit accesses */
        goto out;
    }
    if (is_write) {
        memcpy(&v32, buf, 4);
        switch (off) {
        case TESTDEV_REG_CTRL:
            r = ctrl_write(td, v32);
            break;
        case TESTDEV_REG_RING_ENTRIES:
            td->ring_entries = v32;
            break;
        case TESTDEV_REG_FAULT_INJECT:
            if (v32 == TESTDEV_FAULT_FAIL_RESET)
                td->fail_reset = true;
            else if (v32 <= TESTDEV_FAULT_DISCONNECT)
                td->fault_armed = v32;
            break;
        default:
            break; /* read-only or unassigned: dropped */
        }
        goto out;
    }
    switch (off) {
    case TESTDEV_REG_ID:
        v32 = TESTDEV_ID_VALUE;
        break;
    case TESTDEV_REG_CTRL:
        v32 = td->ctrl;
        break;
    case TESTDEV_REG_STATUS:
        v32 = td->status;
        break;
    case TESTDEV_REG_DESC_SIZE:
        v32 = sizeof(struct testdev_desc);
        break;
    case TESTDEV_REG_RING_ENTRIES:
        v32 = td->ring_entries;
        break;
    case TESTDEV_REG_LAST_WIDTH:
        v32 = td->last_width;
        break;
    default:
        v32 = 0;
        break;
    }
    memcpy(buf, &v32, 4);
out:
    pthread_mutex_unlock(&td->lock);
    return r;
}

static int model_reset(void *arg)
{
    struct npv_testdev_model *td = arg;
    int r = 0;
    pthread_mutex_lock(&td->lock);
    if (td->fail_reset) {
        td->fail_reset = false;
        r = -EIO;
    } else {
        engine_reset(td);
    }
    pthread_mutex_unlock(&td->lock);
    return r;
}

static void model_disconnect(void *arg)
{
    struct npv_testdev_model *td = arg;
    /* The client's memory is gone: stop fetching, keep the registers. */
    pthread_mutex_lock(&td->lock);
    td->ctrl &= ~TESTDEV_CTRL_ENABLE;
    td->status &= ~TESTDEV_STATUS_RUNNING;
    atomic_store(&td->running, false);
    pthread_mutex_unlock(&td->lock);
}

int npv_testdev_model_new(struct npv_ctx *ctx, struct npv_testdev_model **out)
{
    struct npv_testdev_model *td = calloc(1, sizeof(*td));
    int r;
    if (td == NULL)
        return -ENOMEM;
    pthread_mutex_init(&td->lock, NULL);
    pthread_cond_init(&td->cond, NULL);
    atomic_init(&td->stop, false);
    atomic_init(&td->running, false);

    struct npv_vus_config cfg = {
        .vendor_id = TESTDEV_PCI_VENDOR,
        .device_id = TESTDEV_PCI_DEVICE,
        .subsys_vendor_id = TESTDEV_PCI_VENDOR,
        .subsys_id = TESTDEV_PCI_DEVICE,
        .class_code = TESTDEV_PCI_CLASS,
        .msix_vectors = TESTDEV_MSIX_VECTORS,
        .msix_bar = 0,
        .msix_table_offset = TESTDEV_MSIX_TABLE_OFFSET,
        .msix_pba_offset = TESTDEV_MSIX_PBA_OFFSET,
        .arg = td,
        .reset = model_reset,
        .disconnect = model_disconnect,
    };
    cfg.bars[0] = (struct npv_vus_region){
        .size = TESTDEV_BAR0_SIZE,
        .flags = NPV_VUS_REGION_READ | NPV_VUS_REGION_WRITE,
        .shared = true,
        .nr_areas = 1,
        .areas = {{.offset = TESTDEV_DOORBELL_PAGE, .size = 0x1000}},
        .access = regs_access,
    };
    r = npv_vus_new(ctx, &cfg, &td->srv);
    if (r < 0)
        goto err_free;
    td->doorbell =
        (volatile uint32_t *)((uint8_t *)npv_vus_region_mem(td->srv, 0) + TESTDEV_REG_DOORBELL);
    r = pthread_create(&td->poller, NULL, poller_main, td);
    if (r != 0) {
        r = -r;
        goto err_srv;
    }
    td->poller_started = true;
    *out = td;
    return 0;

err_srv:
    npv_vus_free(td->srv);
err_free:
    pthread_cond_destroy(&td->cond);
    pthread_mutex_destroy(&td->lock);
    free(td);
    return r;
}

void npv_testdev_model_free(struct npv_testdev_model *td)
{
    if (td == NULL)
        return;
    if (td->poller_started) {
        atomic_store(&td->stop, true);
        pthread_mutex_lock(&td->lock);
        pthread_cond_broadcast(&td->cond);
        pthread_mutex_unlock(&td->lock);
        pthread_join(td->poller, NULL);
    }
    npv_vus_free(td->srv);
    pthread_cond_destroy(&td->cond);
    pthread_mutex_destroy(&td->lock);
    free(td);
}

struct npv_vus *npv_testdev_model_server(struct npv_testdev_model *td)
{
    return td->srv;
}

int npv_testdev_serve(const char *socket_path, bool once)
{
    struct npv_ctx *ctx;
    struct npv_testdev_model *td;
    int r = npv_ctx_new(&ctx);
    if (r < 0)
        return r;
    r = npv_testdev_model_new(ctx, &td);
    if (r < 0)
        goto out_ctx;
    r = npv_vus_listen(td->srv, socket_path);
    if (r == 0)
        r = npv_vus_run(td->srv, once);
    npv_testdev_model_free(td);
out_ctx:
    npv_ctx_free(ctx);
    return r;
}
