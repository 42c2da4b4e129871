/* SPDX-License-Identifier: MIT */
/*
 * npuvfio demo, the main command: every device of the device table that can
 * run is driven through its driver against its model and checked on the CPU,
 * one table row per device, then what the host offers (status, read here
 * from a fake sysfs tree).
 */
#include <stdio.h>
#include <string.h>

#include <check.h>

#include "fake_sysfs.h"
#include "json_check.h"
#include "run_cli.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static struct fake_sysfs fs;
static struct cli_result r;

static void setup(void)
{
    fake_sysfs_init(&fs);
    fake_add_driver(&fs, "vfio-pci");
    fake_add_id(&fs, 0x1ac1, 0x089a, "apex");
    fake_add_func(&fs, "0000:01:00.0", 0x1ac1, 0x089a, 0x0000ff, "apex", 3, 0);
}

static void teardown(void)
{
    fake_sysfs_destroy(&fs);
}

/* The line of r.out that starts with prefix, or NULL. */
static const char *line_starting(const char *prefix, char *buf, size_t len)
{
    for (const char *p = r.out; p != NULL && *p != '\0';) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (strncmp(p, prefix, strlen(prefix)) == 0) {
            snprintf(buf, len, "%.*s", (int)n, p);
            return buf;
        }
        p = e ? e + 1 : NULL;
    }
    return NULL;
}

START_TEST(demo_prints_one_row_per_device_then_the_host)
{
    char line[512];
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "demo", "--iterations", "20"));
    ck_assert_msg(r.status == 0, "exit %d; stderr: %s", r.status, r.err);
    ck_assert_msg(line_starting("device    transport", line, sizeof(line)) != NULL, "%s", r.out);
    ck_assert_msg(strstr(line, "check") && strstr(line, "p50") && strstr(line, "p99") &&
                      strstr(line, "rate"),
                  "header: %s", line);
    ck_assert_msg(line_starting("testdev ", line, sizeof(line)) != NULL, "%s", r.out);
    ck_assert_msg(strstr(line, "vfio-user (model)") != NULL, "%s", line);
    ck_assert_msg(strstr(line, "matches CPU, 20 iterations") != NULL, "%s", line);
    ck_assert_msg(strstr(line, " us ") != NULL && strstr(line, "jobs/s") != NULL, "%s", line);
    ck_assert_msg(line_starting("edgetpu ", line, sizeof(line)) != NULL, "%s", r.out);
    ck_assert_msg(strstr(line, "matches CPU, 20 iterations") != NULL, "%s", line);
    ck_assert_msg(line_starting("aicore ", line, sizeof(line)) != NULL, "%s", r.out);
    ck_assert_msg(strstr(line, "matches CPU, 20 iterations") != NULL, "%s", line);
    /* Then the host: status's facts and the PCI functions of the (fake) machine. */
    const char *host = strstr(r.out, "What this host offers (npuvfio status):");
    ck_assert_msg(host != NULL, "%s", r.out);
    ck_assert_msg(strstr(host, "  backends ") != NULL, "%s", host);
    ck_assert_msg(strstr(host, "0000:01:00.0") != NULL, "%s", host);
}
END_TEST

START_TEST(demo_json_is_one_document_with_devices_and_host)
{
    run_cli(&r, NULL, ARGS("--json", "--sysfs-root", fs.root, "demo", "--iterations", "10"));
    ck_assert_msg(r.status == 0, "exit %d; stderr: %s", r.status, r.err);
    ck_assert_msg(json_valid_document(r.out), "not one JSON document: %s", r.out);
    ck_assert_msg(strstr(r.out, "{\"devices\":[{\"device\":\"testdev\",\"check\":\"ok\"") == r.out,
                  "%s", r.out);
    ck_assert_msg(strstr(r.out, "\"mismatches\":0,") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "{\"device\":\"edgetpu\",\"check\":\"ok\"") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "{\"device\":\"aicore\",\"check\":\"ok\"") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "\"host\":{\"version\":") != NULL, "%s", r.out);
}
END_TEST

START_TEST(demo_one_device_prints_only_its_row)
{
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "demo", "--device", "testdev", "--iterations", "5"));
    ck_assert_msg(r.status == 0, "exit %d; stderr: %s", r.status, r.err);
    ck_assert_msg(strstr(r.out, "matches CPU, 5 iterations") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "edgetpu ") == NULL, "%s", r.out);
}
END_TEST

START_TEST(demo_refuses_what_cannot_run_with_one_line)
{
    run_cli(&r, NULL, ARGS("demo", "--device", "nosuch"));
    ck_assert_int_eq(r.status, 2);
    run_cli(&r, NULL, ARGS("demo", "0000:01:00.0"));
    ck_assert_int_eq(r.status, 2);
    run_cli(&r, NULL, ARGS("demo", "--iterations", "0"));
    ck_assert_int_eq(r.status, 2);
    /* Hardware at an address that is not there: one line, nothing run. */
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "demo", "--device", "testdev", "0000:09:00.0"));
    ck_assert_int_eq(r.status, 1);
    ck_assert_int_eq(count_lines(r.err), 1);
    ck_assert_msg(strstr(r.err, "no such PCI function") != NULL, "%s", r.err);
}
END_TEST

static Suite *demo_suite(void)
{
    Suite *s = suite_create("cli_demo");
    TCase *tc = tcase_create("demo");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, demo_prints_one_row_per_device_then_the_host);
    tcase_add_test(tc, demo_json_is_one_document_with_devices_and_host);
    tcase_add_test(tc, demo_one_device_prints_only_its_row);
    tcase_add_test(tc, demo_refuses_what_cannot_run_with_one_line);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(demo_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
