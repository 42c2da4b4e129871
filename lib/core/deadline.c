/* SPDX-License-Identifier: MIT */
/* Deadline arithmetic on CLOCK_MONOTONIC: immune to wall-clock steps. */
#include "deadline.h"

#define NS_PER_S 1000000000ull

uint64_t npv_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

uint64_t npv_deadline_after(uint64_t timeout_ns)
{
    uint64_t now = npv_now_ns();
    return timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
}

uint64_t npv_deadline_left(uint64_t deadline_ns)
{
    uint64_t now = npv_now_ns();
    return deadline_ns > now ? deadline_ns - now : 0;
}

void npv_ns_to_timespec(uint64_t ns, struct timespec *ts)
{
    /* Capped at about 68 years so a 32-bit time_t cannot overflow. */
    uint64_t s = ns / NS_PER_S;
    if (s > INT32_MAX)
        s = INT32_MAX;
    ts->tv_sec = (time_t)s;
    ts->tv_nsec = (long)(ns % NS_PER_S);
}

void npv_deadline_to_abs_timespec(uint64_t deadline_ns, struct timespec *ts)
{
    npv_ns_to_timespec(deadline_ns, ts);
}
