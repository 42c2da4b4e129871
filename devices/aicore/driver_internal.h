/* SPDX-License-Identifier: MIT */
/* The AICore driver's state, shared by its files (context, device memory, tables, runs). */
#ifndef NPV_AICORE_DRIVER_INTERNAL_H
#define NPV_AICORE_DRIVER_INTERNAL_H

#include <npuvfio/aicore.h>
#include <npuvfio/bar.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include <npuvfio/ring.h>

#include "regs.h"

static_assert(AICORE_MAX_SUBCORES <= NPV_AICORE_MAX_CORES, "the public bitmaps hold every id");
static_assert(AICORE_PMU_COUNTERS == NPV_AICORE_PMU_EVENTS, "one public counter per Pmu counter");

#define AICORE_DEVMEM_BLOCKS_MAX 64u
#define AICORE_DEVMEM_ALIGN      64u
#define AICORE_NO_TASK           UINT32_MAX

/* The driver's allocator of device memory: a sorted array of allocated blocks, first fit. */
struct aicore_devmem_block {
    uint64_t addr, len;
};
struct aicore_devmem {
    uint64_t base, size;
    struct aicore_devmem_block blocks[AICORE_DEVMEM_BLOCKS_MAX];
    uint32_t nr_blocks;
};

/*
 * A device-constant register table (Ctrl or Pmu) in device memory. `owned`
 * (the block is ours: addr valid, freed at close) and `committed` (its
 * content is on the device) are separate: a failed upload whose rollback
 * free also failed leaves it owned and uncommitted, and the next ensure
 * uploads into the same block.
 */
struct aicore_table {
    uint64_t *host; /* the image, in the context's staging DMA memory */
    npv_iova_t host_iova;
    size_t len;
    uint64_t addr;
    bool owned, committed;
    uint64_t uploads, commits;
};

enum aicore_run_state {
    RUN_FREE = 0,
    RUN_PREPARED,
    RUN_ACTIVE,
    RUN_FINISHED,
};

enum aicore_core_phase {
    CORE_WAIT_READY = 0, /* launched, its ready record not seen yet */
    CORE_WORKING,        /* window opened: tasks may be dispatched */
    CORE_EXITING,        /* DMB = EXIT written */
    CORE_EXITED,
};

/* The host's view of one launched sub-core during a run (the AICPU's per-core state). */
struct aicore_core_run {
    uint32_t phys;
    uint8_t phase;
    uint32_t next;    /* index into the run's per-core task order of the next task to dispatch */
    uint32_t running; /* task index, or AICORE_NO_TASK */
    uint32_t pending; /* task index dispatched behind it, or AICORE_NO_TASK */
    uint32_t running_token, pending_token;
    bool running_acked;
    uint32_t last_token;                 /* the last dispatched */
    uint32_t done_token;                 /* the last completed */
    uint64_t deadline_ns;                /* of the running task; while EXITING, of the exit */
    struct aicore_task_payload *payload; /* its two slots (host DMA memory) */
    npv_iova_t payload_iova;
    uint32_t first, count; /* its tasks in the run's core_order[] */
};

struct npv_aicore_run {
    struct npv_aicore *ac;
    unsigned slot;
    uint32_t stats_seq; /* its record in ac->stats while stats_open */
    bool stats_open;
    enum aicore_run_state state;
    /* Per slot DMA memory: workers, payloads, the result record. */
    struct npv_dma *dma;
    npv_iova_t iova;
    struct aicore_handshake *workers;
    struct aicore_result *result_rec;
    npv_iova_t workers_iova, result_iova;

    struct npv_aicore_task *tasks; /* [max_tasks] */
    uint8_t *task_done;            /* [max_tasks] */
    uint32_t *core_order;          /* [max_tasks] task indices grouped by core */
    uint32_t nr_tasks, tasks_done;
    struct aicore_core_run cores[AICORE_MAX_SUBCORES]; /* by rank */
    uint32_t nr_cores;
    bool pmu;
    uint32_t pmu_events[NPV_AICORE_PMU_EVENTS];
    struct npv_aicore_core_pmu pmu_out[AICORE_MAX_SUBCORES];

    uint64_t epoch;
    uint64_t ctrl_table, pmu_table;
    uint64_t start_ns, end_ns;
    uint64_t
        budget_at; /* CLOCK_MONOTONIC ns: prepare + budget (npv_aicore_prepare_within); 0 none */
    uint64_t phase_deadline_ns; /* handshake, or exit and record */
    int status;                 /* the run's error, kept while it winds down */
    bool abandoned;    /* failed while launched: may be on the device until the next reset */
    bool winding_down; /* every core told to exit; waiting for the record */
    struct npv_aicore_result result;
};

/*
 * A sub-core's PMU as the driver programmed it: its selectors (valid: they
 * and the cycle window are on the device), and the counts read when the
 * current run was armed, which its counts are taken from (driver_pmu.c).
 */
struct aicore_pmu_core {
    bool valid;
    uint32_t events[NPV_AICORE_PMU_EVENTS];
    uint32_t base[NPV_AICORE_PMU_EVENTS];
    uint64_t base_total;
};

struct npv_aicore {
    struct npv_ctx *ctx;
    struct npv_dev *dev;
    struct npv_domain *dom;
    struct npv_aicore_config cfg;
    const struct npv_aicore_mem_ops *ops;
    struct npv_bar *global, *ctrl, *pmu_bar;
    bool pmu_in_ctrl, gone, poisoned;
    bool dead; /* no reset completed in RESET_ATTEMPTS tries */

