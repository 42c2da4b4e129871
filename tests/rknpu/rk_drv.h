/* SPDX-License-Identifier: MIT */
/*
 * What the RKNPU driver suites share: the model in a child process (or the
 * real NPU named by NPUVFIO_TEST_RKNPU=ADDR: a platform device name such as
 * fdab0000.npu on vfio-platform, or a PCI address), the device opened in a
 * 4 GiB domain, the driver opened on it, and the model's test port.
 */
#ifndef NPV_TEST_RK_DRV_H
#define NPV_TEST_RK_DRV_H

#include <stdbool.h>
#include <npuvfio/bar.h>
#include <npuvfio/rknpu.h>

#include "child_server.h"
#include "regs.h"
#include "sample.h"

#define MS 1000000ull
/* Deadlines no healthy run comes near on a loaded machine; a test never waits them out. */
#define GENEROUS_NS (30000 * MS)

struct rk {
    struct vu_server srv;
    bool hardware;
    struct npv_ctx *ctx;
    struct npv_domain *dom;
    struct npv_dev *dev;
    struct npv_bar *port; /* the model's test port (BAR2), NULL on hardware */
    struct npv_rknpu *npu;
};

/* The model only: exit 77 (SKIPPED) with the reason when real hardware is named. */
void rk_require_model(const char *why);
/* Start the model (or find the hardware) and open the driver with cfg (NULL: defaults). */
void rk_open(struct rk *t, const struct npv_rknpu_config *cfg);
/* Open device and driver again on the model t already started (a fresh client). */
void rk_reopen(struct rk *t, const struct npv_rknpu_config *cfg);
/* Close the driver and the device, keep the model running. */
void rk_close_client(struct rk *t);
void rk_close(struct rk *t);

/* Arm a model fault on a core through the test port. */
void rk_fault(struct rk *t, unsigned core, enum rknpu_fault fault);
uint32_t rk_port_read(struct rk *t, uint32_t off);
/* The model's per-core counters on stderr (nothing on hardware): for failure messages. */
void rk_dump(struct rk *t);

/* Submit one job of the given tasks and wait for it: its status. */
int rk_run_tasks(struct rk *t, const struct npv_rknpu_task *tasks, uint32_t nr, uint32_t core_mask,
                 uint32_t domain_id, uint64_t timeout_ns);
/* Run s alone on core_mask and compare: 0 and *mismatches, or the job's error. */
int rk_run_mm(struct rk *t, struct rknpu_sample_mm *s, uint32_t core_mask, uint64_t *mismatches);

/* rk_run_mm on core_mask must succeed and match the CPU reference. */
void rk_assert_exact(struct rk *t, struct rknpu_sample_mm *s, uint32_t core_mask);

/* Open file descriptors, and mappings of memfds and device nodes, of this process. */
unsigned rk_fd_count(void);
unsigned rk_map_count(void);
/* Resident set of this process, bytes. */
uint64_t rk_rss_bytes(void);

#endif
