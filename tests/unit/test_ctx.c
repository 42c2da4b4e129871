/* SPDX-License-Identifier: MIT */
/* The context, logging and error words (lib/ctx.c, lib/log.c, lib/error.c). */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <npuvfio/common.h>
#include <npuvfio/ctx.h>

#include "ctx_internal.h"

struct seen {
    unsigned count;
    enum npv_log_level level;
    char msg[1024];
    void *user;
};

static void record(void *user, enum npv_log_level level, const char *msg)
{
    struct seen *s = user;
    s->count++;
    s->level = level;
    s->user = user;
    snprintf(s->msg, sizeof(s->msg), "%s", msg);
}

static void clear_env(void)
{
    unsetenv("NPUVFIO_LOG");
    unsetenv("NPUVFIO_IOMMU");
    unsetenv("NPUVFIO_SYSFS_ROOT");
}

START_TEST(ctx_free_null_is_noop)
{
    npv_ctx_free(NULL);
}
END_TEST

START_TEST(ctx_defaults_without_environment)
{
    struct npv_ctx *ctx;
    clear_env();
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    ck_assert_int_eq(npv_ctx_log_level(ctx), NPV_LOG_WARN);
    ck_assert_int_eq(npv_ctx_iommu_backend(ctx), NPV_IOMMU_AUTO);
    ck_assert_str_eq(npv_ctx_sysfs_root(ctx), "/sys");
    npv_ctx_free(ctx);
}
END_TEST

START_TEST(ctx_reads_log_level_backend_and_sysfs_root_from_environment)
{
    struct npv_ctx *ctx;
    clear_env();
    setenv("NPUVFIO_LOG", "debug", 1);
    setenv("NPUVFIO_IOMMU", "iommufd", 1);
    setenv("NPUVFIO_SYSFS_ROOT", "/tmp/fake-sys", 1);
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    ck_assert_int_eq(npv_ctx_log_level(ctx), NPV_LOG_DEBUG);
    ck_assert_int_eq(npv_ctx_iommu_backend(ctx), NPV_IOMMU_IOMMUFD);
    ck_assert_str_eq(npv_ctx_sysfs_root(ctx), "/tmp/fake-sys");
    npv_ctx_free(ctx);
    setenv("NPUVFIO_LOG", "", 1);
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    ck_assert_int_eq(npv_ctx_log_level(ctx), NPV_LOG_WARN);
    npv_ctx_free(ctx);
    clear_env();
}
END_TEST

START_TEST(ctx_new_rejects_unparsable_environment)
{
    struct npv_ctx *ctx = NULL;
    clear_env();
    setenv("NPUVFIO_LOG", "loud", 1);
    ck_assert_int_eq(npv_ctx_new(&ctx), -EINVAL);
    ck_assert_ptr_null(ctx);
    clear_env();
    setenv("NPUVFIO_IOMMU", "type1", 1);
    ck_assert_int_eq(npv_ctx_new(&ctx), -EINVAL);
    ck_assert_ptr_null(ctx);
    clear_env();
}
END_TEST

START_TEST(log_level_and_backend_names_parse)
{
    ck_assert_int_eq(npv_log_level_parse("error"), NPV_LOG_ERROR);
    ck_assert_int_eq(npv_log_level_parse("warn"), NPV_LOG_WARN);
    ck_assert_int_eq(npv_log_level_parse("info"), NPV_LOG_INFO);
    ck_assert_int_eq(npv_log_level_parse("debug"), NPV_LOG_DEBUG);
    ck_assert_int_eq(npv_log_level_parse("DEBUG"), -EINVAL);
    ck_assert_int_eq(npv_log_level_parse(""), -EINVAL);
    ck_assert_int_eq(npv_log_level_parse(NULL), -EINVAL);
    ck_assert_int_eq(npv_iommu_backend_parse("auto"), NPV_IOMMU_AUTO);
    ck_assert_int_eq(npv_iommu_backend_parse("legacy"), NPV_IOMMU_LEGACY);
    ck_assert_int_eq(npv_iommu_backend_parse("iommufd"), NPV_IOMMU_IOMMUFD);
    ck_assert_int_eq(npv_iommu_backend_parse("vfio"), -EINVAL);
}
END_TEST

