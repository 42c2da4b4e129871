/* SPDX-License-Identifier: MIT */
/*
 * What the AICore suites share: the model in a child process (or a real
 * device named by NPUVFIO_TEST_AICORE=ADDR), opened as a raw client (no
 * driver) with its BARs mapped, and the host side of the handshake done by
 * hand, so a test can drive the device one register at a time.
 *
 * API, for the model's suites and the driver's:
 *   aic_require_model(why)      exit 77 (SKIPPED) with why when hardware is named
 *   aic_server_start(s, cfg)    the model (cfg NULL: defaults) in a child; returns once it listens
 *   aic_open(t, cfg)            start the model (or find the hardware), open the device in a
 *                               domain, map BAR0..3 (t->port is NULL on hardware)
 *   aic_open_at(t, path)        the same on a server already listening at path
 *   aic_close(t)                close and free everything, kill the child
 *   aic_rd / aic_wr             a global register (BAR0, 64-bit)
 *   aic_ctrl_rd / aic_ctrl_wr   a Ctrl window register of physical id (32-bit)
 *   aic_pmu_rd / aic_pmu_wr     a Pmu register, in BAR3 or in the Ctrl window when aliased
 *   aic_port_rd / aic_port_wr   the model's test port (BAR1); aic_fault arms a fault
 *   aic_topology(t)             read PRESENT, POWER_ON, CAPS into t
 *   aic_buf_new / aic_buf_free  host memory mapped in the domain (IOVA, VA)
 *   aic_copy(t, dir, iova, dev, len)  one copy-engine transfer: its final COPY_STATUS
 *   aic_upload_tables(t, ctrl, pmu)   build the Ctrl (and Pmu, unless 0) tables for the
 *                               present, powered sub-cores and copy them to those device addresses
 * and the hand-driven run (struct aic_run):
 *   aic_run_new / aic_run_free  workers, payload slots and result record for every sub-core
 *   aic_run_launch(t, r, ctrl, pmu, epoch)  clear the records, write the parameters, LAUNCH;
 *                               returns LAUNCH_STATUS
 *   aic_run_wait_ready(t, r, n) wait until n records say done; fills r->phys[] by rank
 *   aic_run_open(t, r, rank)    task pointer, FAST_PATH open, DMB = IDLE, wait COND = IDLE
 *   aic_run_slot(r, rank, token)  payload slot [token & 1] of rank's sub-core
 *   aic_task_new / aic_task_free  fp32 operands (seeded) and a result buffer for one kernel
 *   aic_task_fill(r, rank, token, k, work)  write k into rank's slot for token
 *   aic_task_exact(k)           the result equals the CPU reference bit for bit
 *   aic_dispatch(t, phys, token) DMB = token
 *   aic_wait_cond(t, phys, want, ns)  0, or -ETIMEDOUT with the last COND in *last
 *   aic_wait_result(t, r, ns)   0 once the result's epoch is this run's, else -ETIMEDOUT
 *   aic_exit_all(t, r)          DMB = EXIT on every launched sub-core, wait EXITED on each
 */
#ifndef NPV_TEST_AIC_HARNESS_H
#define NPV_TEST_AIC_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <npuvfio/bar.h>
#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>

#include "aicore/model.h"
#include "aicore/regs.h"
#include "child_server.h"

#define AIC_MS 1000000ull
/* Deadlines no healthy step comes near on a loaded machine; a passing test never waits them out. */
#define AIC_GENEROUS_NS (20000 * AIC_MS)

struct aic {
    struct vu_server srv;
    bool hardware;
    struct npv_ctx *ctx;
    struct npv_domain *dom;
    struct npv_dev *dev;
    struct npv_bar *global, *port, *ctrl, *pmu;
    /* aic_topology() */
    uint32_t clusters, nsub;
    uint64_t present[2], power_on[2];
    bool pmu_in_ctrl;
};

struct aic_buf {
    struct npv_dma *dma;
    void *va;
    uint64_t iova;
    size_t len;
};

struct aic_run {
    struct aic_buf workers, payloads, result;
    uint64_t epoch;
    uint32_t nr;                        /* sub-cores launched */
    uint32_t phys[AICORE_MAX_SUBCORES]; /* by rank, from the ready records */
};

void aic_require_model(const char *why);
void aic_server_start(struct vu_server *s, const struct npv_aicore_model_config *cfg);
void aic_open(struct aic *t, const struct npv_aicore_model_config *cfg);
void aic_open_at(struct aic *t, const char *path);
void aic_close(struct aic *t);

uint64_t aic_rd(struct aic *t, uint64_t off);
void aic_wr(struct aic *t, uint64_t off, uint64_t v);
uint32_t aic_ctrl_rd(struct aic *t, uint32_t phys, uint32_t reg);
void aic_ctrl_wr(struct aic *t, uint32_t phys, uint32_t reg, uint32_t v);
uint32_t aic_pmu_rd(struct aic *t, uint32_t phys, uint32_t reg);
void aic_pmu_wr(struct aic *t, uint32_t phys, uint32_t reg, uint32_t v);
uint64_t aic_port_rd(struct aic *t, uint64_t off);
void aic_port_wr(struct aic *t, uint64_t off, uint64_t v);
void aic_fault(struct aic *t, uint32_t phys, uint64_t kind, uint64_t arg);
void aic_topology(struct aic *t);
bool aic_live(const struct aic *t, uint32_t phys);

void aic_buf_new(struct aic *t, size_t len, struct aic_buf *b);
void aic_buf_free(struct aic_buf *b);
uint64_t aic_copy(struct aic *t, uint64_t dir, uint64_t iova, uint64_t dev, uint64_t len);
void aic_upload_tables(struct aic *t, uint64_t ctrl_dev, uint64_t pmu_dev);

struct aic_task {
    struct aic_buf a, b, c;
    uint32_t kernel, m, n, k;
};

void aic_run_new(struct aic *t, struct aic_run *r);
void aic_run_free(struct aic_run *r);
uint64_t aic_run_launch(struct aic *t, struct aic_run *r, uint64_t ctrl, uint64_t pmu,
                        uint64_t epoch);
void aic_run_wait_ready(struct aic *t, struct aic_run *r, uint32_t n);
void aic_run_open(struct aic *t, struct aic_run *r, uint32_t rank);
struct aicore_task_payload *aic_run_slot(struct aic_run *r, uint32_t rank, uint32_t token);
void aic_dispatch(struct aic *t, uint32_t phys, uint32_t token);
int aic_wait_cond(struct aic *t, uint32_t phys, uint32_t want, uint64_t ns, uint32_t *last);
int aic_wait_result(struct aic *t, struct aic_run *r, uint64_t ns);
void aic_exit_all(struct aic *t, struct aic_run *r);
void aic_task_new(struct aic *t, struct aic_task *k, uint32_t kernel, uint32_t m, uint32_t n,
                  uint32_t kk, uint32_t seed);
void aic_task_free(struct aic_task *k);
void aic_task_fill(struct aic_run *r, uint32_t rank, uint32_t token, const struct aic_task *k,
                   uint32_t work);
bool aic_task_exact(const struct aic_task *k);
uint64_t aic_now_ns(void);

#endif
