/* SPDX-License-Identifier: MIT */
/*
 * The npuvfio binary with platform devices in the fake sysfs tree: list marks
 * the RK3588 NPU by its compatible string, info shows a platform device's
 * group and viability, bind and unbind move it to vfio-platform and back
 * through driver_override and bus/platform/drivers_probe (checked on the
 * driver links the fake kernel moved).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "cli_checks.h"
#include "fake_sysfs.h"
#include "json_check.h"
#include "run_cli.h"

#define ARGS(...)   ((const char *const[]){__VA_ARGS__, NULL})
#define COMPAT(...) ((const char *const[]){__VA_ARGS__, NULL})

static struct fake_sysfs fs;
static struct cli_result r;

/*
 * fdab0000.npu: the vendor RK3588 NPU node on rknpu, alone in IOMMU group 5
 * fdac0000.npu: mainline's node of NPU core 1 on rocket, group 6
 * fdb50000.vepu + fdb50400.jpeg: two codecs sharing group 8 (not viable for either)
 * feb50000.serial: a UART without an IOMMU (not listed)
 * 0000:01:00.0: an Edge TPU, so the PCI table is there too
 */
static void setup(void)
{
    fake_sysfs_init(&fs);
    fake_add_driver(&fs, "vfio-pci");
    fake_add_id(&fs, 0x1ac1, 0x089a, "apex");
    fake_add_func(&fs, "0000:01:00.0", 0x1ac1, 0x089a, 0x0000ff, "apex", 3, 0);
    fake_add_platform_driver(&fs, "vfio-platform");
    fake_add_compat(&fs, "rockchip,rk3588-rknpu", "rknpu");
    fake_add_compat(&fs, "rockchip,rk3588-rknn-core", "rocket");
    fake_add_platform(&fs, "fdab0000.npu", COMPAT("rockchip,rk3588-rknpu"), "rknpu", 5);
    fake_add_platform(&fs, "fdac0000.npu", COMPAT("rockchip,rk3588-rknn-core"), "rocket", 6);
    fake_add_platform(&fs, "fdb50000.vepu", COMPAT("rockchip,rk3588-vepu121"), "hantro-vpu", 8);
    fake_add_platform(&fs, "fdb50400.jpeg", COMPAT("rockchip,rk3588-jpeg", "rockchip,jpeg"),
                      "rockchip-jpeg", 8);
    fake_add_platform(&fs, "feb50000.serial", COMPAT("rockchip,rk3588-uart", "snps,dw-apb-uart"),
                      "dw-apb-uart", -1);
    fake_set_vfio_platform_reset_required(&fs, false);
    fake_kernel_start(&fs);
}

static void teardown(void)
{
    fake_sysfs_destroy(&fs);
}

static void assert_one_line_error(const char *prefix)
{
    check_one_line_error(&r, prefix);
}

static void state_file(const char *name, char *buf, size_t len)
{
    state_file_of(&fs, name, buf, len);
}

static void bind(const char *name)
{
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "bind", "--state-dir", fs.state_dir, name));
}

/* ---- list ---- */

START_TEST(list_marks_rk3588_npu_platform_device)
{
    char line[512];
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "list"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.err, "");
    ck_assert_msg(strstr(r.out, "platform devices:") != NULL, "%s", r.out);
    ck_assert(line_of(r.out, "fdab0000.npu", line, sizeof(line)));
    ck_assert_msg(strstr(line, "rknpu (Rockchip RK3588 NPU)") && strstr(line, " 5 ") &&
                      strstr(line, "rockchip,rk3588-rknpu") && strstr(line, " no "),
                  "%s", line);
    ck_assert(line_of(r.out, "fdac0000.npu", line, sizeof(line)));
    ck_assert_msg(strstr(line, "rknpu (Rockchip RK3588 NPU core)") && strstr(line, "rocket"), "%s",
                  line);
    ck_assert(line_of(r.out, "fdb50400.jpeg", line, sizeof(line)));
    ck_assert_msg(strstr(line, "rockchip,rk3588-jpeg rockchip,jpeg") && !strstr(line, "rknpu"),
                  "%s", line);
    /* Without an IOMMU group VFIO cannot take it: not listed. */
    ck_assert(strstr(r.out, "feb50000.serial") == NULL);
    /* The PCI table comes first, unchanged. */
    ck_assert(strstr(r.out, "0000:01:00.0") < strstr(r.out, "platform devices:"));
}
END_TEST

