/* SPDX-License-Identifier: MIT */
/*
 * The descriptor ring engine: slots in DMA memory, a doorbell, a status block
 * the device writes, bounded waits, and recovery from a hung or lying device.
 * The ordering rules are written down in include/npuvfio/ring.h.
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <npuvfio/ring.h>

#include "ctx_internal.h"
#include "deadline.h"
#include "dev_internal.h"
#include "failpoint_internal.h"
#include "irq_internal.h"
#include "ring_inflight.h"
#include "ring_internal.h"
#include "trace.h"

#define RING_DEFAULT_SPIN_NS 20000u
/*
 * Poll loops read the clock once per this many empty polls (power of two),
 * the first time only after that many: a completion that is already there,
 * or comes within them, costs no clock read.
 */
#define RING_CLOCK_EVERY NPV_RING_CLOCK_EVERY
static_assert((RING_CLOCK_EVERY & (RING_CLOCK_EVERY - 1)) == 0, "a power of two");

struct npv_ring {
    struct npv_ctx *ctx;
    struct npv_ring_config cfg;
    struct npv_inflight *jobs;
    uint8_t *desc;
    uint32_t mask;
    uint32_t prefetch_slots;
    /* Jobs that may be claimed and not yet reaped (entries, or entries - 1). */
    uint32_t capacity;
    bool slot_head;
    bool fatal_word;
    /* Each job's deadline relative to its claim; UINT64_MAX: none. */
    uint64_t job_timeout_ns;
    /* npv_ring_poll calls since the clock was last read. */
    uint32_t polls;
    /* Sequence number of the device's index 0 since its last (re)start. */
    uint32_t dev_base;
    /* The last completed head the device wrote, as it wrote it. */
    uint32_t dev_head;
    /* Sequence number after the last descriptor the doorbell announced. */
    uint32_t rung;
    const volatile uint32_t *head_word;
    volatile uint32_t *error_word;             /* NULL: the device has none */
    const volatile uint32_t *error_index_word; /* NULL: errors belong to the last completion */
    int irq_fd;                                /* -1: no interrupt waits */
    volatile uint32_t *irq_wanted;             /* NULL: the device always interrupts */
    struct npv_dma *irq_wanted_dma;
    /* Completions were collected since the eventfd was last read: it may hold their count. */
    bool irq_unread;
    /* npv_ring_completion_fd was called: the interrupt-wanted word stays 1 between calls. */
    bool fd_mode;
    bool dead;
    const struct npv_ring_sync_hook *sync_hook; /* tests only */
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
 * do and the calls are left out of the hot path entirely; only a test's
 * recording hook sees them there.
 */
static inline void ring_sync_for_device(struct npv_ring *r, struct npv_dma *dma, size_t off,
                                        size_t len)
{
    if (dma == NULL)
        return;
    if (__builtin_expect(r->sync_hook != NULL, 0)) {
        r->sync_hook->for_device(r->sync_hook->arg, dma, off, len);
        return;
    }
#if defined(__aarch64__)
    npv_dma_sync_for_device(dma, off, len);
#endif
}

static inline void ring_sync_for_cpu(struct npv_ring *r, struct npv_dma *dma, size_t off,
                                     size_t len)
{
    if (dma == NULL)
        return;
    if (__builtin_expect(r->sync_hook != NULL, 0)) {
        r->sync_hook->for_cpu(r->sync_hook->arg, dma, off, len);
        return;
    }
#if defined(__aarch64__)
    npv_dma_sync_for_cpu(dma, off, len);
#endif
}

static size_t offset_in(struct npv_dma *dma, const void *p)
{
    return (size_t)((const uint8_t *)p - (const uint8_t *)npv_dma_vaddr(dma));
}

static inline void ring_sync_desc(struct npv_ring *r, uint32_t first_slot, uint32_t n)
{
#if !defined(__aarch64__)
    if (__builtin_expect(r->sync_hook == NULL, 1))
        return;
#endif
    if (r->cfg.desc_dma == NULL)
        return;
    size_t base = offset_in(r->cfg.desc_dma, r->desc);
    size_t sz = r->cfg.desc_size;
    uint32_t entries = r->mask + 1;
    uint32_t first_run = entries - first_slot < n ? entries - first_slot : n;
    ring_sync_for_device(r, r->cfg.desc_dma, base + first_slot * sz, first_run * sz);
    if (n > first_run)
        ring_sync_for_device(r, r->cfg.desc_dma, base, (n - first_run) * sz);
}

static inline void ring_sync_status_for_cpu(struct npv_ring *r)
{
#if !defined(__aarch64__)
    if (__builtin_expect(r->sync_hook == NULL, 1))
        return;
#endif
    if (r->cfg.status_dma == NULL)
        return;
    ring_sync_for_cpu(r, r->cfg.status_dma, offset_in(r->cfg.status_dma, r->cfg.status_vaddr),
                      r->cfg.status_size);
}

/* Clean CPU stores to [p, p + len) of the status block out to the point of coherency. */
static void ring_clean_status(struct npv_ring *r, const volatile void *p, size_t len)
{
    if (r->cfg.status_dma == NULL)
        return;
    ring_sync_for_device(r, r->cfg.status_dma, offset_in(r->cfg.status_dma, (const void *)p), len);
}

void npv_ring_set_sync_hook(struct npv_ring *r, const struct npv_ring_sync_hook *hook)
{
    r->sync_hook = hook;
}

static bool field_ok(uint32_t off, uint32_t size)
{
    return off != NPV_RING_NO_FIELD && (off & 3) == 0 && size >= 4 && off <= size - 4;
}

/* Whether two byte ranges touch a common NPV_RING_CACHE_GRANULE-sized granule. */
static bool share_granule(uintptr_t a, size_t alen, uintptr_t b, size_t blen)
{
    const uintptr_t g = NPV_RING_CACHE_GRANULE;
    uintptr_t a_lo = a & ~(g - 1), a_hi = (a + alen + g - 1) & ~(g - 1);
    uintptr_t b_lo = b & ~(g - 1), b_hi = (b + blen + g - 1) & ~(g - 1);
    return a_lo < b_hi && b_lo < a_hi;
}

static const char *ring_config_fault(const struct npv_ring_config *c)
{
    if (c->entries < 2 || c->entries > 65536 || (c->entries & (c->entries - 1)))
        return "entries must be a power of two in 2..65536";
    if (c->desc_size == 0 || (c->desc_size & 3) || c->desc_size > 4096)
        return "desc_size must be a multiple of 4, at most 4096";
    if (c->desc_vaddr == NULL || c->status_vaddr == NULL)
        return "ring memory and status block are required";
    if (((uintptr_t)c->status_vaddr & 3) != 0)
        return "the status block must be 4-byte aligned";
    if (share_granule((uintptr_t)c->desc_vaddr, (size_t)c->entries * c->desc_size,
                      (uintptr_t)c->status_vaddr, c->status_size))
        return "the status block shares a 128-byte cache granule with the descriptors";
    if (!field_ok(c->fields.head, c->status_size))
        return "the head field must lie in the status block, 4-byte aligned";
    if (c->fields.error != NPV_RING_NO_FIELD && !field_ok(c->fields.error, c->status_size))
        return "the error field must lie in the status block, 4-byte aligned";
    if (c->fields.error_index != NPV_RING_NO_FIELD &&
        (c->fields.error == NPV_RING_NO_FIELD || !field_ok(c->fields.error_index, c->status_size)))
        return "the error index field needs an error field and must lie in the status block";
    if (c->head_format != NPV_RING_HEAD_COUNT && c->head_format != NPV_RING_HEAD_SLOT)
        return "unknown head format";
    if (c->error_format != NPV_RING_ERROR_PER_JOB && c->error_format != NPV_RING_ERROR_FATAL)
        return "unknown error format";
    /* A masked index cannot be told stale: an old one would name a job a lap later. */
    if (c->head_format == NPV_RING_HEAD_SLOT && c->fields.error_index != NPV_RING_NO_FIELD)
        return "a masked head takes no error index (use a per-job word without index, or fatal)";
    if (c->error_format == NPV_RING_ERROR_FATAL &&
        (c->fields.error == NPV_RING_NO_FIELD || c->fields.error_index != NPV_RING_NO_FIELD))
        return "a fatal error word needs an error field and no error index";
    if (c->db_bar == NULL || (c->db_width != 4 && c->db_width != 8))
        return "a doorbell bar and a width of 4 or 8 are required";
    if (c->db_off > c->db_bar->size || c->db_width > c->db_bar->size - c->db_off)
        return "the doorbell lies outside its bar";
    if (c->db_format != NPV_RING_DB_INDEX && c->db_format != NPV_RING_DB_SLOT)
        return "unknown doorbell format";
    if (c->reset == NULL)
        return "a reset callback is required";
    return NULL;
}

static volatile uint32_t *status_word(const struct npv_ring_config *c, uint32_t off)
{
    return (volatile uint32_t *)((uint8_t *)c->status_vaddr + off);
}

/*
 * Before the device is enabled: an empty status block, cleaned to the point
 * of coherency. On non-coherent DMA a CPU store left dirty in the cache
 * would be written back by the next clean+invalidate of the block, over
 * whatever the device wrote in between (its first completion).
 */
static void ring_clear_status(struct npv_ring *r)
{
    volatile uint8_t *p = r->cfg.status_vaddr;
    for (uint32_t i = 0; i < r->cfg.status_size; i += 4)
        __atomic_store_n((volatile uint32_t *)(p + i), 0, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    ring_clean_status(r, p, r->cfg.status_size);
}

/* The device restarts at index 0 (its status block was cleared before it was enabled). */
static void ring_restart_indexes(struct npv_ring *r)
{
    r->dev_base = r->jobs->tail;
    r->dev_head = 0;
    r->rung = r->dev_base;
}

int npv_ring_new(struct npv_ctx *ctx, const struct npv_ring_config *cfg, struct npv_ring **out)
{
    if (cfg == NULL || out == NULL)
        return -EINVAL;
    const char *why = ring_config_fault(cfg);
    if (why != NULL) {
        npv_err(ctx, "ring: bad config: %s", why);
        return -EINVAL;
    }
    struct npv_ring *r = npv_fp_calloc(ctx, 1, sizeof(*r));
    if (r == NULL)
        return -ENOMEM;
    int rc = npv_inflight_new(ctx, cfg->entries, &r->jobs);
    if (rc < 0)
        goto err_ring;
    r->ctx = ctx;
    r->cfg = *cfg;
    if (r->cfg.spin_ns == 0)
        r->cfg.spin_ns = RING_DEFAULT_SPIN_NS;
    r->job_timeout_ns =
        cfg->job_timeout_ns != 0 ? cfg->job_timeout_ns : NPV_RING_DEFAULT_JOB_TIMEOUT_NS;
    r->desc = cfg->desc_vaddr;
    r->mask = cfg->entries - 1;
    r->prefetch_slots = cfg->desc_size >= 128 ? 1 : 128 / cfg->desc_size;
    r->slot_head = cfg->head_format == NPV_RING_HEAD_SLOT;
    /* A slot-valued index cannot tell entries descriptors from none: keep one free. */
    r->capacity =
        r->slot_head || cfg->db_format == NPV_RING_DB_SLOT ? cfg->entries - 1 : cfg->entries;
    r->fatal_word = cfg->error_format == NPV_RING_ERROR_FATAL;
    r->head_word = status_word(cfg, cfg->fields.head);
    if (cfg->fields.error != NPV_RING_NO_FIELD)
        r->error_word = status_word(cfg, cfg->fields.error);
    if (cfg->fields.error_index != NPV_RING_NO_FIELD)
        r->error_index_word = status_word(cfg, cfg->fields.error_index);
    r->irq_fd = cfg->irq != NULL ? npv_irq_fd(cfg->irq, cfg->irq_vec) : -1;
    ring_clear_status(r);
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

/* The jobs are already failed: clear the status block, reset the device, restart the indexes. */
static int ring_reset_device(struct npv_ring *r, int32_t cause, uint32_t failed)
{
    r->stats.resets++;
    npv_stat_add(&r->jobs->stats.resets, 1);
    ring_clear_status(r);
    int rc = r->cfg.reset(r->cfg.reset_arg);
    /*
     * And again now that the callback has stopped the device: a write it made
     * between the first clear and the stop (a head, an error word) would
     * otherwise survive the reset and be read against the restarted indexes
     * (a job reported done before the device saw it, or a spurious fault).
     * The contract (ring.h, reset): when the callback returns, nothing the
     * device wrote before it is still on its way, and the restarted device
     * writes nothing to the block before the next doorbell; so this store
     * races nothing, and on non-coherent DMA it is cleaned before that
     * doorbell as the first one is before the enable.
     */
    ring_clear_status(r);
    ring_restart_indexes(r);
    NPV_TRACE4(ring_reset, r, cause, failed, rc);
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

/* Fan out the failure (the oldest job gets the cause), then reset. */
static int ring_recover(struct npv_ring *r, int32_t cause, uint32_t dev_error)
{
    uint32_t failed = inflight_fail_all(r->jobs, cause, dev_error, -ECANCELED);
    return ring_reset_device(r, cause, failed);
}

int npv_ring_reset(struct npv_ring *r)
{
    return ring_recover(r, -ECANCELED, 0);
}

/*
 * A job's own deadline passed: fail the late jobs with -ETIMEDOUT, the others
 * with -ECANCELED, and reset. Returns whether it did.
 */
static bool ring_expire(struct npv_ring *r, uint64_t now)
{
    uint32_t unfinished = inflight_unfinished(r->jobs);
    uint32_t failed = inflight_expire(r->jobs, now);
    if (failed == 0)
        return false;
    r->stats.timeouts++;
    NPV_TRACE3(job_timeout, r, failed, unfinished);
    npv_warn(r->ctx,
             "ring: a job's deadline passed with %u jobs in flight (device head %u, doorbell %u)",
             unfinished, r->dev_head, r->rung - r->dev_base);
    ring_reset_device(r, -ETIMEDOUT, failed);
    return true;
}

/*
 * A clock reading: give the jobs claimed since the last one their deadlines,
 * then fail and reset if one has passed. Returns whether it did.
 */
static bool ring_clock_reading(struct npv_ring *r, uint64_t now)
{
    if (inflight_unstamped(r->jobs))
        inflight_stamp(r->jobs, now);
    uint64_t d = inflight_next_deadline(r->jobs);
    return d != 0 && now >= d && ring_expire(r, now);
}

/* Whether anything in flight has, or is waiting for, a deadline. */
static inline bool ring_timed(const struct npv_ring *r)
{
    return inflight_unstamped(r->jobs) || inflight_next_deadline(r->jobs) != 0;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

int npv_ring_next_timed(struct npv_ring *r, uint64_t cookie, uint64_t timeout_ns, void **desc)
{
    if (r->dead)
        return -EIO;
    if (r->jobs->tail - r->jobs->head >= r->capacity)
        return -EAGAIN;
    if (timeout_ns == 0)
        timeout_ns = r->job_timeout_ns;
    /* The deadline counts from the next clock reading: a claim reads no clock. */
    uint32_t seq;
    int rc =
        inflight_add_relative(r->jobs, cookie, timeout_ns == UINT64_MAX ? 0 : timeout_ns, &seq);
    if (rc < 0)
        return rc;
    NPV_TRACE3(submit, cookie, r, seq);
    uint32_t slot = (seq - r->dev_base) & r->mask;
    *desc = r->desc + (size_t)slot * r->cfg.desc_size;
    __builtin_prefetch(r->desc + (size_t)((slot + r->prefetch_slots) & r->mask) * r->cfg.desc_size,
                       1);
    return 0;
}

int npv_ring_next(struct npv_ring *r, uint64_t cookie, void **desc)
{
    return npv_ring_next_timed(r, cookie, 0, desc);
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

/*
 * Stats latency (on only when the context asked, stats.h): the time the
 * doorbell announced jobs [from, end), one vDSO clock read per batch.
 */
static void ring_stamp_doorbell(struct npv_ring *r, uint32_t from, uint32_t end)
{
    uint64_t now = npv_now_ns();
    for (uint32_t seq = from; seq != end; seq++)
        r->jobs->slots[seq & r->jobs->mask].t0_ns = now;
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
    /*
     * A trapped doorbell may sit in a batch of posted writes (vfio-user):
     * it leaves now, whatever the caller does next (polls host memory,
     * sleeps on the completion fd in its own epoll).
     */
    npv_dev_kick(r->cfg.db_bar->dev);
    NPV_TRACE3(doorbell, r, val, n);
    if (r->jobs->stats.latency)
        ring_stamp_doorbell(r, tail - n, tail);
    r->rung = tail;
    r->stats.submitted += n;
    r->stats.doorbells++;
    return (int)n;
}

/* Distance from a to b in the device's head format. */
static inline uint32_t head_distance(const struct npv_ring *r, uint32_t a, uint32_t b)
{
    return r->slot_head ? (b - a) & r->mask : b - a;
}

/*
 * A per-job error word with an error index, if the index names a job among
 * the n just completed (the first of them is device index old_head, sequence
 * number first_seq). The device wrote both before the head that covers the
 * job (ring.h, NPV_RING_ERROR_PER_JOB): an index of a later job is ignored
 * here and taken by the collect whose head covers it.
 */
static void ring_take_indexed_error(struct npv_ring *r, uint32_t old_head, uint32_t first_seq,
                                    uint32_t n)
{
    uint32_t err = __atomic_load_n(r->error_word, __ATOMIC_RELAXED);
    if (err == 0)
        return;
    uint32_t idx = __atomic_load_n(r->error_index_word, __ATOMIC_RELAXED);
    uint32_t rel = head_distance(r, old_head, idx);
    /* A stale or wild index names no job of this batch: ignored, never used to index. */
    if (rel >= n)
        return;
    npv_inflight_set_status(r->jobs, first_seq + rel, -EIO, err);
    r->stats.dev_errors++;
}

/* A sticky fatal word: the oldest job still in flight carries it, then reset. */
static void ring_take_fatal(struct npv_ring *r, uint32_t word)
{
    r->stats.faults++;
    r->stats.dev_errors++;
    npv_err(r->ctx, "ring: device reported fatal error %#x with %u jobs in flight", word,
            inflight_unfinished(r->jobs));
    ring_recover(r, -EIO, word);
}

static int ring_wild_head(struct npv_ring *r, uint32_t head)
{
    r->stats.faults++;
    npv_err(r->ctx,
            "ring: device wrote completed head %u, %s than the %u announced after head %u; "
            "treating as a device fault",
            head, r->slot_head && head > r->mask ? "outside the ring, more" : "more",
            r->rung - r->jobs->done, r->dev_head);
    ring_recover(r, -NPV_EDEVFAULT, 0);
    return -NPV_EDEVFAULT;
}

/*
 * The device's head moved to `head`: finish the jobs it covers. 0, or
 * -NPV_EDEVFAULT after recovering from an impossible head.
 */
static int ring_advance(struct npv_ring *r, uint32_t head)
{
    if (r->slot_head && head > r->mask)
        return ring_wild_head(r, head);
    uint32_t n = head_distance(r, r->dev_head, head);
    if (n > r->rung - r->jobs->done)
        return ring_wild_head(r, head);
    uint32_t first_seq = r->jobs->done;
    if (r->error_index_word != NULL)
        ring_take_indexed_error(r, r->dev_head, first_seq, n);
    inflight_complete(r->jobs, first_seq + n);
    if (r->jobs->stats.latency)
        inflight_measure(r->jobs, first_seq, first_seq + n, npv_now_ns());
    r->dev_head = head;
    r->stats.completed += n;
    r->irq_unread = true;
    return 0;
}

/*
 * A non-zero error word without an index (fatal, or per-job without
 * error_index). It names the first job the head does not cover: the device
 * writes the head covering every job it finished, then the word (release),
 * and no head after it until the host has taken the word (per job) or reset
 * the device (fatal) (ring.h, "Device contract"; model choice, no public
 * source states an order). So read the head again now, after the word
 * (acquire): a head the device wrote between this collect's first head read
 * and the word is completed as usual before the word is charged, and the
 * word is never charged to a job the device completed. 0, or -NPV_EDEVFAULT
 * after recovering.
 */
static int ring_take_word(struct npv_ring *r, uint32_t word)
{
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    ring_sync_status_for_cpu(r);
    uint32_t head = __atomic_load_n(r->head_word, __ATOMIC_ACQUIRE);
    if (head != r->dev_head) {
        int rc = ring_advance(r, head);
        if (rc < 0)
            return rc;
    }
    if (r->fatal_word) {
        ring_take_fatal(r, word);
        return 0;
    }
    if (r->jobs->done == r->rung) {
        /* Every announced job is covered: the word names none. */
        r->stats.faults++;
        npv_err(r->ctx,
                "ring: device wrote error word %#x at head %u with no announced job in flight; "
                "treating as a device fault",
                word, head);
        ring_recover(r, -NPV_EDEVFAULT, 0);
        return -NPV_EDEVFAULT;
    }
    npv_inflight_set_status(r->jobs, r->jobs->done, -EIO, word);
    r->stats.dev_errors++;
    /* The device raised its interrupt for the word: an interrupt wait drains it before sleeping. */
    r->irq_unread = true;
    /*
     * Taking it clears it, so the same code from a later job is news. The
     * device waits for this store before it writes the head past the job,
     * so it races no device write (and on non-coherent DMA its clean writes
     * back nothing the device wrote since the invalidate above).
     */
    __atomic_store_n(r->error_word, 0, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    ring_clean_status(r, r->error_word, 4);
    return 0;
}

/*
 * Read the status block and finish what the device completed. 0, or
 * -NPV_EDEVFAULT after recovering from an impossible head or word.
 */
static int ring_collect(struct npv_ring *r)
{
    if (r->dead)
        return 0;
    ring_sync_status_for_cpu(r);
    uint32_t head = __atomic_load_n(r->head_word, __ATOMIC_ACQUIRE);
    if (head != r->dev_head) {
        int rc = ring_advance(r, head);
        if (rc < 0)
            return rc;
    }
    if (r->error_word != NULL && r->error_index_word == NULL) {
        uint32_t word = __atomic_load_n(r->error_word, __ATOMIC_RELAXED);
        if (__builtin_expect(word != 0, 0))
            return ring_take_word(r, word);
    }
    return 0;
}

int npv_ring_poll(struct npv_ring *r, struct npv_cpl *cpl, unsigned max)
{
    int rc = ring_collect(r);
    if (rc < 0)
        return rc;
    if (__builtin_expect((++r->polls & (RING_CLOCK_EVERY - 1)) == 0, 0) && ring_timed(r))
        ring_clock_reading(r, npv_now_ns());
    return (int)inflight_reap(r->jobs, cpl, max);
}

int npv_ring_set_irq_wanted(struct npv_ring *r, uint32_t *word, struct npv_dma *dma)
{
    if (word != NULL &&
        (((uintptr_t)word & 3) != 0 ||
         share_granule((uintptr_t)word, 4, (uintptr_t)r->cfg.status_vaddr, r->cfg.status_size))) {
        npv_err(r->ctx, "ring: the interrupt-wanted word must be 4-byte aligned, outside the "
                        "status block's cache granule");
        return -EINVAL;
    }
    r->irq_wanted = word;
    r->irq_wanted_dma = dma;
    if (word != NULL) {
        __atomic_store_n(word, 0, __ATOMIC_RELAXED);
        if (dma != NULL)
            ring_sync_for_device(r, dma, offset_in(dma, word), 4);
    }
    return 0;
}

/* Tell the device whether a wait sleeps (a full barrier after: see npv_ring_set_irq_wanted). */
static void ring_want_irq(struct npv_ring *r, uint32_t on)
{
    __atomic_store_n(r->irq_wanted, on, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (r->irq_wanted_dma != NULL)
        ring_sync_for_device(r, r->irq_wanted_dma,
                             offset_in(r->irq_wanted_dma, (const void *)r->irq_wanted), 4);
}

/*
 * Sleep on the interrupt until min completions are collected or the wait's
 * deadline passes (then just return); jobs' own deadlines are checked at
 * every wake-up and bound each sleep. *armed: the interrupt-wanted word was
 * set (the caller clears it).
 */
static int ring_sleep_irq(struct npv_ring *r, unsigned min, uint64_t deadline, bool *armed)
{
    for (;;) {
        int rc = ring_collect(r);
        if (rc < 0)
            return rc;
        if (inflight_unreaped(r->jobs) >= min)
            return 0;
        uint64_t now = npv_now_ns();
        if (ring_clock_reading(r, now))
            continue;
        if (now >= deadline)
            return 0;
        /*
         * An interrupt counted for a job collected earlier (by a poll or a
         * spin that never read the eventfd) would end the sleep at once:
         * drain the count, then look again, since a completion whose
         * interrupt was just drained is already in the status block (the
         * device writes the head before it raises the interrupt). Only when
         * something was collected since the eventfd was last read, so a
         * plain interrupt wait pays no extra read.
         */
        if (r->irq_unread) {
            r->irq_unread = false;
            int64_t stale = npv_eventfd_consume(r->irq_fd);
            if (stale < 0 && stale != -EAGAIN)
                return (int)stale;
            if (stale > 0)
                continue;
        }
        /*
         * About to sleep: ask the device for its interrupt, then look at the
         * status block once more (the head it wrote before it saw the word
         * would raise nothing).
         */
        if (r->irq_wanted != NULL && !*armed) {
            ring_want_irq(r, 1);
            *armed = true;
            continue;
        }
        uint64_t until = deadline;
        uint64_t job_deadline = inflight_next_deadline(r->jobs);
        if (job_deadline != 0 && job_deadline < until)
            until = job_deadline;
        r->stats.irq_sleeps++;
        npv_dev_kick(r->cfg.db_bar->dev); /* nothing held back while we sleep */
        int64_t w = npv_eventfd_wait(r->irq_fd, until - now);
        if (w < 0 && w != -ETIMEDOUT)
            return (int)w;
        if (w > 0) {
            /* The count just read covers what this collect finds. */
            rc = ring_collect(r);
            if (rc < 0)
                return rc;
            r->irq_unread = false;
        }
    }
}

static int ring_wait_irq(struct npv_ring *r, unsigned min, uint64_t deadline)
{
    bool armed = r->fd_mode;
    int rc = ring_sleep_irq(r, min, deadline, &armed);
    if (armed && !r->fd_mode)
        ring_want_irq(r, 0);
    return rc;
}

/*
 * Spin until min completions are collected, or until span nanoseconds after
 * *start. *start 0: the clock is first read after RING_CLOCK_EVERY polls and
 * that reading becomes *start (so a bound counts from at most that many polls
 * after the call). Every clock reading also checks the jobs' deadlines.
 * *reached: the time ran out first.
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
            if (ring_clock_reading(r, now))
                continue;
            if (*start == 0) {
                *start = now;
                until = add_sat(now, span);
            } else if (now >= until) {
                /* One last look: the device may have finished while the time ran out. */
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
    if (mode != NPV_RING_WAIT_POLL && (mode > NPV_RING_WAIT_HYBRID || r->irq_fd < 0))
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

/*
 * The completion fd (issue 24 item 4): the interrupt's eventfd, kept
 * readable while completions wait. The device makes it readable (its
 * interrupt, raised after the head it covers: ring.h "Device contract");
 * npv_ring_reap_fd drains it, collects, and writes it again when it leaves
 * completions unreaped, so an epoll loop sees it level-triggered.
 */
int npv_ring_completion_fd(struct npv_ring *r)
{
    if (r->irq_fd < 0)
        return -EINVAL;
    if (!r->fd_mode) {
        r->fd_mode = true;
        /* The loop sleeps in epoll, out of the engine's sight: interrupts stay wanted. */
        if (r->irq_wanted != NULL)
            ring_want_irq(r, 1);
    }
    return r->irq_fd;
}

int npv_ring_reap_fd(struct npv_ring *r, struct npv_cpl *cpl, unsigned max)
{
    if (r->irq_fd < 0 || max == 0)
        return -EINVAL;
    /* Drain first, then collect: an interrupt after the drain finds its head in the block. */
    int64_t n = npv_eventfd_consume(r->irq_fd);
    if (n < 0 && n != -EAGAIN)
        return (int)n;
    r->irq_unread = false;
    int rc = ring_collect(r);
    if (rc < 0)
        return rc;
    if (ring_timed(r))
        ring_clock_reading(r, npv_now_ns());
    unsigned got = inflight_reap(r->jobs, cpl, max);
    if (inflight_unreaped(r->jobs) > 0) {
        /* Some still wait: keep the fd readable (level-triggered). */
        uint64_t one = 1;
        if (write(r->irq_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
            return -errno;
    }
    return (int)got;
}

void npv_ring_set_name(struct npv_ring *r, const char *device, const char *queue)
{
    npv_inflight_set_name(r->jobs, device, queue);
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
