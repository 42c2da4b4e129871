/* SPDX-License-Identifier: MIT */
/* Logging to the context's sink. Never called from the hot path above debug. */
#include <stdarg.h>
#include <stdio.h>

#include "ctx_internal.h"

static const char *const level_tags[] = {"error", "warn", "info", "debug"};

void npv__log(struct npv_ctx *ctx, enum npv_log_level level, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    npv_log_fn fn = NULL;
    void *user = NULL;
    if (ctx != NULL) {
        pthread_mutex_lock(&ctx->lock);
        fn = ctx->log_fn;
        user = ctx->log_user;
        pthread_mutex_unlock(&ctx->lock);
    }
    if (fn != NULL) {
        fn(user, level, msg);
        return;
    }
    unsigned idx = (unsigned)level < 4 ? (unsigned)level : 3;
    fprintf(stderr, "npuvfio %s: %s\n", level_tags[idx], msg);
}
