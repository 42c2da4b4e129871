/* SPDX-License-Identifier: MIT */
/*
 * Commands that change the host are safe: bind refuses a device the host is
 * using (an interface up, a block device mounted, a DRM/accel node open) and
 * names why, root cause (no IOMMU) first; --force overrides; --dry-run of
 * bind, unbind and hugepages changes no file of the fake tree; hugepage
 * amounts parse and an oversized request is refused; a malformed address is
 * a usage error (2).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "cli_checks.h"
#include "fake_sysfs.h"
#include "run_cli.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static struct fake_sysfs fs;
static struct cli_result r;

/*
 * 01:00.0 a NIC (eth0) and 02:00.0 an NVMe drive (nvme0n1, partition p2), each alone in
 * its group; 03:00.0 a GPU (card0, renderD128), 04:00.0 an NPU with accel0, 05:00.0 an NPU
 * with nothing of the host's on it; fdab0000.npu a platform NPU.
 */
static void setup(void)
{
    fake_sysfs_init(&fs);
    fake_add_driver(&fs, "vfio-pci");
    fake_add_platform_driver(&fs, "vfio-platform");
    fake_add_id(&fs, 0x8086, 0x1533, "igb");
    fake_add_id(&fs, 0x144d, 0xa808, "nvme");
    fake_add_id(&fs, 0x1002, 0x73bf, "amdgpu");
    fake_add_id(&fs, 0x1234, 0x4e50, "testdrv");
    fake_add_func(&fs, "0000:01:00.0", 0x8086, 0x1533, 0x020000, "igb", 1, 0);
    fake_add_func(&fs, "0000:02:00.0", 0x144d, 0xa808, 0x010802, "nvme", 2, 0);
    fake_add_func(&fs, "0000:03:00.0", 0x1002, 0x73bf, 0x030000, "amdgpu", 3, 0);
    fake_add_func(&fs, "0000:04:00.0", 0x1234, 0x4e50, 0x120000, "testdrv", 4, 0);
    fake_add_func(&fs, "0000:05:00.0", 0x1234, 0x4e50, 0x120000, "testdrv", 5, 0);
    fake_add_node(&fs, "0000:04:00.0", "accel", "accel0");
    fake_add_compat(&fs, "rockchip,rk3588-rknpu", "rknpu");
    fake_add_platform(&fs, "fdab0000.npu", (const char *const[]){"rockchip,rk3588-rknpu", NULL},
                      "rknpu", 6);
    fake_kernel_start(&fs);
}

static void teardown(void)
{
    fake_sysfs_destroy(&fs);
}

static void bind(const char *dev, const char *extra)
{
    if (extra != NULL)
        run_cli(&r, NULL,
                ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "bind", "--state-dir",
                     fs.state_dir, extra, dev));
    else
        run_cli(&r, NULL,
                ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "bind", "--state-dir",
                     fs.state_dir, dev));
}

static void assert_driver(const char *dev, const char *want)
{
    char drv[64];
    fake_driver_of(&fs, dev, drv, sizeof(drv));
    ck_assert_str_eq(drv, want);
}

START_TEST(bind_refuses_an_interface_that_is_up_naming_it)
{
    fake_add_net(&fs, "0000:01:00.0", "eth0", true);
    bind("0000:01:00.0", NULL);
    ck_assert_int_eq(r.status, 1);
    check_one_line_error(&r, "npuvfio bind: 0000:01:00.0 is in use by the host: eth0 is up");
    ck_assert_msg(strstr(r.err, "--force") != NULL, "%s", r.err);
    assert_driver("0000:01:00.0", "igb");
}
END_TEST

