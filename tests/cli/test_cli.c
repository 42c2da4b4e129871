/* SPDX-License-Identifier: MIT */
/*
 * The npuvfio binary against fake sysfs trees: list, info, bind, unbind and
 * hugepages, their JSON, and their one-line errors; sim and its socket path. Bind and unbind are
 * checked by reading back the driver links the fake kernel moved.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <check.h>

#include "cli_checks.h"
#include "fake_sysfs.h"
#include "json_check.h"
#include "run_cli.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static struct fake_sysfs fs;
static struct cli_result r;

/*
 * group 3: a root port on pcieport and an Edge TPU on its host driver (viable for the TPU)
 * group 7: the test device and a NIC on e1000e (not viable for the test device)
 * group 9: an Ascend 910 unbound and its sibling on pci-stub (viable)
 * no group: a NIC with NUMA node 1
 */
static void setup(void)
{
    fake_sysfs_init(&fs);
    fake_add_driver(&fs, "vfio-pci");
    fake_add_id(&fs, 0x1ac1, 0x089a, "apex");
    fake_add_id(&fs, 0x8086, 0x10d3, "e1000e");
    fake_add_id(&fs, 0x8086, 0x1533, "igb");
    fake_add_id(&fs, 0x1234, 0x4e50, "testdrv");
    fake_add_id(&fs, 0x8086, 0xa110, "pcieport");
    fake_add_func(&fs, "0000:00:1c.0", 0x8086, 0xa110, 0x060400, "pcieport", 3, 0);
    fake_add_func(&fs, "0000:01:00.0", 0x1ac1, 0x089a, 0x0000ff, "apex", 3, 0);
    fake_add_func(&fs, "0000:02:00.0", 0x1234, 0x4e50, 0x120000, "testdrv", 7, 0);
    fake_add_func(&fs, "0000:02:00.1", 0x8086, 0x10d3, 0x020000, "e1000e", 7, 0);
    fake_add_func(&fs, "0000:03:00.0", 0x19e5, 0xd801, 0x120000, NULL, 9, 1);
    fake_add_func(&fs, "0000:03:00.1", 0x19e5, 0xd801, 0x120000, "pci-stub", 9, 1);
    fake_add_func(&fs, "0000:04:00.0", 0x8086, 0x1533, 0x020000, "igb", -1, 1);
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

static void state_file(const char *addr, char *buf, size_t len)
{
    state_file_of(&fs, addr, buf, len);
}

/* ---- global behaviour ---- */

START_TEST(help_lists_every_command)
{
    run_cli(&r, NULL, ARGS("--help"));
    ck_assert_int_eq(r.status, 0);
#define NPV_COMMAND(name, fn, summary) ck_assert_msg(strstr(r.out, "  " #name " ") != NULL, #name);
#include "commands.def"
#undef NPV_COMMAND
}
END_TEST

START_TEST(every_command_has_help)
{
    static const char *const cmds[] = {
#define NPV_COMMAND(name, fn, summary) #name,
#include "commands.def"
#undef NPV_COMMAND
    };
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        run_cli(&r, NULL, ARGS(cmds[i], "--help"));
        ck_assert_msg(r.status == 0, "%s --help: %d", cmds[i], r.status);
        /* A command that runs a program of its own (bench) may name it "npuvfio-<cmd>". */
        ck_assert_msg(strncmp(r.out, "Usage: npuvfio", 14) == 0 && strstr(r.out, cmds[i]) != NULL,
                      "%s --help: %s", cmds[i], r.out);
    }
}
END_TEST

START_TEST(version_prints_version)
{
    run_cli(&r, NULL, ARGS("--version"));
    ck_assert_int_eq(r.status, 0);
    ck_assert(strncmp(r.out, "npuvfio ", 8) == 0);
}
END_TEST

START_TEST(unknown_command_is_usage_error)
{
    run_cli(&r, NULL, ARGS("frobnicate"));
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq(count_lines(r.err), 1);
    ck_assert(strstr(r.err, "unknown command 'frobnicate'") != NULL);
    ck_assert(strstr(r.err, "--help") != NULL);
}
END_TEST

