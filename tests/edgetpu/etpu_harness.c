/* SPDX-License-Identifier: MIT */
#include "etpu_harness.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/domain.h>

#include "edgetpu/model.h"

static void serve_edgetpu(const char *path, void *arg)
{
    (void)arg;
    int r = npv_edgetpu_serve(path, false);
    if (r < 0)
        fprintf(stderr, "edgetpu server: %s\n", npv_strerror(r));
}

/* The model in a child process that dies with the test; returns once it listens. */
void etpu_server_start(struct vu_server *s)
{
    vu_server_start(s, serve_edgetpu, NULL);
}

void etpu_require_model(const char *why)
{
    const char *hw = getenv("NPUVFIO_TEST_EDGETPU");
    if (hw != NULL && hw[0] != '\0') {
        printf("SKIPPED: %s; NPUVFIO_TEST_EDGETPU=%s names a real chip\n", why, hw);
        exit(77);
    }
}

static void map_buffer(struct etpu *t, size_t len, struct npv_dma **dma, uint64_t *va)
{
    ck_assert_int_eq(npv_dma_alloc(t->ctx, 4096, NULL, dma), 0);
    ck_assert_int_eq(npv_dma_map(*dma, t->dom, NPV_DMA_RW, NULL), 0);
    ck_assert_int_eq(npv_edgetpu_map(t->tpu, *dma, 0, len, va), 0);
}

static void open_common(struct etpu *t, const char *hw, const char *path,
                        const struct npv_edgetpu_config *cfg);

void etpu_open(struct etpu *t, const struct npv_edgetpu_config *cfg)
{
    memset(t, 0, sizeof(*t));
    const char *hw = getenv("NPUVFIO_TEST_EDGETPU");
    t->hardware = hw != NULL && hw[0] != '\0';
    if (!t->hardware)
        etpu_server_start(&t->srv);
    open_common(t, hw, t->srv.path, cfg);
}

void etpu_open_at(struct etpu *t, const char *path, const struct npv_edgetpu_config *cfg)
{
    memset(t, 0, sizeof(*t));
    open_common(t, NULL, path, cfg);
}

static void open_common(struct etpu *t, const char *hw, const char *path,
                        const struct npv_edgetpu_config *cfg)
{
    ck_assert_int_eq(npv_ctx_new(&t->ctx), 0);
    /* The chip's queue, status block and level-1 tables must sit below 4 GiB of IOVA. */
    struct npv_domain_opts o = {.aperture_start = 0, .aperture_last = 0xffffffffull};
    ck_assert_int_eq(npv_domain_new(t->ctx, &o, &t->dom), 0);
    struct npv_dev_opts dopts = {.request_timeout_ns = GENEROUS_NS};
    int r;
    if (t->hardware) {
        r = npv_dev_open_pci(t->ctx, hw, t->dom, &dopts, &t->dev);
    } else {
        r = npv_dev_open_vfio_user(t->ctx, path, t->dom, &dopts, &t->dev);
    }
    ck_assert_msg(r == 0, "open device: %s", npv_strerror(r));
    if (!t->hardware)
        ck_assert_int_eq(npv_bar_map(t->dev, 0, &t->port), 0);
    ck_assert_int_eq(npv_bar_map(t->dev, EDGETPU_BAR_INDEX, &t->bar2), 0);
    /*
     * NPV_EDGETPU_INJECT=HOOKS (NPV_EDGETPU_HOOK_* bits, e.g. 0x8): run any
     * suite with a deliberate driver bug, to show that it fails on it.
     */
    struct npv_edgetpu_config c = {0};
    if (cfg != NULL)
        c = *cfg;
    const char *inject = getenv("NPV_EDGETPU_INJECT");
    if (inject != NULL)
        c.test_hooks |= (unsigned)strtoul(inject, NULL, 0);
    /*
     * NPV_EDGETPU_COMPLETION=poll|irq|irq_sc_host: every open of the suite in
     * that completion mode, whatever the test asked for, so a suite written
     * for one mode is shown to hold in the others.
     */
    const char *mode = getenv("NPV_EDGETPU_COMPLETION");
    if (mode != NULL && mode[0] != '\0') {
        if (strcmp(mode, "poll") == 0)
            c.completion = NPV_EDGETPU_POLL;
        else if (strcmp(mode, "irq") == 0)
            c.completion = NPV_EDGETPU_IRQ;
        else if (strcmp(mode, "irq_sc_host") == 0)
            c.completion = NPV_EDGETPU_IRQ_SC_HOST;
        else
            ck_abort_msg("NPV_EDGETPU_COMPLETION=%s: poll, irq or irq_sc_host", mode);
    }
    r = npv_edgetpu_open(t->dev, &c, &t->tpu);
    ck_assert_msg(r == 0, "edgetpu open: %s", npv_strerror(r));
    edgetpu_sample_init(&t->sample, 7);
    r = npv_edgetpu_load(t->tpu, &t->sample.desc, &t->exe);
    ck_assert_msg(r == 0, "load: %s", npv_strerror(r));
    map_buffer(t, EDGETPU_SAMPLE_INPUT_BYTES, &t->in, &t->in_va);
    map_buffer(t, EDGETPU_SAMPLE_OUTPUT_BYTES, &t->out, &t->out_va);
}