START_TEST(list_json_has_platform_devices)
{
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "list", "--json"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(json_valid_document(r.out), "not one JSON document: %s", r.out);
    ck_assert_msg(strstr(r.out, "{\"name\":\"fdab0000.npu\",\"driver\":\"rknpu\",\"iommu_group\":5,"
                                "\"vfio_bound\":false,\"npu\":\"rknpu\",\"npu_model\":\"Rockchip "
                                "RK3588 NPU\",\"compatible\":[\"rockchip,rk3588-rknpu\"]}") != NULL,
                  "%s", r.out);
    ck_assert(strstr(r.out, "\"compatible\":[\"rockchip,rk3588-jpeg\",\"rockchip,jpeg\"]") != NULL);
    ck_assert(strstr(r.out, "\"functions\":[{\"address\":\"0000:01:00.0\"") != NULL);
}
END_TEST

START_TEST(list_npu_only_keeps_platform_npus)
{
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "list", "--npu"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert(strstr(r.out, "fdab0000.npu") != NULL);
    ck_assert(strstr(r.out, "fdac0000.npu") != NULL);
    ck_assert(strstr(r.out, "fdb50000.vepu") == NULL);
    ck_assert(strstr(r.out, "fdb50400.jpeg") == NULL);
}
END_TEST

START_TEST(list_without_platform_bus_shows_pci_only)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "rm -rf '%s/bus/platform'", fs.root);
    ck_assert_int_eq(system(p), 0);
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "list"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert(strstr(r.out, "platform devices:") == NULL);
    ck_assert(strstr(r.out, "0000:01:00.0") != NULL);
}
END_TEST

/* ---- info ---- */

START_TEST(info_platform_shows_compatible_group_and_viability)
{
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "info", "fdab0000.npu"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "fdab0000.npu  platform device  npu: rknpu, Rockchip RK3588 NPU") !=
                      NULL,
                  "%s", r.out);
    ck_assert(strstr(r.out, "  compatible:     rockchip,rk3588-rknpu\n") != NULL);
    ck_assert(strstr(r.out, "  driver:         rknpu\n") != NULL);
    ck_assert(strstr(r.out, "  iommu group:    5\n") != NULL);
    ck_assert(strstr(r.out, "  viable:         yes\n") != NULL);
    /* Not on vfio-platform: the VFIO part is not attempted. */
    ck_assert(strstr(r.out, "vfio:") == NULL);
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "info", "fdb50000.vepu"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "viable:         no: fdb50400.jpeg (rockchip-jpeg)") != NULL, "%s",
                  r.out);
}
END_TEST

START_TEST(info_platform_json_is_one_document)
{
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "--json", "info", "fdb50000.vepu"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(json_valid_document(r.out), "%s", r.out);
    ck_assert_msg(strstr(r.out, "\"name\":\"fdb50000.vepu\",\"bus\":\"platform\"") != NULL, "%s",
                  r.out);
    ck_assert_msg(strstr(r.out,
                         "\"iommu_group\":{\"id\":8,\"viable\":false,\"blockers\":[{\"name\":"
                         "\"fdb50400.jpeg\",\"driver\":\"rockchip-jpeg\"}]}") != NULL,
                  "%s", r.out);
}
END_TEST

START_TEST(info_on_vfio_platform_device_reports_open_outcome)
{
    bind("fdab0000.npu");
    ck_assert_msg(r.status == 0, "%s", r.err);
    /*
     * No /dev/vfio behind the fake tree: the open fails and, without --open,
     * the failure is part of the report.
     */
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "info", "fdab0000.npu"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "  vfio:") != NULL, "%s", r.out);
    bool failed = strstr(r.out, "  vfio:           cannot") != NULL;
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "info", "--open", "--json", "fdab0000.npu"));
    ck_assert_msg(json_valid_document(r.out), "%s", r.out);
    if (failed) {
        ck_assert_int_eq(r.status, 1);
        ck_assert(strstr(r.out, "\"vfio\":{\"opened\":false,\"error\":\"cannot ") != NULL);
        assert_one_line_error("npuvfio info: fdab0000.npu: VFIO: cannot ");
    }
}
END_TEST