START_TEST(unknown_option_is_usage_error)
{
    run_cli(&r, NULL, ARGS("--frob"));
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq(count_lines(r.err), 1);
    run_cli(&r, NULL, ARGS("list", "--frob"));
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq(count_lines(r.err), 1);
    ck_assert_msg(strstr(r.err, "npuvfio list: unknown option '--frob'") != NULL, "%s", r.err);
    run_cli(&r, NULL, ARGS("--log", "loud", "list"));
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq(count_lines(r.err), 1);
}
END_TEST

START_TEST(missing_address_is_usage_error)
{
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "bind"));
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq(count_lines(r.err), 1);
}
END_TEST

/* ---- list ---- */

START_TEST(list_text_marks_known_npus)
{
    char line[256];
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "list"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.err, "");
    ck_assert_int_eq(count_lines(r.out), 8);
    ck_assert(line_of(r.out, "0000:01:00.0", line, sizeof(line)));
    ck_assert_msg(strstr(line, "1ac1:089a") && strstr(line, "apex") && strstr(line, "edgetpu"),
                  "%s", line);
    ck_assert(line_of(r.out, "0000:02:00.0", line, sizeof(line)));
    ck_assert_msg(strstr(line, "testdev") && strstr(line, " 7 "), "%s", line);
    ck_assert(line_of(r.out, "0000:03:00.0", line, sizeof(line)));
    ck_assert_msg(strstr(line, "aicore") && strstr(line, " 1 "), "%s", line);
    ck_assert(line_of(r.out, "0000:02:00.1", line, sizeof(line)));
    ck_assert_msg(!strstr(line, "edgetpu") && !strstr(line, "testdev") && !strstr(line, "aicore"),
                  "%s", line);
    /* Sorted by address. */
    ck_assert(strstr(r.out, "0000:00:1c.0") < strstr(r.out, "0000:01:00.0"));
    ck_assert(strstr(r.out, "0000:03:00.1") < strstr(r.out, "0000:04:00.0"));
}
END_TEST

START_TEST(list_json_is_one_document)
{
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "list", "--json"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(json_valid_document(r.out), "not one JSON document: %s", r.out);
    ck_assert(strstr(r.out, "{\"address\":\"0000:01:00.0\",\"vendor\":\"1ac1\",\"device\":"
                            "\"089a\",\"class\":\"0000ff\",\"driver\":\"apex\",\"iommu_group\":3,"
                            "\"numa_node\":0,\"vfio_bound\":false,\"npu\":\"edgetpu\"}"));
    ck_assert(strstr(r.out, "\"address\":\"0000:03:00.0\",\"vendor\":\"19e5\",\"device\":\"d801\","
                            "\"class\":\"120000\",\"driver\":null,\"iommu_group\":9,"
                            "\"numa_node\":1,\"vfio_bound\":false,\"npu\":\"aicore\""));
    ck_assert(strstr(r.out, "\"address\":\"0000:04:00.0\",\"vendor\":\"8086\",\"device\":\"1533\","
                            "\"class\":\"020000\",\"driver\":\"igb\",\"iommu_group\":null,"
                            "\"numa_node\":1,\"vfio_bound\":false,\"npu\":null"));
    /* The global --json before the command means the same. */
    run_cli(&r, NULL, ARGS("--json", "--sysfs-root", fs.root, "list", "--npu"));
    ck_assert_int_eq(r.status, 0);
    ck_assert(json_valid_document(r.out));
    ck_assert(strstr(r.out, "0000:02:00.1") == NULL);
    ck_assert(strstr(r.out, "\"npu\":\"testdev\"") != NULL);
}
END_TEST

