/* SPDX-License-Identifier: MIT */
/* What the device-decoder harnesses share: an invariant check that names itself, raw reads. */
#ifndef NPV_FUZZ_HARNESS_H
#define NPV_FUZZ_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Say which invariant broke (the fuzzer's crash report and the replay test show it). */
static inline void fuzz_require(const char *harness, bool ok, const char *what, uint64_t v)
{
    if (!ok) {
        fprintf(stderr, "%s: %s (0x%llx)\n", harness, what, (unsigned long long)v);
        abort();
    }
}
#define require(ok, what, v) fuzz_require(__FILE__, (ok), (what), (uint64_t)(v))

static inline uint32_t fuzz_rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline uint64_t fuzz_rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

#endif
