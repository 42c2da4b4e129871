/* SPDX-License-Identifier: MIT */
/* The AICore model's state, shared by its files (registers, windows, sub-cores and copy engine). */
#ifndef NPV_AICORE_MODEL_INTERNAL_H
#define NPV_AICORE_MODEL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../model_compute.h"
#include "model.h"
#include "regs.h"

enum core_state {
    CORE_OFF,        /* not launched (absent, powered off, or no run) */
    CORE_FIND_TABLE, /* launched: reads its table entries, then writes its ready record */
    CORE_LOST,       /* its table entry was not its window: never ready (the hang) */
    CORE_WAIT_OPEN,  /* ready record written, waits for a non-zero DMB */
    CORE_IDLE,       /* window open, waits for a new token */
    CORE_ACK_WAIT,   /* DELAY_ACK: the token is seen, its ACK is due at ack_due_ns */
    CORE_RUN,        /* ACK written, the task runs next */
    CORE_HUNG,       /* HANG: a task that never ends, until the watchdog */
    CORE_EXITED,
    CORE_FAULT, /* frozen by a fatal error */
};

/*
 * One sub-core. The window registers themselves live in the shared memory of
 * BAR2 / BAR3 (aicore_ctrl_cell, aicore_pmu_cell); what is kept here is the
 * model's own view: the last FAST_PATH and DMB values it accepted, and the
 * values it owns (COND, CTRL), which it re-publishes over any client store.
 */
struct aicore_subcore {
    enum core_state state;
    uint32_t rank; /* record index in this run's workers array */
    uint32_t fast_path, dmb;
    uint32_t cond, ctrl;
    uint32_t last_dmb; /* the DMB value the sub-core last acted on */
    uint32_t token;    /* the task being acknowledged / run */
    bool got_token;    /* a token reached it in this run */
    uint64_t task_ptr; /* the record's task field, read when the window opened */
    uint64_t ack_due_ns, hung_since_ns;
    uint64_t cycles; /* the virtual PMU cycle clock: declared work of every task run */
    /* one-shot faults armed through the test port */
    bool arm_hang, arm_drop_fin, arm_bad_phys, arm_stuck_exit;
    uint64_t arm_delay_ack_us; /* 0 = none */
};

struct copy_count {
    uint64_t addr, count;
};
#define AICORE_MODEL_COPY_ADDRS  1024u
#define AICORE_MODEL_TABLE_ADDRS 64u

struct table_stats {
    uint64_t reads, last, distinct;
    uint64_t seen[AICORE_MODEL_TABLE_ADDRS];
};

struct npv_aicore_model {
    struct npv_vus *srv;
    uint32_t clusters, nsub;
    uint64_t devmem_size;
    uint8_t *devmem;             /* device memory (its own mapping): touched by the worker only */
    bool trapped_windows;        /* BAR2/BAR3 not offered for mmap: every access a message */
    bool devmem_survives_reset;  /* the lenient model: RESET keeps device memory */
    uint8_t *ctrl_mem, *pmu_mem; /* BAR2 / BAR3 shared memory: the window registers */
    atomic_uint want_lock;       /* the event loop waits for the lock: the worker yields */
    float *scratch[3];
    uint64_t t0_ns; /* SYS_CNT origin */

    /* Everything below, under lock. */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    uint64_t
        gen; /* bumped by RESET, LAUNCH and client loss: in-flight worker results are dropped */

    uint64_t present[2], power_on[2];
    bool pmu_in_ctrl;
    uint64_t op_timeout_us;
    uint64_t global_err;
    bool devmem_clear_pending; /* RESET cleared device memory: the worker zeroes it first */
    bool poisoned;
    uint64_t fault_core;
    uint64_t launch_status, launches;

    /* run parameters as written, and as latched by the accepted LAUNCH */
    uint64_t p_ctrl_table, p_pmu_table, p_workers, p_workers_count, p_result, p_epoch;
    uint64_t r_ctrl_table, r_pmu_table, r_workers, r_result, r_epoch;
    bool running, result_pending;
    uint32_t launched, exited, run_tasks;
    uint64_t run_start_cnt;

    /* copy engine */
    uint64_t c_host, c_dev, c_len, c_dir;
    uint64_t copy_status, copy_done;
    bool copy_pending;