START_TEST(list_reads_sysfs_root_from_environment)
{
    char env[PATH_MAX + 32];
    snprintf(env, sizeof(env), "NPUVFIO_SYSFS_ROOT=%s", fs.root);
    run_cli(&r, (const char *const[]){env, NULL}, ARGS("list"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert(strstr(r.out, "0000:01:00.0") != NULL);
}
END_TEST

START_TEST(list_of_missing_tree_fails_with_one_line)
{
    run_cli(&r, NULL, ARGS("--sysfs-root", "/nonexistent/npv", "list"));
    assert_one_line_error("npuvfio list: ");
    ck_assert_int_eq(r.status, 1);
}
END_TEST

/* ---- info ---- */

START_TEST(info_names_group_members_and_blocker)
{
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "info", "0000:02:00.0"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert(strstr(r.out, "npu: testdev") != NULL);
    ck_assert(strstr(r.out, "iommu group:    7") != NULL);
    char line[256];
    ck_assert(line_of(r.out, "    0000:02:00.1", line, sizeof(line)));
    ck_assert_msg(strstr(line, "e1000e") && strstr(line, "blocks VFIO"), "%s", line);
    ck_assert(line_of(r.out, "    0000:02:00.0", line, sizeof(line)));
    ck_assert_msg(!strstr(line, "blocks"), "%s", line);
    ck_assert_msg(strstr(r.out, "viable:         no: 0000:02:00.1 (e1000e)") != NULL, "%s", r.out);
    /* Not on vfio-pci: the VFIO part is not attempted. */
    ck_assert(strstr(r.out, "vfio:") == NULL);
}
END_TEST

START_TEST(info_viable_with_pcieport_and_pci_stub)
{
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "info", "0000:01:00.0"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert(strstr(r.out, "0000:00:1c.0") != NULL);
    ck_assert_msg(strstr(r.out, "viable:         yes") != NULL, "%s", r.out);
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "info", "03:00.0"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert(strstr(r.out, "0000:03:00.1") && strstr(r.out, "pci-stub"));
    ck_assert_msg(strstr(r.out, "viable:         yes") != NULL, "%s", r.out);
}
END_TEST

START_TEST(info_json_is_one_document)
{
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "info", "--json", "0000:02:00.0"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(json_valid_document(r.out), "%s", r.out);
    ck_assert(strstr(r.out, "\"iommu_group\":{\"id\":7,\"viable\":false") != NULL);
    ck_assert(strstr(r.out, "\"blockers\":[{\"address\":\"0000:02:00.1\",\"driver\":\"e1000e\"}]"));
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "--json", "info", "0000:04:00.0"));
    ck_assert_int_eq(r.status, 0);
    ck_assert(json_valid_document(r.out));
    ck_assert(strstr(r.out, "\"iommu_group\":null") != NULL);
}
END_TEST

START_TEST(info_open_required_fails_when_not_on_vfio)
{
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "info", "--open", "0000:02:00.0"));
    ck_assert_int_eq(r.status, 1);
    ck_assert(strstr(r.out, "vfio:           not bound to vfio-pci") != NULL);
    assert_one_line_error("npuvfio info: 0000:02:00.0: VFIO: not bound to vfio-pci");
}
END_TEST

START_TEST(info_on_vfio_function_reports_open_outcome)
{
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "bind", "--state-dir", fs.state_dir, "0000:03:00.0"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert(fake_wait_driver(&fs, "0000:03:00.0", "vfio-pci"));
    /*
     * The fake tree has no /dev/vfio behind it, so the open normally fails:
     * without --open that is part of the report and the exit status is 0.
     */
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "info", "0000:03:00.0"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "  vfio:") != NULL, "%s", r.out);
    bool failed = strstr(r.out, "  vfio:           cannot") != NULL;
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "info", "--open", "--json", "0000:03:00.0"));
    ck_assert_msg(json_valid_document(r.out), "%s", r.out);
    if (failed) {
        ck_assert_int_eq(r.status, 1);
        ck_assert(strstr(r.out, "\"vfio\":{\"opened\":false,\"error\":\"cannot ") != NULL);
        assert_one_line_error("npuvfio info: 0000:03:00.0: VFIO: cannot ");
    } else {
        ck_assert_int_eq(r.status, 0);
    }
}
END_TEST

/* ---- bad addresses ---- */

