/* SPDX-License-Identifier: MIT */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_dev.h"

static int fake_reset(void *arg)
{
    struct fake_dev *d = arg;
    d->resets++;
    int rc = d->reset_rc;
    d->reset_rc = 0;
    if (rc < 0)
        return rc;
    /* A reset device forgets its ring position; the doorbell reads 0 again. */
    d->consumed = 0;
    d->hang = false;
    d->halted = false;
    d->resync = true;
    __atomic_store_n((uint32_t *)(d->bar_mem + FAKE_DB_OFF), 0, __ATOMIC_RELAXED);
    if (d->on_enable != NULL)
        d->on_enable(d);
    return 0;
}

void fake_dev_init(struct fake_dev *d, uint32_t entries, struct npv_ring_config *cfg)
{
    memset(d, 0, sizeof(*d));
    d->entries = entries;
    d->ring = aligned_alloc(4096, ((entries * sizeof(struct fake_desc)) + 4095) & ~4095ul);
    /* Its own 128-byte granule: the ring refuses a status block sharing one with descriptors. */
    d->status = aligned_alloc(128, 128);
    d->irq_fd = -1;
    d->bar_mem = aligned_alloc(4096, 4096);
    memset(d->ring, 0xa5, entries * sizeof(struct fake_desc));
    memset(d->status, 0, sizeof(*d->status));
    memset(d->bar_mem, 0, 4096);
    d->direct[0] = 1;
    d->bar.base = d->bar_mem;
    d->bar.size = 4096;
    d->bar.direct = d->direct;

    memset(cfg, 0, sizeof(*cfg));
    cfg->entries = entries;
    cfg->desc_size = sizeof(struct fake_desc);
    cfg->desc_vaddr = d->ring;
    cfg->desc_iova = 0x100000;
    cfg->status_vaddr = d->status;
    cfg->status_iova = 0x200000;
    cfg->status_size = sizeof(struct fake_status);
    cfg->fields.head = 0;
    cfg->fields.error = 4;
    cfg->fields.error_index = 8;
    cfg->db_bar = &d->bar;
    cfg->db_off = FAKE_DB_OFF;
    cfg->db_width = 4;
    cfg->db_format = NPV_RING_DB_INDEX;
    cfg->reset = fake_reset;
    cfg->reset_arg = d;
}

void fake_dev_fini(struct fake_dev *d)
{
    if (d->running)
        fake_dev_stop(d);
    if (!d->borrowed) {
        free(d->ring);
        free(d->status);
    }
    free(d->bar_mem);
}

void fake_dev_use_memory(struct fake_dev *d, struct npv_ring_config *cfg, void *ring, void *status)
{
    if (!d->borrowed) {
        free(d->ring);
        free(d->status);
    }
    d->borrowed = true;
    d->ring = ring;
    d->status = status;
    memset(d->status, 0, sizeof(*d->status));
    cfg->desc_vaddr = ring;
    cfg->status_vaddr = status;
}

uint32_t fake_dev_doorbell(const struct fake_dev *d)
{
    return __atomic_load_n((const uint32_t *)(d->bar_mem + FAKE_DB_OFF), __ATOMIC_ACQUIRE);
}

uint32_t fake_dev_step(struct fake_dev *d, uint32_t max)
{
    if (__atomic_load_n(&d->hang, __ATOMIC_RELAXED))
        return 0;
    uint32_t db = fake_dev_doorbell(d);
    uint32_t n = 0;
    bool halt = false;
    if (d->halted) {
        if (__atomic_load_n(&d->status->error, __ATOMIC_ACQUIRE) != 0)
            return 0;
        /* The host took the word: the failed descriptor completes now. */
        d->halted = false;
        d->consumed++;
        n++;
    }
    while (d->consumed != db && n < max) {
        const struct fake_desc *desc = &d->ring[d->consumed & (d->entries - 1)];
        if (d->resync) {
            d->expect_seq = desc->seq;
            d->resync = false;
        }
        if (desc->seq != d->expect_seq)
            d->bad_descs++;
        d->expect_seq = desc->seq + 1;
        if (desc->fail != 0 && d->no_index) {
            halt = true;
            break;
        }
        if (desc->fail != 0) {
            d->status->error = desc->fail;
            d->status->error_index = d->consumed;
        }
        d->status->last_payload = desc->payload;
        d->consumed++;
        n++;
    }
    if (halt) {
        /* The head first (below), the word after it: it names the first job the head leaves out. */
        d->halted = true;
        if (n > 0)
            __atomic_store_n(&d->status->head, d->consumed, __ATOMIC_RELEASE);
        __atomic_store_n(&d->status->error, d->ring[d->consumed & (d->entries - 1)].fail,
                         __ATOMIC_RELEASE);
        uint64_t one = 1;
        if (d->irq_fd >= 0)
            (void)!write(d->irq_fd, &one, sizeof(one));
        return n;
    }
    if (n > 0) {
        __atomic_store_n(&d->status->head, d->consumed, __ATOMIC_RELEASE);
        /* MSI after the status write, as a device raises it. */
        uint64_t one = 1;
        if (d->irq_fd >= 0)
            (void)!write(d->irq_fd, &one, sizeof(one));
    }
    return n;
}

void fake_dev_write_head(struct fake_dev *d, uint32_t head)
{
    __atomic_store_n(&d->status->head, head, __ATOMIC_RELEASE);
}

static void *fake_dev_thread(void *arg)
{
    struct fake_dev *d = arg;
    unsigned idle = 0;
    while (!__atomic_load_n(&d->stop, __ATOMIC_ACQUIRE)) {
        if (fake_dev_step(d, UINT32_MAX) != 0) {
            idle = 0;
            continue;
        }
        /* On a shared machine both threads may land on one core: let the submitter run. */
        if (++idle % 1024 == 0)
            sched_yield();
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
    }
    return NULL;
}

int fake_dev_start(struct fake_dev *d)
{
    d->stop = false;
    int rc = pthread_create(&d->thread, NULL, fake_dev_thread, d);
    if (rc != 0)
        return -rc;
    d->running = true;
    return 0;
}

void fake_dev_stop(struct fake_dev *d)
{
    __atomic_store_n(&d->stop, true, __ATOMIC_RELEASE);
    pthread_join(d->thread, NULL);
    d->running = false;
}