START_TEST(bind_takes_a_nic_whose_interface_is_down)
{
    fake_add_net(&fs, "0000:01:00.0", "eth0", false);
    bind("0000:01:00.0", NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert(fake_wait_driver(&fs, "0000:01:00.0", "vfio-pci"));
}
END_TEST

START_TEST(bind_refuses_a_mounted_nvme_partition_naming_the_mount)
{
    fake_add_block(&fs, "0000:02:00.0", "nvme/nvme0", "nvme0n1", "259:0");
    fake_add_block(&fs, "0000:02:00.0", "nvme/nvme0/nvme0n1", "nvme0n1p2", "259:2");
    fake_mount(&fs, "259:2", "/dev/nvme0n1p2", "/home");
    bind("0000:02:00.0", NULL);
    ck_assert_int_eq(r.status, 1);
    check_one_line_error(&r, "npuvfio bind: 0000:02:00.0 is in use by the host: nvme0n1p2 is "
                             "mounted on /home");
    assert_driver("0000:02:00.0", "nvme");
}
END_TEST

START_TEST(bind_refuses_an_open_drm_node_naming_the_process)
{
    fake_add_node(&fs, "0000:03:00.0", "drm", "card0");
    fake_add_node(&fs, "0000:03:00.0", "drm", "renderD128");
    fake_open_file(&fs, 1234, "Xorg", "/dev/dri/card0");
    fake_open_file(&fs, 77, "bash", "/dev/pts/0");
    bind("0000:03:00.0", NULL);
    ck_assert_int_eq(r.status, 1);
    check_one_line_error(&r, "npuvfio bind: 0000:03:00.0 is in use by the host: /dev/dri/card0 "
                             "is open by pid 1234 (Xorg)");
    ck_assert_msg(strstr(r.err, "renderD128") == NULL, "%s", r.err);
    assert_driver("0000:03:00.0", "amdgpu");
}
END_TEST

START_TEST(bind_refuses_an_open_accel_node)
{
    fake_open_file(&fs, 4321, "npu-server", "/dev/accel/accel0");
    bind("0000:04:00.0", NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "/dev/accel/accel0 is open by pid 4321 (npu-server)"), "%s", r.err);
}
END_TEST

START_TEST(bind_force_takes_a_device_in_use_and_says_so)
{
    fake_add_net(&fs, "0000:01:00.0", "eth0", true);
    bind("0000:01:00.0", "--force");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.err, "binding anyway (--force): eth0 is up"), "%s", r.err);
    ck_assert(fake_wait_driver(&fs, "0000:01:00.0", "vfio-pci"));
}
END_TEST

START_TEST(bind_refuses_a_platform_device_in_use)
{
    fake_add_node(&fs, "fdab0000.npu", "accel", "accel1");
    fake_open_file(&fs, 99, "rknn_server", "/dev/accel/accel1");
    bind("fdab0000.npu", NULL);
    ck_assert_int_eq(r.status, 1);
    check_one_line_error(&r, "npuvfio bind: fdab0000.npu is in use by the host: "
                             "/dev/accel/accel1 is open by pid 99 (rknn_server)");
    assert_driver("fdab0000.npu", "rknpu");
}
END_TEST

START_TEST(bind_names_a_missing_iommu_before_the_missing_vfio_driver)
{
    /* Neither an IOMMU nor vfio-pci: the IOMMU is the root cause, modprobe would not help. */
    char p[PATH_MAX + 64];
    fake_remove_iommu(&fs);
    snprintf(p, sizeof(p), "%s/kernel/iommu_groups/5/devices/0000:05:00.0", fs.root);
    ck_assert(unlink(p) == 0);
    snprintf(p, sizeof(p), "%s/bus/pci/devices/0000:05:00.0/iommu_group", fs.root);
    ck_assert(unlink(p) == 0);
    static const char *const files[] = {"bind", "unbind", ""};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s/bus/pci/drivers/vfio-pci/%s", fs.root, files[i]);
        ck_assert(i < 2 ? unlink(p) == 0 : rmdir(p) == 0);
    }
    bind("0000:05:00.0", NULL);
    ck_assert_int_eq(r.status, 1);
    check_one_line_error(&r, "npuvfio bind: 0000:05:00.0: no IOMMU group: this machine runs "
                             "without an IOMMU");
    ck_assert_msg(strstr(r.err, "modprobe") == NULL, "%s", r.err);
    bind("0000:05:00.0", "--dry-run");
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "without an IOMMU") && !strstr(r.err, "modprobe"), "%s", r.err);
}
END_TEST