START_TEST(malformed_address_is_one_line_error)
{
    static const char *const cmds[] = {"info", "bind", "unbind"};
    for (size_t i = 0; i < 3; i++) {
        char want[128];
        snprintf(want, sizeof(want),
                 "npuvfio %s: 0000:zz:00.0: malformed PCI address (expected DDDD:BB:DD.F)\n",
                 cmds[i]);
        run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, cmds[i], "0000:zz:00.0"));
        ck_assert_int_eq(r.status, 2); /* a typo on the command line: usage error */
        ck_assert_str_eq(r.err, want);
    }
}
END_TEST

START_TEST(missing_device_is_one_line_error)
{
    static const char *const cmds[] = {"info", "bind", "unbind"};
    for (size_t i = 0; i < 3; i++) {
        run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, cmds[i], "0000:05:00.0"));
        ck_assert_int_eq(r.status, 1);
        char prefix[64];
        snprintf(prefix, sizeof(prefix), "npuvfio %s: 0000:05:00.0: no such PCI function", cmds[i]);
        assert_one_line_error(prefix);
    }
}
END_TEST

/* ---- bind / unbind ---- */

START_TEST(bind_moves_function_to_vfio_pci)
{
    char drv[64], st[64], ov[64];
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "bind", "--state-dir", fs.state_dir, "0000:01:00.0"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, "0000:01:00.0: bound to vfio-pci (was apex)\n");
    ck_assert(fake_wait_driver(&fs, "0000:01:00.0", "vfio-pci"));
    fake_driver_of(&fs, "0000:01:00.0", drv, sizeof(drv));
    ck_assert_str_eq(drv, "vfio-pci");
    state_file("0000:01:00.0", st, sizeof(st));
    ck_assert_str_eq(st, "apex\n");
    ck_assert(fake_read(&fs, "bus/pci/devices/0000:01:00.0/driver_override", ov, sizeof(ov)) > 0);
    ck_assert_str_eq(ov, "vfio-pci");
    /* The other group member stays where it was. */
    fake_driver_of(&fs, "0000:00:1c.0", drv, sizeof(drv));
    ck_assert_str_eq(drv, "pcieport");
    /* list now says so. */
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "list"));
    char line[256];
    ck_assert(line_of(r.out, "0000:01:00.0", line, sizeof(line)));
    ck_assert_msg(strstr(line, "vfio-pci") && strstr(line, " yes "), "%s", line);
}
END_TEST

START_TEST(unbind_restores_previous_driver)
{
    char drv[64], st[64], ov[64];
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "bind", "--state-dir", fs.state_dir, "0000:01:00.0"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert(fake_wait_driver(&fs, "0000:01:00.0", "vfio-pci"));
    char env[PATH_MAX + 64];
    snprintf(env, sizeof(env), "NPUVFIO_STATE_DIR=%s", fs.state_dir);
    run_cli(&r, (const char *const[]){env, NULL},
            ARGS("--sysfs-root", fs.root, "unbind", "0000:01:00.0"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, "0000:01:00.0: driver now apex\n");
    ck_assert(fake_wait_driver(&fs, "0000:01:00.0", "apex"));
    fake_driver_of(&fs, "0000:01:00.0", drv, sizeof(drv));
    ck_assert_str_eq(drv, "apex");
    state_file("0000:01:00.0", st, sizeof(st));
    ck_assert_str_eq(st, "<missing>");
    ck_assert(fake_read(&fs, "bus/pci/devices/0000:01:00.0/driver_override", ov, sizeof(ov)) >= 0);
    ck_assert_str_eq(ov, "\n");
}
END_TEST

START_TEST(unbind_leaves_previously_unbound_function_unbound)
{
    char drv[64];
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "bind", "--state-dir", fs.state_dir, "0000:03:00.0"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, "0000:03:00.0: bound to vfio-pci (was unbound)\n");
    ck_assert(fake_wait_driver(&fs, "0000:03:00.0", "vfio-pci"));
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "unbind", "--state-dir", fs.state_dir, "0000:03:00.0"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    fake_driver_of(&fs, "0000:03:00.0", drv, sizeof(drv));
    ck_assert_str_eq(drv, "");
}
END_TEST

