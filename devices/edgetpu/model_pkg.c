/* SPDX-License-Identifier: MIT */
/*
 * The model's compiled-model packages (model_pkg.h). Parameter caching as
 * libedgetpu's driver keeps it (driver/driver.cc with driver.h
 * current_parameter_caching_token_ and currently_cached_refs_): one token is
 * current; caching under another token drops every cached executable of the
 * old one; executables sharing the token (co-compiled) stay cached together;
 * a reset drops everything.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/edgetpu_model.h>

#include "model_pkg.h"
#include "package_check.h"
#include "regs.h"

#define MAX_PKGS   16u
#define MAX_TOKENS 16u

struct edgetpu_pkgs {
    struct npv_edgetpu_model *m[MAX_PKGS];
    bool cached[MAX_PKGS]; /* package k's caching executable ran under cached_token */
    uint32_t n;
    uint64_t cached_token;
    uint64_t caching_runs, runs, rejects, why, displaced, token_sel;
    struct {
        uint64_t token, runs;
    } tok[MAX_TOKENS];
    uint32_t ntok;
};

int edgetpu_pkgs_new(const char *paths, struct edgetpu_pkgs **out, char *why, size_t why_len)
{
    struct edgetpu_pkgs *p = calloc(1, sizeof(*p));
    char *dup = paths != NULL ? strdup(paths) : NULL;
    int r = 0;
    if (p == NULL || dup == NULL) {
        free(p);
        free(dup);
        return -ENOMEM;
    }
    char *save = NULL;
    for (char *t = strtok_r(dup, ":", &save); t != NULL; t = strtok_r(NULL, ":", &save)) {
        if (p->n == MAX_PKGS) {
            r = -E2BIG;
            break;
        }
        r = npv_edgetpu_model_load(NULL, t, &p->m[p->n], why, why_len);
        if (r < 0)
            break;
        p->n++;
    }
    free(dup);
    if (r < 0) {
        edgetpu_pkgs_free(p);
        return r;
    }
    *out = p;
    return 0;
}

void edgetpu_pkgs_free(struct edgetpu_pkgs *p)
{
    if (p == NULL)
        return;
    for (uint32_t k = 0; k < p->n; k++)
        npv_edgetpu_model_unload(p->m[k]);
    free(p);
}

static const struct npv_edgetpu_model_exe *exe_of(const struct edgetpu_pkgs *p, uint32_t k,
                                                  bool caching)
{
    return caching ? npv_edgetpu_model_caching(p->m[k]) : npv_edgetpu_model_main(p->m[k]);
}

static bool size_is(const struct npv_edgetpu_model_exe *exe, size_t len)
{
    struct npv_edgetpu_chunk c;
    /* Every real executable is one chunk (tests/edgetpu/data); the driver runs chunk 0 only. */
    return exe != NULL && npv_edgetpu_model_chunk(exe, 0, &c) == 0 && c.size == len;
}

bool edgetpu_pkgs_size_known(const struct edgetpu_pkgs *p, size_t len)
{
    for (uint32_t k = 0; p != NULL && k < p->n; k++)
        if (size_is(exe_of(p, k, true), len) || size_is(exe_of(p, k, false), len))
            return true;
    return false;
}

static int reject(struct edgetpu_pkgs *p, enum edgetpu_pkg_why why)
{
    p->rejects++;
    p->why = why;
    return -EPROTO;
}

void edgetpu_pkgs_reset(struct edgetpu_pkgs *p)
{
    if (p == NULL)
        return;
    p->cached_token = 0;
    memset(p->cached, 0, sizeof(p->cached));
}

static void count_token(struct edgetpu_pkgs *p, uint64_t token)
{
    for (uint32_t t = 0; t < p->ntok; t++)
        if (p->tok[t].token == token) {
            p->tok[t].runs++;
            return;
        }
    if (p->ntok < MAX_TOKENS)
        p->tok[p->ntok++] = (typeof(p->tok[0])){.token = token, .runs = 1};
}