START_TEST(bind_without_group_but_with_an_iommu_says_it_does_not_cover_the_device)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/bus/pci/devices/0000:05:00.0/iommu_group", fs.root);
    ck_assert(unlink(p) == 0);
    bind("0000:05:00.0", NULL);
    ck_assert_int_eq(r.status, 1);
    check_one_line_error(&r, "npuvfio bind: 0000:05:00.0: no IOMMU group: the IOMMU does not "
                             "cover this device");
}
END_TEST

START_TEST(bind_dry_run_changes_nothing_and_prints_the_plan)
{
    char *before = fake_snapshot(&fs);
    bind("0000:05:00.0", "--dry-run");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "0000:05:00.0: would bind to vfio-pci (now testdrv); nothing "
                                "changed (--dry-run)") == r.out,
                  "%s", r.out);
    ck_assert_msg(strstr(r.out, "driver_override") && strstr(r.out, "drivers_probe"), "%s", r.out);
    /* Give the fake kernel time it would need to act on a write. */
    usleep(50000);
    char *after = fake_snapshot(&fs);
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
    /* A dry run makes the same checks: in use is refused. */
    fake_add_net(&fs, "0000:01:00.0", "eth0", true);
    bind("0000:01:00.0", "--dry-run");
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "eth0 is up"), "%s", r.err);
}
END_TEST

START_TEST(unbind_dry_run_changes_nothing)
{
    bind("0000:05:00.0", NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert(fake_wait_driver(&fs, "0000:05:00.0", "vfio-pci"));
    char *before = fake_snapshot(&fs);
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "unbind", "--dry-run", "--state-dir", fs.state_dir,
                 "0000:05:00.0"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "0000:05:00.0: would return from vfio-pci to testdrv; nothing "
                                "changed (--dry-run)") == r.out,
                  "%s", r.out);
    usleep(50000);
    char *after = fake_snapshot(&fs);
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
    assert_driver("0000:05:00.0", "vfio-pci");
}
END_TEST

START_TEST(unbind_of_a_device_not_on_vfio_says_nothing_changed)
{
    char *before = fake_snapshot(&fs);
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "unbind", "--state-dir", fs.state_dir, "0000:05:00.0"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, "0000:05:00.0: not on vfio-pci (driver testdrv): nothing changed\n");
    char *after = fake_snapshot(&fs);
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
}
END_TEST

START_TEST(hugepages_dry_run_changes_nothing)
{
    fake_add_pool(&fs, -1, 2048, 16, false);
    char *before = fake_snapshot(&fs);
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "hugepages", "--dry-run", "1G"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "hugepages 2M (all nodes): would set the pool from 16 to 512 "
                                "pages; nothing changed (--dry-run)") == r.out,
                  "%s", r.out);
    char *after = fake_snapshot(&fs);
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
}
END_TEST

START_TEST(hugepages_amounts_with_units_are_whole_pages)
{
    fake_add_pool(&fs, -1, 2048, 4096, true);
    static const struct {
        const char *arg, *want;
    } ok[] = {
        {"2G", "requested 1024,"}, {"512M", "requested 256,"}, {"512MiB", "requested 256,"},
        {"4096k", "requested 2,"}, {"3", "requested 3,"},      {"1gb", "requested 512,"},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        run_cli(&r, NULL,
                ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "hugepages", ok[i].arg));
        ck_assert_msg(r.status == 0, "%s: %s", ok[i].arg, r.err);
        ck_assert_msg(strstr(r.out, ok[i].want), "%s: %s", ok[i].arg, r.out);
    }
    static const char *const bad[] = {"3M", "1.5G", "2X", "G", "-2G", "2Gx"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        run_cli(&r, NULL,
                ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "hugepages", bad[i]));
        ck_assert_msg(r.status == 2, "%s: %d %s", bad[i], r.status, r.err);
        ck_assert_int_eq(count_lines(r.err), 1);
    }
}
END_TEST

