/* SPDX-License-Identifier: MIT */
/*
 * Named counter sources of the stats endpoint (npv_stats_add_source,
 * include/npuvfio/stats.h): what npuvfio serve publishes per client. No
 * device: a context with sources only, read back through npv_stats_format,
 * the stats socket and `npuvfio stats`, by the tests' own strict readers.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <npuvfio/ctx.h>
#include <npuvfio/stats.h>

#include "json_check.h"
#include "stats_text.h"

static struct npv_ctx *ctx;

static void setup(void)
{
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
}

static void teardown(void)
{
    npv_ctx_free(ctx);
    ctx = NULL;
}

/* A source standing for npuvfio serve: clients with a few counters each. */
struct clients {
    unsigned n;
    uint64_t base;
    atomic_uint calls;
};

static void clients_fn(void *user, npv_stats_emit_fn emit, void *arg)
{
    struct clients *c = user;
    atomic_fetch_add(&c->calls, 1);
    for (unsigned i = 0; i < c->n; i++) {
        char entity[32];
        snprintf(entity, sizeof(entity), "client%u", i);
        emit(arg, entity, "runs", c->base + i * 10);
        emit(arg, entity, "runs_ok", c->base + i * 10 - 1);
        emit(arg, entity, "bytes_mapped", (uint64_t)(i + 1) << 20);
    }
}

/* A source that emits per counter (all entities' "a", then all "b"): the other grouping. */
static void by_counter_fn(void *user, npv_stats_emit_fn emit, void *arg)
{
    (void)user;
    emit(arg, "x", "a", 1);
    emit(arg, "y", "a", 2);
    emit(arg, "x", "b", 3);
    emit(arg, "y", "b", 4);
}

static void silent_fn(void *user, npv_stats_emit_fn emit, void *arg)
{
    (void)emit;
    (void)arg;
    atomic_fetch_add((atomic_uint *)user, 1);
}

static char *format(enum npv_stats_format fmt)
{
    char *text;
    size_t len;
    ck_assert_int_eq(npv_stats_format(ctx, fmt, &text, &len), 0);
    ck_assert_uint_eq(strlen(text), len);
    return text;
}

/* Position of needle in hay (must be there). */
static size_t at(const char *hay, const char *needle)
{
    const char *p = strstr(hay, needle);
    ck_assert_msg(p != NULL, "'%s' not in %s", needle, hay);
    return (size_t)(p - hay);
}

/*
 * Every sample line of a metric comes under that metric's one TYPE line: no
 * TYPE line repeats, and a sample's metric is the last TYPE line's.
 */
static void check_grouped(const char *text)
{
    char last[160] = "";
    char types[64][160];
    size_t ntypes = 0;
    for (const char *line = text; *line != '\0';) {
        const char *nl = strchr(line, '\n');
        ck_assert_ptr_nonnull(nl);
        size_t len = (size_t)(nl - line);
        if (strncmp(line, "# TYPE ", 7) == 0) {
            size_t nlen = strcspn(line + 7, " ");
            ck_assert_uint_lt(nlen, sizeof(last));
            memcpy(last, line + 7, nlen);
            last[nlen] = '\0';
            for (size_t i = 0; i < ntypes; i++)
                ck_assert_msg(strcmp(types[i], last) != 0, "TYPE %s twice", last);
            ck_assert_uint_lt(ntypes, 64);
            strcpy(types[ntypes++], last);
        } else if (line[0] != '#' && strncmp(line, "npuvfio_queue_latency", 21) != 0) {
            size_t nlen = strcspn(line, "{ ");
            ck_assert_msg(nlen == strlen(last) && strncmp(line, last, nlen) == 0,
                          "sample '%.*s' outside its TYPE group (last TYPE %s)", (int)len, line,
                          last);
        }
        line = nl + 1;
    }
}

START_TEST(json_has_an_empty_sources_object_without_sources)
{
    char *json = format(NPV_STATS_JSON);
    ck_assert_msg(json_valid_document(json), "%s", json);
    const char *p = json_member(json, "sources");
    ck_assert_msg(p != NULL && strncmp(p, "{}", 2) == 0, "%s", json);
    free(json);
}
END_TEST

