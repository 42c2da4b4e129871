/* SPDX-License-Identifier: MIT */
/*
 * Edge TPU compiled models run (issue 21): the five real compiler outputs in
 * tests/edgetpu/data (google-coral/test_data, Apache-2.0) bound to the chip
 * and invoked through the driver (npv_edgetpu_model_bind / _invoke).
 *
 * On the model, which is given the same packages (NPV_EDGETPU_MODEL_PACKAGES)
 * and checks every fetched chunk bit by bit outside the linked fields, every
 * linked address through its page table in its direction for its buffer's
 * size, and parameters cached under the run's token: every output equals the
 * data-path pattern (a hash of the inputs and the layer's name: it proves
 * where the inputs were read and the outputs written, it is NOT the network's
 * answer), and the model's counters say how often parameters were cached.
 *
 * Runs per model and completion mode: 1000 (the count: the whole
 * suite takes about 50 s on the 2-core build machine, 33 s with 100 runs in
 * the interrupt modes); NPV_EDGETPU_COMPILED_RUNS=N for another count.
 *
 * On a chip (NPUVFIO_TEST_EDGETPU=ADDR, group `hardware`, SKIPPED without):
 * the same runs, each finishing without error; the outputs' values are what
 * only a chip can prove and are not checked here.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dma.h>
#include <npuvfio/edgetpu_model.h>

#include "etpu_harness.h"
#include "npv_test.h"
#include "package_check.h"

#define NR_MODELS 5
static const char *const MODELS[NR_MODELS] = {
    "split_concat_edgetpu.tflite",
    "keras_lstm_mnist_ptq_edgetpu.tflite",
    "mobilenet_v1_0.25_128_quant_edgetpu.tflite",
    "mobilenet_v1_0.25_128_quant_cocompiled_with_mobilenet_v1_0.5_160_quant_edgetpu.tflite",
    "mobilenet_v1_0.5_160_quant_cocompiled_with_mobilenet_v1_0.25_128_quant_edgetpu.tflite",
};
/* The co-compiled pair (one caching token) and a model of another token. */
#define PAIR_A 3
#define PAIR_B 4
#define OTHER  0

static const char *path_of(unsigned i)
{
    static char path[NR_MODELS][4096];
    snprintf(path[i], sizeof(path[i]), "%s/%s", NPV_EDGETPU_DATA, MODELS[i]);
    return path[i];
}

struct ct {
    struct etpu t;
    struct npv_edgetpu_model *m[NR_MODELS];
    struct npv_edgetpu_bound *b[NR_MODELS];
};

static void ct_open(struct ct *c, enum npv_edgetpu_completion mode)
{
    memset(c, 0, sizeof(*c));
    char list[5 * 4096 + 8] = "";
    for (unsigned i = 0; i < NR_MODELS; i++) {
        if (i > 0)
            strcat(list, ":");
        strcat(list, path_of(i));
    }
    /* The model (a child of this process) reads the packages at its start. */
    setenv("NPV_EDGETPU_MODEL_PACKAGES", list, 1);
    struct npv_edgetpu_config cfg = {.completion = mode, .request_timeout_ns = GENEROUS_NS};
    etpu_open(&c->t, &cfg);
    if (!c->t.hardware)
        ck_assert_uint_eq(etpu_port_read(&c->t, EDGETPU_MODEL_PKG_COUNT), NR_MODELS);
    for (unsigned i = 0; i < NR_MODELS; i++) {
        char why[256] = "";
        int r = npv_edgetpu_model_load(c->t.ctx, path_of(i), &c->m[i], why, sizeof(why));
        ck_assert_msg(r == 0, "%s: %s", MODELS[i], why);
        r = npv_edgetpu_model_bind(c->t.tpu, c->m[i], &c->b[i]);
        ck_assert_msg(r == 0, "bind %s: %s", MODELS[i], npv_strerror(r));
    }
}