START_TEST(log_sink_gets_messages_at_or_above_the_level)
{
    struct npv_ctx *ctx;
    struct seen s;
    memset(&s, 0, sizeof(s));
    clear_env();
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    npv_ctx_set_log_sink(ctx, record, &s);
    npv_debug(ctx, "hidden %d", 1);
    npv_info(ctx, "hidden %d", 2);
    ck_assert_uint_eq(s.count, 0);
    npv_warn(ctx, "visible %d", 3);
    ck_assert_uint_eq(s.count, 1);
    ck_assert_int_eq(s.level, NPV_LOG_WARN);
    ck_assert_str_eq(s.msg, "visible 3");
    ck_assert_ptr_eq(s.user, &s);
    npv_err(ctx, "bad %s", "thing");
    ck_assert_int_eq(s.level, NPV_LOG_ERROR);
    ck_assert_str_eq(s.msg, "bad thing");
    npv_ctx_set_log_level(ctx, NPV_LOG_DEBUG);
    npv_debug(ctx, "now %s", "seen");
    ck_assert_uint_eq(s.count, 3);
    ck_assert_int_eq(s.level, NPV_LOG_DEBUG);
    npv_ctx_set_log_level(ctx, NPV_LOG_ERROR);
    npv_warn(ctx, "dropped");
    ck_assert_uint_eq(s.count, 3);
    npv_ctx_free(ctx);
}
END_TEST

START_TEST(log_long_message_is_truncated_not_overflowed)
{
    struct npv_ctx *ctx;
    struct seen s;
    memset(&s, 0, sizeof(s));
    clear_env();
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    npv_ctx_set_log_sink(ctx, record, &s);
    static char big[5000];
    memset(big, 'x', sizeof(big) - 1);
    npv_err(ctx, "%s", big);
    ck_assert_uint_eq(s.count, 1);
    ck_assert_uint_gt(strlen(s.msg), 100);
    ck_assert_uint_lt(strlen(s.msg), sizeof(big) - 1);
    npv_ctx_free(ctx);
}
END_TEST

START_TEST(log_null_sink_restores_stderr)
{
    struct npv_ctx *ctx;
    struct seen s;
    memset(&s, 0, sizeof(s));
    clear_env();
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    npv_ctx_set_log_sink(ctx, record, &s);
    npv_ctx_set_log_sink(ctx, NULL, NULL);
    FILE *tmp = tmpfile();
    ck_assert_ptr_nonnull(tmp);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_ge(dup2(fileno(tmp), STDERR_FILENO), 0);
    npv_err(ctx, "to stderr %d", 42);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    ck_assert_uint_eq(s.count, 0);
    char buf[256] = {0};
    rewind(tmp);
    ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), tmp));
    fclose(tmp);
    ck_assert_ptr_nonnull(strstr(buf, "to stderr 42"));
    ck_assert_ptr_nonnull(strstr(buf, "error"));
    npv_ctx_free(ctx);
}
END_TEST

START_TEST(ctx_sysfs_root_setter_and_path_join)
{
    struct npv_ctx *ctx;
    clear_env();
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    ck_assert_int_eq(npv_ctx_set_sysfs_root(ctx, ""), -EINVAL);
    ck_assert_int_eq(npv_ctx_set_sysfs_root(ctx, NULL), -EINVAL);
    ck_assert_int_eq(npv_ctx_set_sysfs_root(ctx, "/tmp/s"), 0);
    char buf[64];
    ck_assert_int_eq(npv_sysfs_path(ctx, buf, sizeof(buf), "bus/pci/devices/%s", "0000:00:01.0"),
                     0);
    ck_assert_str_eq(buf, "/tmp/s/bus/pci/devices/0000:00:01.0");
    char tiny[12];
    ck_assert_int_eq(npv_sysfs_path(ctx, tiny, sizeof(tiny), "bus/pci"), -ENAMETOOLONG);
    static char long_root[5000];
    memset(long_root, 'r', sizeof(long_root) - 1);
    ck_assert_int_eq(npv_ctx_set_sysfs_root(ctx, long_root), -ENAMETOOLONG);
    ck_assert_str_eq(npv_ctx_sysfs_root(ctx), "/tmp/s");
    npv_ctx_set_iommu_backend(ctx, NPV_IOMMU_LEGACY);
    ck_assert_int_eq(npv_ctx_iommu_backend(ctx), NPV_IOMMU_LEGACY);
    npv_ctx_free(ctx);
}
END_TEST

