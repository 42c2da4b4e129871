/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <npuvfio/bar.h>
#include <npuvfio/edgetpu_model.h>

#include "compiled_run.h"
#include "package_check.h"
#include "sample_run.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The whole file, which must be exactly want bytes (every input layer's bytes, in order). */
static int read_input(const char *path, size_t want, uint8_t **out)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -errno;
    uint8_t *b = malloc(want + 1);
    size_t n = b != NULL ? fread(b, 1, want + 1, f) : 0;
    fclose(f);
    if (b == NULL)
        return -ENOMEM;
    if (n != want) {
        free(b);
        return -EMSGSIZE;
    }
    *out = b;
    return 0;
}

/*
 * Output layer 0 on a chip, dequantised: "top-5 of NAME: index score ..." (a
 * classifier's scores), or every value of a tensor of 10 or fewer.
 */
static void top5(const struct npv_edgetpu_model_exe *exe, struct npv_edgetpu_bound *b, char *dst,
                 size_t len)
{
    struct npv_edgetpu_layer l;
    size_t n = 0;
    if (npv_edgetpu_model_output(exe, 0, &l) < 0)
        return;
    const uint8_t *p = npv_edgetpu_bound_output(b, 0, NULL, &n);
    size_t count =
        l.data_type == NPV_EDGETPU_FIXED_POINT8 || l.data_type == NPV_EDGETPU_SIGNED_FIXED_POINT8
            ? l.size_bytes
            : 0;
    float *v = count ? malloc(count * sizeof(float)) : NULL;
    if (v == NULL || npv_edgetpu_dequantize(&l, p, l.size_bytes, v, count) < 0) {
        snprintf(dst, len, "output %s: %u bytes (data type %u)", l.name, l.size_bytes, l.data_type);
        free(v);
        return;
    }
    int at;
    if (count <= 10) { /* a small tensor: every value */
        at = snprintf(dst, len, "%s:", l.name);
        for (size_t i = 0; i < count && at >= 0 && (size_t)at < len; i++)
            at += snprintf(dst + at, len - (size_t)at, " %.4f", (double)v[i]);
        free(v);
        return;
    }
    at = snprintf(dst, len, "top-5 of %s:", l.name);
    for (int k = 0; k < 5 && (size_t)k < count; k++) {
        size_t best = 0;
        for (size_t i = 1; i < count; i++)
            if (v[i] > v[best])
                best = i;
        if (at >= 0 && (size_t)at < len)
            at += snprintf(dst + at, len - (size_t)at, " %zu %.4f", best, (double)v[best]);
        v[best] = -1e30f;
    }
    free(v);
}

int edgetpu_compiled_run(struct npv_edgetpu *tpu, const struct npv_sample_opts *opts,
                         struct npv_sample_result *res)
{
    unsigned n = opts->iterations ? opts->iterations : EDGETPU_COMPILED_DEFAULT_ITERATIONS;
    struct npv_edgetpu_model *m = NULL;
    struct npv_edgetpu_bound *b = NULL;
    uint8_t *file_in = NULL, *want = NULL;
    uint64_t *lat = calloc(n, sizeof(*lat));
    char why[160] = "";
    memset(res, 0, sizeof(*res));
    bool on_model = edgetpu_is_model(tpu) == 1;
    int r = lat == NULL ? -ENOMEM : 0;
    if (r == 0)
        r = npv_edgetpu_model_load(npv_dev_ctx(npv_edgetpu_dev(tpu)), opts->model_path, &m, why,
                                   sizeof(why));
    if (r < 0) {
        fprintf(stderr, "npuvfio run: %s: %s\n", opts->model_path, why);
        goto out;
    }
    const struct npv_edgetpu_model_exe *exe = npv_edgetpu_model_main(m);
    struct npv_edgetpu_exe_info info;
    npv_edgetpu_model_exe_info(exe, &info);
    size_t in_total = 0;
    for (uint32_t i = 0; i < info.nr_inputs; i++) {
        struct npv_edgetpu_layer l;
        (void)npv_edgetpu_model_input(exe, i, &l);
        in_total += (size_t)l.size_bytes * info.batch_size;
    }
    if (opts->input_path != NULL && (r = read_input(opts->input_path, in_total, &file_in)) < 0) {
        fprintf(stderr, "npuvfio run: %s: %s (the model's inputs are %zu bytes)\n",
                opts->input_path, strerror(-r), in_total);
        goto out;
    }
    r = npv_edgetpu_model_bind(tpu, m, &b);
    uint64_t h = EDGETPU_FNV_OFFSET, seed = 0x5eed;
    for (unsigned it = 0; r == 0 && it < n; it++) {
        const uint8_t *ins[64];
        size_t off = 0;
        for (uint32_t i = 0; i < info.nr_inputs && i < 64; i++) {
            size_t len;
            uint8_t *p = npv_edgetpu_bound_input(b, i, NULL, &len);
            for (size_t k = 0; k < len; k++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                p[k] = file_in != NULL ? file_in[off + k] : (uint8_t)(seed >> 56);
            }
            off += len;
            ins[i] = p;
        }
        for (uint32_t o = 0; o < info.nr_outputs; o++) {
            size_t len = 0;
            uint8_t *p = npv_edgetpu_bound_output(b, o, NULL, &len);
            memset(p, 0xcc, len); /* a stale output must not pass for a fresh one */
        }
        uint64_t t0 = now_ns();
        r = npv_edgetpu_model_invoke(b, NULL, NULL);
        lat[it] = now_ns() - t0;
        if (r < 0)
            break;
        r = 0;
        res->elapsed_ns += lat[it];
        res->iterations++;
        res->jobs++;
        for (uint32_t o = 0; o < info.nr_outputs; o++) {
            size_t len;
            const uint8_t *p = npv_edgetpu_bound_output(b, o, NULL, &len);
            res->bytes += len;
            h = edgetpu_fnv1a(h, p, len);
            if (!on_model || info.batch_size != 1 || info.nr_inputs > 64)
                continue;
            free(want);
            want = malloc(len);
            if (want == NULL) {
                r = -ENOMEM;
                break;
            }
            (void)edgetpu_pkg_pattern(exe, o, ins, want, len);
            for (size_t k = 0; k < len; k++)
                res->mismatches += p[k] != want[k];
        }
    }
    npv_sample_percentiles(lat, res);
    snprintf(res->what, sizeof(res->what), "%s: %u in, %u out; outputs FNV-1a %016llx",
             info.name[0] != '\0' ? info.name : "compiled model", info.nr_inputs, info.nr_outputs,
             (unsigned long long)h);
    if (on_model) {
        snprintf(res->reference, sizeof(res->reference),
                 "the model's data-path pattern (not the network's answer)");
        snprintf(res->detail, sizeof(res->detail),
                 "the model checked every chunk and address against the package; it does not "
                 "execute DarwiNN code, so the values prove the data path only");
    } else if (r == 0 && b != NULL) {
        snprintf(res->reference, sizeof(res->reference), "nothing (a chip: the network's outputs)");
        top5(exe, b, res->detail, sizeof(res->detail));
    }
out:
    npv_edgetpu_model_unbind(b);
    npv_edgetpu_model_unload(m);
    free(file_in);
    free(want);
    free(lat);
    return r;
}
