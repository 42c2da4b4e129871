/* SPDX-License-Identifier: MIT */
/*
 * npv_dev_open_pci's checks and backend choice against a fake sysfs tree, on
 * a machine without /dev/vfio: what the caller hears before any VFIO ioctl
 * (bad address, missing or host-bound function, a non-viable group naming its
 * blockers, a backend the kernel lacks: -NPV_ENOBACKEND), and that no fd
 * leaks on those paths.
 * The ioctl paths themselves run in the VM suite (tests/vm).
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <npuvfio/dev.h>
#include <npuvfio/domain.h>
#include "npv_config.h"
#include "npv_test.h"
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

static void write_file(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void link_to(const char *target, const char *rel)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    ck_assert_int_eq(symlink(target, path), 0);
}

/* A function in IOMMU group 3, on driver (NULL: unbound). */
static void function(const char *bdf, const char *driver)
{
    char rel[256], target[256];
    snprintf(rel, sizeof(rel), "bus/pci/devices/%s", bdf);
    mkdirs(rel);
    snprintf(rel, sizeof(rel), "bus/pci/devices/%s/vendor", bdf);
    write_file(rel, "0x1234\n");
    snprintf(rel, sizeof(rel), "bus/pci/devices/%s/device", bdf);
    write_file(rel, "0x11e8\n");
    snprintf(rel, sizeof(rel), "bus/pci/devices/%s/class", bdf);
    write_file(rel, "0x00ff00\n");
    if (driver != NULL) {
        snprintf(rel, sizeof(rel), "bus/pci/devices/%s/driver", bdf);
        snprintf(target, sizeof(target), "../../../bus/pci/drivers/%s", driver);
        link_to(target, rel);
    }
    snprintf(rel, sizeof(rel), "bus/pci/devices/%s/iommu_group", bdf);
    link_to("../../../kernel/iommu_groups/3", rel);
    mkdirs("kernel/iommu_groups/3/devices");
    snprintf(rel, sizeof(rel), "kernel/iommu_groups/3/devices/%s", bdf);
    snprintf(target, sizeof(target), "../../../../bus/pci/devices/%s", bdf);
    link_to(target, rel);
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
    snprintf(root, sizeof(root), "/tmp/npv-kernel-sysfs-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    log_text[0] = '\0';
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    npv_ctx_set_log_sink(ctx, capture, NULL);
    ck_assert_int_eq(npv_ctx_set_sysfs_root(ctx, root), 0);
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
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
static int open_pci(const char *bdf)
{
    struct npv_dev *dev = (struct npv_dev *)1;
    int before = count_fds();
    int ret = npv_dev_open_pci(ctx, bdf, dom, NULL, &dev);
    if (ret < 0) {
        ck_assert_ptr_null(dev);
        ck_assert_int_eq(count_fds(), before);
    }
    return ret;
}

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

START_TEST(open_pci_rejects_malformed_address)
{
    ck_assert_int_eq(open_pci("00:03"), -EINVAL);
    ck_assert_int_eq(open_pci("0000:00:03.9"), -EINVAL);
    ck_assert_ptr_nonnull(strstr(log_text, "not a PCI address"));
}
END_TEST

START_TEST(open_pci_rejects_null_arguments)
{
    struct npv_dev *dev;
    ck_assert_int_eq(npv_dev_open_pci(NULL, "0000:00:03.0", dom, NULL, &dev), -EINVAL);
    ck_assert_int_eq(npv_dev_open_pci(ctx, NULL, dom, NULL, &dev), -EINVAL);
    ck_assert_int_eq(npv_dev_open_pci(ctx, "0000:00:03.0", NULL, NULL, &dev), -EINVAL);
    ck_assert_int_eq(npv_dev_open_pci(ctx, "0000:00:03.0", dom, NULL, NULL), -EINVAL);
}
END_TEST

START_TEST(open_pci_missing_function_is_enodev)
{
    mkdirs("bus/pci/devices");
    ck_assert_int_eq(open_pci("0000:00:03.0"), -ENODEV);
    ck_assert_ptr_nonnull(strstr(log_text, "no such PCI function"));
}
END_TEST

START_TEST(open_pci_function_on_host_driver_is_enodev)
{
    function("0000:00:03.0", "e1000e");
    ck_assert_int_eq(open_pci("00:03.0"), -ENODEV);
    ck_assert_ptr_nonnull(strstr(log_text, "bound to e1000e, not vfio-pci"));
}
END_TEST

START_TEST(open_pci_unbound_function_is_enodev)
{
    function("0000:00:03.0", NULL);
    ck_assert_int_eq(open_pci("0000:00:03.0"), -ENODEV);
    ck_assert_ptr_nonnull(strstr(log_text, "not bound to any driver"));
}
END_TEST

START_TEST(legacy_open_names_blockers_of_non_viable_group)
{
    function("0000:00:03.0", "vfio-pci");
    function("0000:00:03.1", "e1000e");
    npv_ctx_set_iommu_backend(ctx, NPV_IOMMU_LEGACY);
    ck_assert_int_eq(open_pci("0000:00:03.0"), -NPV_ENOTVIABLE);
    ck_assert_ptr_nonnull(strstr(log_text, "0000:00:03.1 (driver e1000e)"));
}
END_TEST

/*
 * The cases below depend on which /dev nodes this host has, so each sits in
 * a case group with its precondition (see main): a host without the
 * precondition shows the group as skipped in ctest, never as passed.
 */

START_TEST(iommufd_open_names_blockers_of_non_viable_group)
{
    function("0000:00:03.0", "vfio-pci");
    function("0000:00:03.1", "e1000e");
    npv_ctx_set_iommu_backend(ctx, NPV_IOMMU_IOMMUFD);
    ck_assert_int_eq(open_pci("0000:00:03.0"), -NPV_ENOTVIABLE);
}
END_TEST

/* A device that exists with a backend that does not: not -ENODEV, which means no device. */
START_TEST(forced_iommufd_without_kernel_support_is_enobackend)
{
    function("0000:00:03.0", "vfio-pci");
    npv_ctx_set_iommu_backend(ctx, NPV_IOMMU_IOMMUFD);
    ck_assert_int_eq(open_pci("0000:00:03.0"), -NPV_ENOBACKEND);
    if (NPV_HAVE_IOMMUFD)
        ck_assert_ptr_nonnull(strstr(log_text, "no /dev/iommu"));
    else
        ck_assert_ptr_nonnull(strstr(log_text, "no iommufd support"));
}
END_TEST

START_TEST(forced_legacy_without_vfio_container_is_enobackend)
{
    function("0000:00:03.0", "vfio-pci");
    npv_ctx_set_iommu_backend(ctx, NPV_IOMMU_LEGACY);
    ck_assert_int_eq(open_pci("0000:00:03.0"), -NPV_ENOBACKEND);
    ck_assert_ptr_nonnull(strstr(log_text, "/dev/vfio/vfio"));
}
END_TEST

START_TEST(auto_without_cdev_falls_back_to_legacy)
{
    /* No vfio-dev/ directory: even with /dev/iommu the device has no cdev. */
    function("0000:00:03.0", "vfio-pci");
    npv_ctx_set_iommu_backend(ctx, NPV_IOMMU_AUTO);
    ck_assert_int_eq(open_pci("0000:00:03.0"), -NPV_ENOBACKEND);
    ck_assert_ptr_nonnull(strstr(log_text, "/dev/vfio/vfio"));
}
END_TEST

START_TEST(cdev_name_comes_from_vfio_dev_directory)
{
    char name[32];
    function("0000:00:03.0", "vfio-pci");
    ck_assert_int_eq(npv_vfio_cdev_name(ctx, "0000:00:03.0", name, sizeof(name)), -ENOENT);
    mkdirs("bus/pci/devices/0000:00:03.0/vfio-dev/vfiox");
    ck_assert_int_eq(npv_vfio_cdev_name(ctx, "0000:00:03.0", name, sizeof(name)), -ENOENT);
    mkdirs("bus/pci/devices/0000:00:03.0/vfio-dev/vfio12");
    ck_assert_int_eq(npv_vfio_cdev_name(ctx, "0000:00:03.0", name, sizeof(name)), 0);
    ck_assert_str_eq(name, "vfio12");
    ck_assert_int_eq(npv_vfio_cdev_name(ctx, "0000:00:03.0", name, 4), -ENAMETOOLONG);
}
END_TEST

static void add_fake_sysfs_cases(TCase *tc)
{
    tcase_add_test(tc, open_pci_rejects_malformed_address);
    tcase_add_test(tc, open_pci_rejects_null_arguments);
    tcase_add_test(tc, open_pci_missing_function_is_enodev);
    tcase_add_test(tc, open_pci_function_on_host_driver_is_enodev);
    tcase_add_test(tc, open_pci_unbound_function_is_enodev);
    tcase_add_test(tc, legacy_open_names_blockers_of_non_viable_group);
    tcase_add_test(tc, cdev_name_comes_from_vfio_dev_directory);
}

static const char *missing_iommufd(void)
{
    if (!NPV_HAVE_IOMMUFD)
        return "built without iommufd";
    return exists("/dev/iommu") ? NULL : "no /dev/iommu on this host";
}

static void add_host_with_iommufd_cases(TCase *tc)
{
    tcase_add_test(tc, iommufd_open_names_blockers_of_non_viable_group);
}

static const char *present_iommufd(void)
{
    return NPV_HAVE_IOMMUFD && exists("/dev/iommu") ? "this host has /dev/iommu" : NULL;
}

static void add_host_without_iommufd_cases(TCase *tc)
{
    tcase_add_test(tc, forced_iommufd_without_kernel_support_is_enobackend);
}

static const char *present_vfio_container(void)
{
    return exists("/dev/vfio/vfio") ? "this host has /dev/vfio/vfio" : NULL;
}

static void add_host_without_vfio_container_cases(TCase *tc)
{
    tcase_add_test(tc, forced_legacy_without_vfio_container_is_enobackend);
    tcase_add_test(tc, auto_without_cdev_falls_back_to_legacy);
}

/* Group names are the ctest suffixes in tests/kernel/CMakeLists.txt. */
static const struct npv_test_group groups[] = {
    {NULL, NULL, add_fake_sysfs_cases},
    {"host_with_iommufd", missing_iommufd, add_host_with_iommufd_cases},
    {"host_without_iommufd", present_iommufd, add_host_without_iommufd_cases},
    {"host_without_vfio_container", present_vfio_container, add_host_without_vfio_container_cases},
};

int main(int argc, char **argv)
{
    return npv_test_main_groups(argc, argv, "kernel_vfio_pci_open", groups,
                                sizeof(groups) / sizeof(groups[0]), setup, teardown);
}