START_TEST(strerror_names_own_codes_and_errno)
{
    ck_assert_ptr_nonnull(strstr(npv_strerror(-NPV_EDEVFAULT), "device fault"));
    ck_assert_ptr_nonnull(strstr(npv_strerror(NPV_EDEVFAULT), "device fault"));
    ck_assert_ptr_nonnull(strstr(npv_strerror(-NPV_ENOTVIABLE), "not viable"));
    ck_assert_ptr_nonnull(strstr(npv_strerror(-NPV_EPEERPROTO), "vfio-user"));
    ck_assert_ptr_nonnull(strstr(npv_strerror(-NPV_ENOBACKEND), "IOMMU backend"));
    ck_assert_str_eq(npv_strerror(-NPV_ERROR_BASE - 99), "unknown error");
    ck_assert_str_eq(npv_strerror(-ENOENT), "No such file or directory");
    ck_assert_str_eq(npv_strerror(ENOMEM), "Cannot allocate memory");
    ck_assert_ptr_nonnull(npv_strerror(0));
    ck_assert_ptr_nonnull(npv_strerror(-1000000));
    ck_assert_ptr_nonnull(npv_strerror(-NPV_ERROR_END));
    ck_assert_ptr_nonnull(npv_strerror(INT32_MIN + 1));
}
END_TEST

START_TEST(version_and_build_flags_are_reported)
{
    const char *v = npv_version();
    unsigned a, b, c;
    ck_assert_int_eq(sscanf(v, "%u.%u.%u", &a, &b, &c), 3);
    int f = npv_build_has_iommufd();
    ck_assert(f == 0 || f == 1);
}
END_TEST

/*
 * Setters racing readers and loggers. A reader must only ever see a value
 * some setter set, and a root pointer it holds must stay readable (under
 * ASan a freed one is a heap-use-after-free, which fails the test).
 */
#define RACE_SETS    20000
#define RACE_READERS 3

static const char *const race_roots[2] = {"/tmp/npv-race-root-a", "/tmp/npv-race-root-bb"};

struct race {
    struct npv_ctx *ctx;
    atomic_bool done;
    atomic_uint delivered[2];
    atomic_uint bad; /* values no setter set */
};

static void race_sink_a(void *user, enum npv_log_level level, const char *msg)
{
    (void)level;
    (void)msg;
    atomic_fetch_add(&((struct race *)user)->delivered[0], 1);
}

static void race_sink_b(void *user, enum npv_log_level level, const char *msg)
{
    (void)level;
    (void)msg;
    atomic_fetch_add(&((struct race *)user)->delivered[1], 1);
}

static bool is_race_root(const char *s, size_t skip_suffix)
{
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(race_roots[i]);
        if (strlen(s) == n + skip_suffix && strncmp(s, race_roots[i], n) == 0)
            return true;
    }
    return false;
}

static void *race_setter(void *arg)
{
    struct race *r = arg;
    for (unsigned i = 0; i < RACE_SETS; i++) {
        npv_ctx_set_log_level(r->ctx, (i & 1) ? NPV_LOG_DEBUG : NPV_LOG_ERROR);
        npv_ctx_set_log_sink(r->ctx, (i & 2) ? race_sink_b : race_sink_a, r);
        if (npv_ctx_set_sysfs_root(r->ctx, race_roots[i & 1]) != 0)
            atomic_fetch_add(&r->bad, 1);
        npv_ctx_set_iommu_backend(r->ctx, (enum npv_iommu_backend)(i % 3));
    }
    atomic_store(&r->done, true);
    return NULL;
}

static void *race_reader(void *arg)
{
    struct race *r = arg;
    char path[128];
    do {
        const char *root = npv_ctx_sysfs_root(r->ctx);
        if (!is_race_root(root, 0) && strcmp(root, "/sys") != 0)
            atomic_fetch_add(&r->bad, 1);
        if (npv_sysfs_path(r->ctx, path, sizeof(path), "bus/pci") != 0 ||
            (!is_race_root(path, strlen("/bus/pci")) && strcmp(path, "/sys/bus/pci") != 0))
            atomic_fetch_add(&r->bad, 1);
        int level = (int)npv_ctx_log_level(r->ctx);
        int backend = (int)npv_ctx_iommu_backend(r->ctx);
        if (level < NPV_LOG_ERROR || level > NPV_LOG_DEBUG || backend < 0 || backend > 2)
            atomic_fetch_add(&r->bad, 1);
        npv_err(r->ctx, "reader saw root %s", root);
        npv_debug(r->ctx, "reader saw level %d", level);
    } while (!atomic_load(&r->done));
    return NULL;
}