START_TEST(info_open_required_fails_when_not_on_vfio_platform)
{
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "info", "--open", "fdac0000.npu"));
    ck_assert_int_eq(r.status, 1);
    ck_assert(strstr(r.out, "vfio:           not bound to vfio-platform") != NULL);
    assert_one_line_error("npuvfio info: fdac0000.npu: VFIO: not bound to vfio-platform");
}
END_TEST

START_TEST(unknown_device_name_is_one_line_error)
{
    static const char *const cmds[] = {"info", "bind", "unbind"};
    for (size_t i = 0; i < 3; i++) {
        char want[PATH_MAX + 256];
        run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, cmds[i], "fdff0000.nothing"));
        ck_assert_int_eq(r.status, 1);
        snprintf(want, sizeof(want),
                 "npuvfio %s: fdff0000.nothing: no such device: not a PCI address "
                 "(DDDD:BB:DD.F) and not a platform device in %s/bus/platform/devices\n",
                 cmds[i], fs.root);
        ck_assert_str_eq(r.err, want);
    }
}
END_TEST

/* ---- bind / unbind ---- */

START_TEST(bind_moves_platform_device_to_vfio_platform)
{
    char drv[64], st[64], ov[64];
    bind("fdab0000.npu");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, "fdab0000.npu: bound to vfio-platform (was rknpu)\n");
    fake_driver_of(&fs, "fdab0000.npu", drv, sizeof(drv));
    ck_assert_str_eq(drv, "vfio-platform");
    state_file("fdab0000.npu", st, sizeof(st));
    ck_assert_str_eq(st, "rknpu\n");
    ck_assert(fake_read(&fs, "bus/platform/devices/fdab0000.npu/driver_override", ov, sizeof(ov)) >
              0);
    ck_assert_str_eq(ov, "vfio-platform");
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "list"));
    char line[512];
    ck_assert(line_of(r.out, "fdab0000.npu", line, sizeof(line)));
    ck_assert_msg(strstr(line, "vfio-platform") && strstr(line, " yes "), "%s", line);
    /* Bound already: nothing moves, the record of the first driver stays. */
    bind("fdab0000.npu");
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, "fdab0000.npu: already bound to vfio-platform\n");
    state_file("fdab0000.npu", st, sizeof(st));
    ck_assert_str_eq(st, "rknpu\n");
}
END_TEST

START_TEST(unbind_returns_platform_device_to_previous_driver)
{
    char drv[64], st[64], ov[64];
    bind("fdab0000.npu");
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "unbind", "--state-dir", fs.state_dir, "fdab0000.npu"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, "fdab0000.npu: driver now rknpu\n");
    fake_driver_of(&fs, "fdab0000.npu", drv, sizeof(drv));
    ck_assert_str_eq(drv, "rknpu");
    state_file("fdab0000.npu", st, sizeof(st));
    ck_assert_str_eq(st, "<missing>");
    ck_assert(fake_read(&fs, "bus/platform/devices/fdab0000.npu/driver_override", ov, sizeof(ov)) >=
              0);
    ck_assert_str_eq(ov, "\n");
}
END_TEST

START_TEST(unbind_without_record_lets_of_match_choose)
{
    char drv[64];
    bind("fdac0000.npu");
    ck_assert_msg(r.status == 0, "%s", r.err);
    char other[PATH_MAX + 32];
    snprintf(other, sizeof(other), "%s.none", fs.state_dir);
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "unbind", "--state-dir", other, "fdac0000.npu"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    /* drivers_probe with the override cleared: the compatible string picks rocket again. */
    ck_assert(fake_wait_driver(&fs, "fdac0000.npu", "rocket"));
    fake_driver_of(&fs, "fdac0000.npu", drv, sizeof(drv));
    ck_assert_str_eq(drv, "rocket");
}
END_TEST

