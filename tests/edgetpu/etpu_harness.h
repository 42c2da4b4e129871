/* SPDX-License-Identifier: MIT */
/*
 * What the Edge TPU suites share: the model in a child process (or a real
 * chip named by NPUVFIO_TEST_EDGETPU=ADDR), the driver opened on it in a
 * domain below 4 GiB, the sample network loaded, one input and one output
 * buffer mapped into the chip's MMU.
 */
#ifndef NPV_TEST_ETPU_HARNESS_H
#define NPV_TEST_ETPU_HARNESS_H

#include <stdbool.h>
#include <npuvfio/bar.h>
#include <npuvfio/edgetpu.h>

#include <sys/types.h>

#include "child_server.h"
#include "sample.h"

#define MS 1000000ull
/* Deadlines no healthy run comes near on a loaded machine; a test never waits them out. */
#define GENEROUS_NS (30000 * MS)

struct etpu {
    struct vu_server srv;
    bool hardware;
    struct npv_ctx *ctx;
    struct npv_domain *dom;
    struct npv_dev *dev;
    struct npv_bar *port; /* the model's test port (BAR0), NULL on hardware */
    struct npv_bar *bar2; /* the test's own view of BAR2 */
    struct npv_edgetpu *tpu;
    struct edgetpu_sample sample;
    struct npv_edgetpu_executable *exe;
    struct npv_dma *in, *out;
    uint64_t in_va, out_va;
};

/* The model in a child process that dies with the test; returns once it listens. */
void etpu_server_start(struct vu_server *s);
/* Open the driver on a device already started at path (the model) and run one request. */
void etpu_open_at(struct etpu *t, const char *path, const struct npv_edgetpu_config *cfg);

/* The model only: exit 77 (SKIPPED) with the reason when a real chip is named. */
void etpu_require_model(const char *why);
/*
 * Start (or find) the device and open the driver with cfg (NULL: defaults),
 * plus the hooks named by NPV_EDGETPU_INJECT, in the completion mode
 * NPV_EDGETPU_COMPLETION names when it is set.
 */
void etpu_open(struct etpu *t, const struct npv_edgetpu_config *cfg);
void etpu_close(struct etpu *t);
/* Run request n of the sample: 0 and the output equal to the CPU reference, or the error. */
int etpu_run_check(struct etpu *t, uint32_t n, bool *exact);
/* Arm a model fault through the test port. */
void etpu_fault(struct etpu *t, uint64_t fault);
uint64_t etpu_port_read(struct etpu *t, uint64_t off);

#endif