/* The addresses a checked chunk carries (arrays freed by addrs_free). */
static int addrs_get(const struct npv_edgetpu_model_exe *exe, const uint8_t *chunk, size_t len,
                     struct edgetpu_pkg_addrs *a)
{
    struct npv_edgetpu_exe_info info;
    npv_edgetpu_model_exe_info(exe, &info);
    size_t nin = (size_t)info.nr_inputs * info.batch_size + 1;
    size_t nout = (size_t)info.nr_outputs * info.batch_size + 1;
    memset(a, 0, sizeof(*a));
    a->inputs = calloc(nin, sizeof(uint64_t));
    a->outputs = calloc(nout, sizeof(uint64_t));
    a->input_seen = calloc(nin, sizeof(bool));
    a->output_seen = calloc(nout, sizeof(bool));
    if (a->inputs == NULL || a->outputs == NULL || a->input_seen == NULL || a->output_seen == NULL)
        return -ENOMEM;
    return edgetpu_pkg_chunk_addrs(exe, 0, chunk, len, a);
}

static void addrs_free(struct edgetpu_pkg_addrs *a)
{
    free(a->inputs);
    free(a->outputs);
    free(a->input_seen);
    free(a->output_seen);
}

/* Whether the parameter address holds the package's parameters. 0, 1 (differ), or HIB bits <0. */
static int params_match(const struct npv_edgetpu_exe_info *info, const struct edgetpu_pkg_addrs *a,
                        const struct edgetpu_pkg_io *io, uint64_t *hib, uint64_t *bad_va)
{
    if (info->parameters_size == 0)
        return 0;
    if (!a->parameters_seen)
        return 1;
    uint8_t *buf = malloc(info->parameters_size);
    if (buf == NULL)
        return -ENOMEM;
    *hib = io->copy(io->arg, a->parameters, buf, info->parameters_size, false, bad_va);
    int r = *hib != 0 ? -EFAULT : memcmp(buf, info->parameters, info->parameters_size) != 0;
    free(buf);
    return r;
}

/* The parameter-caching executable of package k ran: the chip holds its parameters. */
static void cached_now(struct edgetpu_pkgs *p, uint32_t k, uint64_t token)
{
    if (token != p->cached_token) {
        /* driver.cc: another token's parameters are dropped from the chip's memory */
        bool any = false;
        for (uint32_t j = 0; j < p->n; j++)
            any |= p->cached[j];
        if (any)
            p->displaced++;
        memset(p->cached, 0, sizeof(p->cached));
        p->cached_token = token;
    }
    p->cached[k] = true;
    p->caching_runs++;
    count_token(p, token);
}

static int run_caching(struct edgetpu_pkgs *p, const uint32_t *cand, uint32_t nc,
                       const uint8_t *chunk, size_t len, const struct edgetpu_pkg_io *io,
                       uint64_t *hib, uint64_t *bad_va)
{
    /* Identical bitstreams (a model and its co-compiled twin): the parameters tell them apart. */
    for (uint32_t c = 0; c < nc; c++) {
        const struct npv_edgetpu_model_exe *exe = exe_of(p, cand[c], true);
        struct npv_edgetpu_exe_info info;
        npv_edgetpu_model_exe_info(exe, &info);
        struct edgetpu_pkg_addrs a;
        int r = addrs_get(exe, chunk, len, &a);
        if (r == 0)
            r = params_match(&info, &a, io, hib, bad_va);
        addrs_free(&a);
        if (r == -ENOMEM)
            return reject(p, EDGETPU_PKG_WHY_NOMEM);
        if (r == -EFAULT)
            return reject(p, EDGETPU_PKG_WHY_DMA);
        if (r == 0) {
            cached_now(p, cand[c], info.caching_token);
            return 0;
        }
    }
    return reject(p, EDGETPU_PKG_WHY_PARAMS);
}