START_TEST(bind_refusal_names_missing_reset_module)
{
    char drv[64], st[64], ov[64];
    fake_set_vfio_platform_reset_required(&fs, true);
    bind("fdab0000.npu");
    ck_assert_int_eq(r.status, 1);
    assert_one_line_error("npuvfio bind: fdab0000.npu: did not bind to vfio-platform");
    /* Given back before the command returned (the next command must find it so). */
    fake_driver_of(&fs, "fdab0000.npu", drv, sizeof(drv));
    ck_assert_str_eq(drv, "rknpu");
    /* The reset-module reason was logged as an error before the final line. */
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "--log", "debug", "bind", "--state-dir", fs.state_dir,
                 "fdab0000.npu"));
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "vfio-reset:rockchip,rk3588-rknpu") != NULL &&
                      strstr(r.err, "reset_required=0") != NULL,
                  "%s", r.err);
    /* Everything undone: the old driver back, no override, no record. */
    ck_assert(fake_wait_driver(&fs, "fdab0000.npu", "rknpu"));
    fake_driver_of(&fs, "fdab0000.npu", drv, sizeof(drv));
    ck_assert_str_eq(drv, "rknpu");
    ck_assert(fake_read(&fs, "bus/platform/devices/fdab0000.npu/driver_override", ov, sizeof(ov)) >=
              0);
    ck_assert_str_eq(ov, "\n");
    state_file("fdab0000.npu", st, sizeof(st));
    ck_assert_str_eq(st, "<missing>");
}
END_TEST

START_TEST(bind_refuses_platform_group_not_viable_naming_blocker)
{
    char drv[64], st[64];
    bind("fdb50000.vepu");
    ck_assert_int_eq(r.status, 1);
    assert_one_line_error("npuvfio bind: fdb50000.vepu: IOMMU group 8 is not viable: ");
    ck_assert_msg(strstr(r.err, "fdb50400.jpeg (rockchip-jpeg)") != NULL, "%s", r.err);
    fake_driver_of(&fs, "fdb50000.vepu", drv, sizeof(drv));
    ck_assert_str_eq(drv, "hantro-vpu");
    state_file("fdb50000.vepu", st, sizeof(st));
    ck_assert_str_eq(st, "<missing>");
}
END_TEST

START_TEST(bind_refuses_platform_device_without_iommu_group)
{
    bind("feb50000.serial");
    ck_assert_int_eq(r.status, 1);
    assert_one_line_error("npuvfio bind: feb50000.serial: no IOMMU group");
}
END_TEST

START_TEST(bind_refuses_without_vfio_platform_driver)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "rm -rf '%s/bus/platform/drivers/vfio-platform'", fs.root);
    ck_assert_int_eq(system(p), 0);
    bind("fdab0000.npu");
    assert_one_line_error("npuvfio bind: fdab0000.npu: the vfio-platform driver is not loaded");
}
END_TEST

/* ---- demo and run on a platform device (the RK3588 NPU's vfio-platform path) ---- */

START_TEST(demo_platform_device_not_on_vfio_platform_says_bind_it)
{
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "demo", "--device", "rknpu", "fdab0000.npu"));
    ck_assert_int_eq(r.status, 1);
    assert_one_line_error("npuvfio demo: fdab0000.npu: platform device on rknpu, not on "
                          "vfio-platform (npuvfio bind fdab0000.npu)");
    ck_assert_msg(r.out[0] == '\0', "nothing runs: %s", r.out);
}
END_TEST

START_TEST(demo_absent_platform_device_is_one_line_failure)
{
    char want[PATH_MAX + 256];
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "demo", "--device", "rknpu", "fdff0000.npu"));
    ck_assert_int_eq(r.status, 1);
    snprintf(want, sizeof(want),
             "npuvfio demo: fdff0000.npu: no such device: not a PCI address (DDDD:BB:DD.F) and "
             "not a platform device in %s/bus/platform/devices\n",
             fs.root);
    ck_assert_str_eq(r.err, want);
}
END_TEST

START_TEST(demo_malformed_address_is_usage_error)
{
    static const char *const bad[] = {"fdab0000/npu", "..", "0000:zz:00.0"};
    for (size_t i = 0; i < 3; i++) {
        run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "demo", "--device", "rknpu", bad[i]));
        ck_assert_msg(r.status == 2, "%s: %d %s", bad[i], r.status, r.err);
        ck_assert_int_eq(count_lines(r.err), 1);
    }
}
END_TEST

