/* SPDX-License-Identifier: MIT */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <npuvfio/dev.h>
#include <npuvfio/domain.h>

#include "rel_harness.h"

bool rel_device_runs(const struct npv_device_entry *e)
{
    return e->model_create != NULL && e->driver_open != NULL && e->sample_run != NULL;
}

const struct npv_device_entry *rel_device_or_note(size_t i, const char *tag, const char *what)
{
    const struct npv_device_entry *e = npv_device_at(i);
    ck_assert_ptr_nonnull(e);
    if (rel_device_runs(e))
        return e;
    printf("%s device=%s%s%s not-covered (no model, driver and sample on vfio-user yet)\n", tag,
           e->name, *what ? " " : "", what);
    fflush(stdout);
    return NULL;
}

size_t rel_device_count(void)
{
    size_t n = 0;
    while (npv_device_at(n) != NULL)
        n++;
    return n;
}

static void quiet(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

struct npv_ctx *rel_ctx_new(void)
{
    struct npv_ctx *ctx;
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    if (getenv("NPV_REL_LOG") == NULL)
        npv_ctx_set_log_sink(ctx, quiet, NULL);
    return ctx;
}

static void serve(const char *path, void *arg)
{
    const struct npv_device_entry *e = arg;
    int r = npv_device_serve(e, path, false);
    fprintf(stderr, "model %s: %s\n", e->name, strerror(-r));
    _exit(1);
}

void rel_model_start(struct vu_server *s, const struct npv_device_entry *e)
{
    vu_server_start(s, serve, (void *)e);
}

static void serve_small(const char *path, void *arg)
{
    const struct npv_device_entry *e = arg;
    int r = npv_device_serve_small(e, path, false);
    fprintf(stderr, "model %s (small): %s\n", e->name, strerror(-r));
    _exit(1);
}

void rel_model_start_small(struct vu_server *s, const struct npv_device_entry *e)
{
    vu_server_start(s, serve_small, (void *)e);
}

void rel_model_restart(struct vu_server *s, const struct npv_device_entry *e)
{
    vu_server_restart(s, serve, (void *)e);
}

static long count_dir(const char *path)
{
    DIR *d = opendir(path);
    ck_assert_msg(d != NULL, "%s: %m", path);
    long n = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        if (de->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static long count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: %m", path);
    long n = 0;
    for (int ch; (ch = fgetc(f)) != EOF;)
        n += ch == '\n';
    fclose(f);
    return n;
}

static long rss_kib(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: %m", path);
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

void rel_counts_read(pid_t pid, struct npv_ctx *ctx, struct rel_counts *c)
{
    char base[64], path[96];
    if (pid == 0)
        snprintf(base, sizeof(base), "/proc/self");
    else
        snprintf(base, sizeof(base), "/proc/%d", (int)pid);
    snprintf(path, sizeof(path), "%s/fd", base);
    /* Less the descriptor opendir itself holds while counting this process. */
    c->fds = count_dir(path) - (pid == 0 ? 1 : 0);
    snprintf(path, sizeof(path), "%s/maps", base);
    c->mappings = count_lines(path);
    snprintf(path, sizeof(path), "%s/status", base);
    c->rss_kib = rss_kib(path);
    memset(&c->lib, 0, sizeof(c->lib));
    if (ctx != NULL)
        npv_ctx_resources(ctx, &c->lib);
}

void rel_pass_run(struct npv_ctx *ctx, const struct npv_device_entry *e, const char *path,
                  unsigned iterations, void (*before_retry)(void *), void *arg,
                  struct rel_pass *out)
{
    struct rel_pass_opts o = {.iterations = iterations, .before_retry = before_retry, .arg = arg};
    rel_pass_run_opts(ctx, e, path, &o, out);
}

void rel_pass_run_opts(struct npv_ctx *ctx, const struct npv_device_entry *e, const char *path,
                       const struct rel_pass_opts *o, struct rel_pass *out)
{
    unsigned iterations = o->iterations;
    struct npv_domain *dom = NULL;
    struct npv_dev *dev = NULL;
    void *drv = NULL;
    *out = (struct rel_pass){.exact = false};
    int r = npv_domain_new(ctx, NULL, &dom);
    if (r < 0) {
        *out = (struct rel_pass){.err = r, .step = "domain"};
        return;
    }
    r = npv_dev_open_vfio_user(ctx, path, dom, NULL, &dev);
    if (r < 0) {
        *out = (struct rel_pass){.err = r, .step = "open"};
        goto out_dom;
    }
    if (o->deadline_ns != 0 && e->driver_open_deadline != NULL)
        r = e->driver_open_deadline(dev, o->deadline_ns, &drv);
    else
        r = e->driver_open(dev, &drv);
    if (r < 0) {
        *out = (struct rel_pass){.err = r, .step = "driver"};
        goto out_dev;
    }
    struct npv_sample_opts opts = {.iterations = iterations};
    struct npv_sample_result res = {0};
    r = e->sample_run(drv, &opts, &res);
    if (r < 0) {
        *out = (struct rel_pass){.err = r, .step = "run"};
        if (o->before_retry != NULL)
            o->before_retry(o->arg);
        struct npv_sample_result again = {0};
        out->retried = e->sample_run(drv, &opts, &again);
        /* A driver that answers must answer right: a wrong result is never an error path. */
        if (out->retried == 0)
            ck_assert_msg(again.mismatches == 0, "%s: retry after %s: %llu bytes differ", e->name,
                          strerror(-r), (unsigned long long)again.mismatches);
    } else {
        out->exact = res.mismatches == 0 && res.iterations == iterations;
    }
    e->driver_close(drv);
out_dev:
    npv_dev_close(dev);
out_dom:
    npv_domain_put(dom);
}