static int run_main(struct edgetpu_pkgs *p, uint32_t k, const uint8_t *chunk, size_t len,
                    const struct edgetpu_pkg_io *io, uint64_t *hib, uint64_t *bad_va)
{
    const struct npv_edgetpu_model_exe *exe = exe_of(p, k, false);
    struct npv_edgetpu_exe_info info;
    npv_edgetpu_model_exe_info(exe, &info);
    struct edgetpu_pkg_addrs a;
    uint32_t batch = info.batch_size, nin = info.nr_inputs;
    uint8_t **in = calloc((size_t)nin * batch + 1, sizeof(*in));
    uint8_t *out = NULL, *scratch = NULL;
    int r = addrs_get(exe, chunk, len, &a);
    if (r < 0 || in == NULL) {
        r = reject(p, EDGETPU_PKG_WHY_NOMEM);
        goto out;
    }
    /* Every input and output of every batch element has its address in the chunk. */
    for (size_t i = 0; i < (size_t)nin * batch; i++)
        if (!a.input_seen[i]) {
            r = reject(p, EDGETPU_PKG_WHY_UNLINKED);
            goto out;
        }
    for (size_t o = 0; o < (size_t)info.nr_outputs * batch; o++)
        if (!a.output_seen[o]) {
            r = reject(p, EDGETPU_PKG_WHY_UNLINKED);
            goto out;
        }
    r = params_match(&info, &a, io, hib, bad_va);
    if (r != 0) {
        r = reject(p, r == -ENOMEM   ? EDGETPU_PKG_WHY_NOMEM
                      : r == -EFAULT ? EDGETPU_PKG_WHY_DMA
                                     : EDGETPU_PKG_WHY_PARAMS);
        goto out;
    }
    /* Inputs read through the page table, each for its whole size. */
    for (uint32_t i = 0; i < nin; i++) {
        struct npv_edgetpu_layer l;
        (void)npv_edgetpu_model_input(exe, i, &l);
        for (uint32_t b = 0; b < batch; b++) {
            size_t at = (size_t)i * batch + b;
            in[at] = malloc(l.size_bytes);
            if (in[at] == NULL) {
                r = reject(p, EDGETPU_PKG_WHY_NOMEM);
                goto out;
            }
            *hib = io->copy(io->arg, a.inputs[at], in[at], l.size_bytes, false, bad_va);
            if (*hib != 0) {
                r = reject(p, EDGETPU_PKG_WHY_DMA);
                goto out;
            }
        }
    }
    /* Scratch, when linked: read and written back, its whole size per batch element. */
    if (info.scratch_size != 0 && a.scratch_seen) {
        scratch = malloc(info.scratch_size);
        if (scratch == NULL) {
            r = reject(p, EDGETPU_PKG_WHY_NOMEM);
            goto out;
        }
        *hib = io->copy(io->arg, a.scratch, scratch, info.scratch_size, false, bad_va);
        if (*hib == 0)
            *hib = io->copy(io->arg, a.scratch, scratch, info.scratch_size, true, bad_va);
        if (*hib != 0) {
            r = reject(p, EDGETPU_PKG_WHY_DMA);
            goto out;
        }
    }
    /* Outputs: the data-path pattern, written through the page table. */
    const uint8_t *row[64];
    if (nin > 64) {
        r = reject(p, EDGETPU_PKG_WHY_NOMEM);
        goto out;
    }
    for (uint32_t o = 0; o < info.nr_outputs; o++) {
        struct npv_edgetpu_layer l;
        (void)npv_edgetpu_model_output(exe, o, &l);
        free(out);
        out = malloc(l.size_bytes);
        if (out == NULL) {
            r = reject(p, EDGETPU_PKG_WHY_NOMEM);
            goto out;
        }
        for (uint32_t b = 0; b < batch; b++) {
            for (uint32_t i = 0; i < nin; i++)
                row[i] = in[(size_t)i * batch + b];
            (void)edgetpu_pkg_pattern(exe, o, row, out, l.size_bytes);
            *hib = io->copy(io->arg, a.outputs[(size_t)o * batch + b], out, l.size_bytes, true,
                            bad_va);
            if (*hib != 0) {
                r = reject(p, EDGETPU_PKG_WHY_DMA);
                goto out;
            }
        }
    }
    p->runs++;
    r = 0;
out:
    for (size_t i = 0; in != NULL && i < (size_t)nin * batch; i++)
        free(in[i]);
    free(in);
    free(out);
    free(scratch);
    addrs_free(&a);
    return r;
}

