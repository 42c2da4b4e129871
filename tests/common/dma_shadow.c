/* SPDX-License-Identifier: MIT */
#include "dma_shadow.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The real calls, reached through the linker's --wrap. */
int __real_npv_dma_alloc(struct npv_ctx *ctx, size_t size, const struct npv_dma_opts *opts,
                         struct npv_dma **out);
void __real_npv_dma_free(struct npv_dma *dma);
void __real_npv_dma_sync_for_device(struct npv_dma *dma, size_t off, size_t len);
void __real_npv_dma_sync_for_cpu(struct npv_dma *dma, size_t off, size_t len);
int __wrap_npv_dma_alloc(struct npv_ctx *ctx, size_t size, const struct npv_dma_opts *opts,
                         struct npv_dma **out);
void __wrap_npv_dma_free(struct npv_dma *dma);
void __wrap_npv_dma_sync_for_device(struct npv_dma *dma, size_t off, size_t len);
void __wrap_npv_dma_sync_for_cpu(struct npv_dma *dma, size_t off, size_t len);

#define MAX_SHADOWS 64

static struct dma_shadow shadows[MAX_SHADOWS];
static bool watching;
static char failure[512];
static void (*cpu_sync_hook)(struct npv_dma *dma, size_t off, size_t len);
static void (*free_hook)(struct dma_shadow *s);

void dma_shadow_watch(bool on)
{
    watching = on;
    if (on)
        failure[0] = '\0';
}

void dma_shadow_set_hooks(void (*on_cpu_sync)(struct npv_dma *dma, size_t off, size_t len),
                          void (*on_free)(struct dma_shadow *s))
{
    cpu_sync_hook = on_cpu_sync;
    free_hook = on_free;
}

void dma_shadow_fail(const char *fmt, ...)
{
    if (failure[0] != '\0')
        return; /* the first one says what went wrong */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(failure, sizeof(failure), fmt, ap);
    va_end(ap);
}

const char *dma_shadow_failure(void)
{
    return failure;
}

struct dma_shadow *dma_shadow_of(const struct npv_dma *dma)
{
    for (size_t i = 0; dma != NULL && i < MAX_SHADOWS; i++)
        if (shadows[i].dma == dma)
            return &shadows[i];
    return NULL;
}

uint8_t *dma_shadow_mem(const struct dma_shadow *s)
{
    return npv_dma_vaddr(s->dma);
}

static bool range_in(const struct dma_shadow *s, size_t off, size_t len)
{
    return off <= s->size && len <= s->size - off;
}

struct dma_shadow *dma_shadow_at(struct npv_domain *dom, uint64_t iova, uint64_t len, size_t *off)
{
    void *va = NULL;
    if (dom == NULL || npv_domain_iova_to_vaddr(dom, iova, &va) < 0)
        return NULL;
    for (size_t i = 0; i < MAX_SHADOWS; i++) {
        struct dma_shadow *s = &shadows[i];
        uint8_t *m = s->dma != NULL ? dma_shadow_mem(s) : NULL;
        if (m == NULL || (uint8_t *)va < m || (uint8_t *)va >= m + s->size)
            continue;
        *off = (size_t)((uint8_t *)va - m);
        return range_in(s, *off, len) ? s : NULL;
    }
    return NULL;
}

bool dma_shadow_device_sees(const struct dma_shadow *s, size_t off, size_t len)
{
    return range_in(s, off, len) && memcmp(s->view + off, dma_shadow_mem(s) + off, len) == 0;
}

void dma_shadow_device_wrote(struct dma_shadow *s, size_t off, size_t len,
                             const uint8_t *cpu_cached)
{
    if (!range_in(s, off, len))
        return;
    uint8_t *m = dma_shadow_mem(s) + off;
    memcpy(s->dev + off, m, len);
    memcpy(s->view + off, m, len);
    memset(s->stale + off, 1, len);
    memcpy(m, cpu_cached, len);
}

void dma_shadow_device_owns(struct dma_shadow *s, size_t off, size_t len)
{
    if (range_in(s, off, len))
        memcpy(s->view + off, dma_shadow_mem(s) + off, len);
}

int __wrap_npv_dma_alloc(struct npv_ctx *ctx, size_t size, const struct npv_dma_opts *opts,
                         struct npv_dma **out)
{
    int r = __real_npv_dma_alloc(ctx, size, opts, out);
    if (r < 0 || !watching)
        return r;
    for (size_t i = 0; i < MAX_SHADOWS; i++) {
        struct dma_shadow *s = &shadows[i];
        if (s->dma != NULL)
            continue;
        size_t n = npv_dma_size(*out);
        /* Fresh DMA memory is zero, as the device sees it before any clean. */
        *s = (struct dma_shadow){.dma = *out,
                                 .size = n,
                                 .view = calloc(1, n),
                                 .dev = calloc(1, n),
                                 .stale = calloc(1, n)};
        ck_assert(s->view != NULL && s->dev != NULL && s->stale != NULL);
        return r;
    }
    dma_shadow_fail("more than %d buffers to shadow", MAX_SHADOWS);
    return r;
}

void __wrap_npv_dma_free(struct npv_dma *dma)
{
    struct dma_shadow *s = dma_shadow_of(dma);
    if (s != NULL) {
        if (free_hook != NULL)
            free_hook(s);
        free(s->view);
        free(s->dev);
        free(s->stale);
        *s = (struct dma_shadow){0};
    }
    __real_npv_dma_free(dma);
}

void __wrap_npv_dma_sync_for_device(struct npv_dma *dma, size_t off, size_t len)
{
    struct dma_shadow *s = dma_shadow_of(dma);
    if (s != NULL) {
        if (!range_in(s, off, len)) {
            dma_shadow_fail("sync_for_device [%zu, +%zu) outside its buffer of %zu bytes", off, len,
                            s->size);
        } else {
            /* The CPU's bytes, stale or written, are what a clean leaves in memory. */
            memcpy(s->view + off, dma_shadow_mem(s) + off, len);
            memset(s->stale + off, 0, len);
        }
    }
    __real_npv_dma_sync_for_device(dma, off, len);
}

void __wrap_npv_dma_sync_for_cpu(struct npv_dma *dma, size_t off, size_t len)
{
    struct dma_shadow *s = dma_shadow_of(dma);
    if (s != NULL && range_in(s, off, len)) {
        /* The invalidate: the CPU now reads what the device wrote. */
        uint8_t *m = dma_shadow_mem(s);
        for (size_t i = off; i < off + len; i++)
            if (s->stale[i]) {
                m[i] = s->dev[i];
                s->stale[i] = 0;
            }
        if (cpu_sync_hook != NULL)
            cpu_sync_hook(dma, off, len);
    }
    __real_npv_dma_sync_for_cpu(dma, off, len);
}