START_TEST(unbind_without_record_lets_kernel_choose)
{
    char drv[64];
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "bind", "--state-dir", fs.state_dir, "0000:01:00.0"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert(fake_wait_driver(&fs, "0000:01:00.0", "vfio-pci"));
    char other[PATH_MAX + 32];
    snprintf(other, sizeof(other), "%s.none", fs.state_dir);
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "unbind", "--state-dir", other, "0000:01:00.0"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    /* drivers_probe with the override cleared: the id tables pick apex again. */
    ck_assert(fake_wait_driver(&fs, "0000:01:00.0", "apex"));
    fake_driver_of(&fs, "0000:01:00.0", drv, sizeof(drv));
    ck_assert_str_eq(drv, "apex");
}
END_TEST

START_TEST(unbind_of_function_on_host_driver_is_noop)
{
    char drv[64];
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "unbind", "--state-dir", fs.state_dir, "0000:04:00.0"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, "0000:04:00.0: not on vfio-pci (driver igb): nothing changed\n");
    fake_driver_of(&fs, "0000:04:00.0", drv, sizeof(drv));
    ck_assert_str_eq(drv, "igb");
}
END_TEST

START_TEST(bind_refuses_group_not_viable_naming_blocker)
{
    char drv[64], st[64];
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "bind", "--state-dir", fs.state_dir, "0000:02:00.0"));
    ck_assert_int_eq(r.status, 1);
    assert_one_line_error("npuvfio bind: 0000:02:00.0: IOMMU group 7 is not viable: ");
    ck_assert_msg(strstr(r.err, "0000:02:00.1 (e1000e)") != NULL, "%s", r.err);
    ck_assert_str_eq(r.out, "");
    /* Nothing moved, nothing remembered. */
    fake_driver_of(&fs, "0000:02:00.0", drv, sizeof(drv));
    ck_assert_str_eq(drv, "testdrv");
    fake_driver_of(&fs, "0000:02:00.1", drv, sizeof(drv));
    ck_assert_str_eq(drv, "e1000e");
    state_file("0000:02:00.0", st, sizeof(st));
    ck_assert_str_eq(st, "<missing>");
}
END_TEST

START_TEST(bind_refusal_names_blocker_either_way)
{
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "bind", "--state-dir", fs.state_dir, "0000:02:00.1"));
    ck_assert_int_eq(r.status, 1); /* 02:00.0 is on testdrv: the same trap, the other way */
    ck_assert(strstr(r.err, "0000:02:00.0 (testdrv)") != NULL);
}
END_TEST

START_TEST(bind_refuses_function_without_iommu_group)
{
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "bind", "--state-dir", fs.state_dir, "0000:04:00.0"));
    ck_assert_int_eq(r.status, 1);
    assert_one_line_error("npuvfio bind: 0000:04:00.0: no IOMMU group");
}
END_TEST

START_TEST(bind_refuses_without_vfio_pci_driver)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/bus/pci/drivers/vfio-pci/bind", fs.root);
    unlink(p);
    snprintf(p, sizeof(p), "%s/bus/pci/drivers/vfio-pci/unbind", fs.root);
    unlink(p);
    snprintf(p, sizeof(p), "%s/bus/pci/drivers/vfio-pci", fs.root);
    ck_assert(rmdir(p) == 0);
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "bind", "--state-dir", fs.state_dir, "0000:01:00.0"));
    assert_one_line_error("npuvfio bind: 0000:01:00.0: the vfio-pci driver is not loaded");
}
END_TEST

START_TEST(bind_of_bound_function_is_noop)
{
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "bind", "--state-dir", fs.state_dir, "0000:01:00.0"));
    ck_assert_int_eq(r.status, 0);
    ck_assert(fake_wait_driver(&fs, "0000:01:00.0", "vfio-pci"));
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "bind", "--state-dir", fs.state_dir, "0000:01:00.0"));
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, "0000:01:00.0: already bound to vfio-pci\n");
    char st[64];
    state_file("0000:01:00.0", st, sizeof(st));
    ck_assert_str_eq(st, "apex\n");
}
END_TEST

/* ---- hugepages ---- */

START_TEST(hugepages_reserves_and_reports)
{
    fake_add_pool(&fs, -1, 2048, 8, true);
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "hugepages", "4"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, "hugepages 2M (all nodes): requested 4, reserved 4, free 4\n");
    ck_assert_str_eq(r.err, "");
}
END_TEST

