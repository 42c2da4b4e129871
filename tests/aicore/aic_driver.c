/* SPDX-License-Identifier: MIT */
#include "aic_driver.h"

#include <check.h>
#include <string.h>

void aicd_open(struct aicd *d, const struct npv_aicore_model_config *mcfg,
               const struct npv_aicore_config *cfg)
{
    memset(d, 0, sizeof(*d));
    aic_open(&d->t, mcfg);
    int r = npv_aicore_open(d->t.dev, cfg, &d->ac);
    ck_assert_msg(r == 0, "npv_aicore_open: %s", npv_strerror(r));
    for (unsigned s = 0; s < NPV_AICORE_SLOTS; s++)
        ck_assert_int_eq(aicore_sample_build(d->ac, true, &d->g[s]), 0);
}

void aicd_close(struct aicd *d)
{
    for (unsigned s = 0; s < NPV_AICORE_SLOTS; s++)
        aicore_sample_free(d->ac, &d->g[s]);
    npv_aicore_close(d->ac);
    aic_close(&d->t);
}

int aicd_prepare(struct aicd *d, unsigned slot, bool pmu, uint32_t seed,
                 struct npv_aicore_run **run)
{
    aicore_sample_fill(&d->g[slot], seed);
    d->g[slot].desc.pmu = pmu;
    return npv_aicore_prepare(d->ac, slot, &d->g[slot].desc, run);
}

int aicd_finish(struct aicd *d, struct npv_aicore_run *run, bool *exact)
{
    struct npv_aicore_run_info info;
    npv_aicore_run_info(run, &info);
    int r = npv_aicore_wait(run, AIC_GENEROUS_NS);
    *exact = r == 0 && aicore_sample_check(&d->g[info.slot]) == 0;
    return r;
}

int aicd_run(struct aicd *d, unsigned slot, bool pmu, uint32_t seed, bool *exact)
{
    struct npv_aicore_run *run;
    *exact = false;
    int r = aicd_prepare(d, slot, pmu, seed, &run);
    if (r < 0)
        return r;
    r = npv_aicore_launch(run);
    if (r == 0)
        r = aicd_finish(d, run, exact);
    ck_assert_int_eq(npv_aicore_release(run), 0);
    return r;
}

uint64_t aicd_port(struct aicd *d, uint64_t off)
{
    return aic_port_rd(&d->t, off);
}

uint64_t aicd_copies_to(struct aicd *d, uint64_t dev_addr)
{
    aic_port_wr(&d->t, AICORE_TP_COPY_QUERY_ADDR, dev_addr);
    return aic_port_rd(&d->t, AICORE_TP_COPY_QUERY_COUNT);
}
