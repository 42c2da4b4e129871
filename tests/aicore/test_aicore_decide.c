/* SPDX-License-Identifier: MIT */
/*
 * The driver's decide-transition rule (hw-native-sys/simpler's
 * SchedulerContext::decide_slot_transition in
 * src/a2a3/runtime/tensormap_and_ringbuffer/runtime/scheduler/scheduler_completion.cpp)
 * on its own: what one COND value means for a core with a running and
 * possibly a pending task.
 */
#include <check.h>

#include "driver_internal.h"
#include "npv_test.h"

START_TEST(running_ack_frees_the_pending_slot)
{
    struct aicore_transition t = aicore_decide(AICORE_COND_ACK(5), 5, false, 0, 4);
    ck_assert(t.running_acked && !t.complete_running && t.slot_free && !t.invalid);
}
END_TEST

START_TEST(running_fin_without_pending_completes_it)
{
    struct aicore_transition t = aicore_decide(AICORE_COND_FIN(5), 5, true, 0, 4);
    ck_assert(t.complete_running && !t.promote_pending && !t.invalid);
}
END_TEST

START_TEST(running_ack_with_a_pending_task_frees_nothing)
{
    struct aicore_transition t = aicore_decide(AICORE_COND_ACK(5), 5, true, 6, 4);
    ck_assert(!t.slot_free && !t.complete_running && !t.invalid);
}
END_TEST

START_TEST(running_fin_with_a_pending_task_promotes_it_unacked)
{
    struct aicore_transition t = aicore_decide(AICORE_COND_FIN(5), 5, true, 6, 4);
    ck_assert(t.complete_running && t.promote_pending && !t.pending_acked && !t.complete_pending);
    ck_assert(!t.slot_free && !t.invalid);
}
END_TEST

START_TEST(pending_ack_implies_the_running_task_finished)
{
    struct aicore_transition t = aicore_decide(AICORE_COND_ACK(6), 5, true, 6, 4);
    ck_assert(t.complete_running && t.promote_pending && t.pending_acked && !t.complete_pending);
}
END_TEST

START_TEST(pending_fin_completes_both)
{
    struct aicore_transition t = aicore_decide(AICORE_COND_FIN(6), 5, true, 6, 4);
    ck_assert(t.complete_running && t.promote_pending && t.complete_pending);
}
END_TEST

START_TEST(idle_or_the_previous_fin_say_nothing_new)
{
    struct aicore_transition t = aicore_decide(AICORE_COND_IDLE, 5, false, 0, 0);
    ck_assert(!t.invalid && !t.complete_running && !t.slot_free);
    t = aicore_decide(AICORE_COND_FIN(4), 5, false, 0, 4);
    ck_assert(!t.invalid && !t.complete_running);
}
END_TEST

/* The first token goes out right after the window opens: COND may still be at its reset value. */
START_TEST(the_reset_value_before_the_window_is_seen_open_says_nothing_new)
{
    struct aicore_transition t = aicore_decide(AICORE_COND_RESET, 1, false, 0, 0);
    ck_assert(!t.invalid && !t.complete_running && !t.running_acked && !t.slot_free);
}
END_TEST

START_TEST(a_status_naming_no_task_of_this_core_is_invalid)
{
    ck_assert(aicore_decide(AICORE_COND_FIN(9), 5, true, 6, 4).invalid);
    ck_assert(aicore_decide(AICORE_COND_ACK(4), 5, true, 0, 4).invalid);
    ck_assert(aicore_decide(AICORE_COND_EXITED, 5, true, 0, 4).invalid);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("unit_aicore_decide");
    TCase *tc = tcase_create("decide");
    tcase_add_test(tc, running_ack_frees_the_pending_slot);
    tcase_add_test(tc, running_fin_without_pending_completes_it);
    tcase_add_test(tc, running_ack_with_a_pending_task_frees_nothing);
    tcase_add_test(tc, running_fin_with_a_pending_task_promotes_it_unacked);
    tcase_add_test(tc, pending_ack_implies_the_running_task_finished);
    tcase_add_test(tc, pending_fin_completes_both);
    tcase_add_test(tc, idle_or_the_previous_fin_say_nothing_new);
    tcase_add_test(tc, the_reset_value_before_the_window_is_seen_open_says_nothing_new);
    tcase_add_test(tc, a_status_naming_no_task_of_this_core_is_invalid);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}
