/* SPDX-License-Identifier: MIT */
/*
 * The bench's JSON: every repetition of every figure, the medians, and the
 * targets; and --compare, which reads the targets back from an earlier file.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/ctx.h>

#include "bench.h"

static void json_num(FILE *f, double v)
{
    if (!isfinite(v))
        fprintf(f, "null");
    else
        fprintf(f, "%.6g", v);
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void json_str(FILE *f, const char *v)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)v; *c != '\0'; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c < 0x20)
            fprintf(f, "\\u%04x", *c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

/* {"median": m, "min": a, "max": b, "reps": [...]} */
static void json_series(FILE *f, const struct series *s)
{
    fprintf(f, "{\"median\": ");
    json_num(f, series_median(s));
    fprintf(f, ", \"min\": ");
    json_num(f, series_min(s));
    fprintf(f, ", \"max\": ");
    json_num(f, series_max(s));
    fprintf(f, ", \"reps\": [");
    for (unsigned i = 0; i < s->n; i++) {
        fprintf(f, "%s", i ? ", " : "");
        json_num(f, s->v[i]);
    }
    fprintf(f, "]}");
}

static void json_lat(FILE *f, const struct lat *l)
{
    if (l->n == 0) {
        /* Nothing measured: no figure, not zeros. */
        fprintf(f, "{\"n\": 0, \"min\": null, \"p50\": null, \"p99\": null, \"p999\": null, "
                   "\"max\": null}");
        return;
    }
    fprintf(f,
            "{\"n\": %llu, \"min\": %.1f, \"p50\": %.1f, \"p99\": %.1f, \"p999\": %.1f, "
            "\"max\": %.1f}",
            (unsigned long long)l->n, l->min, l->p50, l->p99, l->p999, l->max);
}

static void json_cost(FILE *f, const struct per_job *c)
{
    fprintf(f, "{\"wakeups\": ");
    json_series(f, &c->wakeups);
    fprintf(f, ", \"cpu_ns\": ");
    json_series(f, &c->cpu_ns);
    fprintf(f, "}");
}

static void json_mem(FILE *f, const struct bench_opts *o, const struct ours_mem *mm)
{
    fprintf(f, ", \"page_size\": %zu,\n      \"cacheline_adjacent_p50_ns\": ", mm->page_size);
    json_series(f, &mm->cacheline_adjacent_p50);
    fprintf(f, ",\n      \"modes\": {");
    bool first = true;
    for (int mode = 0; mode < BENCH_MODES; mode++) {
        if (!o->mode_on[mode])
            continue;
        fprintf(f, "%s\n        \"%s\": {\"qd1_rtt_p50_ns\": ", first ? "" : ",",
                bench_mode_names[mode]);
        first = false;
        json_series(f, &mm->rtt_p50[mode]);
        fprintf(f, ", \"qd1_rtt_last_rep_ns\": ");
        json_lat(f, &mm->rtt[mode]);
        fprintf(f, ", \"qd1_per_job\": ");
        json_cost(f, &mm->rtt_cost[mode]);
        fprintf(f, ",\n          \"rate_per_s\": {");
        for (unsigned q = 0; q < o->nqd; q++) {
            fprintf(f, "%s\"%u\": ", q ? ", " : "", o->qd[q]);
            json_series(f, &mm->rate[mode][q]);
        }
        fprintf(f, "},\n          \"per_job\": {");
        for (unsigned q = 0; q < o->nqd; q++) {
            fprintf(f, "%s\"%u\": ", q ? ", " : "", o->qd[q]);
            json_cost(f, &mm->rate_cost[mode][q]);
        }
        fprintf(f, "}}");
    }
    fprintf(f, "}}");
}

void bench_json_reads_target(FILE *f, const struct dev_row *d)
{
    if (!isfinite(d->reads_goal)) {
        fprintf(f, "null");
        return;
    }
    bool met = isfinite(d->steady_reads) && d->steady_reads <= d->reads_goal;
    fprintf(f, "{\"goal\": \"<=%g\", \"value\": ", d->reads_goal);
    json_num(f, d->steady_reads);
    fprintf(f, ", \"met\": %s", met ? "true" : "false");
    if (!met && d->reads_why != NULL) {
        fprintf(f, ", \"why\": ");
        json_str(f, d->reads_why);
    }
    fprintf(f, "}");
}