    struct aicore_subcore core[AICORE_MAX_SUBCORES];

    /* test port */
    uint64_t tp_fault_core, tp_fault_arg;
    bool arm_fail_copy;
    /* RESET_STUCK (one-shot) and RESET_DEAD; reset_incomplete: the last RESET never finished */
    bool arm_reset_stuck, reset_dead, reset_incomplete;
    uint64_t copy_query_addr, copies_h2d, copies_d2h, copies_failed;
    struct copy_count copy_counts[AICORE_MODEL_COPY_ADDRS];
    uint32_t nr_copy_counts;
    struct table_stats ctrl_stats, pmu_stats;
    uint64_t table_mismatches, bad_accesses, dispatches, idle_polls, pmu_counter_reads;
    uint64_t tasks[AICORE_MAX_SUBCORES];

    /* Where the workers add each task's compute time (npv_aicore_model_count_compute); NULL:
     * nowhere. */
    _Atomic(struct npv_model_compute *) compute;

    pthread_t worker;
    bool worker_started;
    bool stop;
};

static inline bool aicore_bit(const uint64_t bits[2], uint32_t i)
{
    return (bits[i / 64u] >> (i % 64u)) & 1u;
}

/* The window of physical id i answers: it exists, is present and powered. */
static inline bool aicore_window_live(const struct npv_aicore_model *m, uint32_t i)
{
    return i < m->nsub && aicore_bit(m->present, i) && aicore_bit(m->power_on, i);
}

/* A 32-bit register of window id in BAR2 (Ctrl) or where the Pmu registers are (BAR3 or BAR2). */
static inline uint32_t *aicore_ctrl_cell(const struct npv_aicore_model *m, uint32_t id,
                                         uint32_t reg)
{
    return (uint32_t *)(m->ctrl_mem + (size_t)id * AICORE_WINDOW_STRIDE + reg);
}

static inline uint32_t *aicore_pmu_cell(const struct npv_aicore_model *m, uint32_t id, uint32_t reg)
{
    uint8_t *base = m->pmu_in_ctrl ? m->ctrl_mem : m->pmu_mem;
    return (uint32_t *)(base + (size_t)id * AICORE_WINDOW_STRIDE + reg);
}

/* The client may store to a mapped window at any time: every access is one atomic word. */
static inline uint32_t aicore_cell_ld(const uint32_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline void aicore_cell_st(uint32_t *p, uint32_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* Take the model lock from the event loop: the polling worker lets it go at its next pass. */
void aicore_model_lock(struct npv_aicore_model *m);
void aicore_model_unlock(struct npv_aicore_model *m);

/* Record a sticky GLOBAL_ERR bit (under lock). */
void aicore_error(struct npv_aicore_model *m, uint64_t bits);
/*
 * A fatal error of sub-core i (or none: UINT32_MAX): poison, freeze, end the run with an
 * ERROR result record. Worker thread only, under lock (dropped around the record's DMA).
 */
void aicore_fatal(struct npv_aicore_model *m, uint32_t i, uint64_t bits);
uint64_t aicore_sys_cnt(const struct npv_aicore_model *m);

/* model_window.c: BAR2 (Ctrl) and BAR3 (Pmu): trapped accesses on the event loop, the poll. */
void aicore_bad_access(struct npv_aicore_model *m);
/* Values the sub-core owns, published into its window (under lock). */
void aicore_set_cond(struct npv_aicore_model *m, uint32_t id, uint32_t v);
void aicore_set_ctrl(struct npv_aicore_model *m, uint32_t id, uint32_t v);
/* Every window as the model's view says (RESET, LAUNCH, topology changes; under lock). */
void aicore_windows_publish(struct npv_aicore_model *m);
/* One pass over the mapped windows: take DMB / FAST_PATH stores, undo the others. */
bool aicore_windows_poll(struct npv_aicore_model *m);
int aicore_ctrl_access(void *arg, uint32_t index, uint64_t off, void *buf, size_t len,
                       bool is_write);
int aicore_pmu_access(void *arg, uint32_t index, uint64_t off, void *buf, size_t len,
                      bool is_write);

/* model_core.c: the worker thread (sub-cores, copy engine, result records). */
void *aicore_worker_main(void *arg);

#endif