START_TEST(json_serves_two_sources_with_entities_and_counters_in_emit_order)
{
    struct clients serve = {.n = 3, .base = 100};
    ck_assert_int_eq(npv_stats_add_source(ctx, "serve", clients_fn, &serve), 0);
    ck_assert_int_eq(npv_stats_add_source(ctx, "other", by_counter_fn, NULL), 0);
    char *json = format(NPV_STATS_JSON);
    ck_assert_msg(json_valid_document(json), "%s", json);
    ck_assert_uint_eq(atomic_load(&serve.calls), 1);
    for (unsigned i = 0; i < 3; i++) {
        char e[16];
        snprintf(e, sizeof(e), "client%u", i);
        const char *runs[] = {"sources", "serve", e, "runs", NULL};
        const char *ok[] = {"sources", "serve", e, "runs_ok", NULL};
        const char *bytes[] = {"sources", "serve", e, "bytes_mapped", NULL};
        ck_assert_uint_eq(json_num(json, runs), 100 + i * 10);
        ck_assert_uint_eq(json_num(json, ok), 100 + i * 10 - 1);
        ck_assert_uint_eq(json_num(json, bytes), (uint64_t)(i + 1) << 20);
    }
    /* Sources in addition order, entities and counters in emit order. */
    ck_assert_uint_lt(at(json, "\"serve\":"), at(json, "\"other\":"));
    ck_assert_uint_lt(at(json, "\"client0\":"), at(json, "\"client1\":"));
    ck_assert_uint_lt(at(json, "\"client1\":"), at(json, "\"client2\":"));
    at(json, "\"client0\":{\"runs\":100,\"runs_ok\":99,\"bytes_mapped\":1048576}");
    /* An entity emitted in two runs is one object with its counters in emit order. */
    at(json, "\"other\":{\"x\":{\"a\":1,\"b\":3},\"y\":{\"a\":2,\"b\":4}}");
    const char *xb[] = {"sources", "other", "x", "b", NULL};
    ck_assert_uint_eq(json_num(json, xb), 3);
    /* The queues' part is still there. */
    ck_assert_ptr_nonnull(json_member(json, "devices"));
    ck_assert_ptr_nonnull(json_member(json, "context"));
    free(json);
}
END_TEST

START_TEST(prometheus_groups_each_counter_under_one_type_line)
{
    struct clients serve = {.n = 3, .base = 100};
    ck_assert_int_eq(npv_stats_add_source(ctx, "serve", clients_fn, &serve), 0);
    ck_assert_int_eq(npv_stats_add_source(ctx, "other", by_counter_fn, NULL), 0);
    char *prom = format(NPV_STATS_PROMETHEUS);
    check_grouped(prom);
    for (unsigned i = 0; i < 3; i++) {
        char want[32];
        snprintf(want, sizeof(want), "entity=\"client%u\"", i);
        ck_assert_double_eq(prom_value(prom, "npuvfio_serve_runs", want), 100 + i * 10);
        ck_assert_double_eq(prom_value(prom, "npuvfio_serve_runs_ok", want), 100 + i * 10 - 1);
        ck_assert_double_eq(prom_value(prom, "npuvfio_serve_bytes_mapped", want),
                            (double)((uint64_t)(i + 1) << 20));
    }
    ck_assert_double_eq(prom_value(prom, "npuvfio_other_a", "entity=\"y\""), 2);
    ck_assert_double_eq(prom_value(prom, "npuvfio_other_b", "entity=\"x\""), 3);
    at(prom, "# TYPE npuvfio_serve_runs gauge\nnpuvfio_serve_runs{entity=\"client0\"} 100\n"
             "npuvfio_serve_runs{entity=\"client1\"} 110\n"
             "npuvfio_serve_runs{entity=\"client2\"} 120\n");
    free(prom);
}
END_TEST

START_TEST(a_source_that_emits_nothing_is_an_empty_object)
{
    atomic_uint calls = 0;
    ck_assert_int_eq(npv_stats_add_source(ctx, "quiet", silent_fn, &calls), 0);
    char *json = format(NPV_STATS_JSON);
    ck_assert_msg(json_valid_document(json), "%s", json);
    at(json, "\"sources\":{\"quiet\":{}}");
    free(json);
    char *prom = format(NPV_STATS_PROMETHEUS);
    check_grouped(prom);
    ck_assert_ptr_null(strstr(prom, "npuvfio_quiet"));
    free(prom);
    ck_assert_uint_eq(atomic_load(&calls), 2);
}
END_TEST

