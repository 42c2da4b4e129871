/* SPDX-License-Identifier: MIT */
/* The Edge TPU driver's state, shared by its files (bring-up, MMU, requests). */
#ifndef NPV_EDGETPU_DRIVER_INTERNAL_H
#define NPV_EDGETPU_DRIVER_INTERNAL_H

#include <npuvfio/bar.h>
#include <npuvfio/edgetpu.h>
#include <npuvfio/irq.h>

#include "regs.h"

#define EDGETPU_EXT_SLOTS_MAX EDGETPU_PAGE_TABLE_ENTRIES
#define FOUR_GIB              (1ull << 32)

struct edgetpu_l1 {
    struct npv_dma *dma; /* one 4 KiB page of 512 entries */
    npv_iova_t iova;
    uint32_t used;
};

/*
 * One request the caller has not collected yet, oldest first: claimed on the
 * ring, then consumed (the ring reported its status block), then finished
 * (SC_HOST_0 counted it) or failed.
 */
struct edgetpu_req {
    uint64_t deadline_ns; /* its own deadline: claim + request_timeout_ns */
    struct npv_cpl c;     /* once consumed */
    bool consumed;
    bool done; /* finished on the chip, counted before a reset re-based the counter */
};

struct npv_edgetpu {
    struct npv_ctx *ctx;
    struct npv_dev *dev;
    struct npv_domain *dom;
    struct npv_edgetpu_config cfg;
    struct npv_bar *bar;
    struct npv_irq *irq;
    struct npv_irq_waitset *ws; /* vectors 0, 4 and 12 of irq */
    bool gone;

    /* Queue memory: ring page and status block page, simple slots 4096 and 4097. */
    struct npv_dma *queue_dma;
    npv_iova_t queue_iova;
    struct npv_ring *ring;
    uint64_t ring_va, sb_va; /* their device VAs (simple space), not their IOVAs */

    /* Requests not collected yet, FIFO: [req_head, +req_n), the first held_n consumed. */
    struct edgetpu_req *reqs;
    uint32_t req_head, req_n, held_n;
    int held_fail;         /* what a reset does to consumed, unfinished requests (set before it) */
    uint32_t held_fail_at; /* which of them (from req_head) held_fail names: the expired one */
    uint32_t eio_left;     /* requests on the ring a fatal error's reset fails with -EIO */

    /* Extended space: level-1 tables per level-0 slot, a page bitmap, next-fit hint. */
    struct edgetpu_l1 *l1; /* [8192 - simple_entries] */
    uint32_t nr_l0;
    uint64_t *ext_bitmap; /* 1 bit per extended page */
    uint64_t ext_pages;
    uint64_t ext_hint;

    /* One instruction buffer per ring slot, mapped once. */
    struct npv_dma *instr_dma;
    uint64_t instr_va;

    /*
     * Parameter caching (libedgetpu driver.cc current_parameter_caching_token_
     * and currently_cached_refs_): the token whose parameters the chip holds,
     * and an epoch bumped when they are dropped (another token cached, a
     * reset). A bound model's parameters are cached while its stamp equals it.
     */
    uint64_t pc_token;
    uint64_t pc_epoch;

    uint32_t sc_host_base;   /* sc_host_int_count field 0 at open / reset */
    uint32_t sc_host_reaped; /* completions collected since then, mod 2^16 */
    struct npv_edgetpu_error last_error;
};

struct npv_edgetpu_executable {
    struct npv_edgetpu *tpu;
    struct npv_edgetpu_executable_desc d;
    uint8_t *instructions;
    struct npv_edgetpu_field *fields;
    struct npv_dma *params_dma; /* NULL without parameters */
    uint64_t params_va;
    size_t params_len;
    struct npv_dma *scratch_dma; /* queue_entries * scratch_stride, NULL without scratch */
    uint64_t scratch_va;
    size_t scratch_stride;
};

/* driver_mmu.c */
int edgetpu_mmu_init(struct npv_edgetpu *tpu);
void edgetpu_mmu_fini(struct npv_edgetpu *tpu);
/* Zero every page-table slot and restore extended_table (open, after every reset). */
int edgetpu_mmu_clear(struct npv_edgetpu *tpu);
/* Write the chip's page table again after a reset: simple slots and level-0 slots. */
int edgetpu_mmu_program(struct npv_edgetpu *tpu);
int edgetpu_map_simple(struct npv_edgetpu *tpu, uint32_t slot, npv_iova_t iova);
/* Map [iova, iova + len) into extended space; *va keeps iova's page offset. */
int edgetpu_map_iova(struct npv_edgetpu *tpu, npv_iova_t iova, size_t len, uint64_t *va);

/* driver_request.c: bits [bit, bit + 32) of buf get v, LSB first within bytes. */
void edgetpu_patch32(uint8_t *buf, uint32_t bit, uint32_t v);

/* driver.c */
int edgetpu_write64(struct npv_edgetpu *tpu, uint64_t off, uint64_t v);
int edgetpu_read64(struct npv_edgetpu *tpu, uint64_t off, uint64_t *v);
uint64_t edgetpu_mono_ns(void);

/* driver_request.c: one descriptor for a chunk already in memory at device VA va. */
int edgetpu_submit_chunk(struct npv_edgetpu *tpu, uint64_t va, uint32_t size, uint64_t cookie);
/* driver_request.c: wait for the one request in flight; 0 or its failure (npv_edgetpu_run). */
int edgetpu_wait_one(struct npv_edgetpu *tpu);

/* driver_request.c: requests the chip finished before a reset keep their success. Under recover. */
void edgetpu_reqs_at_reset(struct npv_edgetpu *tpu, bool chip_error);
/* Acknowledge the interrupts a wait sleeps on (libedgetpu's handlers' W0C writes). */
void edgetpu_ack(struct npv_edgetpu *tpu);

#endif