/*
 * Bound to vfio-platform, the device is opened through vfio-platform (the
 * row says so); the fake tree has no /dev/vfio behind it, so the open fails
 * and the demo fails with the device named.
 */
START_TEST(demo_platform_device_on_vfio_platform_opens_through_vfio_platform)
{
    bind("fdab0000.npu");
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "demo", "--device", "rknpu", "fdab0000.npu"));
    ck_assert_msg(r.status == 1, "%d %s %s", r.status, r.out, r.err);
    char line[512];
    ck_assert_msg(line_of(r.out, "rknpu", line, sizeof(line)) != NULL, "%s", r.out);
    ck_assert_msg(strstr(line, "vfio-platform fdab0000.npu") != NULL && strstr(line, "FAILED"),
                  "%s", line);
    ck_assert_msg(strstr(r.err, "npuvfio demo: fdab0000.npu: ") != NULL, "%s", r.err);
}
END_TEST

START_TEST(run_pci_option_takes_a_platform_device_name)
{
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "run", "--device", "rknpu", "--pci", "fdac0000.npu"));
    ck_assert_int_eq(r.status, 1);
    assert_one_line_error("npuvfio run: fdac0000.npu: platform device on rocket, not on "
                          "vfio-platform (npuvfio bind fdac0000.npu)");
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "run", "--device", "rknpu", "--pci", "fdff0000.npu"));
    ck_assert_int_eq(r.status, 1);
    assert_one_line_error("npuvfio run: fdff0000.npu: no such device");
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "run", "--device", "rknpu", "--pci", "fdab0000/npu"));
    ck_assert_int_eq(r.status, 2);
    bind("fdab0000.npu");
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "run", "--device", "rknpu", "--pci", "fdab0000.npu"));
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "npuvfio run: fdab0000.npu: ") != NULL, "%s", r.err);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cli_platform");
    TCase *l = tcase_create("list_info");
    tcase_add_checked_fixture(l, setup, teardown);
    tcase_add_test(l, list_marks_rk3588_npu_platform_device);
    tcase_add_test(l, list_json_has_platform_devices);
    tcase_add_test(l, list_npu_only_keeps_platform_npus);
    tcase_add_test(l, list_without_platform_bus_shows_pci_only);
    tcase_add_test(l, info_platform_shows_compatible_group_and_viability);
    tcase_add_test(l, info_platform_json_is_one_document);
    tcase_add_test(l, info_on_vfio_platform_device_reports_open_outcome);
    tcase_add_test(l, info_open_required_fails_when_not_on_vfio_platform);
    tcase_add_test(l, unknown_device_name_is_one_line_error);
    suite_add_tcase(s, l);

    TCase *b = tcase_create("bind");
    tcase_add_checked_fixture(b, setup, teardown);
    tcase_add_test(b, bind_moves_platform_device_to_vfio_platform);
    tcase_add_test(b, unbind_returns_platform_device_to_previous_driver);
    tcase_add_test(b, unbind_without_record_lets_of_match_choose);
    tcase_add_test(b, bind_refusal_names_missing_reset_module);
    tcase_add_test(b, bind_refuses_platform_group_not_viable_naming_blocker);
    tcase_add_test(b, bind_refuses_platform_device_without_iommu_group);
    tcase_add_test(b, bind_refuses_without_vfio_platform_driver);
    suite_add_tcase(s, b);

    TCase *d = tcase_create("demo_run");
    tcase_set_timeout(d, 60);
    tcase_add_checked_fixture(d, setup, teardown);
    tcase_add_test(d, demo_platform_device_not_on_vfio_platform_says_bind_it);
    tcase_add_test(d, demo_absent_platform_device_is_one_line_failure);
    tcase_add_test(d, demo_malformed_address_is_usage_error);
    tcase_add_test(d, demo_platform_device_on_vfio_platform_opens_through_vfio_platform);
    tcase_add_test(d, run_pci_option_takes_a_platform_device_name);
    suite_add_tcase(s, d);
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
