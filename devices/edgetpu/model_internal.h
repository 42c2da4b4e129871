/* SPDX-License-Identifier: MIT */
/* The Edge TPU model's state, shared by its files (registers, queue engine). */
#ifndef NPV_EDGETPU_MODEL_INTERNAL_H
#define NPV_EDGETPU_MODEL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../model_compute.h"
#include "model.h"
#include "model_pkg.h"
#include "regs.h"

/* Reads of scu_ctrl_3 (or of an init flag) before a status bit follows its control. */
#define EDGETPU_MODEL_SETTLE_READS 2u

/*
 * One W0C status register in a mapped window: the model's value, and the
 * value it last stored, so a store by the driver shows as a difference.
 */
struct w0c_reg {
    uint32_t off;
    uint64_t val;
    uint64_t stored;
};

struct npv_edgetpu_model {
    struct npv_vus *srv;
    uint8_t *bar2; /* the shared BAR2 memory (the three windows are mapped by the client) */

    /* Everything below, under lock (event loop for trapped accesses, poller for the windows). */
    pthread_mutex_t lock;

    bool gone; /* EDGETPU_FAULT_DEVICE_GONE: reads all-ones, nothing runs */

    /* SCU */
    uint32_t scu_ctrl_0, scu_ctrl_2, scu_ctrl_3_rw, scu_ctr_6;
    uint32_t scu3_cur;    /* the RO bits as software reads them now */
    uint32_t scu3_target; /* the RO bits once settled */
    unsigned scu3_settle; /* reads left until scu3_cur = scu3_target */
    bool gcb_in_reset;
    uint64_t
        reset_gen; /* bumped at every GCB reset edge: a late write of an old queue is dropped */
    unsigned init_settle; /* reads of an init flag left until page_table_init/msix_table_init */
    uint64_t idle_register;

    /* kernel HIB */
    uint64_t extended_table;
    uint64_t translation_enable;
    uint64_t intvecctl[7]; /* 0x46018 .. 0x46048 */
    uint64_t kdma_pause, kdma_pause_mask, status_block_delay;
    uint64_t pte[EDGETPU_PAGE_TABLE_ENTRIES];
    /* Slots already counted as not holding a client IOVA (each counted once per value). */
    uint8_t pte_flagged[EDGETPU_PAGE_TABLE_ENTRIES];
    uint64_t pte_checked_gen; /* the DMA table generation the valid entries were checked at */

    /* user HIB, the model's side of the mapped registers */
    uint64_t iq_control_seen;
    bool iq_enabled;
    uint64_t iq_base, iq_sb_base;
    uint32_t iq_size;
    uint32_t fetched, completed; /* masked ring indexes */
    bool fatal;
    bool hung;
    uint64_t hib_error, first_error, fault_address;
    uint64_t sc_host_count;
    uint64_t sc_error;
    struct w0c_reg iq_int_status, sc_host_int_status, fatal_int_status;

    /* test port */
    uint32_t fault_armed;
    bool late_sb;
    uint64_t late_sb_us;
    uint64_t bad_pte_count, bad_pte_value, split_accesses, high_dma_count;
    uint64_t exec_us;      /* a program's run time after its chunk was consumed */
    uint64_t unacked_irqs; /* vectors not raised: status bit still set */
    uint64_t gcb_resets;
    bool uhib_trapped; /* strict: the user-HIB page is trapped, so every access width is seen */

    /*
     * Programs consumed (status block written) and not yet run: the chip's
     * scalar core runs a chunk after the queue's DMA consumed it.
     */
    struct edgetpu_exec {
        uint8_t *chunk;
        uint32_t size;
        int64_t due_ns;
        uint64_t exec_ns; /* the execution time it was given (exec_us when consumed) */
    } * execq;
    uint32_t exec_cap, exec_head, exec_n;

    /* Compiled-model packages (model_pkg.h), NULL without: NPV_EDGETPU_MODEL_PACKAGES. */
    struct edgetpu_pkgs *pkgs;

    uint64_t work_count;     /* descriptors worked: the poller's idleness measure */
    atomic_int loop_waiting; /* the event loop waits for lock: the poller steps aside */

    pthread_t poller;
    bool poller_started;
    atomic_bool stop;
    /* Where the workers add each program's compute time (npv_edgetpu_model_count_compute); NULL:
     * nowhere. */
    _Atomic(struct npv_model_compute *) compute;
};

/* A 64-bit register in the mapped BAR2 memory. */
static inline uint64_t win_load(const struct npv_edgetpu_model *m, uint32_t off)
{
    return __atomic_load_n((const uint64_t *)(m->bar2 + off), __ATOMIC_ACQUIRE);
}

static inline void win_store(struct npv_edgetpu_model *m, uint32_t off, uint64_t v)
{
    __atomic_store_n((uint64_t *)(m->bar2 + off), v, __ATOMIC_RELEASE);
}

/* Count valid page-table entries whose memory the client has unmapped since the last look. */
void edgetpu_pte_recheck(struct npv_edgetpu_model *m);

/* model_queue.c: the instruction queue engine, the MMU and the executor. Under lock. */
void edgetpu_queue_poll(struct npv_edgetpu_model *m);
/* Set bits of a W0C status register in a window (after taking in the driver's clears). */
/*
 * Set bits of a W0C status register in a window (after taking in the driver's
 * clears). True when one of them went from 0 to 1: only then does the chip
 * raise the source's vector, so a driver that never acknowledges gets no
 * more interrupts (an acknowledge is the W0C write: libedgetpu
 * driver/interrupt/interrupt_controller.cc
 * InterruptController::ClearInterruptStatus).
 */
bool edgetpu_w0c_set(struct npv_edgetpu_model *m, struct w0c_reg *r, uint64_t bits);
/* A trapped store to a W0C status register: bits written 0 are cleared. */
void edgetpu_w0c_write(struct npv_edgetpu_model *m, struct w0c_reg *r, uint64_t v);
/* Drop programs consumed and not run (GCB reset, queue disabled). Under lock. */
void edgetpu_exec_flush(struct npv_edgetpu_model *m);
/* The model's current time, CLOCK_MONOTONIC ns. */
int64_t edgetpu_now_ns(void);
/* Raise a HIB error: sticky status, first error, fault address, queue fatal, FATAL_ERR vector. */
void edgetpu_raise_error(struct npv_edgetpu_model *m, uint64_t bits, uint64_t fault_va, bool has_va,
                         bool queue_word);
/* Deliver a source's interrupt through its INTVECCTL routing, when enabled. */
void edgetpu_raise_vector(struct npv_edgetpu_model *m, uint64_t vector);
/* Status bit `bits` of r set; the source's vector raised on its 0->1 edge if control enables it. */
void edgetpu_signal(struct npv_edgetpu_model *m, struct w0c_reg *r, uint64_t bits,
                    uint32_t control_off, uint64_t control_bit, uint64_t source);

#endif
