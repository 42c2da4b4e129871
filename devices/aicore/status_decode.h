/* SPDX-License-Identifier: MIT */
/*
 * What the driver concludes from the values the AICore device writes: the
 * topology registers read at open and after a reset, the ready records, COND
 * (aicore_decide, driver_dispatch.c), the result record, and the launch,
 * copy-engine and reset status registers. Pure functions: the driver calls
 * exactly these, and tests/fuzz feeds them arbitrary values.
 */
#ifndef NPV_AICORE_STATUS_DECODE_H
#define NPV_AICORE_STATUS_DECODE_H

#include <stdbool.h>
#include <stdint.h>

#include <npuvfio/aicore.h>

#include "regs.h"

/* The global registers that describe the device, as read. */
struct aicore_topology_regs {
    uint64_t id, caps, stride, ctrl_reg_base, pmu_reg_base, devmem_base, devmem_size;
    uint64_t present[2], powered[2];
};

/* What the driver keeps of them: only filled in on success. */
struct aicore_shape {
    struct npv_aicore_topology topo;
    uint64_t stride, ctrl_reg_base, pmu_reg_base, devmem_base;
    uint32_t rank_phys[AICORE_MAX_SUBCORES]; /* usable sub-cores by rank */
    uint32_t phys_rank[AICORE_MAX_SUBCORES]; /* the inverse, for usable ids */
};

/* Present and powered: a sub-core the driver launches. */
bool aicore_topology_usable(const struct npv_aicore_topology *t, uint32_t phys);

/* 0; -ENODEV not an AICore (or off the bus); -EPROTO a shape the driver cannot hold. */
int aicore_decode_topology(const struct aicore_topology_regs *regs, struct aicore_shape *out);

/*
 * A ready record (done, physical id, core type) of rank against the sub-core
 * the driver launched there: 0 not written yet, 1 ready, -EPROTO a record
 * that names another rank, sub-core or core type.
 */
int aicore_decode_ready(uint32_t done, uint32_t phys, uint32_t type, uint32_t rank,
                        uint32_t want_phys, uint32_t clusters);

/*
 * The result record (a copy) of the run stamped epoch (never 0): -EINPROGRESS
 * not this run's or not final, -EIO the device reports an error, -EPROTO an
 * OK that does not add up with what the host counted, 0 success.
 */
int aicore_decode_record(const struct aicore_result *rec, uint64_t epoch, uint32_t nr_tasks,
                         uint32_t nr_cores, uint32_t host_tasks_done, bool all_exited);

/* LAUNCH_STATUS right after LAUNCH: 0 accepted, -EBUSY, -EIO. */
int aicore_decode_launch_status(uint64_t status);

/*
 * The copy engine: DONE and ERROR stay until the next GO, so only a new
 * COPY_DONE count says the status is this copy's; read after it, the status
 * is final (read before, it may still be BUSY): 0 done, -EIO.
 */
bool aicore_copy_finished(uint64_t done_before, uint64_t done);
int aicore_decode_copy_status(uint64_t status);

/* STATUS and GLOBAL_ERR after a RESET: 1 still settling, 0 ready, -ENODEV gone. */
int aicore_decode_reset(uint64_t status, uint64_t global_err);

#endif
