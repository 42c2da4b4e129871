/* SPDX-License-Identifier: MIT */
/* The AICore model's state, shared by its files (registers, windows, sub-cores and copy engine). */
#ifndef NPV_AICORE_MODEL_INTERNAL_H
#define NPV_AICORE_MODEL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

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

struct aicore_pmu {
    uint32_t ctrl0;
    uint32_t cnt[AICORE_PMU_COUNTERS];
    uint32_t evt[AICORE_PMU_COUNTERS];
    uint64_t total, start_cyc, stop_cyc;
};

struct aicore_subcore {
    enum core_state state;
    uint32_t rank; /* record index in this run's workers array */
    /* Ctrl window */
    uint32_t fast_path, dmb, dmb_high, cond;
    uint32_t last_dmb; /* the DMB value the sub-core last acted on */
    uint32_t token;    /* the task being acknowledged / run */
    uint64_t task_ptr; /* the record's task field, read when the window opened */
    uint64_t ack_due_ns, hung_since_ns;
    struct aicore_pmu pmu;
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
    uint8_t *devmem; /* device memory: touched by the worker only */
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
    uint64_t table_mismatches, bad_accesses, dispatches;
    uint64_t tasks[AICORE_MAX_SUBCORES];

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

/* Record a sticky GLOBAL_ERR bit (under lock). */
void aicore_error(struct npv_aicore_model *m, uint64_t bits);
/*
 * A fatal error of sub-core i (or none: UINT32_MAX): poison, freeze, end the run with an
 * ERROR result record. Worker thread only, under lock (dropped around the record's DMA).
 */
void aicore_fatal(struct npv_aicore_model *m, uint32_t i, uint64_t bits);
uint64_t aicore_sys_cnt(const struct npv_aicore_model *m);

/* model_window.c: BAR2 (Ctrl) and BAR3 (Pmu), on the event loop. */
int aicore_ctrl_access(void *arg, uint32_t index, uint64_t off, void *buf, size_t len,
                       bool is_write);
int aicore_pmu_access(void *arg, uint32_t index, uint64_t off, void *buf, size_t len,
                      bool is_write);

/* model_core.c: the worker thread (sub-cores, copy engine, result records). */
void *aicore_worker_main(void *arg);

#endif