    struct npv_aicore_topology topo;
    uint64_t stride, ctrl_reg_base, pmu_reg_base;
    uint32_t nr_usable;
    uint32_t rank_phys[AICORE_MAX_SUBCORES]; /* launched sub-cores by rank */
    uint32_t phys_rank[AICORE_MAX_SUBCORES]; /* the inverse, for usable ids */

    struct aicore_devmem devmem;
    struct npv_dma *staging; /* the two tables' images */
    struct aicore_table ctrl_table, pmu_table;

    struct aicore_pmu_core pmu_core[AICORE_MAX_SUBCORES]; /* by physical id */
    struct npv_aicore_run runs[NPV_AICORE_SLOTS];
    uint64_t next_epoch;
    struct npv_aicore_run *active;
    /* Runs in lib/stats (stats.h): device "aicore:<device name>", queue "runs". */
    struct npv_inflight *stats;
    struct npv_aicore_counters counters;
};

/* driver.c */
uint64_t aicore_now_ns(void);
int aicore_global_read(struct npv_aicore *ac, uint64_t off, uint64_t *v);
int aicore_global_write(struct npv_aicore *ac, uint64_t off, uint64_t v);
int aicore_ctrl_read(struct npv_aicore *ac, uint32_t phys, uint32_t off, uint32_t *v);
int aicore_ctrl_write(struct npv_aicore *ac, uint32_t phys, uint32_t off, uint32_t v);
int aicore_pmu_read(struct npv_aicore *ac, uint32_t phys, uint32_t off, uint32_t *v);
/* Two Pmu registers, off and off + 4, in one 8-byte access (low first). */
int aicore_pmu_read64(struct npv_aicore *ac, uint32_t phys, uint32_t off, uint64_t *v);
int aicore_pmu_write(struct npv_aicore *ac, uint32_t phys, uint32_t off, uint32_t v);
bool aicore_core_usable(const struct npv_aicore *ac, uint32_t phys);
/* Reset the device, wait for it, read its topology again. */
/* Resets of the device, each bounded, tried RESET_ATTEMPTS times; ac->dead when none took. */
#define RESET_ATTEMPTS 3
int aicore_device_reset(struct npv_aicore *ac);
/* -ESTALE when PRESENT or POWER_ON differ from the topology the tables were built from. */
int aicore_launch_check_topology(struct npv_aicore *ac);

/* driver_devmem.c */
void aicore_devmem_init(struct aicore_devmem *m, uint64_t base, uint64_t size);

/* driver_table.c */
void aicore_table_build(struct npv_aicore *ac, struct aicore_table *t, uint64_t reg_base);
/* Upload t on first use (or after a failed one, or a reset); 0 once committed. */
int aicore_table_ensure(struct npv_aicore *ac, struct aicore_table *t);
/* Free an owned block (close): keyed on the address, whatever the committed flag says. */
void aicore_table_release(struct npv_aicore *ac, struct aicore_table *t);
/* The table a run with PMU on names: the Pmu table, or the Ctrl table where Pmu is in Ctrl. */
struct aicore_table *aicore_pmu_table_of(struct npv_aicore *ac);
/* The tables a run needs, committed (uploaded again after a reset). */
int aicore_tables_ensure(struct npv_aicore *ac, bool pmu);

/* driver_run.c */
int aicore_runs_init(struct npv_aicore *ac);
void aicore_runs_fini(struct npv_aicore *ac);
/* Stop the active run with err (reset, close). */
void aicore_run_abandon(struct npv_aicore_run *run, int err);
/* The run's record in ac->stats ends with status (0, or how it failed). */
void aicore_stats_finish(struct npv_aicore_run *run, int status);
/* driver_pmu.c */
int aicore_pmu_arm(struct npv_aicore_run *run);
/* Read a finished PMU run's counters and stop counting. */
int aicore_pmu_collect(struct npv_aicore_run *run);
/* The counters' baselines no longer hold (reset, a run abandoned): program in full next time. */
void aicore_pmu_forget(struct npv_aicore *ac);

/* driver_dispatch.c: the decide-transition rule (simpler's decide_slot_transition). */
struct aicore_transition {
    bool running_acked;    /* COND names the running task */
    bool complete_running; /* the running task finished */
    bool promote_pending;  /* the pending task is now the running one */
    bool pending_acked;    /* ... and it is ACKed already */
    bool complete_pending; /* ... and it is FINished already */
    bool slot_free;        /* a next task may be dispatched */
    bool invalid;          /* COND names neither task: the device is confused */
};
struct aicore_transition aicore_decide(uint32_t cond, uint32_t running_token, bool running_acked,
                                       uint32_t pending_token, uint32_t done_token);
/* A task written to the core's DMB with token: it runs, or waits behind the running one. */
void aicore_core_dispatched(struct aicore_core_run *c, uint32_t task, uint32_t token,
                            uint64_t deadline_ns);
/* A next task may be written: nothing runs, or the running one is ACKed and none waits. */
bool aicore_core_slot_free(const struct aicore_core_run *c);
/* Account a (valid) transition; the tasks it completed go to done[], oldest first: 0..2. */
unsigned aicore_core_apply(struct aicore_core_run *c, struct aicore_transition t,
                           uint64_t next_deadline_ns, uint32_t done[2]);
int aicore_run_step(struct npv_aicore_run *run);

#endif
