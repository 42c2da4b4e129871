/* SPDX-License-Identifier: MIT */
/*
 * The Edge TPU: open the chip, build and load an executable (one int8 fully
 * connected layer with ReLU), map an input and an output into the chip's own
 * MMU, run one inference, check it against the CPU.
 *
 *   npuvfio sim --device edgetpu --socket /tmp/edgetpu.sock &
 *   edgetpu_sample /tmp/edgetpu.sock
 *
 *   cc edgetpu_sample.c $(pkg-config --cflags --libs npuvfio-edgetpu)
 *
 * The executable is written in npuvfio's own instruction format
 * (npuvfio/edgetpu_insn.h), which only the model executes; a real chip runs
 * DarwiNN bitstreams compiled by Google's edgetpu_compiler. The driver calls
 * (npuvfio/edgetpu.h) are the same for either.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include <npuvfio/edgetpu.h>
#include <npuvfio/edgetpu_insn.h>

#define ROWS         4u  /* pixels of a 1x1 convolution */
#define IN           32u /* input features */
#define OUT          8u  /* output features */
#define INPUT_BYTES  (ROWS * IN)
#define OUTPUT_BYTES (ROWS * OUT)
#define MULTIPLIER   655 /* ~1/100 in Q16: accumulators land in int8 range */
#define SHIFT        16u

/* Parameters, copied by the driver into DMA memory once per load. */
struct params {
    int8_t weights[OUT][IN];
    int32_t bias[OUT];
};

/* An executable: FC then "raise host interrupt 0" (done), plus where to patch addresses. */
struct network {
    struct npv_edgetpu_insn insn[2];
    struct npv_edgetpu_field fields[8];
    struct params params;
    struct npv_edgetpu_executable_desc desc;
};

/* Each address is two 32-bit immediates the driver fills in at load time. */
static void patch_address(struct network *n, size_t field_off, uint8_t base, uint32_t offset)
{
    for (uint8_t half = NPV_EDGETPU_LOWER_32BIT; half <= NPV_EDGETPU_UPPER_32BIT; half++)
        n->fields[n->desc.nr_fields++] = (struct npv_edgetpu_field){
            .bit_offset = (uint32_t)(field_off + 4u * half) * 8u,
            .base = base,
            .half = half,
            .offset = offset,
        };
}

static void build_network(struct network *n)
{
    memset(n, 0, sizeof(*n));
    for (uint32_t o = 0; o < OUT; o++) {
        n->params.bias[o] = (int32_t)(o * 37u) - 150;
        for (uint32_t i = 0; i < IN; i++)
            n->params.weights[o][i] = (int8_t)((int)((o * 7u + i * 13u) % 61u) - 30);
    }
    n->insn[0] = (struct npv_edgetpu_insn){.opcode = NPV_EDGETPU_OP_FC,
                                           .flags = NPV_EDGETPU_FC_RELU,
                                           .rows = ROWS,
                                           .in_features = IN,
                                           .out_features = OUT,
                                           .multiplier = MULTIPLIER,
                                           .shift = SHIFT};
    n->insn[1] = (struct npv_edgetpu_insn){.opcode = NPV_EDGETPU_OP_SC_HOST_INT};
    patch_address(n, offsetof(struct npv_edgetpu_insn, input_lo), NPV_EDGETPU_BASE_INPUT, 0);
    patch_address(n, offsetof(struct npv_edgetpu_insn, weights_lo), NPV_EDGETPU_BASE_PARAMETER,
                  offsetof(struct params, weights));
    patch_address(n, offsetof(struct npv_edgetpu_insn, bias_lo), NPV_EDGETPU_BASE_PARAMETER,
                  offsetof(struct params, bias));
    patch_address(n, offsetof(struct npv_edgetpu_insn, output_lo), NPV_EDGETPU_BASE_OUTPUT, 0);
    n->desc.instructions = n->insn;
    n->desc.instructions_size = sizeof(n->insn);
    n->desc.fields = n->fields;
    n->desc.parameters = &n->params;
    n->desc.parameters_size = sizeof(n->params);
    n->desc.nr_inputs = 1;
    n->desc.nr_outputs = 1;
}

