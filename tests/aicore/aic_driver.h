/* SPDX-License-Identifier: MIT */
/*
 * What the driver's suites share, on top of aic_harness.h: the driver opened
 * on the harness's device (the model in a child process, or the device named
 * by NPUVFIO_TEST_AICORE=ADDR) and the sample graph built twice, one per
 * pipeline slot, so a run can be checked bit-exact against the CPU reference.
 */
#ifndef NPV_TEST_AIC_DRIVER_H
#define NPV_TEST_AIC_DRIVER_H

#include <npuvfio/aicore.h>

#include "aic_harness.h"
#include "aicore/sample.h"

struct aicd {
    struct aic t;
    struct npv_aicore *ac;
    struct aicore_sample_graph g[NPV_AICORE_SLOTS];
};

/* mcfg: the model's build (NULL: defaults); cfg: the driver's (NULL: defaults). */
void aicd_open(struct aicd *d, const struct npv_aicore_model_config *mcfg,
               const struct npv_aicore_config *cfg);
void aicd_close(struct aicd *d);
/* Fresh inputs into slot's graph and prepare it (PMU as asked): the prepare's result. */
int aicd_prepare(struct aicd *d, unsigned slot, bool pmu, uint32_t seed,
                 struct npv_aicore_run **run);
/* Wait for a launched run of slot: its status; *exact says whether every output matched. */
int aicd_finish(struct aicd *d, struct npv_aicore_run *run, bool *exact);
/* prepare, launch, finish, release in slot: the first failure, 0 with *exact. */
int aicd_run(struct aicd *d, unsigned slot, bool pmu, uint32_t seed, bool *exact);
/* The model's counter (test port); only on the model. */
uint64_t aicd_port(struct aicd *d, uint64_t off);
/* H2D copies the model counted whose destination was dev_addr. */
uint64_t aicd_copies_to(struct aicd *d, uint64_t dev_addr);

#endif
