/* SPDX-License-Identifier: MIT */
/*
 * What the RKNPU suites share: the model in a child process (or a real NPU
 * named by NPUVFIO_TEST_RKNPU=ADDR), opened with libnpuvfio alone -- no
 * driver -- so a test programs the cores' registers itself: BAR access, DMA
 * buffers in one domain with the NPU's 32-bit (4 GiB) aperture, MSI-X
 * vectors, hand-built matmul programs (regcmd.h) and their CPU references.
 *
 * API (for every rknpu suite; extend it rather than copy it):
 *   rknpu_server_start(s)           the model in a child process, listening
 *   rknpu_require_model(why)        exit 77 (SKIPPED) when a real NPU is named
 *   rknpu_open(t) / rknpu_open_at(t, path) / rknpu_close(t)
 *   rknpu_rd(t, core, off) / rknpu_wr(t, core, off, v)     core window registers
 *   rknpu_port_rd(t, off) / rknpu_port_wr(t, off, v)       test port (model only)
 *   rknpu_fault(t, core, fault)     arm a fault on a core (model only)
 *   rknpu_buf_alloc(t, size, b) / rknpu_buf_free(b)        a mapped DMA buffer
 *   rknpu_mm_init(t, mm, prec, m, k, n, bias, relu, seed)  operands, packed, and
 *                                   the CPU reference; rknpu_mm_check(mm) compares
 *   rknpu_mm_program(t, mm, ntasks) chain ntasks copies of mm's task in one list
 *   rknpu_run(t, core, prog, ntasks, mask)   program the PC and start the run
 *   rknpu_wait(t, core, timeout_ns)  wait for the core's vector; the masked status
 *   rknpu_finish(t, core)           clear the status, drop OPERATION_ENABLE
 *   rknpu_soft_reset(t, core)       assert and release the reset lines; IN_RESET after
 *   rknpu_now_ns()                  CLOCK_MONOTONIC, for deadlines
 */
#ifndef NPV_TEST_RKNPU_HARNESS_H
#define NPV_TEST_RKNPU_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <npuvfio/bar.h>
#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include <npuvfio/irq.h>

#include "child_server.h"
#include "rknpu/regcmd.h"
#include "rknpu/regs.h"

#define RKNPU_MS 1000000ull
/* Deadlines no healthy run comes near on a loaded machine; a passing test never waits them out. */
#define RKNPU_GENEROUS_NS (30000 * RKNPU_MS)
/* How long a test waits to be sure that nothing arrives (only where the point is absence). */
#define RKNPU_QUIET_NS (300 * RKNPU_MS)

struct rknpu_buf {
    struct npv_dma *dma;
    uint32_t iova;
    void *va;
    size_t size;
};

struct rknpu_t {
    struct vu_server srv;
    bool hardware;
    struct npv_ctx *ctx;
    struct npv_domain *dom;
    struct npv_dev *dev;
    struct npv_bar *regs; /* BAR0: the three core windows */
    struct npv_bar *port; /* BAR2: the test port, NULL on hardware */
    struct npv_irq *irq;  /* MSI-X, vector c = core c */
};

/* A matmul with its operands in native layouts and its CPU reference. */
struct rknpu_mm {
    struct rknpu_matmul_desc desc;
    struct rknpu_buf a, b, bias, c;
    void *want; /* C in the native layout, as the CPU computes it */
    struct rknpu_buf prog;
    uint32_t prog_words; /* of the first task */
};

/* CLOCK_MONOTONIC in ns, for deadlines. */
int64_t rknpu_now_ns(void);

void rknpu_server_start(struct vu_server *s);
void rknpu_require_model(const char *why);
void rknpu_open(struct rknpu_t *t);
void rknpu_open_at(struct rknpu_t *t, const char *path);
void rknpu_close(struct rknpu_t *t);

uint32_t rknpu_rd(struct rknpu_t *t, unsigned core, uint32_t off);
void rknpu_wr(struct rknpu_t *t, unsigned core, uint32_t off, uint32_t v);
uint32_t rknpu_port_rd(struct rknpu_t *t, uint32_t off);
void rknpu_port_wr(struct rknpu_t *t, uint32_t off, uint32_t v);
void rknpu_fault(struct rknpu_t *t, unsigned core, enum rknpu_fault f);

void rknpu_buf_alloc(struct rknpu_t *t, size_t size, struct rknpu_buf *b);
void rknpu_buf_free(struct rknpu_buf *b);

void rknpu_mm_init(struct rknpu_t *t, struct rknpu_mm *mm, uint32_t prec, uint32_t m, uint32_t k,
                   uint32_t n, bool bias, bool relu, uint32_t seed);
void rknpu_mm_free(struct rknpu_mm *mm);
/* Write ntasks chained copies of mm's task into mm->prog (each 64-byte aligned). */
void rknpu_mm_program(struct rknpu_t *t, struct rknpu_mm *mm, uint32_t ntasks);
/* C equals the reference: bit-exact for int8, within 1e-3 relative for fp16. */
bool rknpu_mm_check(const struct rknpu_mm *mm);
/* Poison C so a stale result cannot pass. */
void rknpu_mm_poison(struct rknpu_mm *mm);

/* Program the PC as the vendor driver does and raise OPERATION_ENABLE. */
void rknpu_run(struct rknpu_t *t, unsigned core, const struct rknpu_buf *prog, uint32_t words,
               uint32_t ntasks, uint32_t int_mask);
/* The masked interrupt status once the core's vector fired, or 0 at the deadline. */
uint32_t rknpu_wait(struct rknpu_t *t, unsigned core, uint64_t timeout_ns);
void rknpu_finish(struct rknpu_t *t, unsigned core);
/* Assert and release SRST_A|SRST_H; returns the SOFT_RESET register read after, less PRESENT. */
uint32_t rknpu_soft_reset(struct rknpu_t *t, unsigned core);

#endif