/* What the chip must write, from the arithmetic npuvfio/edgetpu_insn.h states. */
static void cpu_reference(const struct params *p, const int8_t *x, int8_t *y)
{
    for (uint32_t r = 0; r < ROWS; r++)
        for (uint32_t o = 0; o < OUT; o++) {
            int32_t acc = p->bias[o];
            for (uint32_t i = 0; i < IN; i++)
                acc += x[r * IN + i] * p->weights[o][i];
            int64_t v = ((int64_t)acc * MULTIPLIER + (1 << (SHIFT - 1))) >> SHIFT;
            v = v < 0 ? 0 : v > 127 ? 127 : v; /* ReLU at zero point 0, then int8 */
            y[r * OUT + o] = (int8_t)v;
        }
}

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
        r = npv_edgetpu_map(tpu, io->in, 0, INPUT_BYTES, &io->in_va);
    if (r == 0)
        r = npv_edgetpu_map(tpu, io->out, 0, OUTPUT_BYTES, &io->out_va);
    return r;
}

/* The chip's page table lets go of the memory before the memory goes. */
static void unmap_io(struct npv_edgetpu *tpu, struct io *io)
{
    if (io->in_va != 0)
        (void)npv_edgetpu_unmap(tpu, io->in_va, INPUT_BYTES);
    if (io->out_va != 0)
        (void)npv_edgetpu_unmap(tpu, io->out_va, OUTPUT_BYTES);
    npv_dma_free(io->in);
    npv_dma_free(io->out);
}

static int infer_and_check(struct npv_edgetpu *tpu, const struct network *n, struct io *io)
{
    struct npv_edgetpu_executable *exe;
    int r = npv_edgetpu_load(tpu, &n->desc, &exe);
    if (r < 0)
        return fail("loading the executable", r);
    int8_t *x = npv_dma_vaddr(io->in), *y = npv_dma_vaddr(io->out);
    int8_t want[OUTPUT_BYTES];
    for (uint32_t i = 0; i < INPUT_BYTES; i++)
        x[i] = (int8_t)((int)(i * 29u % 101u) - 50);
    /* A stale output must not pass for a fresh one. */
    memset(y, 0xcc, OUTPUT_BYTES);
    npv_dma_sync_for_device(io->in, 0, INPUT_BYTES);
    /* The fill too, or a non-coherent host's sync_for_cpu writes it back over the output. */
    npv_dma_sync_for_device(io->out, 0, OUTPUT_BYTES);
    r = npv_edgetpu_run(tpu, exe, &io->in_va, &io->out_va);
    npv_edgetpu_unload(exe);
    if (r < 0) {
        struct npv_edgetpu_error e;
        npv_edgetpu_last_error(tpu, &e);
        fprintf(stderr, "edgetpu_sample: hib_error_status 0x%llx, page fault at 0x%llx\n",
                (unsigned long long)e.hib_error_status, (unsigned long long)e.page_fault_address);
        return fail("running the inference", r);
    }
    npv_dma_sync_for_cpu(io->out, 0, OUTPUT_BYTES);
    cpu_reference(&n->params, x, want);
    if (memcmp(y, want, sizeof(want)) != 0) {
        fprintf(stderr, "edgetpu_sample: the output differs from the CPU reference\n");
        return 1;
    }
    printf("edgetpu_sample: int8 FC %u->%u with ReLU over %u rows matches the CPU reference bit "
           "for bit\n",
           IN, OUT, ROWS);
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
    struct network *n = malloc(sizeof(*n));
    int r = n == NULL ? -ENOMEM : npv_ctx_new(&ctx);
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
        build_network(n);
        ret = infer_and_check(tpu, n, &io);
    }
    if (tpu != NULL)
        unmap_io(tpu, &io);
    npv_edgetpu_close(tpu);
    npv_dev_close(dev);
    npv_domain_put(dom);
    npv_ctx_free(ctx);
    free(n);
    return ret;
}