START_TEST(hugepages_short_reports_and_fails)
{
    fake_add_pool(&fs, -1, 2048, 3, true);
    run_cli(
        &r, NULL,
        ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "hugepages", "4", "--size", "2M"));
    ck_assert_int_eq(r.status, 1);
    ck_assert_str_eq(r.out, "hugepages 2M (all nodes): requested 4, reserved 3, free 3\n");
    assert_one_line_error("npuvfio hugepages: short: the kernel reserved 3 of 4 2M pages");
}
END_TEST

START_TEST(hugepages_node_1g_json)
{
    fake_add_pool(&fs, 1, 1048576, 2, true);
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "hugepages", "2", "--size", "1G",
                 "--node", "1", "--json"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(json_valid_document(r.out), "%s", r.out);
    ck_assert_str_eq(r.out, "{\"size\":\"1G\",\"page_size\":1073741824,\"node\":1,\"requested\":2,"
                            "\"reserved\":2,\"free\":2,\"short\":false}\n");
}
END_TEST

START_TEST(hugepages_without_count_reports_pool)
{
    fake_add_pool(&fs, -1, 2048, 16, false);
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "hugepages"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, "hugepages 2M (all nodes): reserved 16, free 16\n");
}
END_TEST

START_TEST(hugepages_missing_pool_and_bad_args)
{
    run_cli(
        &r, NULL,
        ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "hugepages", "4", "--size", "1G"));
    /* A size this machine has no pool of is a usage error (issue 19 §3: --size 4M). */
    ck_assert_msg(r.status == 2, "exit %d: %s", r.status, r.err);
    ck_assert_msg(
        strncmp(r.err, "npuvfio hugepages: --size 1G: this machine has no 1G hugepages", 62) == 0,
        "%s", r.err);
    ck_assert_int_eq(count_lines(r.err), 1);
    run_cli(
        &r, NULL,
        ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "hugepages", "4", "--size", "3M"));
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq(count_lines(r.err), 1);
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "hugepages", "-4"));
    ck_assert_int_eq(r.status, 2);
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "--proc-root", fs.proc, "hugepages", "many"));
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq(count_lines(r.err), 1);
}
END_TEST

START_TEST(status_reports_groups_driver_and_functions)
{
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "status"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "vfio-pci driver loaded: yes") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "IOMMU      3 IOMMU groups") != NULL, "%s", r.out);
    /* The PCI table follows, read from the same tree. */
    char line[256];
    ck_assert_ptr_nonnull(line_of(r.out, "0000:01:00.0", line, sizeof(line)));
    ck_assert_msg(strstr(line, "edgetpu") != NULL, "%s", line);
}
END_TEST

START_TEST(status_json_is_one_document)
{
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "status", "--json"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(json_valid_document(r.out), "not one JSON document: %s", r.out);
    ck_assert_msg(strstr(r.out, "\"iommu_groups\":3") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "\"vfio_pci_loaded\":true") != NULL, "%s", r.out);
}
END_TEST

/* ---- run ---- */

START_TEST(run_testdev_checks_every_result_and_prints_percentiles)
{
    run_cli(&r, NULL, ARGS("run", "--device", "testdev", "--iterations", "50"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "50 (800 jobs); every result matches the CPU reference") != NULL,
                  "%s", r.out);
    ck_assert_msg(strstr(r.out, "latency:    p50 ") != NULL && strstr(r.out, ", p99 ") != NULL,
                  "%s", r.out);
    ck_assert_msg(strstr(r.out, "rate:") != NULL, "%s", r.out);
}
END_TEST

START_TEST(run_edgetpu_checks_every_output_of_the_sample_network)
{
    run_cli(&r, NULL, ARGS("run", "--device", "edgetpu", "--iterations", "50"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "50 (50 jobs); every result matches the CPU reference") != NULL,
                  "%s", r.out);
    ck_assert_msg(strstr(r.out, "outputs FNV-1a ") != NULL, "%s", r.out);
}
END_TEST

