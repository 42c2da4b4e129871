/* SPDX-License-Identifier: MIT */
/*
 * The AICore driver's reading of the records and status registers the
 * device writes (devices/aicore/status_decode.c): the result record of a run
 * (check_record), a sub-core's ready record (step_ready), LAUNCH_STATUS,
 * the copy engine's COPY_DONE/COPY_STATUS and STATUS/GLOBAL_ERR after a
 * reset. Byte 0 % 5 picks the decoder; the rest is its input:
 *   0  the run (epoch, tasks, cores, tasks the host saw, all exited) and a
 *      64-byte result record
 *   1  rank, launched sub-core, clusters, and a ready record (done, id, type)
 *   2  LAUNCH_STATUS   3  COPY_DONE before and after, COPY_STATUS
 *   4  STATUS, GLOBAL_ERR
 * Aborts when a run succeeds on a record that is not its own, not OK, does
 * not add up or comes before every sub-core exited; when a ready record
 * naming another rank, sub-core or core type is accepted; when any status
 * but the documented success succeeds; or on an answer outside the set.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include "regs.h"
#include "status_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input after byte 0, read as little-endian fields; missing bytes read 0. */
struct reader {
    const uint8_t *p;
    size_t left;
};

static uint64_t take(struct reader *r, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        if (i < r->left)
            v |= (uint64_t)r->p[i] << (8 * i);
    size_t used = n < r->left ? n : r->left;
    r->p += used;
    r->left -= used;
    return v;
}

static void record(struct reader *in)
{
    uint64_t epoch = take(in, 8) | 1; /* the driver never stamps 0 */
    uint32_t nr_tasks = (uint32_t)take(in, 4), nr_cores = (uint32_t)take(in, 4);
    uint32_t host_done = (uint32_t)take(in, 4);
    bool all_exited = take(in, 1) & 1;
    struct aicore_result rec;
    uint8_t raw[sizeof(rec)];
    for (size_t i = 0; i < sizeof(raw); i++)
        raw[i] = (uint8_t)take(in, 1);
    memcpy(&rec, raw, sizeof(rec));
    int r = aicore_decode_record(&rec, epoch, nr_tasks, nr_cores, host_done, all_exited);
    require(r == 0 || r == -EINPROGRESS || r == -EIO || r == -EPROTO, "undocumented answer", r);
    if (rec.epoch != epoch)
        require(r == -EINPROGRESS, "another run's record decided this run", rec.epoch);
    if (r == -EIO)
        require(rec.verdict == AICORE_VERDICT_ERROR, "-EIO without an ERROR verdict", rec.verdict);
    if (r == 0)
        require(rec.verdict == AICORE_VERDICT_OK && rec.tasks_done == nr_tasks &&
                    rec.cores_exited == nr_cores && host_done == nr_tasks && all_exited,
                "success on a record that does not add up", rec.verdict);
}

static void ready(struct reader *in)
{
    uint32_t clusters = 1u + (uint32_t)take(in, 1) % AICORE_MAX_CLUSTERS;
    uint32_t nr_cores = clusters * AICORE_SUBCORES_PER_CLUSTER;
    uint32_t rank = (uint32_t)take(in, 1) % nr_cores, want = (uint32_t)take(in, 1) % nr_cores;
    uint32_t done = (uint32_t)take(in, 4), phys = (uint32_t)take(in, 4);
    uint32_t type = (uint32_t)take(in, 4);
    int r = aicore_decode_ready(done, phys, type, rank, want, clusters);
    require(r == 0 || r == 1 || r == -EPROTO, "undocumented answer", r);
    if (done == 0)
        require(r == 0, "an unwritten record decided", done);
    if (r == 1)
        require(done == rank + 1 && phys == want && type == aicore_core_type(clusters, want),
                "a record of another rank, sub-core or type accepted", phys);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct reader in = {data + 1, size - 1};
    switch (data[0] % 5) {
    case 0:
        record(&in);
        break;
    case 1:
        ready(&in);
        break;
    case 2: {
        uint64_t st = take(&in, 8);
        int r = aicore_decode_launch_status(st);
        require(r == 0 || r == -EBUSY || r == -EIO, "undocumented launch answer", st);
        require((r == 0) == (st == AICORE_LAUNCH_ACCEPTED), "launch accepted wrongly", st);
        break;
    }
    case 3: {
        uint64_t before = take(&in, 8), after = take(&in, 8), st = take(&in, 8);
        require(aicore_copy_finished(before, after) == (before != after), "copy count", after);
        int r = aicore_decode_copy_status(st);
        require(r == 0 || r == -EIO, "undocumented copy answer", st);
        require((r == 0) == (st == AICORE_COPY_DONE), "copy status", st);
        break;
    }
    default: {
        uint64_t st = take(&in, 8), err = take(&in, 8);
        int r = aicore_decode_reset(st, err);
        require(r == 0 || r == 1 || r == -ENODEV, "undocumented reset answer", st);
        if (st == ~0ull)
            require(r == -ENODEV, "an all-ones STATUS is not a gone device", st);
        if (r == 0)
            require((st & (AICORE_STATUS_RUNNING | AICORE_STATUS_POISONED)) == 0 && err == 0,
                    "ready while running, poisoned or in error", st);
        break;
    }
    }
    return 0;
}
