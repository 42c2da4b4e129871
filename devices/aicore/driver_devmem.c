/* SPDX-License-Identifier: MIT */
/*
 * Device memory ("GM" on the part): the driver's allocator of it, and the
 * copy engine, the host's only way in (the host cannot map it). The default
 * ops table a caller may wrap (npv_aicore_config.mem_ops).
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "driver_internal.h"
#include "status_decode.h"

void aicore_devmem_init(struct aicore_devmem *m, uint64_t base, uint64_t size)
{
    memset(m, 0, sizeof(*m));
    m->base = base;
    m->size = size;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) & ~(a - 1);
}

/* First fit between the sorted blocks. */
static int devmem_alloc(struct npv_aicore *ac, void *arg, size_t len, uint64_t *dev_addr)
{
    (void)arg;
    struct aicore_devmem *m = &ac->devmem;
    if (len == 0 || dev_addr == NULL)
        return -EINVAL;
    if (m->nr_blocks == AICORE_DEVMEM_BLOCKS_MAX)
        return -ENOSPC;
    uint64_t want = align_up(len, AICORE_DEVMEM_ALIGN);
    uint64_t at = m->base;
    uint32_t i = 0;
    for (; i <= m->nr_blocks; i++) {
        uint64_t end = i < m->nr_blocks ? m->blocks[i].addr : m->base + m->size;
        if (end >= at && end - at >= want)
            break;
        if (i < m->nr_blocks)
            at = align_up(m->blocks[i].addr + m->blocks[i].len, AICORE_DEVMEM_ALIGN);
    }
    if (i > m->nr_blocks)
        return -ENOSPC;
    memmove(&m->blocks[i + 1], &m->blocks[i], (m->nr_blocks - i) * sizeof(m->blocks[0]));
    m->blocks[i] = (struct aicore_devmem_block){.addr = at, .len = want};
    m->nr_blocks++;
    *dev_addr = at;
    return 0;
}

static int devmem_free(struct npv_aicore *ac, void *arg, uint64_t dev_addr)
{
    (void)arg;
    struct aicore_devmem *m = &ac->devmem;
    for (uint32_t i = 0; i < m->nr_blocks; i++) {
        if (m->blocks[i].addr != dev_addr)
            continue;
        memmove(&m->blocks[i], &m->blocks[i + 1], (m->nr_blocks - i - 1) * sizeof(m->blocks[0]));
        m->nr_blocks--;
        return 0;
    }
    return -EINVAL;
}

/* Program the copy engine, GO, and poll its status with a deadline. */
static int devmem_copy_h2d(struct npv_aicore *ac, void *arg, uint64_t dev_addr, npv_iova_t src,
                           size_t len)
{
    (void)arg;
    if (len == 0 || len > AICORE_COPY_MAX_LEN)
        return -EINVAL;
    uint64_t done_before = 0;
    int r = aicore_global_read(ac, AICORE_REG_COPY_DONE, &done_before);
    if (r == 0)
        r = aicore_global_write(ac, AICORE_REG_COPY_HOST_IOVA, src);
    if (r == 0)
        r = aicore_global_write(ac, AICORE_REG_COPY_DEV_ADDR, dev_addr);
    if (r == 0)
        r = aicore_global_write(ac, AICORE_REG_COPY_LEN, len);
    if (r == 0)
        r = aicore_global_write(ac, AICORE_REG_COPY_DIR, AICORE_COPY_H2D);
    if (r == 0)
        r = aicore_global_write(ac, AICORE_REG_COPY_GO, AICORE_COPY_GO_VALUE);
    if (r < 0)
        return r;
    uint64_t deadline = aicore_now_ns() + ac->cfg.poll_timeout_ns;
    for (;;) {
        uint64_t status = 0, done = 0;
        r = aicore_global_read(ac, AICORE_REG_COPY_DONE, &done);
        if (r < 0)
            return r;
        if (aicore_copy_finished(done_before, done)) {
            r = aicore_global_read(ac, AICORE_REG_COPY_STATUS, &status);
            if (r < 0)
                return r;
            return aicore_decode_copy_status(status);
        }
        if (aicore_now_ns() >= deadline)
            return -ETIMEDOUT;
        struct timespec nap = {.tv_sec = 0, .tv_nsec = 1000};
        nanosleep(&nap, NULL);
    }
}

static const struct npv_aicore_mem_ops default_ops = {
    .alloc = devmem_alloc,
    .free = devmem_free,
    .copy_h2d = devmem_copy_h2d,
};

const struct npv_aicore_mem_ops *npv_aicore_default_mem_ops(void)
{
    return &default_ops;
}
