/* SPDX-License-Identifier: MIT */
/* The context, logging and error words (lib/ctx.c, lib/log.c, lib/error.c). */
#include <check.h>
#include <errno.h>
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
    suite_add_tcase(s, tc);
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