void bench_json_dev_open(FILE *f, const struct dev_row *d)
{
    fprintf(f, "{\"max_rate\": ");
    json_num(f, d->max_rate);
    if (d->open_skipped != NULL) {
        fprintf(f, ", \"skipped\": ");
        json_str(f, d->open_skipped);
    }
    fprintf(f, ", \"points\": [");
    for (unsigned k = 0; k < d->nopen; k++) {
        const struct dev_open_point *p = &d->open[k];
        fprintf(f, "%s{\"frac\": %.2f, \"rate\": ", k ? ", " : "", p->frac);
        json_num(f, p->rate);
        fprintf(f, ", \"count\": %llu, \"achieved\": ", (unsigned long long)p->count);
        json_num(f, p->achieved);
        fprintf(f, ", \"p50_ns\": ");
        json_num(f, p->p50_ns);
        fprintf(f, ", \"p99_ns\": ");
        json_num(f, p->p99_ns);
        fprintf(f, ", \"p999_ns\": ");
        json_num(f, p->p999_ns);
        fprintf(f, "}");
    }
    fprintf(f, "]}");
}

int bench_write_json(const char *path, const struct bench_run *run)
{
    const struct bench_opts *o = run->o;
    const struct peer_results *p = run->p;
    const struct ours_results *r = run->r;
    FILE *f = fopen(path, "we");
    if (f == NULL)
        return -errno;
    fprintf(f, "{\n  \"command\": ");
    json_str(f, run->cmdline);
    fprintf(f, ",\n  \"machine\": {\"cpu\": ");
    json_str(f, run->c->model);
    fprintf(f,
            ", \"pus\": %u, \"submitter_cpu\": %d, \"device_cpu\": %d, \"kernel\": \"%s\", "
            "\"npuvfio\": \"%s\"},\n",
            run->c->npus, run->c->sub, run->c->dev, run->kernel, npv_version());
    fprintf(f,
            "  \"run\": {\"point_ns\": %llu, \"warmup_ns\": %llu, \"quick\": %s, \"reps\": %u, "
            "\"elapsed_s\": %.1f, \"statistic\": \"median of the repetitions; min and max "
            "beside it\", \"ours_descriptor_bytes\": 32, \"same_work_request_bytes\": %u, "
            "\"same_work_completion_bytes\": 16, \"rte_ring_bound_element_bytes\": 16},\n",
            (unsigned long long)o->point_ns, (unsigned long long)o->warmup_ns,
            o->quick ? "true" : "false", o->reps, run->elapsed_s, o->desc_size);
    fprintf(f, "  \"ours\": {\n");
    for (int m = 0; m < BENCH_MEMS; m++) {
        const struct ours_mem *mm = &r->mem[m];
        fprintf(f, "    \"%s\": {\"ran\": %s", m == 0 ? "hugepage_2m" : "page_4k",
                mm->ran ? "true" : "false");
        if (!mm->ran)
            fprintf(f, ", \"skipped\": \"%s\"}", mm->skipped ? mm->skipped : "");
        else
            json_mem(f, o, mm);
        fprintf(f, "%s\n", m + 1 < BENCH_MEMS ? "," : "");
    }
    fprintf(f,
            "  },\n  \"syscalls\": {\"poll_round_trips\": %llu, \"poll_syscalls\": %llu, "
            "\"irq_round_trips\": %llu, \"irq_syscalls\": %llu, \"method\": \"seccomp "
            "user notification, every call counted then continued\"},\n",
            (unsigned long long)r->rt_poll, (unsigned long long)r->sys_poll,
            (unsigned long long)r->rt_irq, (unsigned long long)r->sys_irq);
    fprintf(f, "  \"peers\": {\n    \"cacheline_rtt_p50_ns\": ");
    json_series(f, &p->cacheline_p50);
    fprintf(f, ",\n    \"eventfd_rtt_p50_ns\": ");
    json_series(f, &p->eventfd_p50);
    fprintf(f, ",\n    \"io_uring_nop_batch1_per_s\": ");
    json_series(f, &p->uring_nop_1);
    fprintf(f, ",\n    \"io_uring_nop_batch32_per_s\": ");
    json_series(f, &p->uring_nop_32);
    fprintf(f, ",\n    \"rte_ring_spsc16_burst32_per_s\": ");
    if (p->have_rte_ring)
        json_series(f, &p->rte_ring_16);
    else
        fprintf(f, "null");
    fprintf(f, ",\n    \"same_work_rte_ring_per_s\": {");
    for (unsigned q = 0; q < o->nqd; q++) {
        fprintf(f, "%s\"%u\": ", q ? ", " : "", o->qd[q]);
        if (p->have_rte_ring)
            json_series(f, &p->same_work[q]);
        else
            fprintf(f, "null");
    }
    fprintf(f, "}\n  },\n  \"devices\": [");
    for (unsigned i = 0; i < run->d->n; i++) {
        const struct dev_row *d = &run->d->row[i];
        fprintf(f, "%s\n    {\"name\": \"%s\"", i ? "," : "", d->name);
        if (d->skipped != NULL) {
            fprintf(f, ", \"skipped\": \"%s\"}", d->skipped);
            continue;
        }
        fprintf(f, ", \"what\": ");
        json_str(f, d->what);
        fprintf(f, ", \"mismatches\": %llu, \"p50_ns\": ", (unsigned long long)d->mismatches);
        json_series(f, &d->p50_ns);
        fprintf(f, ", \"p99_ns\": ");
        json_series(f, &d->p99_ns);
        fprintf(f, ", \"per_s\": ");
        json_series(f, &d->per_s);
        fprintf(f, ",\n     \"reads_per_job\": ");
        json_series(f, &d->reads_per_job);
        fprintf(f, ", \"writes_per_job\": ");
        json_series(f, &d->writes_per_job);
        fprintf(f, ", \"trapped_reads_per_job\": ");
        json_series(f, &d->trapped_reads_per_job);
        fprintf(f, ", \"trapped_writes_per_job\": ");
        json_series(f, &d->trapped_writes_per_job);
        fprintf(f, ",\n     \"steady_per_job\": {\"reads\": ");
        json_num(f, d->steady_reads);
        fprintf(f, ", \"writes\": ");
        json_num(f, d->steady_writes);
        fprintf(f, ", \"trapped_reads\": ");
        json_num(f, d->steady_trapped_reads);
        fprintf(f, ", \"trapped_writes\": ");
        json_num(f, d->steady_trapped_writes);
        fprintf(f, ", \"messages\": ");
        json_num(f, d->steady_messages);
        fprintf(f, ", \"messages_unbatched\": ");
        json_num(f, d->steady_messages_unbatched);
        fprintf(f, "}");
        fprintf(f, ",\n     \"compute_ns\": ");
        json_series(f, &d->compute_ns);
        fprintf(f, ", \"overhead_ns\": ");
        json_series(f, &d->overhead_ns);
        fprintf(f, ", \"loop_per_s\": ");
        json_series(f, &d->loop_per_s);
        fprintf(f, ",\n     \"reads_target\": ");
        bench_json_reads_target(f, d);
        fprintf(f, ",\n     \"open_loop\": ");
        bench_json_dev_open(f, d);
        fprintf(f, "}");
    }
    fprintf(f, "\n  ],\n  \"targets\": [\n");
    for (int i = 0; i < BENCH_TARGETS; i++) {
        const struct target *t = &run->t[i];
        fprintf(f, "    {\"name\": \"%s\", \"value\": ", t->name);
        json_num(f, t->value);
        fprintf(f, ", \"goal\": \"%s%g\", \"met\": %s}%s\n",
                t->dir == TARGET_AT_MOST    ? "<="
                : t->dir == TARGET_AT_LEAST ? ">="
                                            : "==",
                t->goal, t->met ? "true" : "false", i + 1 < BENCH_TARGETS ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    int rc = ferror(f) ? -EIO : 0;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    return rc;
}

/* ---- --compare ---- */

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
        if (n + 1 == cap) {
            char *more = realloc(buf, cap * 2);
            if (more == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = more;
            cap *= 2;
        }
    }
    if (buf != NULL)
        buf[n] = '\0';
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    return buf;
}

static const char *skip_space(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

/* After `"key"` and optional white space: the colon and the white space after it, or NULL. */
static const char *after_colon(const char *p)
{
    p = skip_space(p);
    return *p == ':' ? skip_space(p + 1) : NULL;
}

/*
 * The value of the target named name in the "targets" array of an earlier
 * --json file: the object holding "name": "N" and "value": V, in either
 * order, with any white space (a file a person or a script rewrote still
 * reads). NAN when absent or null.
 */
static double earlier_value(const char *json, const char *name)
{
    const char *p = strstr(json, "\"targets\"");
    size_t len = strlen(name);
    while (p != NULL && (p = strstr(p, "\"name\"")) != NULL) {
        const char *v = after_colon(p + 6);
        p += 6;
        if (v == NULL || *v != '"' || strncmp(v + 1, name, len) != 0 || v[1 + len] != '"')
            continue;
        /* The enclosing object: from its '{' to its '}' (no nesting inside a target). */
        const char *open = v, *close = strchr(v, '}');
        while (open > json && *open != '{')
            open--;
        for (const char *k = open;
             close != NULL && (k = strstr(k, "\"value\"")) != NULL && k < close; k += 7) {
            const char *num = after_colon(k + 7);
            if (num == NULL)
                continue;
            char *end;
            double d = strtod(num, &end);
            return end == num ? NAN : d;
        }
        return NAN;
    }
    return NAN;
}

/* How much worse today is than before, as a fraction (0.4: 40% worse); 0 when not worse. */
static double worsening(const struct target *t, double before)
{
    if (!isfinite(before) || !isfinite(t->value))
        return 0;
    switch (t->dir) {
    case TARGET_AT_LEAST:
        return before > 0 && t->value < before ? (before - t->value) / before : 0;
    case TARGET_AT_MOST:
        return t->value > before && t->value > 0 ? (t->value - before) / t->value : 0;
    case TARGET_ZERO:
        return t->value > before ? 1 : 0;
    }
    return 0;
}

int bench_compare(const char *path, const struct target *t, int nt)
{
    char *json = read_all(path);
    if (json == NULL)
        return -errno;
    int dropped = 0;
    printf("\nAgainst %s (ratios only; absolute times are not compared)\n", path);
    printf("  %-34s %10s %10s %9s\n", "target", "earlier", "today", "change");
    for (int i = 0; i < nt; i++) {
        double before = earlier_value(json, t[i].name);
        if (!isfinite(before) && strcmp(t[i].name, "lines_vs_bound_qd32") == 0 &&
            isfinite(earlier_value(json, "rate_vs_io_uring_nop"))) {
            /* Issue 25 retired it for this one: another ratio, so nothing to compare. */
            printf("  %-34s %10s %10.3f   (replaces rate_vs_io_uring_nop: not compared)\n",
                   t[i].name, "-", t[i].value);
            continue;
        }
        double w = worsening(&t[i], before);
        printf("  %-34s %10.3f %10.3f %8.0f%%%s\n", t[i].name, before, t[i].value,
               isfinite(before) && before != 0 ? (t[i].value / before - 1) * 100 : NAN,
               w > 1.0 / 3 ? "  <-- WORSE BY MORE THAN A THIRD" : "");
        if (w > 1.0 / 3) {
            dropped++;
            fprintf(stderr,
                    "!!! npuvfio-bench WARNING: %s went from %.3f to %.3f, worse by %.0f%% "
                    "(more than a third) against %s !!!\n",
                    t[i].name, before, t[i].value, w * 100, path);
        }
    }
    if (dropped == 0)
        printf("  no ratio got worse by more than a third\n");
    free(json);
    return dropped;
}