START_TEST(remove_stops_the_calls_and_names_are_checked)
{
    atomic_uint calls = 0;
    ck_assert_int_eq(npv_stats_add_source(NULL, "s", silent_fn, &calls), -EINVAL);
    ck_assert_int_eq(npv_stats_add_source(ctx, NULL, silent_fn, &calls), -EINVAL);
    ck_assert_int_eq(npv_stats_add_source(ctx, "s", NULL, &calls), -EINVAL);
    ck_assert_int_eq(npv_stats_remove_source(ctx, NULL), -EINVAL);
    ck_assert_int_eq(npv_stats_remove_source(ctx, "s"), -ENOENT);

    ck_assert_int_eq(npv_stats_add_source(ctx, "my src", silent_fn, &calls), 0);
    ck_assert_int_eq(npv_stats_add_source(ctx, "my src", silent_fn, &calls), -EEXIST);
    /* Unique after sanitising: "my_src" is the same source. */
    ck_assert_int_eq(npv_stats_add_source(ctx, "my_src", silent_fn, &calls), -EEXIST);
    char *text = format(NPV_STATS_JSON);
    free(text);
    ck_assert_uint_eq(atomic_load(&calls), 1);
    ck_assert_int_eq(npv_stats_remove_source(ctx, "my src"), 0);
    ck_assert_int_eq(npv_stats_remove_source(ctx, "my src"), -ENOENT);
    text = format(NPV_STATS_JSON);
    ck_assert_ptr_null(strstr(text, "my_src"));
    free(text);
    text = format(NPV_STATS_PROMETHEUS);
    free(text);
    ck_assert_uint_eq(atomic_load(&calls), 1);
    /* The name is free again. */
    ck_assert_int_eq(npv_stats_add_source(ctx, "my_src", silent_fn, &calls), 0);
    ck_assert_int_eq(npv_stats_remove_source(ctx, "my src"), 0);
}
END_TEST

static void odd_names_fn(void *user, npv_stats_emit_fn emit, void *arg)
{
    (void)user;
    emit(arg, "client \"3\"\n", "runs ok{x}", 7);
    emit(arg, "10.0.0.1:5/a-b", "wait-ns.total", 8);
    emit(arg, NULL, NULL, 9);
}

START_TEST(names_are_sanitised_in_json_and_prometheus)
{
    ck_assert_int_eq(npv_stats_add_source(ctx, "npu serve\"", odd_names_fn, NULL), 0);
    char *json = format(NPV_STATS_JSON);
    ck_assert_msg(json_valid_document(json), "%s", json);
    const char *a[] = {"sources", "npu_serve_", "client__3__", "runs_ok_x_", NULL};
    const char *b[] = {"sources", "npu_serve_", "10.0.0.1:5/a-b", "wait-ns.total", NULL};
    const char *c[] = {"sources", "npu_serve_", "", "", NULL};
    ck_assert_uint_eq(json_num(json, a), 7);
    ck_assert_uint_eq(json_num(json, b), 8);
    ck_assert_uint_eq(json_num(json, c), 9);
    free(json);
    char *prom = format(NPV_STATS_PROMETHEUS);
    check_grouped(prom);
    /* The metric name in the metric alphabet; the label keeps the safe characters. */
    ck_assert_double_eq(prom_value(prom, "npuvfio_npu_serve__runs_ok_x_", "entity=\"client__3__\""),
                        7);
    ck_assert_double_eq(
        prom_value(prom, "npuvfio_npu_serve__wait_ns_total", "entity=\"10.0.0.1:5/a-b\""), 8);
    ck_assert_double_eq(prom_value(prom, "npuvfio_npu_serve__", "entity=\"\""), 9);
    free(prom);
}
END_TEST

START_TEST(ctx_free_frees_a_registered_source_without_calling_it)
{
    atomic_uint calls = 0;
    ck_assert_int_eq(npv_stats_add_source(ctx, "left", silent_fn, &calls), 0);
    ck_assert_int_eq(npv_stats_add_source(ctx, "also_left", silent_fn, &calls), 0);
    npv_ctx_free(ctx);
    ctx = NULL;
    ck_assert_uint_eq(atomic_load(&calls), 0);
}
END_TEST

/* ---- the socket and the CLI ---- */

static char *ask(const char *path, const char *cmd)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(write(fd, cmd, strlen(cmd)), (ssize_t)strlen(cmd));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    for (;;) {
        ck_assert_uint_lt(len + 1, cap);
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        ck_assert_int_ge(r, 0);
        if (r == 0)
            break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    close(fd);
    return buf;
}

static char *run(const char *cmd)
{
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    size_t cap = 1 << 16;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    size_t len = fread(buf, 1, cap - 1, f);
    buf[len] = '\0';
    ck_assert_int_eq(pclose(f), 0);
    return buf;
}