START_TEST(run_json_is_one_document)
{
    run_cli(&r, NULL, ARGS("--json", "run", "--device", "testdev", "--iterations", "10"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(json_valid_document(r.out), "not one JSON document: %s", r.out);
    ck_assert_msg(strstr(r.out, "\"mismatches\":0,\"ok\":true") != NULL, "%s", r.out);
}
END_TEST

START_TEST(run_refuses_devices_without_a_sample_and_bad_arguments)
{
    run_cli(&r, NULL, ARGS("run", "--device", "nosuch"));
    ck_assert_int_eq(r.status, 2);
    run_cli(&r, NULL, ARGS("run"));
    ck_assert_int_eq(r.status, 2);
    run_cli(&r, NULL, ARGS("run", "--device", "testdev", "--iterations", "0"));
    ck_assert_int_eq(r.status, 2);
    run_cli(&r, NULL,
            ARGS("run", "--device", "testdev", "--socket", "/x", "--pci", "0000:01:00.0"));
    ck_assert_int_eq(r.status, 2);
}
END_TEST

START_TEST(run_against_a_missing_socket_fails_with_one_line)
{
    run_cli(&r, NULL, ARGS("run", "--device", "testdev", "--socket", "/nonexistent/dev.sock"));
    ck_assert_int_eq(r.status, 1);
    ck_assert_int_eq(count_lines(r.err), 1);
    ck_assert_msg(strstr(r.err, "npuvfio run: ") == r.err, "%s", r.err);
}
END_TEST

START_TEST(list_help_names_the_known_npus_from_the_device_table)
{
    run_cli(&r, NULL, ARGS("list", "--help"));
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(strstr(r.out, "testdev   1234:4e50") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "edgetpu   1ac1:089a") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "aicore    19e5:d100,19e5:d801,1234:4e41") != NULL, "%s", r.out);
}
END_TEST

/* ---- sim: one server per socket path ---- */

static void sim_path(char *path, size_t len, const char *tag)
{
    snprintf(path, len, "/tmp/npv-cli-sim-%s-%d.sock", tag, (int)getpid());
    unlink(path);
}

static int unix_socket_at(const char *path, bool do_listen)
{
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    ck_assert_int_ge(s, 0);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
    if (do_listen)
        ck_assert_int_eq(listen(s, 4), 0);
    return s;
}

START_TEST(sim_refuses_a_path_another_server_listens_on)
{
    char path[108];
    sim_path(path, sizeof(path), "live");
    int other = unix_socket_at(path, true);
    struct stat before, after;
    ck_assert_int_eq(lstat(path, &before), 0);
    run_cli(&r, NULL, ARGS("sim", "--device", "testdev", "--socket", path));
    ck_assert_int_eq(r.status, 1);
    char want[160];
    snprintf(want, sizeof(want), "another server is listening on %s", path);
    ck_assert_msg(strstr(r.err, want) != NULL, "stderr: %s", r.err);
    ck_assert_int_eq(count_lines(r.err), 1);
    /* The other server's socket is untouched. */
    ck_assert_int_eq(lstat(path, &after), 0);
    ck_assert_uint_eq(after.st_ino, before.st_ino);
    close(other);
    unlink(path);
}
END_TEST

struct sim_run {
    const char *path;
    struct cli_result res;
};

static void *run_sim_once(void *arg)
{
    struct sim_run *s = arg;
    run_cli(&s->res, NULL, ARGS("sim", "--device", "testdev", "--socket", s->path, "--once"));
    return NULL;
}

static bool connects(const char *path)
{
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    bool ok = connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(s);
    return ok;
}

START_TEST(sim_replaces_a_stale_socket_and_removes_it_on_exit)
{
    char path[108];
    sim_path(path, sizeof(path), "stale");
    close(unix_socket_at(path, false)); /* a server that died left its socket */
    static struct sim_run s;
    s.path = path;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, run_sim_once, &s), 0);
    /* The first connection that succeeds is the sim's (--once: it exits when we leave). */
    for (int i = 0; !connects(path); i++) {
        ck_assert_msg(i < 30000, "sim never took the path");
        usleep(1000);
    }
    pthread_join(t, NULL);
    ck_assert_msg(s.res.status == 0, "status %d, stderr: %s", s.res.status, s.res.err);
    ck_assert_ptr_nonnull(strstr(s.res.err, "listening on"));
    struct stat st;
    ck_assert_int_ne(lstat(path, &st), 0);
}
END_TEST

static Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *g = tcase_create("global");
    tcase_add_checked_fixture(g, setup, teardown);
    tcase_add_test(g, help_lists_every_command);
    tcase_add_test(g, every_command_has_help);
    tcase_add_test(g, version_prints_version);
    tcase_add_test(g, unknown_command_is_usage_error);
    tcase_add_test(g, unknown_option_is_usage_error);
    tcase_add_test(g, missing_address_is_usage_error);
    suite_add_tcase(s, g);

    TCase *l = tcase_create("list_info");
    tcase_add_checked_fixture(l, setup, teardown);
    tcase_add_test(l, list_text_marks_known_npus);
    tcase_add_test(l, status_reports_groups_driver_and_functions);
    tcase_add_test(l, status_json_is_one_document);
    tcase_add_test(l, list_json_is_one_document);
    tcase_add_test(l, list_reads_sysfs_root_from_environment);
    tcase_add_test(l, list_of_missing_tree_fails_with_one_line);
    tcase_add_test(l, info_names_group_members_and_blocker);
    tcase_add_test(l, info_viable_with_pcieport_and_pci_stub);
    tcase_add_test(l, info_json_is_one_document);
    tcase_add_test(l, info_open_required_fails_when_not_on_vfio);
    tcase_add_test(l, info_on_vfio_function_reports_open_outcome);
    tcase_add_test(l, malformed_address_is_one_line_error);
    tcase_add_test(l, missing_device_is_one_line_error);
    suite_add_tcase(s, l);

    TCase *b = tcase_create("bind");
    tcase_add_checked_fixture(b, setup, teardown);
    tcase_add_test(b, bind_moves_function_to_vfio_pci);
    tcase_add_test(b, unbind_restores_previous_driver);
    tcase_add_test(b, unbind_leaves_previously_unbound_function_unbound);
    tcase_add_test(b, unbind_without_record_lets_kernel_choose);
    tcase_add_test(b, unbind_of_function_on_host_driver_is_noop);
    tcase_add_test(b, bind_refuses_group_not_viable_naming_blocker);
    tcase_add_test(b, bind_refusal_names_blocker_either_way);
    tcase_add_test(b, bind_refuses_function_without_iommu_group);
    tcase_add_test(b, bind_refuses_without_vfio_pci_driver);
    tcase_add_test(b, bind_of_bound_function_is_noop);
    suite_add_tcase(s, b);

    TCase *h = tcase_create("hugepages");
    tcase_add_checked_fixture(h, setup, teardown);
    tcase_add_test(h, hugepages_reserves_and_reports);
    tcase_add_test(h, hugepages_short_reports_and_fails);
    tcase_add_test(h, hugepages_node_1g_json);
    tcase_add_test(h, hugepages_without_count_reports_pool);
    tcase_add_test(h, hugepages_missing_pool_and_bad_args);
    suite_add_tcase(s, h);

    TCase *run = tcase_create("run");
    tcase_add_checked_fixture(run, setup, teardown);
    tcase_add_test(run, run_testdev_checks_every_result_and_prints_percentiles);
    tcase_add_test(run, run_edgetpu_checks_every_output_of_the_sample_network);
    tcase_add_test(run, run_json_is_one_document);
    tcase_add_test(run, run_refuses_devices_without_a_sample_and_bad_arguments);
    tcase_add_test(run, run_against_a_missing_socket_fails_with_one_line);
    tcase_add_test(run, list_help_names_the_known_npus_from_the_device_table);
    suite_add_tcase(s, run);
    TCase *sim = tcase_create("sim");
    tcase_add_test(sim, sim_refuses_a_path_another_server_listens_on);
    tcase_add_test(sim, sim_replaces_a_stale_socket_and_removes_it_on_exit);
    suite_add_tcase(s, sim);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cli_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