static void ct_close(struct ct *c)
{
    for (unsigned i = 0; i < NR_MODELS; i++) {
        npv_edgetpu_model_unbind(c->b[i]);
        npv_edgetpu_model_unload(c->m[i]);
    }
    etpu_close(&c->t);
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Inputs from seed n, outputs filled 0xcc; one invoke; outputs against the pattern. */
static int run_once(struct ct *c, unsigned k, uint64_t n, const uint64_t *in_va,
                    const uint64_t *out_va, uint8_t *const *in_mem, uint8_t *const *out_mem)
{
    const struct npv_edgetpu_model_exe *exe = npv_edgetpu_model_main(c->m[k]);
    struct npv_edgetpu_exe_info info;
    npv_edgetpu_model_exe_info(exe, &info);
    const uint8_t *ins[16];
    ck_assert_uint_le(info.nr_inputs, 16);
    uint64_t s = n * 1000003u + k;
    for (uint32_t i = 0; i < info.nr_inputs; i++) {
        size_t len;
        uint8_t *p = in_mem != NULL ? in_mem[i] : npv_edgetpu_bound_input(c->b[k], i, NULL, &len);
        struct npv_edgetpu_layer l;
        ck_assert_int_eq(npv_edgetpu_model_input(exe, i, &l), 0);
        for (uint32_t j = 0; j < l.size_bytes; j++)
            p[j] = (uint8_t)splitmix(&s);
        ins[i] = p;
    }
    for (uint32_t o = 0; o < info.nr_outputs; o++) {
        size_t len;
        uint8_t *p =
            out_mem != NULL ? out_mem[o] : npv_edgetpu_bound_output(c->b[k], o, NULL, &len);
        struct npv_edgetpu_layer l;
        ck_assert_int_eq(npv_edgetpu_model_output(exe, o, &l), 0);
        memset(p, 0xcc, l.size_bytes);
    }
    int r = npv_edgetpu_model_invoke(c->b[k], in_va, out_va);
    if (r < 0 || c->t.hardware)
        return r; /* on a chip: the outputs' values are the network's, not checked here */
    for (uint32_t o = 0; o < info.nr_outputs; o++) {
        size_t len;
        uint8_t *p =
            out_mem != NULL ? out_mem[o] : npv_edgetpu_bound_output(c->b[k], o, NULL, &len);
        struct npv_edgetpu_layer l;
        ck_assert_int_eq(npv_edgetpu_model_output(exe, o, &l), 0);
        uint8_t *want = malloc(l.size_bytes);
        ck_assert_ptr_nonnull(want);
        ck_assert_int_eq(edgetpu_pkg_pattern(exe, o, ins, want, l.size_bytes), 0);
        bool same = memcmp(p, want, l.size_bytes) == 0;
        free(want);
        ck_assert_msg(same, "%s run %llu: output %u (%s) is not the data-path pattern", MODELS[k],
                      (unsigned long long)n, o, l.name);
    }
    return r;
}

static uint64_t port(struct ct *c, uint64_t off)
{
    return c->t.hardware ? 0 : etpu_port_read(&c->t, off);
}

static uint64_t token_runs(struct ct *c, uint64_t token)
{
    if (c->t.hardware)
        return 0;
    ck_assert_int_eq(npv_bar_write(c->t.port, EDGETPU_MODEL_PKG_TOKEN, 8, token), 0);
    return etpu_port_read(&c->t, EDGETPU_MODEL_PKG_TOKEN_RUNS);
}

/* What the model said about the last chunk it refused (model_pkg.h), for failure messages. */
static const char *refusal(struct ct *c)
{
    static const char *const why[] = {"none",
                                      "chunk differs from the package",
                                      "parameters not cached",
                                      "parameters differ",
                                      "unlinked layer",
                                      "address does not reach its buffer",
                                      "model out of memory"};
    uint64_t w = port(c, EDGETPU_MODEL_PKG_REJECT_WHY);
    return c->t.hardware ? "" : w < sizeof(why) / sizeof(why[0]) ? why[w] : "?";
}

static unsigned runs_for(enum npv_edgetpu_completion mode)
{
    const char *e = getenv("NPV_EDGETPU_COMPILED_RUNS");
    if (e != NULL && e[0] != '\0')
        return (unsigned)strtoul(e, NULL, 0);
    (void)mode;
    return (unsigned)npv_test_volume(1000u);
}

static const char *const MODE_NAME[] = {"poll", "irq", "irq_sc_host"};

static void all_five(enum npv_edgetpu_completion mode)
{
    struct ct c;
    ct_open(&c, mode);
    unsigned n = runs_for(mode);
    for (unsigned k = 0; k < NR_MODELS; k++) {
        for (unsigned i = 0; i < n; i++) {
            int r = run_once(&c, k, i, NULL, NULL, NULL, NULL);
            ck_assert_msg(r >= 0, "%s (%s) run %u: %s; model: %s", MODELS[k], MODE_NAME[mode], i,
                          npv_strerror(r), refusal(&c));
            /* Parameters cached once per model: every model but the pair's second has its own
             * token, and the pair's second caches under the token once too (driver.cc). */
            ck_assert_msg(r == (i == 0), "%s run %u: cached %d", MODELS[k], i, r);
        }
    }
    if (!c.t.hardware) {
        ck_assert_uint_eq(port(&c, EDGETPU_MODEL_PKG_REJECTS), 0);
        ck_assert_uint_eq(port(&c, EDGETPU_MODEL_PKG_RUNS), (uint64_t)NR_MODELS * n);
        ck_assert_uint_eq(port(&c, EDGETPU_MODEL_PKG_CACHING_RUNS), NR_MODELS);
        /* Tokens in run order: A, B, C, D, D: three displacements. */
        ck_assert_uint_eq(port(&c, EDGETPU_MODEL_PKG_DISPLACED), 3);
    }
    printf("edgetpu_compiled: %s: 5 models x %u runs\n", MODE_NAME[mode], n);
    ct_close(&c);
}

START_TEST(all_five_run_with_exact_data_path_in_every_mode)
{
    all_five((enum npv_edgetpu_completion)_i);
}
END_TEST

START_TEST(cocompiled_pair_alternates_caching_only_when_the_token_changes)
{
    struct ct c;
    ct_open(&c, NPV_EDGETPU_POLL);
    uint64_t tok = npv_edgetpu_model_caching_token(c.m[PAIR_A]);
    ck_assert(npv_edgetpu_model_same_cache(c.m[PAIR_A], c.m[PAIR_B]));
    unsigned n = 1000;
    for (unsigned i = 0; i < n; i++) {
        unsigned k = (i & 1) ? PAIR_B : PAIR_A;
        int r = run_once(&c, k, i, NULL, NULL, NULL, NULL);
        ck_assert_msg(r >= 0, "alternation %u: %s; model: %s", i, npv_strerror(r), refusal(&c));
        /* Each of the pair caches once under the shared token, then never again. */
        ck_assert_msg(r == (i < 2), "alternation %u: cached %d", i, r);
    }
    if (!c.t.hardware) {
        ck_assert_uint_eq(token_runs(&c, tok), 2);
        ck_assert_uint_eq(port(&c, EDGETPU_MODEL_PKG_CACHING_RUNS), 2);
        ck_assert_uint_eq(port(&c, EDGETPU_MODEL_PKG_DISPLACED), 0);
    }
    /* Another token in between: the pair's parameters are displaced and cached again. */
    uint64_t other = npv_edgetpu_model_caching_token(c.m[OTHER]);
    for (unsigned i = 0; i < 20; i++) {
        unsigned k = (i & 1) ? PAIR_A : OTHER;
        int r = run_once(&c, k, i, NULL, NULL, NULL, NULL);
        ck_assert_msg(r == 1, "token change %u: %d (%s); model: %s", i, r,
                      r < 0 ? npv_strerror(r) : "", refusal(&c));
    }
    if (!c.t.hardware) {
        ck_assert_uint_eq(token_runs(&c, tok), 2 + 10);
        ck_assert_uint_eq(token_runs(&c, other), 10);
        ck_assert_uint_eq(port(&c, EDGETPU_MODEL_PKG_DISPLACED), 20);
        ck_assert_uint_eq(port(&c, EDGETPU_MODEL_PKG_REJECTS), 0);
    }
    ct_close(&c);
}
END_TEST

START_TEST(caching_is_redone_after_a_reset)
{
    struct ct c;
    ct_open(&c, NPV_EDGETPU_IRQ);
    int r0 = run_once(&c, PAIR_A, 0, NULL, NULL, NULL, NULL);
    ck_assert_msg(r0 == 1, "first run: %d; model: %s", r0, refusal(&c));
    ck_assert_int_eq(run_once(&c, PAIR_A, 1, NULL, NULL, NULL, NULL), 0);
    ck_assert_int_eq(npv_edgetpu_reset(c.t.tpu), 0);
    /* The chip lost its cached parameters with the reset. */
    int r = run_once(&c, PAIR_A, 2, NULL, NULL, NULL, NULL);
    ck_assert_msg(r == 1, "after reset: %d (%s); model: %s", r, r < 0 ? npv_strerror(r) : "",
                  refusal(&c));
    ck_assert_int_eq(run_once(&c, PAIR_A, 3, NULL, NULL, NULL, NULL), 0);
    if (!c.t.hardware) {
        ck_assert_uint_eq(port(&c, EDGETPU_MODEL_PKG_CACHING_RUNS), 2);
        ck_assert_uint_eq(port(&c, EDGETPU_MODEL_PKG_REJECTS), 0);
    }
    ct_close(&c);
}
END_TEST

START_TEST(inputs_and_outputs_in_the_callers_wrapped_memory)
{
    struct ct c;
    ct_open(&c, NPV_EDGETPU_IRQ_SC_HOST);
    unsigned k = 0; /* split/concat: 3 inputs, 5 outputs */
    const struct npv_edgetpu_model_exe *exe = npv_edgetpu_model_main(c.m[k]);
    struct npv_edgetpu_exe_info info;
    npv_edgetpu_model_exe_info(exe, &info);
    size_t total = (size_t)(info.nr_inputs + info.nr_outputs) * 4096;
    /* The caller's memory: a memfd, so a device server in another process reaches it too. */
    int fd = memfd_create("etpu-io", MFD_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)total), 0);
    uint8_t *mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(mem, MAP_FAILED);
    struct npv_dma *dma;
    ck_assert_int_eq(npv_dma_wrap(c.t.ctx, mem, total, fd, 0, 0, &dma), 0);
    ck_assert_int_eq(npv_dma_map(dma, c.t.dom, NPV_DMA_RW, NULL), 0);
    uint64_t in_va[8], out_va[8];
    uint8_t *in_mem[8], *out_mem[8];
    for (uint32_t i = 0; i < info.nr_inputs + info.nr_outputs; i++) {
        uint64_t va;
        ck_assert_int_eq(npv_edgetpu_map(c.t.tpu, dma, (size_t)i * 4096, 4096, &va), 0);
        if (i < info.nr_inputs) {
            in_va[i] = va;
            in_mem[i] = mem + (size_t)i * 4096;
        } else {
            out_va[i - info.nr_inputs] = va;
            out_mem[i - info.nr_inputs] = mem + (size_t)i * 4096;
        }
    }
    for (unsigned n = 0; n < 50; n++) {
        int r = run_once(&c, k, n, in_va, out_va, in_mem, out_mem);
        ck_assert_msg(r >= 0, "run %u: %s; model: %s", n, npv_strerror(r), refusal(&c));
    }
    for (uint32_t i = 0; i < info.nr_inputs; i++)
        ck_assert_int_eq(npv_edgetpu_unmap(c.t.tpu, in_va[i], 4096), 0);
    for (uint32_t i = 0; i < info.nr_outputs; i++)
        ck_assert_int_eq(npv_edgetpu_unmap(c.t.tpu, out_va[i], 4096), 0);
    npv_dma_free(dma);
    munmap(mem, total);
    close(fd);
    ct_close(&c);
}
END_TEST

