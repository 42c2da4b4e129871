/* SPDX-License-Identifier: MIT */
/*
 * Programs' sources of named counters (include/npuvfio/stats.h,
 * npv_stats_add_source): a list in addition order under ctx->stats_lock.
 * Each source's fn runs with that lock held, so npv_stats_remove_source,
 * which unlinks under the same lock, returns only when fn is not running and
 * can no longer be reached (model choice: the simplest rule that lets the
 * caller free fn's user data right after the removal).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/stats.h>

#include "ctx_internal.h"
#include "stats_internal.h"

struct npv_stats_source {
    struct npv_stats_source *next;
    npv_stats_source_fn fn;
    void *user;
    char name[NPV_STATS_NAME_MAX];
};

int npv_stats_add_source(struct npv_ctx *ctx, const char *name, npv_stats_source_fn fn, void *user)
{
    if (ctx == NULL || name == NULL || fn == NULL)
        return -EINVAL;
    struct npv_stats_source *src = calloc(1, sizeof(*src));
    if (src == NULL)
        return -ENOMEM;
    src->fn = fn;
    src->user = user;
    npv_stats_copy_name(src->name, sizeof(src->name), name);
    pthread_mutex_lock(&ctx->stats_lock);
    struct npv_stats_source **link = &ctx->stats_sources;
    for (; *link != NULL; link = &(*link)->next) {
        if (strcmp((*link)->name, src->name) == 0) {
            pthread_mutex_unlock(&ctx->stats_lock);
            free(src);
            return -EEXIST;
        }
    }
    *link = src;
    pthread_mutex_unlock(&ctx->stats_lock);
    return 0;
}

int npv_stats_remove_source(struct npv_ctx *ctx, const char *name)
{
    if (ctx == NULL || name == NULL)
        return -EINVAL;
    char want[NPV_STATS_NAME_MAX];
    npv_stats_copy_name(want, sizeof(want), name);
    struct npv_stats_source *found = NULL;
    pthread_mutex_lock(&ctx->stats_lock);
    for (struct npv_stats_source **link = &ctx->stats_sources; *link != NULL;
         link = &(*link)->next) {
        if (strcmp((*link)->name, want) == 0) {
            found = *link;
            *link = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&ctx->stats_lock);
    if (found == NULL)
        return -ENOENT;
    free(found);
    return 0;
}

void npv_stats_sources_free(struct npv_ctx *ctx)
{
    while (ctx->stats_sources != NULL) {
        struct npv_stats_source *src = ctx->stats_sources;
        ctx->stats_sources = src->next;
        free(src);
    }
}

/* The emit a source's fn calls: keep one sample, sanitised. */
static void keep(void *arg, const char *entity, const char *counter, uint64_t value)
{
    struct npv_stats_samples *s = arg;
    if (s->nomem)
        return;
    if (s->n == s->cap) {
        size_t ncap = s->cap != 0 ? s->cap * 2 : 16;
        struct npv_stats_sample *nv = realloc(s->v, ncap * sizeof(*nv));
        if (nv == NULL) {
            s->nomem = true;
            return;
        }
        s->v = nv;
        s->cap = ncap;
    }
    struct npv_stats_sample *x = &s->v[s->n++];
    x->source = s->sources - 1;
    npv_stats_copy_name(x->entity, sizeof(x->entity), entity);
    npv_stats_copy_name(x->counter, sizeof(x->counter), counter);
    x->value = value;
}

int npv_stats_sources_collect(struct npv_ctx *ctx, struct npv_stats_samples *out)
{
    memset(out, 0, sizeof(*out));
    size_t count = 0;
    for (const struct npv_stats_source *src = ctx->stats_sources; src != NULL; src = src->next)
        count++;
    if (count == 0)
        return 0;
    out->names = calloc(count, sizeof(*out->names));
    if (out->names == NULL)
        return -ENOMEM;
    for (const struct npv_stats_source *src = ctx->stats_sources; src != NULL; src = src->next) {
        memcpy(out->names[out->sources++], src->name, sizeof(src->name));
        src->fn(src->user, keep, out);
    }
    return out->nomem ? -ENOMEM : 0;
}

void npv_stats_samples_free(struct npv_stats_samples *s)
{
    free(s->names);
    free(s->v);
    memset(s, 0, sizeof(*s));
}
