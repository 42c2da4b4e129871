/* SPDX-License-Identifier: MIT */
/*
 * Deadlines on CLOCK_MONOTONIC, in nanoseconds. Every wait in the library is
 * bounded by one; the arithmetic saturates so "no timeout" (UINT64_MAX) never
 * wraps into the past.
 */
#ifndef NPV_DEADLINE_H
#define NPV_DEADLINE_H

#include <stdint.h>
#include <time.h>

uint64_t npv_now_ns(void);
/* now + timeout_ns, saturating at UINT64_MAX. */
uint64_t npv_deadline_after(uint64_t timeout_ns);
/* Nanoseconds until deadline_ns, 0 when it has passed. */
uint64_t npv_deadline_left(uint64_t deadline_ns);
void npv_ns_to_timespec(uint64_t ns, struct timespec *ts);
/* The deadline as an absolute CLOCK_MONOTONIC time (pthread_cond_timedwait with a monotonic
 * condattr). */
void npv_deadline_to_abs_timespec(uint64_t deadline_ns, struct timespec *ts);

#endif
