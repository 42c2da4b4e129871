/* SPDX-License-Identifier: MIT */
/*
 * The AICore stand-in's model: a vfio-user server that behaves as regs.h
 * says, built on the server framework only. BAR0 and the test port are
 * trapped; the Ctrl and Pmu windows are shared memory the worker polls
 * (or trapped, when built so; absent windows read 0). Sub-cores are state
 * machines stepped by one worker thread, not one OS thread each (a model
 * choice; simpler's simulator runs one per sub-core, SIM_AUTO_BLOCKDIM in
 * src/common/platform/sim/host/device_runner_base.h): 72 spinning threads on
 * two vCPUs livelock. The worker also runs the copy engine; device memory
 * lives in the model.
 */
#ifndef NPV_AICORE_MODEL_H
#define NPV_AICORE_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <npuvfio/ctx.h>
#include <npuvfio/vfio_user_server.h>

struct npv_aicore_model;

/* What the model is built as; zero fields take the defaults in brackets. */
struct npv_aicore_model_config {
    uint32_t clusters; /* 1..AICORE_MAX_CLUSTERS [AICORE_DEFAULT_CLUSTERS] */
    /*
     * false [default]: every sub-core powered, and present but for cluster
     * AICORE_DEFAULT_ABSENT_CLUSTER (when it exists); true: present / power_on
     * below, bit i = physical id i (bits past the topology must be clear).
     */
    bool custom_topology;
    uint64_t present[2], power_on[2];
    bool pmu_in_ctrl; /* Pmu registers inside the Ctrl window, BAR3 reads 0 [false] */
    /*
     * false [default]: BAR2 and BAR3 are offered for mmap and the worker polls
     * them; true: every window access is a message the model sees with its
     * width, and the Pmu counters clear on read as the part's (regs.h).
     */
    bool trapped_windows;
    /* false [default]: RESET clears device memory; true: it keeps it (the lenient model). */
    bool devmem_survives_reset;
    uint64_t devmem_size; /* bytes of device memory, 4 KiB..1 GiB [AICORE_DEVMEM_SIZE_DEFAULT] */
};

/* Create the model (cfg NULL: defaults), its worker and its server (not yet listening). */
int npv_aicore_model_new(struct npv_ctx *ctx, const struct npv_aicore_model_config *cfg,
                         struct npv_aicore_model **out);
/* Stop the worker, free the server. NULL is a no-op. */
void npv_aicore_model_free(struct npv_aicore_model *m);
struct npv_vus *npv_aicore_model_server(struct npv_aicore_model *m);
/*
 * Add each task's compute time to *c from now on (NULL: stop); c outlives
 * the model's use of it. A task's compute: its payload read, its kernel
 * run with its operands in and out.
 */
struct npv_model_compute;
void npv_aicore_model_count_compute(struct npv_aicore_model *m, struct npv_model_compute *c);

/*
 * Run a default AICore server on socket_path in the calling thread until the
 * first client leaves (once) or forever. For tests that fork a child server.
 */
int npv_aicore_serve(const char *socket_path, bool once);
/* The same with a configuration (NULL: defaults). */
int npv_aicore_serve_config(const char *socket_path, bool once,
                            const struct npv_aicore_model_config *cfg);

#endif