int edgetpu_pkgs_exec(struct edgetpu_pkgs *p, const uint8_t *chunk, size_t len,
                      const struct edgetpu_pkg_io *io, uint64_t *hib, uint64_t *bad_va)
{
    uint32_t cand_pc[MAX_PKGS], cand_main[MAX_PKGS], npc = 0, nmain = 0;
    bool sized = false;
    *hib = 0;
    for (uint32_t k = 0; k < p->n; k++) {
        for (int pc = 1; pc >= 0; pc--) {
            const struct npv_edgetpu_model_exe *exe = exe_of(p, k, pc != 0);
            if (!size_is(exe, len))
                continue;
            sized = true;
            if (edgetpu_pkg_check_chunk(exe, 0, chunk, len, NULL) != 0)
                continue;
            struct npv_edgetpu_exe_info info;
            npv_edgetpu_model_exe_info(exe, &info);
            if (info.type == NPV_EDGETPU_EXE_PARAMETER_CACHING)
                cand_pc[npc++] = k;
            else
                cand_main[nmain++] = k;
        }
    }
    if (!sized)
        return 1;
    if (npc > 0)
        return run_caching(p, cand_pc, npc, chunk, len, io, hib, bad_va);
    if (nmain == 0)
        return reject(p, EDGETPU_PKG_WHY_CHUNK);
    /*
     * An execution-only program uses the parameters cached on the chip: they
     * must be there, under its token (libedgetpu runs the caching executable
     * first: driver.cc). Of identical bitstreams, the one whose are cached.
     */
    for (uint32_t c = 0; c < nmain; c++) {
        uint32_t k = cand_main[c];
        struct npv_edgetpu_exe_info info;
        npv_edgetpu_model_exe_info(exe_of(p, k, false), &info);
        if (info.type != NPV_EDGETPU_EXE_EXECUTION_ONLY ||
            (p->cached[k] && p->cached_token == info.caching_token))
            return run_main(p, k, chunk, len, io, hib, bad_va);
    }
    return reject(p, EDGETPU_PKG_WHY_NOT_CACHED);
}

bool edgetpu_pkgs_port(struct edgetpu_pkgs *p, uint64_t off, bool is_write, uint64_t *v)
{
    if (is_write) {
        if (off != EDGETPU_MODEL_PKG_TOKEN)
            return false;
        if (p != NULL)
            p->token_sel = *v;
        return true;
    }
    uint64_t x = 0;
    switch (off) {
    case EDGETPU_MODEL_PKG_CACHING_RUNS:
        x = p != NULL ? p->caching_runs : 0;
        break;
    case EDGETPU_MODEL_PKG_RUNS:
        x = p != NULL ? p->runs : 0;
        break;
    case EDGETPU_MODEL_PKG_REJECTS:
        x = p != NULL ? p->rejects : 0;
        break;
    case EDGETPU_MODEL_PKG_REJECT_WHY:
        x = p != NULL ? p->why : 0;
        break;
    case EDGETPU_MODEL_PKG_DISPLACED:
        x = p != NULL ? p->displaced : 0;
        break;
    case EDGETPU_MODEL_PKG_TOKEN:
        x = p != NULL ? p->token_sel : 0;
        break;
    case EDGETPU_MODEL_PKG_TOKEN_RUNS:
        for (uint32_t t = 0; p != NULL && t < p->ntok; t++)
            if (p->tok[t].token == p->token_sel)
                x = p->tok[t].runs;
        break;
    case EDGETPU_MODEL_PKG_COUNT:
        x = p != NULL ? p->n : 0;
        break;
    default:
        return false;
    }
    *v = x;
    return true;
}
