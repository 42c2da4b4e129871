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

/*
 * What a core's run needs from its PC registers at the operation-enable edge
 * (regs.h: the PC block, as rknpu_job_subcore_commit_pc of the vendor's
 * driver writes it).
 */
struct rknpu_run {
    uint32_t base;     /* regcmd IOVA of the first task */
    uint32_t amount;   /* its REGISTER_AMOUNTS */
    uint32_t tasks;    /* TASK_NUMBER */
    bool pingpong;     /* TASK_PP_EN */
    uint32_t int_mask; /* INTERRUPT_MASK at the edge */
};

/*
 * A forwarding model: the same register map, soft resets, interrupts and
 * test port, but its cores compute nothing. A run's start is handed to
 * start() and its end comes back through npv_rknpu_model_finish: the virtual
 * RKNPU each client of an owner gets (npuvfio serve, serve/), whose runs the
 * owner runs on the real NPU. All callbacks are optional.
 */
struct rknpu_forward {
    void *arg;
    /*
     * OPERATION_ENABLE rose on core with a run the core takes (the rules of
     * the model's own start); gen names the run for npv_rknpu_model_finish.
     * Called under the core's lock from the event loop thread: must not
     * block. A negative errno refuses it: the core stays idle and the
     * client's register write fails with that error.
     */
    int (*start)(void *arg, unsigned core, uint64_t gen, const struct rknpu_run *run);
    /* A reset abandoned run gen of core (its finish will be ignored). Under the core's lock. */
    void (*abandon)(void *arg, unsigned core, uint64_t gen);
    /* The client's DMA map and unmap (npv_vus_config.dma_map / dma_unmap). */
    int (*dma_map)(void *arg, npv_iova_t iova, uint64_t size, unsigned prot, void *vaddr, int fd,
                   uint64_t fd_offset);
    void (*dma_unmap)(void *arg, npv_iova_t iova, uint64_t size);
    void (*disconnect)(void *arg); /* the client left, its mappings gone */
};

/* Create the model, its server (not yet listening) and its core threads. */
int npv_rknpu_model_new(struct npv_ctx *ctx, struct npv_rknpu_model **out);
/* A forwarding model (struct rknpu_forward, copied): no core threads. */
int npv_rknpu_model_new_forwarding(struct npv_ctx *ctx, const struct rknpu_forward *fwd,
                                   struct npv_rknpu_model **out);
/*
 * Run gen of core ended: raw_bits raised in INTERRUPT_RAW_STATUS (the vector
 * fires where unmasked), tasks_done added to TASK_STATUS, the core idle. A
 * run a reset abandoned (gen differs) is ignored. Any thread.
 */
void npv_rknpu_model_finish(struct npv_rknpu_model *m, unsigned core, uint64_t gen,
                            uint32_t raw_bits, uint32_t tasks_done);
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