START_TEST(the_socket_and_the_cli_serve_the_sources)
{
    struct clients serve = {.n = 2, .base = 50};
    ck_assert_int_eq(npv_stats_add_source(ctx, "serve", clients_fn, &serve), 0);
    ck_assert_int_eq(npv_stats_add_source(ctx, "other", by_counter_fn, NULL), 0);
    char path[108];
    snprintf(path, sizeof(path), "/tmp/npv-stats-sources-%d.sock", (int)getpid());
    struct npv_stats_server *srv;
    ck_assert_int_eq(npv_stats_serve(ctx, path, &srv), 0);

    char *json = ask(path, "json\n");
    ck_assert_msg(json_valid_document(json), "%s", json);
    const char *runs[] = {"sources", "serve", "client1", "runs", NULL};
    const char *yb[] = {"sources", "other", "y", "b", NULL};
    ck_assert_uint_eq(json_num(json, runs), 60);
    ck_assert_uint_eq(json_num(json, yb), 4);
    free(json);
    char *prom = ask(path, "prometheus\n");
    check_grouped(prom);
    ck_assert_double_eq(prom_value(prom, "npuvfio_serve_runs_ok", "entity=\"client1\""), 59);
    free(prom);

    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s stats %s", NPV_CLI, path);
    char *cli = run(cmd);
    ck_assert_msg(json_valid_document(cli), "%s", cli);
    ck_assert_uint_eq(json_num(cli, runs), 60);
    free(cli);
    snprintf(cmd, sizeof(cmd), "%s stats %s --prometheus", NPV_CLI, path);
    cli = run(cmd);
    ck_assert_double_eq(prom_value(cli, "npuvfio_other_a", "entity=\"x\""), 1);
    free(cli);
    npv_stats_server_stop(srv);
}
END_TEST

/* ---- threads: formats race additions and removals ---- */

/* A source's state, freed by its remover right after npv_stats_remove_source returns. */
struct racer {
    atomic_int running;
    atomic_int removed;
    atomic_uint calls;
};

static atomic_uint after_remove;

static void racer_fn(void *user, npv_stats_emit_fn emit, void *arg)
{
    struct racer *r = user;
    atomic_store(&r->running, 1);
    if (atomic_load(&r->removed))
        atomic_fetch_add(&after_remove, 1);
    atomic_fetch_add(&r->calls, 1);
    emit(arg, "e", "calls", atomic_load(&r->calls));
    /* Stay a while, so a removal lands while fn runs. */
    for (volatile int i = 0; i < 20000; i++)
        ;
    atomic_store(&r->running, 0);
}

static atomic_int stop_threads;

static void *formatter(void *arg)
{
    unsigned *formats = arg;
    while (!atomic_load(&stop_threads)) {
        char *text;
        size_t len;
        enum npv_stats_format fmt = (*formats & 1) ? NPV_STATS_PROMETHEUS : NPV_STATS_JSON;
        ck_assert_int_eq(npv_stats_format(ctx, fmt, &text, &len), 0);
        if (fmt == NPV_STATS_JSON)
            ck_assert_msg(json_valid_document(text), "%s", text);
        free(text);
        (*formats)++;
    }
    return NULL;
}

static void *churner(void *arg)
{
    unsigned id = *(unsigned *)arg;
    for (unsigned i = 0; i < 300; i++) {
        char name[32];
        snprintf(name, sizeof(name), "t%u_%u", id, i % 4);
        struct racer *r = calloc(1, sizeof(*r));
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(npv_stats_add_source(ctx, name, racer_fn, r), 0);
        for (volatile int k = 0; k < 2000; k++)
            ;
        ck_assert_int_eq(npv_stats_remove_source(ctx, name), 0);
        /* fn is not running and will not be called: its state may go now. */
        ck_assert_int_eq(atomic_load(&r->running), 0);
        atomic_store(&r->removed, 1);
        free(r);
    }
    return NULL;
}

START_TEST(formats_race_additions_and_removals)
{
    atomic_store(&stop_threads, 0);
    atomic_store(&after_remove, 0);
    unsigned formats = 0, ids[2] = {0, 1};
    pthread_t fth, cth[2];
    ck_assert_int_eq(pthread_create(&fth, NULL, formatter, &formats), 0);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&cth[i], NULL, churner, &ids[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(cth[i], NULL);
    atomic_store(&stop_threads, 1);
    pthread_join(fth, NULL);
    ck_assert_uint_gt(formats, 0);
    ck_assert_uint_eq(atomic_load(&after_remove), 0);
    char *json = format(NPV_STATS_JSON);
    at(json, "\"sources\":{}");
    free(json);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("stats_sources");
    TCase *tc = tcase_create("format");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, json_has_an_empty_sources_object_without_sources);
    tcase_add_test(tc, json_serves_two_sources_with_entities_and_counters_in_emit_order);
    tcase_add_test(tc, prometheus_groups_each_counter_under_one_type_line);
    tcase_add_test(tc, a_source_that_emits_nothing_is_an_empty_object);
    tcase_add_test(tc, remove_stops_the_calls_and_names_are_checked);
    tcase_add_test(tc, names_are_sanitised_in_json_and_prometheus);
    tcase_add_test(tc, ctx_free_frees_a_registered_source_without_calling_it);
    tcase_add_test(tc, the_socket_and_the_cli_serve_the_sources);
    suite_add_tcase(s, tc);
    tc = tcase_create("threads");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, formats_race_additions_and_removals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
