/* SPDX-License-Identifier: MIT */
/* The RKNPU driver's state, shared by its files (cores, domains, jobs, matmul). */
#ifndef NPV_RKNPU_DRIVER_INTERNAL_H
#define NPV_RKNPU_DRIVER_INTERNAL_H

#include <npuvfio/bar.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include <npuvfio/irq.h>
#include <npuvfio/rknpu.h>

#include "regs.h"

#define RKNPU_NO_JOB UINT32_MAX

/*
 * One domain of the sixteen. Command memory (the laid-out register-command
 * lists) must be reachable in the domain the job runs in, so each domain
 * carries its own, one slot per job of the queue, allocated with the domain
 * so that submit allocates nothing.
 */
struct rknpu_domain {
    struct npv_domain *dom; /* NULL: not created */
    uint32_t refs;          /* buffers + jobs not yet finished (+ 1 while claimed) */
    uint32_t jobs;          /* jobs queued or running in it: a wrapped buffer stays mapped */
    /*
     * NULL in a domain made by npv_rknpu_domain_claim: its whole address
     * space is the caller's, so it takes laid-out jobs only, until it is freed.
     */
    struct npv_dma *cmd;
    npv_iova_t cmd_iova;
    bool claimed; /* npv_rknpu_domain_claim's reference is held */
};

/* One core's share of a job: a chain of tasks laid out back to back. */
struct rknpu_part {
    uint8_t core;
    bool finished;
    uint16_t nr_tasks;
    uint32_t first_amount; /* PC_REGISTER_AMOUNTS of the first task */
    uint32_t done_mask;    /* the last task's done pair (rknpu_done_mask) */
    npv_iova_t first_iova;
    uint32_t seq; /* in the core's npv_inflight while running */
};

enum rknpu_job_state {
    RKNPU_JOB_FREE = 0,
    RKNPU_JOB_QUEUED,
    RKNPU_JOB_RUNNING,
    RKNPU_JOB_DONE,
};

struct rknpu_job {
    enum rknpu_job_state state;
    uint32_t domain_id;
    uint64_t cookie;
    uint64_t timeout_ns; /* from the start of each part on its core */
    uint64_t budget_at;  /* CLOCK_MONOTONIC ns: submit + budget (npv_rknpu_submit_within); 0 none */
    int32_t status;
    uint32_t dev_error;
    uint8_t nr_parts, parts_left;
    struct rknpu_part parts[NPV_RKNPU_NUM_CORES];
};

struct rknpu_core {
    struct npv_bar *bar; /* NULL: trapped access of region `region` (windows.h) */
    uint32_t region;
    struct npv_irq *irq; /* NPV_RKNPU_IRQ: the core's line */
    uint32_t irq_vec;
    bool irq_pending_unmask;
    uint64_t base; /* of the core's window in bar */
    struct npv_inflight *inflight;
    uint32_t running;    /* job index or RKNPU_NO_JOB */
    uint32_t queued;     /* parts waiting for this core */
    bool enable_high;    /* the 0 of the last start's enable pulse was lost */
    bool out_of_service; /* stalled, and this transport cannot reset it: its jobs fail */
};

/*
 * How a stalled core is brought back, per transport (driver.c choose_reset):
 * the PCI stand-in's own reset lines (GLOBAL_SOFT_RESET, the model's, not the
 * SoC's); VFIO_DEVICE_RESET of a platform device that reports it (all three
 * cores); or nothing -- the core is taken out of service.
 */
enum rknpu_reset_kind {
    RKNPU_RESET_MODEL_LINES,
    RKNPU_RESET_DEVICE,
    RKNPU_RESET_NONE,
};

struct npv_rknpu {
    struct npv_ctx *ctx;
    struct npv_dev *dev;
    struct npv_rknpu_config cfg;
    struct npv_bar *bars[NPV_RKNPU_NUM_CORES];
    unsigned nr_bars;
    struct rknpu_core cores[NPV_RKNPU_NUM_CORES];
    unsigned nr_cores;
    struct npv_irq *irqs[NPV_RKNPU_NUM_CORES]; /* one MSI-X set, or a line per core */
    struct npv_irq_waitset *waitset;
    bool irq_level; /* platform lines: masked after each interrupt */

    struct rknpu_domain domains[NPV_RKNPU_MAX_DOMAINS];
    struct npv_domain *attached; /* the domain the driver last attached the device to */
    uint64_t slot_bytes;         /* command memory of one job */

    struct rknpu_job *jobs; /* [queue_depth] */
    uint32_t *free_jobs;    /* stack of free indexes */
    uint32_t nr_free;
    uint32_t *pending; /* FIFO of queued job indexes, oldest first */
    uint32_t pending_head, nr_pending;
    uint32_t *done; /* FIFO of finished job indexes to reap */
    uint32_t done_head, nr_done;
    uint32_t pending_budgets; /* queued jobs with a budget: poll looks for expired ones */

