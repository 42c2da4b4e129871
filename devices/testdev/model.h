/* SPDX-License-Identifier: MIT */
/*
 * The generic test device's model: a vfio-user server that behaves as the
 * register map in regs.h says. Built on the server framework only.
 */
#ifndef NPV_TESTDEV_MODEL_H
#define NPV_TESTDEV_MODEL_H

#include <stdbool.h>
#include <npuvfio/ctx.h>
#include <npuvfio/vfio_user_server.h>

struct npv_testdev_model;

/* Create the model and its server (not yet listening). */
int npv_testdev_model_new(struct npv_ctx *ctx, struct npv_testdev_model **out);
/* Stop the poller, free the server. NULL is a no-op. */
void npv_testdev_model_free(struct npv_testdev_model *td);
struct npv_vus *npv_testdev_model_server(struct npv_testdev_model *td);
/*
 * Add each descriptor's compute time to *c from now on (NULL: stop); c outlives
 * the model's use of it. A descriptor's compute: its fetch and its
 * copy or fill.
 */
struct npv_model_compute;
void npv_testdev_model_count_compute(struct npv_testdev_model *m, struct npv_model_compute *c);

/*
 * Run a testdev server on socket_path in the calling thread until the first
 * client leaves (once) or forever. For tests that fork a child server.
 * Returns 0 or a negative errno.
 */
int npv_testdev_serve(const char *socket_path, bool once);

#endif
