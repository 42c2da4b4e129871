/* SPDX-License-Identifier: MIT */
/*
 * vfio-platform on a fake sysfs tree: the platform device as the library
 * reads it (compatible strings, driver, IOMMU group, the NPU it is), its
 * group's viability, and npv_dev_open_platform's checks and backend choice up
 * to the first VFIO system call (no fd may leak on the way). Run with
 * --at-dev it also takes the open to /dev/vfio/vfio, which only a machine
 * without kernel VFIO answers predictably (else the case is SKIPPED).
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <npuvfio/dev.h>
#include <npuvfio/domain.h>
#include <npuvfio/platform.h>
#include "vfio_device_internal.h"

static char root[256];
static char log_text[16384];
static struct npv_ctx *ctx;
static struct npv_domain *dom;

static void capture(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    size_t used = strlen(log_text);
    snprintf(log_text + used, sizeof(log_text) - used, "%s\n", msg);
}

static void mkdirs(const char *rel)
{
    char path[512], *p;
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (p = path + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
    }
    mkdir(path, 0755);
}

static void write_bytes(const char *rel, const char *bytes, size_t len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, len, f), len);
    fclose(f);
}

static void link_to(const char *target, const char *rel)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    ck_assert_int_eq(symlink(target, path), 0);
}

/*
 * A platform device as the kernel lays it out: bus/platform/devices/NAME is
 * the device's directory, of_node/compatible the node's strings back to back
 * with their NULs (compat, compat_len), group -1 for none, driver NULL for
 * unbound.
 */
static void platform_dev(const char *name, const char *compat, size_t compat_len,
                         const char *driver, int group)
{
    char rel[256], target[256];
    snprintf(rel, sizeof(rel), "bus/platform/devices/%s", name);
    mkdirs(rel);
    if (compat != NULL) {
        snprintf(rel, sizeof(rel), "bus/platform/devices/%s/of_node", name);
        mkdirs(rel);
        snprintf(rel, sizeof(rel), "bus/platform/devices/%s/of_node/compatible", name);
        write_bytes(rel, compat, compat_len);
    }
    if (driver != NULL) {
        snprintf(rel, sizeof(rel), "bus/platform/devices/%s/driver", name);
        snprintf(target, sizeof(target), "../../../../bus/platform/drivers/%s", driver);
        link_to(target, rel);
    }
    if (group >= 0) {
        snprintf(rel, sizeof(rel), "bus/platform/devices/%s/iommu_group", name);
        snprintf(target, sizeof(target), "../../../../kernel/iommu_groups/%d", group);
        link_to(target, rel);
        snprintf(rel, sizeof(rel), "kernel/iommu_groups/%d/devices", group);
        mkdirs(rel);
        snprintf(rel, sizeof(rel), "kernel/iommu_groups/%d/devices/%s", group, name);
        snprintf(target, sizeof(target), "../../../../bus/platform/devices/%s", name);
        link_to(target, rel);
    }
}

#define NPU_COMPAT "rockchip,rk3588-rknpu"

static void npu(const char *driver, int group)
{
    platform_dev("fdab0000.npu", NPU_COMPAT, sizeof(NPU_COMPAT), driver, group);
}

static int count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

