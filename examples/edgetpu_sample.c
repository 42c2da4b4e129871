/* SPDX-License-Identifier: MIT */
/*
 * The Edge TPU: open the chip, load an executable, map an input and an
 * output into the chip's own MMU, run one inference, check it against the
 * CPU reference.
 *
 *   npuvfio sim --device edgetpu --socket /tmp/edgetpu.sock &
 *   edgetpu_sample /tmp/edgetpu.sock
 *
 * Built in-tree only: the executable is the project's sample network
 * (devices/edgetpu/sample.h), written in our own instruction format
 * (devices/edgetpu/regs.h), which only the model executes; a real chip runs
 * DarwiNN bitstreams compiled by Google's edgetpu_compiler. The driver calls
 * below are the public API (include/npuvfio/edgetpu.h) and are the same for
 * either.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include <npuvfio/edgetpu.h>

#include "sample.h"

static int fail(const char *what, int err)
{
    fprintf(stderr, "edgetpu_sample: %s: %s\n", what, npv_strerror(err));
    return 1;
}

struct io {
    struct npv_dma *in, *out;
    uint64_t in_va, out_va; /* addresses in the chip's MMU, not IOVAs */
};

/*
 * Two levels of mapping: npv_dma_map puts the buffer in the IOMMU domain
 * (host side), npv_edgetpu_map puts those IOVAs in the chip's page table
 * (device side). The chip sees only the second.
 */
static int map_io(struct npv_edgetpu *tpu, struct npv_ctx *ctx, struct npv_domain *dom,
                  struct io *io)
{
    int r = npv_dma_alloc(ctx, 4096, NULL, &io->in);
    if (r == 0)
        r = npv_dma_alloc(ctx, 4096, NULL, &io->out);
    /* Least privilege: the chip only reads the input and only writes the output. */
    if (r == 0)
        r = npv_dma_map(io->in, dom, NPV_DMA_READ, NULL);
    if (r == 0)
        r = npv_dma_map(io->out, dom, NPV_DMA_WRITE, NULL);
    if (r == 0)
        r = npv_edgetpu_map(tpu, io->in, 0, EDGETPU_SAMPLE_INPUT_BYTES, &io->in_va);
    if (r == 0)
        r = npv_edgetpu_map(tpu, io->out, 0, EDGETPU_SAMPLE_OUTPUT_BYTES, &io->out_va);
    return r;
}

/* The chip's page table lets go of the memory before the memory goes. */
static void unmap_io(struct npv_edgetpu *tpu, struct io *io)
{
    if (io->in_va != 0)
        (void)npv_edgetpu_unmap(tpu, io->in_va, EDGETPU_SAMPLE_INPUT_BYTES);
    if (io->out_va != 0)
        (void)npv_edgetpu_unmap(tpu, io->out_va, EDGETPU_SAMPLE_OUTPUT_BYTES);
    npv_dma_free(io->in);
    npv_dma_free(io->out);
}

static int infer_and_check(struct npv_edgetpu *tpu, const struct edgetpu_sample *s, struct io *io)
{
    struct npv_edgetpu_executable *exe;
    int r = npv_edgetpu_load(tpu, &s->desc, &exe);
    if (r < 0)
        return fail("loading the executable", r);
    int8_t *x = npv_dma_vaddr(io->in), *y = npv_dma_vaddr(io->out);
    int8_t want[EDGETPU_SAMPLE_OUTPUT_BYTES];
    edgetpu_sample_input(0, x);
    /* A stale output must not pass for a fresh one. */
    memset(y, 0xcc, EDGETPU_SAMPLE_OUTPUT_BYTES);
    npv_dma_sync_for_device(io->in, 0, EDGETPU_SAMPLE_INPUT_BYTES);
    r = npv_edgetpu_run(tpu, exe, &io->in_va, &io->out_va);
    npv_edgetpu_unload(exe);
    if (r < 0) {
        struct npv_edgetpu_error e;
        npv_edgetpu_last_error(tpu, &e);
        fprintf(stderr, "edgetpu_sample: hib_error_status 0x%llx, page fault at 0x%llx\n",
                (unsigned long long)e.hib_error_status, (unsigned long long)e.page_fault_address);
        return fail("running the inference", r);
    }
    npv_dma_sync_for_cpu(io->out, 0, EDGETPU_SAMPLE_OUTPUT_BYTES);
    edgetpu_sample_reference(s, x, want);
    if (memcmp(y, want, sizeof(want)) != 0) {
        fprintf(stderr, "edgetpu_sample: the output differs from the CPU reference\n");
        return 1;
    }
    printf("edgetpu_sample: int8 FC %u->%u ReLU->%u over %u rows matches the CPU reference bit "
           "for bit\n",
           EDGETPU_SAMPLE_IN, EDGETPU_SAMPLE_HIDDEN, EDGETPU_SAMPLE_OUT, EDGETPU_SAMPLE_ROWS);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: edgetpu_sample SOCKET (an Edge TPU model: npuvfio sim)\n");
        return 2;
    }
    /* The chip holds its queue and page tables by 32-bit address: a domain
     * that never hands out an IOVA above 4 GiB keeps them reachable. */
    struct npv_domain_opts below_4g = {.aperture_last = 0xffffffffull};
    struct npv_ctx *ctx = NULL;
    struct npv_domain *dom = NULL;
    struct npv_dev *dev = NULL;
    struct npv_edgetpu *tpu = NULL;
    struct io io = {0};
    struct edgetpu_sample *s = malloc(sizeof(*s)); /* ~7 KiB of weights */
    int r = s == NULL ? -ENOMEM : npv_ctx_new(&ctx);
    if (r == 0)
        r = npv_domain_new(ctx, &below_4g, &dom);
    if (r == 0)
        r = npv_dev_open_vfio_user(ctx, argv[1], dom, NULL, &dev);
    if (r == 0)
        r = npv_edgetpu_open(dev, NULL, &tpu);
    if (r == 0)
        r = map_io(tpu, ctx, dom, &io);
    int ret = 1;
    if (r < 0) {
        ret = fail("setting up", r);
    } else {
        edgetpu_sample_init(s, 7);
        ret = infer_and_check(tpu, s, &io);
    }
    if (tpu != NULL)
        unmap_io(tpu, &io);
    npv_edgetpu_close(tpu);
    npv_dev_close(dev);
    npv_domain_put(dom);
    npv_ctx_free(ctx);
    free(s);
    return ret;
}