START_TEST(hugepages_refuses_more_than_half_of_available_memory)
{
    fake_add_pool(&fs, -1, 2048, 100000, true);
    fake_set_meminfo(&fs, 24u << 20, 0); /* 24 GiB available: 12 GiB allowed */
    char *before = fake_snapshot(&fs);
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "hugepages", "100000"));
    ck_assert_int_eq(r.status, 1);
    check_one_line_error(&r, "npuvfio hugepages: 100000 2M pages (200000 MiB) is more than 50% "
                             "of MemAvailable");
    ck_assert_msg(strstr(r.err, "--force"), "%s", r.err);
    char *after = fake_snapshot(&fs);
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
    /* Half is allowed; a pool already holding memory counts towards what may be asked again. */
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "hugepages", "12G"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    fake_set_meminfo(&fs, 12u << 20, 12u << 20);
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "hugepages", "12G"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "hugepages", "13G"));
    ck_assert_int_eq(r.status, 1);
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "hugepages", "--force", "13G"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "requested 6656, reserved 6656"), "%s", r.out);
}
END_TEST

START_TEST(hugepages_refuses_without_meminfo_unless_forced)
{
    fake_add_pool(&fs, -1, 2048, 8, true);
    char p[PATH_MAX + 16];
    snprintf(p, sizeof(p), "%s/meminfo", fs.proc);
    ck_assert(unlink(p) == 0);
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "hugepages", "4"));
    ck_assert_int_eq(r.status, 1);
    check_one_line_error(&r, "npuvfio hugepages: cannot read MemAvailable");
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "hugepages", "--force", "4"));
    ck_assert_msg(r.status == 0, "%s", r.err);
}
END_TEST

START_TEST(malformed_address_is_a_usage_error_for_every_command)
{
    static const char *const cmds[] = {"info", "bind", "unbind"};
    static const char *const addrs[] = {"0000:zz:00.0", "00:1f.9", "0000:00:00.0:1"};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 3; j++) {
            run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, cmds[i], addrs[j]));
            ck_assert_msg(r.status == 2, "%s %s: %d %s", cmds[i], addrs[j], r.status, r.err);
            ck_assert_int_eq(count_lines(r.err), 1);
        }
    /* A well-formed address or platform name that is absent is a failure, not a typo. */
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "bind", "0000:09:00.0"));
    ck_assert_int_eq(r.status, 1);
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "bind", "fdac0000.npu"));
    ck_assert_int_eq(r.status, 1);
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "demo", "--device", "testdev", "0000:zz:00.0"));
    ck_assert_msg(r.status == 2, "demo: %d %s", r.status, r.err);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cli_host_safety");
    TCase *t = tcase_create("host_safety");
    tcase_set_timeout(t, 120);
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, bind_refuses_an_interface_that_is_up_naming_it);
    tcase_add_test(t, bind_takes_a_nic_whose_interface_is_down);
    tcase_add_test(t, bind_refuses_a_mounted_nvme_partition_naming_the_mount);
    tcase_add_test(t, bind_refuses_an_open_drm_node_naming_the_process);
    tcase_add_test(t, bind_refuses_an_open_accel_node);
    tcase_add_test(t, bind_force_takes_a_device_in_use_and_says_so);
    tcase_add_test(t, bind_refuses_a_platform_device_in_use);
    tcase_add_test(t, bind_names_a_missing_iommu_before_the_missing_vfio_driver);
    tcase_add_test(t, bind_without_group_but_with_an_iommu_says_it_does_not_cover_the_device);
    tcase_add_test(t, bind_dry_run_changes_nothing_and_prints_the_plan);
    tcase_add_test(t, unbind_dry_run_changes_nothing);
    tcase_add_test(t, unbind_of_a_device_not_on_vfio_says_nothing_changed);
    tcase_add_test(t, hugepages_dry_run_changes_nothing);
    tcase_add_test(t, hugepages_amounts_with_units_are_whole_pages);
    tcase_add_test(t, hugepages_refuses_more_than_half_of_available_memory);
    tcase_add_test(t, hugepages_refuses_without_meminfo_unless_forced);
    tcase_add_test(t, malformed_address_is_a_usage_error_for_every_command);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
