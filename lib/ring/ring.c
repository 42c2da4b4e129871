/* SPDX-License-Identifier: MIT */
/*
 * The descriptor ring engine: slots in DMA memory, a doorbell, a status block
 * the device writes, bounded waits, and recovery from a hung or lying device.
 * The ordering rules are written down in include/npuvfio/ring.h.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/ring.h>

#include "ctx_internal.h"
#include "deadline.h"
#include "ring_inflight.h"

#define RING_DEFAULT_SPIN_NS 20000u
/*
 * Poll loops read the clock once per this many empty polls (power of two),
 * the first time only after that many: a completion that is already there,
 * or comes within them, costs no clock read.
 */
#define RING_CLOCK_EVERY 16u

struct npv_ring {
    struct npv_ctx *ctx;
    struct npv_ring_config cfg;
    struct npv_inflight *jobs;
    uint8_t *desc;
    uint32_t mask;
    /* Jobs that may be in flight: entries, or entries - 1 when a slot index would alias. */
    uint32_t capacity;
    /* Sequence number of the device's index 0 since its last (re)start. */
    uint32_t dev_base;
    /* Descriptors the device completed since its last (re)start (from its head). */
    uint32_t dev_head;
    /* Sequence number after the last descriptor the doorbell announced. */
    uint32_t rung;
    const volatile uint32_t *head_word;
    const volatile uint32_t *error_word;       /* NULL: the device has none */
    const volatile uint32_t *error_index_word; /* NULL: errors belong to the last completion */
    uint32_t last_error;
    bool dead;
    struct npv_ring_stats stats;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/*
 * Cache maintenance for DMA that is not coherent. x86 DMA always snoops the
 * CPU caches (the library clears No Snoop at open), so there is nothing to
 * do and the calls are left out of the hot path entirely.
 */
static inline void ring_sync_desc(struct npv_ring *r, uint32_t first_slot, uint32_t n)
{
#if defined(__aarch64__)
    if (r->cfg.desc_dma == NULL)
        return;
    size_t base = (size_t)((uint8_t *)r->desc - (uint8_t *)npv_dma_vaddr(r->cfg.desc_dma));
    size_t sz = r->cfg.desc_size;
    uint32_t entries = r->mask + 1;
    uint32_t first_run = entries - first_slot < n ? entries - first_slot : n;
    npv_dma_sync_for_device(r->cfg.desc_dma, base + first_slot * sz, first_run * sz);
    if (n > first_run)
        npv_dma_sync_for_device(r->cfg.desc_dma, base, (n - first_run) * sz);
#else
    (void)r;
    (void)first_slot;
    (void)n;
#endif
}

static inline void ring_sync_status(struct npv_ring *r)
{
#if defined(__aarch64__)
    if (r->cfg.status_dma == NULL)
        return;
    size_t off =
        (size_t)((uint8_t *)r->cfg.status_vaddr - (uint8_t *)npv_dma_vaddr(r->cfg.status_dma));
    npv_dma_sync_for_cpu(r->cfg.status_dma, off, r->cfg.status_size);
#else
    (void)r;
#endif
}

static bool field_ok(uint32_t off, uint32_t size)
{
    return off != NPV_RING_NO_FIELD && (off & 3) == 0 && size >= 4 && off <= size - 4;
}

static int ring_check_config(struct npv_ctx *ctx, const struct npv_ring_config *c)
{
    const char *why = NULL;
    if (c->entries < 2 || c->entries > 65536 || (c->entries & (c->entries - 1)))
        why = "entries must be a power of two in 2..65536";
    else if (c->desc_size == 0 || (c->desc_size & 3) || c->desc_size > 4096)
        why = "desc_size must be a multiple of 4, at most 4096";
    else if (c->desc_vaddr == NULL || c->status_vaddr == NULL)
        why = "ring memory and status block are required";
    else if (((uintptr_t)c->status_vaddr & 3) != 0)
        why = "the status block must be 4-byte aligned";
    else if (!field_ok(c->fields.head, c->status_size))
        why = "the head field must lie in the status block, 4-byte aligned";
    else if (c->fields.error != NPV_RING_NO_FIELD && !field_ok(c->fields.error, c->status_size))
        why = "the error field must lie in the status block, 4-byte aligned";
    else if (c->fields.error_index != NPV_RING_NO_FIELD &&
             (c->fields.error == NPV_RING_NO_FIELD ||
              !field_ok(c->fields.error_index, c->status_size)))
        why = "the error index field needs an error field and must lie in the status block";
    else if (c->db_bar == NULL || (c->db_width != 4 && c->db_width != 8))
        why = "a doorbell bar and a width of 4 or 8 are required";
    else if (c->db_off > c->db_bar->size || c->db_width > c->db_bar->size - c->db_off)
        why = "the doorbell lies outside its bar";
    else if (c->db_format != NPV_RING_DB_INDEX && c->db_format != NPV_RING_DB_SLOT)
        why = "unknown doorbell format";
    else if (c->head_format != NPV_RING_HEAD_COUNT && c->head_format != NPV_RING_HEAD_SLOT)
        why = "unknown head format";
    else if (c->error_format != NPV_RING_ERROR_PER_JOB && c->error_format != NPV_RING_ERROR_FATAL)
        why = "unknown error format";
    else if (c->error_format == NPV_RING_ERROR_FATAL &&
             (c->fields.error == NPV_RING_NO_FIELD || c->fields.error_index != NPV_RING_NO_FIELD))
        why = "a fatal error format needs an error field and no error index";
    else if (c->reset == NULL)
        why = "a reset callback is required";
    if (why == NULL)
        return 0;
    npv_err(ctx, "ring: bad config: %s", why);
    return -EINVAL;
}

static volatile uint32_t *status_word(const struct npv_ring_config *c, uint32_t off)
{
    return (volatile uint32_t *)((uint8_t *)c->status_vaddr + off);
}

/* The device restarts at index 0 with an empty status block. */
static void ring_restart_indexes(struct npv_ring *r)
{
    r->dev_base = r->jobs->tail;
    r->dev_head = 0;
    r->rung = r->dev_base;
    r->last_error = 0;
    __atomic_store_n(status_word(&r->cfg, r->cfg.fields.head), 0, __ATOMIC_RELAXED);
    if (r->error_word != NULL)
        __atomic_store_n(status_word(&r->cfg, r->cfg.fields.error), 0, __ATOMIC_RELAXED);
    if (r->error_index_word != NULL)
        __atomic_store_n(status_word(&r->cfg, r->cfg.fields.error_index), 0, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

int npv_ring_new(struct npv_ctx *ctx, const struct npv_ring_config *cfg, struct npv_ring **out)
{
    if (cfg == NULL || out == NULL)
        return -EINVAL;
    int rc = ring_check_config(ctx, cfg);
    if (rc < 0)
        return rc;
    struct npv_ring *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return -ENOMEM;
    rc = npv_inflight_new(ctx, cfg->entries, &r->jobs);
    if (rc < 0)
        goto err_ring;
    r->ctx = ctx;
    r->cfg = *cfg;
    if (r->cfg.spin_ns == 0)
        r->cfg.spin_ns = RING_DEFAULT_SPIN_NS;
    r->desc = cfg->desc_vaddr;
    r->mask = cfg->entries - 1;
    /*
     * A masked head or a slot doorbell cannot tell a full ring from an empty
     * one: one slot stays free.
     */
    r->capacity = cfg->head_format == NPV_RING_HEAD_SLOT || cfg->db_format == NPV_RING_DB_SLOT
                      ? cfg->entries - 1
                      : cfg->entries;
    r->head_word = status_word(cfg, cfg->fields.head);
    if (cfg->fields.error != NPV_RING_NO_FIELD)
        r->error_word = status_word(cfg, cfg->fields.error);
    if (cfg->fields.error_index != NPV_RING_NO_FIELD)
        r->error_index_word = status_word(cfg, cfg->fields.error_index);
    ring_restart_indexes(r);
    *out = r;
    return 0;

err_ring:
    free(r);
    return rc;
}

void npv_ring_free(struct npv_ring *r)
{
    if (r == NULL)
        return;
    npv_inflight_free(r->jobs);
    free(r);
}

/* Fan out the failure, reset the device, restart the indexes. */
static int ring_recover(struct npv_ring *r, int32_t cause)
{
    uint32_t failed = npv_inflight_fail_all(r->jobs, cause, -ECANCELED);
    r->stats.resets++;
    int rc = r->cfg.reset(r->cfg.reset_arg);
    ring_restart_indexes(r);
    if (rc < 0) {
        r->dead = true;
        npv_err(r->ctx, "ring: device reset failed (%s); ring is dead until npv_ring_reset",
                npv_strerror(rc));
        return rc;
    }
    r->dead = false;
    npv_info(r->ctx, "ring: device reset after %s; %u jobs failed", npv_strerror(cause), failed);
    return 0;
}

/*
 * A sticky fatal word: the jobs the head names as done are done; the oldest
 * other one failed with the word, the rest are cancelled, the device is reset.
 */
static void ring_fatal(struct npv_ring *r, uint32_t word)
{
    uint32_t first = r->jobs->done;
    bool any = inflight_unfinished(r->jobs) > 0;
    npv_err(r->ctx, "ring: device reports fatal error 0x%x", word);
    r->stats.dev_errors++;
    (void)ring_recover(r, -EIO);
    if (any)
        r->jobs->slots[first & r->jobs->mask].dev_error = word;
}

int npv_ring_reset(struct npv_ring *r)
{
    return ring_recover(r, -ECANCELED);
}

int npv_ring_next(struct npv_ring *r, uint64_t cookie, void **desc)
{
    if (r->dead)
        return -EIO;
    if (inflight_unfinished(r->jobs) >= r->capacity)
        return -EAGAIN;
    uint32_t seq;
    int rc = inflight_add(r->jobs, cookie, 0, &seq);
    if (rc < 0)
        return rc;
    *desc = r->desc + (size_t)((seq - r->dev_base) & r->mask) * r->cfg.desc_size;
    return 0;
}

int npv_ring_push(struct npv_ring *r, const void *desc, uint64_t cookie)
{
    void *slot;
    int rc = npv_ring_next(r, cookie, &slot);
    if (rc < 0)
        return rc;
    memcpy(slot, desc, r->cfg.desc_size);
    return 0;
}

int npv_ring_submit(struct npv_ring *r)
{
    uint32_t tail = r->jobs->tail;
    uint32_t n = tail - r->rung;
    if (n == 0 || r->dead)
        return 0;
    ring_sync_desc(r, (r->rung - r->dev_base) & r->mask, n);
    uint32_t idx = tail - r->dev_base;
    uint64_t val = r->cfg.db_format == NPV_RING_DB_SLOT ? (idx & r->mask) : idx;
    if (r->cfg.db_width == 8)
        npv_bar_write64_release(r->cfg.db_bar, r->cfg.db_off, val);
    else
        npv_bar_write32_release(r->cfg.db_bar, r->cfg.db_off, (uint32_t)val);
    r->rung = tail;
    r->stats.submitted += n;
    r->stats.doorbells++;
    return (int)n;
}

/* The device's error word, if it names a job in [first, first + n). */
static void ring_take_error(struct npv_ring *r, uint32_t old_head, uint32_t n)
{
    uint32_t err = __atomic_load_n(r->error_word, __ATOMIC_RELAXED);
    uint32_t idx;
    if (r->error_index_word != NULL) {
        if (err == 0)
            return;
        idx = __atomic_load_n(r->error_index_word, __ATOMIC_RELAXED);
    } else {
        /* Without an index a device's error word is news only when it changes. */
        if (err == r->last_error)
            return;
        r->last_error = err;
        if (err == 0)
            return;
        idx = old_head + n - 1;
    }
    /* A stale or wild index names no job of this batch: it is ignored, never used to index. */
    if (idx - old_head >= n)
        return;
    npv_inflight_set_status(r->jobs, r->dev_base + idx, -EIO, err);
    r->stats.dev_errors++;
}

/*
 * Read the status block and finish what the device completed. 0, or
 * -NPV_EDEVFAULT after recovering from an impossible head.
 */
static int ring_collect(struct npv_ring *r)
{
    if (r->dead)
        return 0;
    ring_sync_status(r);
    uint32_t head = __atomic_load_n(r->head_word, __ATOMIC_ACQUIRE);
    uint32_t n = head - r->dev_head;
    bool wild = false;
    if (r->cfg.head_format == NPV_RING_HEAD_SLOT) {
        wild = head > r->mask;
        n = (head - r->dev_head) & r->mask;
    }
    uint32_t fatal = 0;
    if (r->cfg.error_format == NPV_RING_ERROR_FATAL)
        fatal = __atomic_load_n(r->error_word, __ATOMIC_RELAXED);
    if (n == 0 && !wild && fatal == 0)
        return 0;
    uint32_t announced = r->rung - r->dev_base - r->dev_head;
    if (wild || n > announced) {
        r->stats.faults++;
        npv_err(r->ctx,
                "ring: device wrote completed head %u, outside (%u, %u]; treating as a device "
                "fault",
                head, r->dev_head, r->rung - r->dev_base);
        int rc = ring_recover(r, -NPV_EDEVFAULT);
        (void)rc;
        return -NPV_EDEVFAULT;
    }
    if (r->error_word != NULL && r->cfg.error_format == NPV_RING_ERROR_PER_JOB)
        ring_take_error(r, r->dev_head, n);
    r->dev_head += n;
    inflight_complete(r->jobs, r->dev_base + r->dev_head);
    r->stats.completed += n;
    if (fatal != 0)
        ring_fatal(r, fatal);
    return 0;
}

int npv_ring_poll(struct npv_ring *r, struct npv_cpl *cpl, unsigned max)
{
    int rc = ring_collect(r);
    if (rc < 0)
        return rc;
    return (int)inflight_reap(r->jobs, cpl, max);
}

static int ring_timed_out(struct npv_ring *r)
{
    r->stats.timeouts++;
    npv_warn(r->ctx, "ring: deadline passed with %u jobs in flight (device head %u, doorbell %u)",
             npv_inflight_unfinished(r->jobs), r->dev_head, r->rung - r->dev_base);
    ring_recover(r, -ETIMEDOUT);
    return -ETIMEDOUT;
}

static int ring_wait_irq(struct npv_ring *r, unsigned min, uint64_t deadline)
{
    for (;;) {
        int rc = ring_collect(r);
        if (rc < 0)
            return rc;
        if (inflight_unreaped(r->jobs) >= min)
            return 0;
        uint64_t now = npv_now_ns();
        if (now >= deadline)
            return ring_timed_out(r);
        /* The eventfd counts interrupts raised since the last read: none is lost in between. */
        r->stats.irq_sleeps++;
        int64_t w = npv_irq_wait(r->cfg.irq, r->cfg.irq_vec, deadline - now);
        if (w < 0 && w != -ETIMEDOUT)
            return (int)w;
    }
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

/*
 * Spin until min completions are collected, or until span nanoseconds after
 * *start. *start 0: the clock is first read after RING_CLOCK_EVERY polls and
 * that reading becomes *start (so a bound counts from at most that many polls
 * after the call). *reached: the time ran out first.
 */
static int ring_spin(struct npv_ring *r, unsigned min, uint64_t span, uint64_t *start,
                     bool *reached)
{
    uint64_t until = *start != 0 ? add_sat(*start, span) : 0;
    *reached = false;
    for (uint32_t i = 1;; i++) {
        int rc = ring_collect(r);
        if (rc < 0)
            return rc;
        if (inflight_unreaped(r->jobs) >= min)
            return 0;
        if ((i & (RING_CLOCK_EVERY - 1)) == 0) {
            uint64_t now = npv_now_ns();
            if (*start == 0) {
                *start = now;
                until = add_sat(now, span);
            } else if (now >= until) {
                /* One last look: the deadline may have passed while the device finished. */
                rc = ring_collect(r);
                if (rc < 0)
                    return rc;
                if (inflight_unreaped(r->jobs) < min)
                    *reached = true;
                return 0;
            }
        }
        cpu_relax();
    }
}

int npv_ring_wait(struct npv_ring *r, enum npv_ring_wait_mode mode, unsigned min,
                  uint64_t timeout_ns, struct npv_cpl *cpl, unsigned max)
{
    if (min == 0 || min > max)
        return -EINVAL;
    if (mode != NPV_RING_WAIT_POLL && (mode > NPV_RING_WAIT_HYBRID || r->cfg.irq == NULL))
        return -EINVAL;
    if (inflight_unreaped(r->jobs) < min) {
        if (inflight_unfinished(r->jobs) + inflight_unreaped(r->jobs) < min)
            return -EINVAL;
        uint64_t start = 0;
        int rc;
        bool reached;
        switch (mode) {
        case NPV_RING_WAIT_POLL:
            rc = ring_spin(r, min, timeout_ns, &start, &reached);
            if (rc == 0 && reached)
                rc = ring_timed_out(r);
            break;
        case NPV_RING_WAIT_HYBRID: {
            uint64_t span = timeout_ns < r->cfg.spin_ns ? timeout_ns : r->cfg.spin_ns;
            rc = ring_spin(r, min, span, &start, &reached);
            if (rc == 0 && reached)
                rc = ring_wait_irq(r, min, add_sat(start, timeout_ns));
            break;
        }
        default:
            rc = ring_wait_irq(r, min, npv_deadline_after(timeout_ns));
            break;
        }
        if (rc < 0)
            return rc;
    }
    return (int)inflight_reap(r->jobs, cpl, max);
}

void npv_ring_stats(const struct npv_ring *r, struct npv_ring_stats *st)
{
    *st = r->stats;
}

uint32_t npv_ring_entries(const struct npv_ring *r)
{
    return r->mask + 1;
}

uint32_t npv_ring_capacity(const struct npv_ring *r)
{
    return r->capacity;
}

uint32_t npv_ring_in_flight(const struct npv_ring *r)
{
    return npv_inflight_unfinished(r->jobs);
}

int npv_ring_dead(const struct npv_ring *r)
{
    return r->dead;
}