static void setup(void)
{
    snprintf(root, sizeof(root), "/tmp/npv-platform-sysfs-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    log_text[0] = '\0';
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    npv_ctx_set_log_sink(ctx, capture, NULL);
    ck_assert_int_eq(npv_ctx_set_sysfs_root(ctx, root), 0);
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
    mkdirs("bus/platform/devices");
}

static void teardown(void)
{
    npv_domain_put(dom);
    npv_ctx_free(ctx);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    ck_assert_int_eq(system(cmd), 0);
}

/* Opens that fail before any device exists must leave neither a device nor an fd behind. */
static int open_platform(const char *name)
{
    struct npv_dev *dev = (struct npv_dev *)1;
    int before = count_fds();
    int ret = npv_dev_open_platform(ctx, name, dom, NULL, &dev);
    if (ret < 0) {
        ck_assert_ptr_null(dev);
        ck_assert_int_eq(count_fds(), before);
    }
    return ret;
}

/* ---- the device as sysfs shows it ---- */

START_TEST(platform_dev_read_joins_compatible_strings)
{
    static const char two[] = "rockchip,rk3588-jpeg\0rockchip,jpeg";
    platform_dev("fdb50400.jpeg", two, sizeof(two), "rockchip-jpeg", 8);
    struct npv_platform_dev d;
    ck_assert_int_eq(npv_platform_dev_read(ctx, "fdb50400.jpeg", &d), 0);
    ck_assert_str_eq(d.name, "fdb50400.jpeg");
    ck_assert_str_eq(d.compatible, "rockchip,rk3588-jpeg rockchip,jpeg");
    ck_assert_str_eq(d.driver, "rockchip-jpeg");
    ck_assert_int_eq(d.iommu_group, 8);
    ck_assert(!d.vfio_bound);
    ck_assert_ptr_null(npv_platform_known_npu(&d));
}
END_TEST

START_TEST(platform_dev_read_without_of_node_or_group)
{
    platform_dev("PNP0103:00", NULL, 0, NULL, -1);
    struct npv_platform_dev d;
    ck_assert_int_eq(npv_platform_dev_read(ctx, "PNP0103:00", &d), 0);
    ck_assert_str_eq(d.compatible, "");
    ck_assert_str_eq(d.driver, "");
    ck_assert_int_eq(d.iommu_group, -1);
    ck_assert_int_eq(npv_platform_dev_read(ctx, "fdab0000.npu", &d), -ENODEV);
}
END_TEST

START_TEST(platform_dev_read_keeps_odd_bytes_printable)
{
    static const char odd[] = "vendor,a b\0vendor,\x01x";
    platform_dev("odd.dev", odd, sizeof(odd), NULL, -1);
    struct npv_platform_dev d;
    ck_assert_int_eq(npv_platform_dev_read(ctx, "odd.dev", &d), 0);
    ck_assert_str_eq(d.compatible, "vendor,a?b vendor,?x");
}
END_TEST

START_TEST(platform_names_are_sysfs_entries)
{
    ck_assert(npv_platform_name_valid("fdab0000.npu"));
    ck_assert(npv_platform_name_valid("PNP0103:00"));
    ck_assert(!npv_platform_name_valid(""));
    ck_assert(!npv_platform_name_valid("."));
    ck_assert(!npv_platform_name_valid(".."));
    ck_assert(!npv_platform_name_valid("../pci/devices/0000:00:03.0"));
    ck_assert(!npv_platform_name_valid(NULL));
    char longname[NPV_PLATFORM_NAME_LEN + 1];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    ck_assert(!npv_platform_name_valid(longname));
    longname[NPV_PLATFORM_NAME_LEN - 1] = '\0';
    ck_assert(npv_platform_name_valid(longname));
    struct npv_platform_dev d;
    ck_assert_int_eq(npv_platform_dev_read(ctx, "../../kernel", &d), -EINVAL);
}
END_TEST

START_TEST(known_npu_by_any_compatible_string_exactly)
{
    struct npv_platform_dev d = {.name = "x"};
    snprintf(d.compatible, sizeof(d.compatible), "rockchip,rk3588-rknpu");
    const struct npv_platform_npu *n = npv_platform_known_npu(&d);
    ck_assert_ptr_nonnull(n);
    ck_assert_str_eq(n->family, "rknpu");
    ck_assert_str_eq(n->model, "Rockchip RK3588 NPU");
    /* A board-specific string first, the generic one later: still known. */
    snprintf(d.compatible, sizeof(d.compatible), "radxa,rock5b-npu rockchip,rk3588-rknn-core");
    n = npv_platform_known_npu(&d);
    ck_assert_ptr_nonnull(n);
    ck_assert_str_eq(n->compatible, "rockchip,rk3588-rknn-core");
    /* A prefix or an extension of a known string is another device. */
    snprintf(d.compatible, sizeof(d.compatible), "rockchip,rk3588-rknpu2 rockchip,rk3588");
    ck_assert_ptr_null(npv_platform_known_npu(&d));
    snprintf(d.compatible, sizeof(d.compatible), "rockchip,rk3568-rknpu");
    ck_assert_ptr_null(npv_platform_known_npu(&d));
    ck_assert_ptr_null(npv_platform_known_npu(NULL));
}
END_TEST

START_TEST(platform_list_is_sorted_and_empty_without_the_bus)
{
    npu("rknpu", 5);
    platform_dev("fd880000.usb", NULL, 0, NULL, -1);
    platform_dev("fdb50400.jpeg", NULL, 0, NULL, 8);
    struct npv_platform_dev *list;
    size_t n;
    ck_assert_int_eq(npv_platform_list(ctx, &list, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(list[0].name, "fd880000.usb");
    ck_assert_str_eq(list[1].name, "fdab0000.npu");
    ck_assert_str_eq(list[2].name, "fdb50400.jpeg");
    ck_assert_str_eq(npv_platform_known_npu(&list[1])->family, "rknpu");
    free(list);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s/bus/platform'", root);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(npv_platform_list(ctx, &list, &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(list);
}
END_TEST

/* ---- group viability ---- */

START_TEST(platform_group_viable_when_others_unbound_or_on_vfio)
{
    npu("vfio-platform", 5);
    platform_dev("fdab9000.sibling", NULL, 0, NULL, 5);
    platform_dev("fdaba000.other", NULL, 0, "vfio-platform", 5);
    struct npv_group_member b[4];
    size_t n = 99;
    ck_assert_int_eq(npv_platform_group_viable(ctx, "fdab0000.npu", b, 4, &n), 1);
    ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(platform_group_not_viable_names_blockers_of_any_bus)
{
    npu("vfio-platform", 5);
    platform_dev("fdab9000.codec", NULL, 0, "hantro-vpu", 5);
    /* A PCI function in the same group (unusual on a SoC, possible in sysfs) counts too. */
    mkdirs("bus/pci/devices/0000:00:01.0");
    link_to("../../../../bus/pci/drivers/e1000e", "bus/pci/devices/0000:00:01.0/driver");
    link_to("../../../../bus/pci/devices/0000:00:01.0",
            "kernel/iommu_groups/5/devices/0000:00:01.0");
    struct npv_group_member b[4];
    size_t n = 0;
    ck_assert_int_eq(npv_platform_group_viable(ctx, "fdab0000.npu", b, 4, &n), 0);
    ck_assert_uint_eq(n, 2);
    bool codec = false, nic = false;
    for (size_t i = 0; i < n; i++) {
        codec |= strcmp(b[i].name, "fdab9000.codec") == 0 && strcmp(b[i].driver, "hantro-vpu") == 0;
        nic |= strcmp(b[i].name, "0000:00:01.0") == 0 && strcmp(b[i].driver, "e1000e") == 0;
    }
    ck_assert(codec && nic);
    /* max 1: one written, both counted. */
    ck_assert_int_eq(npv_platform_group_viable(ctx, "fdab0000.npu", b, 1, &n), 0);
    ck_assert_uint_eq(n, 2);
}
END_TEST

START_TEST(platform_group_viable_without_group_is_enoent)
{
    npu("rknpu", -1);
    size_t n;
    ck_assert_int_eq(npv_platform_group_viable(ctx, "fdab0000.npu", NULL, 0, &n), -ENOENT);
    ck_assert_int_eq(npv_platform_group_viable(ctx, "nosuch.dev", NULL, 0, &n), -ENODEV);
}
END_TEST

/* ---- npv_dev_open_platform up to the VFIO calls ---- */

START_TEST(open_platform_rejects_null_arguments)
{
    struct npv_dev *dev;
    ck_assert_int_eq(npv_dev_open_platform(NULL, "fdab0000.npu", dom, NULL, &dev), -EINVAL);
    ck_assert_int_eq(npv_dev_open_platform(ctx, NULL, dom, NULL, &dev), -EINVAL);
    ck_assert_int_eq(npv_dev_open_platform(ctx, "fdab0000.npu", NULL, NULL, &dev), -EINVAL);
    ck_assert_int_eq(npv_dev_open_platform(ctx, "fdab0000.npu", dom, NULL, NULL), -EINVAL);
}
END_TEST

START_TEST(open_platform_rejects_malformed_name)
{
    ck_assert_int_eq(open_platform("../devices/x"), -EINVAL);
    ck_assert_int_eq(open_platform(""), -EINVAL);
    ck_assert_ptr_nonnull(strstr(log_text, "not a platform device name"));
}
END_TEST

START_TEST(open_platform_missing_device_is_enodev)
{
    ck_assert_int_eq(open_platform("fdab0000.npu"), -ENODEV);
    ck_assert_ptr_nonnull(strstr(log_text, "fdab0000.npu: no such platform device"));
}
END_TEST

START_TEST(open_platform_device_on_host_driver_is_enodev)
{
    npu("rknpu", 5);
    ck_assert_int_eq(open_platform("fdab0000.npu"), -ENODEV);
    ck_assert_ptr_nonnull(strstr(log_text, "bound to rknpu, not vfio-platform"));
}
END_TEST

START_TEST(open_platform_unbound_device_is_enodev)
{
    npu(NULL, 5);
    ck_assert_int_eq(open_platform("fdab0000.npu"), -ENODEV);
    ck_assert_ptr_nonnull(strstr(log_text, "not bound to any driver; bind it to vfio-platform"));
}
END_TEST

START_TEST(open_platform_without_iommu_group_is_enodev)
{
    npu("vfio-platform", -1);
    ck_assert_int_eq(open_platform("fdab0000.npu"), -ENODEV);
    ck_assert_ptr_nonnull(strstr(log_text, "no IOMMU group"));
}
END_TEST

START_TEST(legacy_open_names_platform_blockers_of_non_viable_group)
{
    npu("vfio-platform", 5);
    platform_dev("fdab9000.codec", NULL, 0, "hantro-vpu", 5);
    npv_ctx_set_iommu_backend(ctx, NPV_IOMMU_LEGACY);
    ck_assert_int_eq(open_platform("fdab0000.npu"), -NPV_ENOTVIABLE);
    ck_assert_ptr_nonnull(strstr(log_text, "fdab9000.codec (driver hantro-vpu)"));
    ck_assert_ptr_nonnull(strstr(log_text, "bind it to vfio-platform"));
}
END_TEST

START_TEST(cdev_name_comes_from_platform_vfio_dev_directory)
{
    char name[32];
    npu("vfio-platform", 5);
    ck_assert_int_eq(npv_vfio_cdev_name_on(ctx, "platform", "fdab0000.npu", name, sizeof(name)),
                     -ENOENT);
    mkdirs("bus/platform/devices/fdab0000.npu/vfio-dev/vfio7");
    ck_assert_int_eq(npv_vfio_cdev_name_on(ctx, "platform", "fdab0000.npu", name, sizeof(name)), 0);
    ck_assert_str_eq(name, "vfio7");
    /* The PCI lookup does not find it: the bus is part of the path. */
    ck_assert_int_eq(npv_vfio_cdev_name(ctx, "fdab0000.npu", name, sizeof(name)), -ENOENT);
}
END_TEST

/*
 * With the checks passed, auto picks legacy (no cdev here) and the first thing
 * it does is open /dev/vfio/vfio: on a machine without kernel VFIO that is
 * -NPV_ENOBACKEND (the device is there, the backend is not), the log names
 * the missing node, and nothing leaks.
 */
START_TEST(auto_open_of_viable_platform_device_reaches_dev_vfio)
{
    npu("vfio-platform", 5);
    platform_dev("fdab9000.iommu-neighbour", NULL, 0, NULL, 5);
    npv_ctx_set_iommu_backend(ctx, NPV_IOMMU_AUTO);
    ck_assert_int_eq(open_platform("fdab0000.npu"), -NPV_ENOBACKEND);
    ck_assert_ptr_nonnull(strstr(log_text, "/dev/vfio/vfio"));
}
END_TEST

static Suite *suite(bool at_dev)
{
    Suite *s = suite_create("kernel_vfio_platform_open");
    TCase *tc = tcase_create(at_dev ? "at_dev" : "sysfs");
    tcase_add_checked_fixture(tc, setup, teardown);
    if (at_dev) {
        tcase_add_test(tc, auto_open_of_viable_platform_device_reaches_dev_vfio);
        suite_add_tcase(s, tc);
        return s;
    }
    tcase_add_test(tc, platform_dev_read_joins_compatible_strings);
    tcase_add_test(tc, platform_dev_read_without_of_node_or_group);
    tcase_add_test(tc, platform_dev_read_keeps_odd_bytes_printable);
    tcase_add_test(tc, platform_names_are_sysfs_entries);
    tcase_add_test(tc, known_npu_by_any_compatible_string_exactly);
    tcase_add_test(tc, platform_list_is_sorted_and_empty_without_the_bus);
    tcase_add_test(tc, platform_group_viable_when_others_unbound_or_on_vfio);
    tcase_add_test(tc, platform_group_not_viable_names_blockers_of_any_bus);
    tcase_add_test(tc, platform_group_viable_without_group_is_enoent);
    tcase_add_test(tc, open_platform_rejects_null_arguments);
    tcase_add_test(tc, open_platform_rejects_malformed_name);
    tcase_add_test(tc, open_platform_missing_device_is_enodev);
    tcase_add_test(tc, open_platform_device_on_host_driver_is_enodev);
    tcase_add_test(tc, open_platform_unbound_device_is_enodev);
    tcase_add_test(tc, open_platform_without_iommu_group_is_enodev);
    tcase_add_test(tc, legacy_open_names_platform_blockers_of_non_viable_group);
    tcase_add_test(tc, cdev_name_comes_from_platform_vfio_dev_directory);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    bool at_dev = argc > 1 && strcmp(argv[1], "--at-dev") == 0;
    if (at_dev && access("/dev/vfio/vfio", F_OK) == 0) {
        printf("SKIPPED: /dev/vfio/vfio exists here, so the open would go on to real VFIO "
               "calls; the tests/vm guests cover those\n");
        return 77;
    }
    SRunner *sr = srunner_create(suite(at_dev));
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
