/* SPDX-License-Identifier: MIT */
/*
 * The AICore driver's reading of a sub-core's COND register while it
 * dispatches tasks (aicore_decide, aicore_core_apply, aicore_core_slot_free
 * and aicore_core_dispatched in devices/aicore/driver_dispatch.c, simpler's
 * decide_slot_transition rule). One sub-core with 1..64 tasks (byte 0);
 * bytes 1-4 the token before the first (below AICORE_TOKEN_MAX - 64, so
 * tokens near the special COND values are reached). Then a script, one op byte each:
 *   op % 8 == 0  the driver dispatches the next task if the slot is free
 *   op % 8 == 1..6  the device writes ACK(running), FIN(running),
 *                   ACK(pending), FIN(pending), IDLE, FIN(last done)
 *   op % 8 == 7  the device writes the next 4 bytes, any value
 * and after each write the driver polls COND as step_working does. A
 * transition the rule calls invalid ends the run (the driver's -EPROTO).
 * Aborts when a task completes that was not dispatched, completes twice or
 * out of order, when a COND naming no token of the core (nor IDLE, nor its
 * reset value, which a token written right after the window opened may
 * still meet, nor the last FIN) is not invalid, or when the core's view
 * becomes inconsistent.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include "driver_internal.h"
#include "regs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TASKS 64u

/* The driver's view stays one of: nothing, a running task, a running task and one behind it. */
static void check_view(const struct aicore_core_run *c, uint32_t dispatched, uint32_t completed)
{
    require(c->running != AICORE_NO_TASK || (c->pending == AICORE_NO_TASK && c->running_token == 0),
            "a pending task without a running one", c->pending);
    if (c->running != AICORE_NO_TASK) {
        require(c->running == completed, "the running task is not the oldest unfinished",
                c->running);
        require(c->running_token != 0 && c->running_token <= c->last_token, "running token",
                c->running_token);
    }
    if (c->pending != AICORE_NO_TASK)
        require(c->pending == c->running + 1 && c->pending_token == c->running_token + 1,
                "the pending task is not the one behind the running one", c->pending);
    uint32_t in_flight = (c->running != AICORE_NO_TASK) + (c->pending != AICORE_NO_TASK);
    require(completed + in_flight == dispatched, "tasks lost or invented", dispatched);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5)
        return 0;
    uint32_t nr_tasks = 1u + data[0] % MAX_TASKS;
    uint32_t first = fuzz_rd32(data + 1) % (AICORE_TOKEN_MAX - 2 * MAX_TASKS);
    struct aicore_core_run c = {
        .running = AICORE_NO_TASK,
        .pending = AICORE_NO_TASK,
        .last_token = first,
        .count = nr_tasks,
    };
    uint8_t done[MAX_TASKS] = {0};
    uint32_t dispatched = 0, completed = 0;
    for (size_t at = 5; at < size; at++) {
        uint8_t op = data[at];
        uint32_t cond = 0;
        switch (op % 8) {
        case 0:
            if (aicore_core_slot_free(&c) && c.next < c.count) {
                require(c.next == dispatched, "next task", c.next);
                aicore_core_dispatched(&c, c.next, c.last_token + 1, 0);
                dispatched++;
            }
            check_view(&c, dispatched, completed);
            continue;
        case 1:
            cond = AICORE_COND_ACK(c.running_token);
            break;
        case 2:
            cond = AICORE_COND_FIN(c.running_token);
            break;
        case 3:
            cond = AICORE_COND_ACK(c.pending_token);
            break;
        case 4:
            cond = AICORE_COND_FIN(c.pending_token);
            break;
        case 5:
            cond = AICORE_COND_IDLE;
            break;
        case 6:
            cond = AICORE_COND_FIN(c.done_token);
            break;
        default:
            if (at + 4 >= size)
                return 0;
            cond = fuzz_rd32(data + at + 1);
            at += 4;
            break;
        }
        if (c.running == AICORE_NO_TASK)
            continue; /* step_working reads COND only with a task on the core */
        struct aicore_transition t =
            aicore_decide(cond, c.running_token, c.running_acked, c.pending_token, c.done_token);
        uint32_t id = cond & AICORE_COND_ID_MASK;
        bool names_task = id == c.running_token || (c.pending_token != 0 && id == c.pending_token);
        bool says_nothing = cond == AICORE_COND_IDLE || cond == AICORE_COND_RESET ||
                            (c.done_token != 0 && cond == AICORE_COND_FIN(c.done_token));
        if (!names_task && !says_nothing) {
            require(t.invalid, "a COND naming no task of the core accepted", cond);
            return 0; /* the driver fails the run: -EPROTO */
        }
        require(!t.invalid, "a COND naming the core's task refused", cond);
        require(!t.promote_pending || c.pending_token != 0, "promoted no pending task", cond);
        require(!t.complete_pending || t.promote_pending, "completed a pending task in place",
                cond);
        require(!t.complete_running || names_task, "completed on a COND naming no task", cond);
        uint32_t fin[2];
        unsigned n = aicore_core_apply(&c, t, 0, fin);
        require(n <= 2, "more than two completions from one COND", n);
        for (unsigned i = 0; i < n; i++) {
            require(fin[i] < dispatched, "a task completed that was never dispatched", fin[i]);
            require(!done[fin[i]], "a task completed twice", fin[i]);
            require(fin[i] == completed, "a task completed out of order", fin[i]);
            done[fin[i]] = 1;
            completed++;
        }
        check_view(&c, dispatched, completed);
    }
    return 0;
}