void etpu_close(struct etpu *t)
{
    if (t->tpu != NULL) {
        npv_edgetpu_unload(t->exe);
        (void)npv_edgetpu_unmap(t->tpu, t->in_va, EDGETPU_SAMPLE_INPUT_BYTES);
        (void)npv_edgetpu_unmap(t->tpu, t->out_va, EDGETPU_SAMPLE_OUTPUT_BYTES);
        npv_edgetpu_close(t->tpu);
    }
    npv_dma_free(t->in);
    npv_dma_free(t->out);
    npv_bar_unmap(t->port);
    npv_bar_unmap(t->bar2);
    npv_dev_close(t->dev);
    npv_domain_put(t->dom);
    npv_ctx_free(t->ctx);
    vu_server_kill(&t->srv);
    memset(t, 0, sizeof(*t));
}

int etpu_run_check(struct etpu *t, uint32_t n, bool *exact)
{
    int8_t want[EDGETPU_SAMPLE_OUTPUT_BYTES];
    int8_t *x = npv_dma_vaddr(t->in);
    int8_t *y = npv_dma_vaddr(t->out);
    edgetpu_sample_input(n, x);
    /* A stale output must not pass for a fresh one. */
    memset(y, 0xcc, EDGETPU_SAMPLE_OUTPUT_BYTES);
    edgetpu_sample_reference(&t->sample, x, want);
    npv_dma_sync_for_device(t->in, 0, EDGETPU_SAMPLE_INPUT_BYTES);
    npv_dma_sync_for_device(t->out, 0, EDGETPU_SAMPLE_OUTPUT_BYTES);
    int r = npv_edgetpu_run(t->tpu, t->exe, &t->in_va, &t->out_va);
    npv_dma_sync_for_cpu(t->out, 0, EDGETPU_SAMPLE_OUTPUT_BYTES);
    *exact = memcmp(y, want, sizeof(want)) == 0;
    return r;
}

void etpu_fault(struct etpu *t, uint64_t fault)
{
    ck_assert_ptr_nonnull(t->port);
    ck_assert_int_eq(npv_bar_write(t->port, EDGETPU_MODEL_FAULT, 8, fault), 0);
}

uint64_t etpu_port_read(struct etpu *t, uint64_t off)
{
    uint64_t v = 0;
    ck_assert_ptr_nonnull(t->port);
    ck_assert_int_eq(npv_bar_read(t->port, off, 8, &v), 0);
    return v;
}
