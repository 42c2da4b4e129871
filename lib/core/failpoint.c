/* SPDX-License-Identifier: MIT */
/* Failure injection: the nth call of one class fails once (npuvfio/failpoint.h). */
#include <errno.h>
#include <stdatomic.h>

#include "ctx_internal.h"
#include "failpoint_internal.h"
#include "npv_config.h"

static const char *const class_names[NPV_FAIL_CLASS_COUNT] = {
    [NPV_FAIL_ALLOC] = "alloc",   [NPV_FAIL_MMAP] = "mmap",       [NPV_FAIL_MEMFD] = "memfd",
    [NPV_FAIL_IOCTL] = "ioctl",   [NPV_FAIL_EVENTFD] = "eventfd", [NPV_FAIL_URING] = "uring",
    [NPV_FAIL_SOCKET] = "socket",
};

/* The errno a real call of the class most plausibly fails with when it runs out. */
static const int class_errno[NPV_FAIL_CLASS_COUNT] = {
    [NPV_FAIL_ALLOC] = ENOMEM,      [NPV_FAIL_MMAP] = ENOMEM,    [NPV_FAIL_MEMFD] = EMFILE,
    [NPV_FAIL_IOCTL] = EIO,         [NPV_FAIL_EVENTFD] = EMFILE, [NPV_FAIL_URING] = ENOMEM,
    [NPV_FAIL_SOCKET] = ECONNRESET,
};

static bool class_valid(enum npv_fail_class cls)
{
    return (unsigned)cls < NPV_FAIL_CLASS_COUNT;
}

const char *npv_failpoint_class_name(enum npv_fail_class cls)
{
    return class_valid(cls) ? class_names[cls] : NULL;
}

#if NPV_HAVE_FAILPOINTS

static void reset_counts(struct npv_ctx *ctx)
{
    for (int i = 0; i < NPV_FAIL_CLASS_COUNT; i++)
        atomic_store(&ctx->fail_calls[i], 0);
}

int npv_failpoint_arm(struct npv_ctx *ctx, enum npv_fail_class cls, uint64_t nth)
{
    if (ctx == NULL || !class_valid(cls) || nth == 0)
        return -EINVAL;
    /* Disarmed while the counts and the target change, so no call fires on a half-set arm. */
    atomic_store(&ctx->fail_armed_class, -1);
    reset_counts(ctx);
    atomic_store(&ctx->fail_armed_nth, nth);
    atomic_store(&ctx->fail_armed_class, (int)cls);
    return 0;
}

int npv_failpoint_disarm(struct npv_ctx *ctx)
{
    if (ctx == NULL)
        return -EINVAL;
    atomic_store(&ctx->fail_armed_class, -1);
    reset_counts(ctx);
    return 0;
}

uint64_t npv_failpoint_calls(struct npv_ctx *ctx, enum npv_fail_class cls)
{
    if (ctx == NULL || !class_valid(cls))
        return 0;
    return atomic_load(&ctx->fail_calls[cls]);
}

int npv_failpoint_check(struct npv_ctx *ctx, enum npv_fail_class cls)
{
    if (ctx == NULL || !class_valid(cls))
        return 0;
    uint64_t n = atomic_fetch_add(&ctx->fail_calls[cls], 1) + 1;
    int armed = (int)cls;
    if (atomic_load_explicit(&ctx->fail_armed_class, memory_order_relaxed) != armed ||
        n != atomic_load(&ctx->fail_armed_nth))
        return 0;
    /* Once: of two threads that both saw the armed call, only the one that disarms fails. */
    if (!atomic_compare_exchange_strong(&ctx->fail_armed_class, &armed, -1))
        return 0;
    npv_debug(ctx, "failpoint: %s call %llu fails with errno %d", class_names[cls],
              (unsigned long long)n, class_errno[cls]);
    errno = class_errno[cls];
    return -class_errno[cls];
}

#else

int npv_failpoint_arm(struct npv_ctx *ctx, enum npv_fail_class cls, uint64_t nth)
{
    (void)ctx;
    (void)cls;
    (void)nth;
    return -ENOTSUP;
}

int npv_failpoint_disarm(struct npv_ctx *ctx)
{
    (void)ctx;
    return -ENOTSUP;
}

uint64_t npv_failpoint_calls(struct npv_ctx *ctx, enum npv_fail_class cls)
{
    (void)ctx;
    (void)cls;
    return 0;
}

int npv_failpoint_check(struct npv_ctx *ctx, enum npv_fail_class cls)
{
    (void)ctx;
    (void)cls;
    return 0;
}

#endif
