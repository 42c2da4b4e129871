/* SPDX-License-Identifier: MIT */
/*
 * The Edge TPU model: a vfio-user server that behaves as regs.h says, built
 * on the server framework only. BAR2 holds the CSRs: the tile, scalar-core
 * and user-HIB windows are shared pages the client mmaps (a poller thread
 * watches them: the tail doorbell is a store), everything else is trapped so
 * the model sees each access's width. BAR0 is the model's test port.
 */
#ifndef NPV_EDGETPU_MODEL_H
#define NPV_EDGETPU_MODEL_H

#include <stdbool.h>
#include <npuvfio/ctx.h>
#include <npuvfio/vfio_user_server.h>

struct npv_edgetpu_model;

/* Create the model and its server (not yet listening). */
int npv_edgetpu_model_new(struct npv_ctx *ctx, struct npv_edgetpu_model **out);
/* Stop the poller, free the server. NULL is a no-op. */
void npv_edgetpu_model_free(struct npv_edgetpu_model *m);
struct npv_vus *npv_edgetpu_model_server(struct npv_edgetpu_model *m);
/*
 * Add each program's compute time to *c from now on (NULL: stop); c outlives
 * the model's use of it. A program's compute: the execution time the
 * model gives it (EDGETPU_MODEL_EXEC_US) and its instructions run.
 */
struct npv_model_compute;
void npv_edgetpu_model_count_compute(struct npv_edgetpu_model *m, struct npv_model_compute *c);

/*
 * Run an Edge TPU server on socket_path in the calling thread until the first
 * client leaves (once) or forever. For tests that fork a child server.
 */
int npv_edgetpu_serve(const char *socket_path, bool once);

#endif
