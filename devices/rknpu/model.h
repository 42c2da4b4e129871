/* SPDX-License-Identifier: MIT */
/*
 * The RKNPU model: a PCI-shaped stand-in for the RK3588 NPU (regs.h says why
 * and how), a vfio-user server with the three cores' 64 KiB windows in BAR0,
 * one MSI-X vector per core and the test port in BAR2. Each core runs its
 * register-command programs in a thread of its own, so three cores compute
 * at once.
 */
#ifndef NPV_RKNPU_MODEL_H
#define NPV_RKNPU_MODEL_H

#include <stdbool.h>
#include <npuvfio/ctx.h>
#include <npuvfio/vfio_user_server.h>

struct npv_rknpu_model;

/* Create the model, its server (not yet listening) and its core threads. */
int npv_rknpu_model_new(struct npv_ctx *ctx, struct npv_rknpu_model **out);
/* Stop the core threads, free the server. NULL is a no-op. */
void npv_rknpu_model_free(struct npv_rknpu_model *m);
struct npv_vus *npv_rknpu_model_server(struct npv_rknpu_model *m);
/*
 * Add each task's compute time to *c from now on (NULL: stop); c outlives the
 * model's use of it. Unit: one task (one matmul): its operands in, the
 * arithmetic, C out (a test-port task delay is not counted).
 */
struct npv_model_compute;
void npv_rknpu_model_count_compute(struct npv_rknpu_model *m, struct npv_model_compute *c);

/*
 * Run an RKNPU server on socket_path in the calling thread until the first
 * client leaves (once) or forever. For tests that fork a child server.
 */
int npv_rknpu_serve(const char *socket_path, bool once);

#endif