    struct npv_rknpu_counters counters;
    /*
     * Queue mode (driver_queue.c): written by the control thread only, at
     * queue open and close, never while a queue's thread runs.
     */
    struct npv_rknpu_queue *queues[NPV_RKNPU_NUM_CORES];
    unsigned queues_open;
    /*
     * Bumped by a queue that reset the whole device (RKNPU_RESET_DEVICE):
     * every other queue fails its running job at its next poll.
     */
    uint64_t reset_epoch; /* __atomic */
    /*
     * The domain switch between queues (driver_queue.c): read and written by
     * every queue's thread, __atomic only. A queue starts a job when its
     * domain is `attached` and no queue owns a switch, publishing its
     * `running` count first and checking again after (a Dekker handshake
     * with the switching queue, which takes `owner`, then waits for every
     * core's count to be 0 before it attaches).
     */
    struct {
        /* The domain attached (npu->attached while no queue is open): a queue's is held. */
        struct npv_domain *attached;
        uint32_t owner; /* 0, or 1 + the core of the queue switching */
        struct {
            uint32_t running;
            uint8_t pad[60]; /* a cache line per core: only its own thread writes it */
        } core[NPV_RKNPU_NUM_CORES];
    } qsw __attribute__((aligned(64)));
    bool dead; /* a core could not be reset */
    enum rknpu_reset_kind reset_kind;
};

struct npv_rknpu_mem {
    struct npv_rknpu *npu;
    struct npv_dma *dma;
    npv_iova_t iova;
    uint64_t size;
    uint32_t domain_id;
    bool wrapped; /* dma is the caller's (npv_rknpu_mem_wrap): unmapped, never freed */
};

uint64_t rknpu_now_ns(void);

/* Domains (driver_domain.c). */
int rknpu_domain_get(struct npv_rknpu *npu, uint32_t id);
void rknpu_domain_put(struct npv_rknpu *npu, uint32_t id);
int rknpu_domain_attach(struct npv_rknpu *npu, uint32_t id);
void rknpu_domains_release(struct npv_rknpu *npu);

/* Cores (driver.c). */
int rknpu_core_start(struct npv_rknpu *npu, unsigned core, npv_iova_t regcmd, uint32_t amount,
                     uint32_t nr_tasks, uint32_t done_mask);
/* 1 finished, 0 still running, < 0 error; *status gets the interrupt status then. */
int rknpu_core_check(struct npv_rknpu *npu, unsigned core, uint32_t nr_tasks, uint32_t done_mask,
                     uint32_t *status);
int rknpu_core_reset(struct npv_rknpu *npu, unsigned core);
/*
 * One 32-bit register of a core's window, mapped or trapped (windows.h). A
 * read that fails, or of a page the driver may not touch, is all-ones; a
 * write returns 0 or < 0 (-EPERM for such a page).
 */
uint32_t rknpu_reg_read(struct npv_rknpu *npu, unsigned core, uint32_t off);
int rknpu_reg_write(struct npv_rknpu *npu, unsigned core, uint32_t off, uint32_t v);
/* Soft resets of one core, tried RESET_ATTEMPTS times, counted; npu->dead when none took. */
#define RESET_ATTEMPTS 3
void rknpu_core_recover(struct npv_rknpu *npu, unsigned core);
/* Fail the part running on core c (if any) with status, without touching the core. */
void rknpu_fail_running(struct npv_rknpu *npu, unsigned c, int32_t status);

/*
 * Register-command trailers (driver_matmul.c): every task's list ends with
 * RKNPU_TRAILER_WORDS words: the next task's PC BASE_ADDRESS and
 * REGISTER_AMOUNTS (no-ops for the last task), the barrier, and the
 * operation-enable command that starts the task's blocks.
 */
void rknpu_regcmd_trailer(uint64_t *trailer, uint32_t enable_mask);
void rknpu_regcmd_chain(uint64_t *trailer, npv_iova_t next, uint32_t next_amount);

/* Interrupts (driver_irq.c), NPV_RKNPU_IRQ only. */
int rknpu_irq_init(struct npv_rknpu *npu);
void rknpu_irq_fini(struct npv_rknpu *npu);
/* Sleep until a core's interrupt, until_ns or the earliest job deadline, whichever is first. */
void rknpu_irq_sleep(struct npv_rknpu *npu, uint64_t until_ns);
/* Unmask the level lines whose cores' status the last poll cleared. */
void rknpu_irq_rearm(struct npv_rknpu *npu);

/* Jobs (driver_job.c). */
uint32_t rknpu_task_words(uint32_t regcmd_count);
/*
 * Lay part p's tasks (job tasks p, p + n, ...) out from word *cursor of a
 * command-memory slot at slot / slot_iova, chained by their trailers.
 */
void rknpu_lay_out_part(struct npv_rknpu *npu, const struct npv_rknpu_job *job, unsigned p,
                        unsigned n, uint64_t *slot, npv_iova_t slot_iova, uint32_t *cursor,
                        struct rknpu_part *part);
/* Queues (driver_queue.c): close those left open (npv_rknpu_close). */
void rknpu_queues_close_all(struct npv_rknpu *npu);
int rknpu_jobs_init(struct npv_rknpu *npu);
void rknpu_jobs_fini(struct npv_rknpu *npu);
void rknpu_jobs_cancel_all(struct npv_rknpu *npu);
/* The earliest budget of a queued job, 0 when none has one. */
uint64_t rknpu_next_budget(const struct npv_rknpu *npu);

#endif
