/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>

#include "fake_edgetpu.h"

static void etpu_fatal(struct fake_etpu *d, uint32_t code)
{
    if (__atomic_load_n(&d->status->fatal_error, __ATOMIC_RELAXED) == 0)
        __atomic_store_n(&d->status->fatal_error, code, __ATOMIC_RELEASE);
}

/* The driver's reset sequence: control = 0, tail = 0 (not reset by hardware), control = 0b101. */
static int etpu_reset(void *arg)
{
    struct fake_etpu *d = arg;
    d->resets++;
    d->fetched = 0;
    d->hang = false;
    d->fatal_after = 0;
    d->resync = true;
    __atomic_store_n((uint64_t *)(d->bar_mem + ETPU_TAIL_OFF), 0, __ATOMIC_RELAXED);
    /* The queue's fatal state clears with the reset; the status block was zeroed by the host. */
    return 0;
}

void fake_etpu_init(struct fake_etpu *d, uint32_t entries, struct npv_ring_config *cfg)
{
    memset(d, 0, sizeof(*d));
    d->entries = entries;
    d->ring = aligned_alloc(4096, 4096);
    d->status = aligned_alloc(4096, 4096);
    d->bar_mem = aligned_alloc(4096, ETPU_BAR_SIZE);
    memset(d->ring, 0xa5, 4096);
    memset(d->status, 0, 4096);
    memset(d->bar_mem, 0, ETPU_BAR_SIZE);
    d->resync = true;
    memset(d->direct, 1, sizeof(d->direct));
    d->bar.base = d->bar_mem;
    d->bar.size = ETPU_BAR_SIZE;
    d->bar.direct = d->direct;

    memset(cfg, 0, sizeof(*cfg));
    cfg->entries = entries;
    cfg->desc_size = sizeof(struct etpu_desc);
    cfg->desc_vaddr = d->ring;
    cfg->desc_iova = 0x1000000;
    cfg->status_vaddr = d->status;
    cfg->status_iova = 0x1001000;
    cfg->status_size = sizeof(struct etpu_status);
    cfg->fields.head = 0;
    cfg->fields.error = 4;
    cfg->fields.error_index = NPV_RING_NO_FIELD;
    cfg->head_format = NPV_RING_HEAD_SLOT;
    cfg->error_format = NPV_RING_ERROR_FATAL;
    cfg->db_bar = &d->bar;
    cfg->db_off = ETPU_TAIL_OFF;
    cfg->db_width = 8;
    cfg->db_format = NPV_RING_DB_SLOT;
    cfg->reset = etpu_reset;
    cfg->reset_arg = d;
}

void fake_etpu_fini(struct fake_etpu *d)
{
    free(d->ring);
    free(d->status);
    free(d->bar_mem);
}

uint64_t fake_etpu_tail(const struct fake_etpu *d)
{
    return __atomic_load_n((const uint64_t *)(d->bar_mem + ETPU_TAIL_OFF), __ATOMIC_ACQUIRE);
}

uint32_t fake_etpu_step(struct fake_etpu *d, uint32_t max)
{
    if (d->hang || __atomic_load_n(&d->status->fatal_error, __ATOMIC_RELAXED) != 0)
        return 0; /* a fatal error stops the queue until reset */
    uint64_t tail = fake_etpu_tail(d);
    if (tail >= d->entries) {
        etpu_fatal(d, ETPU_FATAL_BAD_TAIL);
        return 0;
    }
    uint32_t n = 0;
    uint32_t fatal = 0;
    while (d->fetched != tail && n < max) {
        if (d->fatal_after != 0 && --d->fatal_after == 0) {
            fatal = ETPU_FATAL_INJECTED;
            break;
        }
        const struct etpu_desc *desc = &d->ring[d->fetched];
        if (d->resync) {
            d->expect_seq = desc->address;
            d->resync = false;
        }
        if (desc->address != d->expect_seq || desc->reserved != 0) {
            fatal = ETPU_FATAL_BAD_DESC;
            break;
        }
        d->expect_seq++;
        d->fetched = (d->fetched + 1) & (d->entries - 1);
        d->wraps += d->fetched == 0;
        n++;
    }
    /* ring.h's device contract: the head over what was finished, then the fatal word. */
    if (n > 0)
        __atomic_store_n(&d->status->completed_head, d->fetched, __ATOMIC_RELEASE);
    if (fatal != 0)
        etpu_fatal(d, fatal);
    return n;
}

void fake_etpu_write_head(struct fake_etpu *d, uint32_t head)
{
    __atomic_store_n(&d->status->completed_head, head, __ATOMIC_RELEASE);
}
