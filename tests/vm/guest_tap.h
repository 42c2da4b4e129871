/* SPDX-License-Identifier: MIT */
/*
 * Verdict lines of the guest test programs. The guest has no test runner and
 * its only channel to the host is the serial console, so each check prints
 * one TAP line ("ok N - what" / "not ok N - what # why") that run-guest.sh
 * counts. Checks depend on each other (no mapping, no DMA), so a program runs
 * them in order and skips what cannot run: a skipped check is a failure, so
 * nothing passes without running.
 */
#ifndef NPV_GUEST_TAP_H
#define NPV_GUEST_TAP_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

struct tap {
    unsigned n, failed;
    const char *prefix; /* backend name, so verdicts of two runs read apart */
};

__attribute__((format(printf, 3, 4))) static inline bool tap_check(struct tap *t, bool ok,
                                                                   const char *fmt, ...)
{
    va_list ap;
    printf("%sok %u - %s: ", ok ? "" : "not ", ++t->n, t->prefix);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    if (!ok)
        t->failed++;
    return ok;
}

/* A diagnostic line: shown by the host, counted as nothing. */
__attribute__((format(printf, 1, 2))) static inline void tap_diag(const char *fmt, ...)
{
    va_list ap;
    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static inline int tap_done(const struct tap *t)
{
    printf("1..%u\n", t->n);
    fflush(stdout);
    return t->failed ? 1 : 0;
}

#endif