static void add_cases(TCase *tc)
{
    tcase_add_loop_test(tc, all_five_run_with_exact_data_path_in_every_mode, NPV_EDGETPU_POLL,
                        NPV_EDGETPU_IRQ_SC_HOST + 1);
    tcase_add_test(tc, cocompiled_pair_alternates_caching_only_when_the_token_changes);
    tcase_add_test(tc, caching_is_redone_after_a_reset);
    tcase_add_test(tc, inputs_and_outputs_in_the_callers_wrapped_memory);
}

static const char *no_chip(void)
{
    const char *hw = getenv("NPUVFIO_TEST_EDGETPU");
    return hw != NULL && hw[0] != '\0'
               ? NULL
               : "no Edge TPU named: set NPUVFIO_TEST_EDGETPU=ADDR (bound to vfio-pci) to run the "
                 "compiled models on a chip";
}

static const char *chip_named(void)
{
    return no_chip() == NULL ? "a chip is named: the group hardware runs these" : NULL;
}

int main(int argc, char **argv)
{
    const struct npv_test_group groups[] = {
        {NULL, chip_named, add_cases},
        {"hardware", no_chip, add_cases},
    };
    return npv_test_main_groups(argc, argv, "edgetpu_compiled", groups,
                                sizeof(groups) / sizeof(groups[0]), NULL, NULL);
}