START_TEST(ctx_setters_race_readers_and_loggers_safely)
{
    struct race r;
    memset(&r, 0, sizeof(r));
    clear_env();
    ck_assert_int_eq(npv_ctx_new(&r.ctx), 0);
    npv_ctx_set_log_sink(r.ctx, race_sink_a, &r);
    pthread_t setter, readers[RACE_READERS];
    for (int i = 0; i < RACE_READERS; i++)
        ck_assert_int_eq(pthread_create(&readers[i], NULL, race_reader, &r), 0);
    ck_assert_int_eq(pthread_create(&setter, NULL, race_setter, &r), 0);
    pthread_join(setter, NULL);
    for (int i = 0; i < RACE_READERS; i++)
        pthread_join(readers[i], NULL);
    ck_assert_uint_eq(atomic_load(&r.bad), 0);
    /* Every reader logged at error level at least once, to one of the two sinks. */
    ck_assert_uint_ge(atomic_load(&r.delivered[0]) + atomic_load(&r.delivered[1]), RACE_READERS);
    /* The last values set are the ones read now. */
    ck_assert_str_eq(npv_ctx_sysfs_root(r.ctx), race_roots[(RACE_SETS - 1) & 1]);
    ck_assert_int_eq(npv_ctx_log_level(r.ctx), NPV_LOG_DEBUG);
    ck_assert_int_eq(npv_ctx_iommu_backend(r.ctx), (RACE_SETS - 1) % 3);
    npv_ctx_free(r.ctx);
}
END_TEST

START_TEST(ctx_sysfs_root_pointer_outlives_later_sets)
{
    struct npv_ctx *ctx;
    clear_env();
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    ck_assert_int_eq(npv_ctx_set_sysfs_root(ctx, "/tmp/first"), 0);
    const char *first = npv_ctx_sysfs_root(ctx);
    ck_assert_int_eq(npv_ctx_set_sysfs_root(ctx, "/tmp/second"), 0);
    /* Read after the set that replaced it: ASan reports a use after free if it was freed. */
    ck_assert_str_eq(first, "/tmp/first");
    ck_assert_str_eq(npv_ctx_sysfs_root(ctx), "/tmp/second");
    /* Setting a root again reuses the kept copy rather than growing the list. */
    ck_assert_int_eq(npv_ctx_set_sysfs_root(ctx, "/tmp/first"), 0);
    ck_assert_ptr_eq(npv_ctx_sysfs_root(ctx), first);
    npv_ctx_free(ctx);
}
END_TEST

static Suite *ctx_suite(void)
{
    Suite *s = suite_create("ctx");
    TCase *tc = tcase_create("ctx");
    tcase_add_test(tc, ctx_free_null_is_noop);
    tcase_add_test(tc, ctx_defaults_without_environment);
    tcase_add_test(tc, ctx_reads_log_level_backend_and_sysfs_root_from_environment);
    tcase_add_test(tc, ctx_new_rejects_unparsable_environment);
    tcase_add_test(tc, log_level_and_backend_names_parse);
    tcase_add_test(tc, log_sink_gets_messages_at_or_above_the_level);
    tcase_add_test(tc, log_long_message_is_truncated_not_overflowed);
    tcase_add_test(tc, log_null_sink_restores_stderr);
    tcase_add_test(tc, ctx_sysfs_root_setter_and_path_join);
    tcase_add_test(tc, strerror_names_own_codes_and_errno);
    tcase_add_test(tc, version_and_build_flags_are_reported);
    tcase_add_test(tc, ctx_sysfs_root_pointer_outlives_later_sets);
    suite_add_tcase(s, tc);
    TCase *race = tcase_create("race");
    tcase_add_test(race, ctx_setters_race_readers_and_loggers_safely);
    suite_add_tcase(s, race);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ctx_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
