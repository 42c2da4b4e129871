/* SPDX-License-Identifier: MIT */
/*
 * scripts/run-hw-tests.sh on fake sysfs trees (issue 26): a device that is
 * absent, in use by the host or behind no IOMMU is reported and skipped and
 * nothing of the tree changes; a malformed DEVICE=ADDR exits 2 before
 * anything is read; a run binds the device, runs the ctest tests labelled hw
 * and the device's label with the address in the suite's variable, writes
 * JUnit and the JSON record, and gives the binding and the hugepage count
 * back: after a normal run, after a test killed at its timeout, and when the
 * runner itself gets SIGTERM in the middle of a test.
 *
 * The "build tree" is a CTestTestfile.cmake written here, so the runner's
 * steps are checked, not the device suites (those need hardware). One test
 * in it is this binary run as a small Check suite (argv[1] "demo-suite"),
 * whose model-only case exits 77 as on hardware: the record has each case.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "fake_sysfs.h"
#include "json_check.h"
#include "npv_test.h"
#include "run_cli.h"

static struct fake_sysfs fs;
static char work[PATH_MAX]; /* the fake build tree and the runner's output, outside the tree */
static char build[PATH_MAX + 8];
static char outdir[PATH_MAX + 8];

struct run {
    int status; /* exit status; 128 + signal; -1 missed the deadline */
    char out[65536];
};
static struct run r;

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static bool read_file(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return true;
}

/*
 * The fake build tree: one ctest test per (name, labels, command, timeout);
 * a second test with only the device's label and one with only hw show the
 * runner selects by both.
 */
static void ctest_tree(const char *body)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/CTestTestfile.cmake", build);
    char text[5 * PATH_MAX];
    snprintf(text, sizeof(text),
             "%s"
             "add_test(only_device_label \"/bin/sh\" \"-c\" \"exit 1\")\n"
             "set_tests_properties(only_device_label PROPERTIES LABELS \"edgetpu\")\n"
             "add_test(only_hw_label \"/bin/sh\" \"-c\" \"exit 1\")\n"
             "set_tests_properties(only_hw_label PROPERTIES LABELS \"hw;rknpu\")\n",
             body);
    write_file(p, text);
}

/*
 * 0000:05:00.0 an NPU on testdrv alone in group 5; 0000:01:00.0 a NIC in group 1;
 * 0000:07:00.0 an NPU with no IOMMU group. An empty 2 MiB hugepage pool.
 */
static void setup(void)
{
    fake_sysfs_init(&fs);
    fake_add_driver(&fs, "vfio-pci");
    fake_add_id(&fs, 0x8086, 0x1533, "igb");
    fake_add_id(&fs, 0x1ac1, 0x089a, "apex");
    fake_add_func(&fs, "0000:01:00.0", 0x8086, 0x1533, 0x020000, "igb", 1, 0);
    fake_add_func(&fs, "0000:05:00.0", 0x1ac1, 0x089a, 0x088000, "apex", 5, 0);
    fake_add_func(&fs, "0000:07:00.0", 0x1ac1, 0x089a, 0x088000, "apex", -1, 0);
    /* Plain files: a write is what a read gives back (the kernel granting it all). */
    fake_add_pool(&fs, -1, 2048, 0, false);
    fake_kernel_start(&fs);
    const char *tmp = getenv("TMPDIR");
    snprintf(work, sizeof(work), "%s/npv-hwrun-XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    ck_assert(mkdtemp(work) != NULL);
    snprintf(build, sizeof(build), "%s/build", work);
    snprintf(outdir, sizeof(outdir), "%s/out", work);
    ck_assert_int_eq(mkdir(build, 0755), 0);
    ctest_tree("add_test(pass \"/bin/sh\" \"-c\" \"test \\\"$NPUVFIO_TEST_EDGETPU\\\" = "
               "0000:05:00.0\")\n"
               "set_tests_properties(pass PROPERTIES LABELS \"hw;edgetpu\")\n");
}

static void teardown(void)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", work);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", work);
    fake_sysfs_destroy(&fs);
}

/*
 * Start the runner with args (NULL-terminated) and the fake tree's
 * environment; stdout and stderr go to work/runner.log. No Check call in the
 * child: the fake kernel's thread may hold Check's lock at the fork.
 */
static pid_t start(const char *const *args)
{
    static char e_sys[PATH_MAX + 32], e_proc[PATH_MAX + 32], e_state[PATH_MAX + 48];
    snprintf(e_sys, sizeof(e_sys), "NPUVFIO_SYSFS_ROOT=%s", fs.root);
    snprintf(e_proc, sizeof(e_proc), "NPUVFIO_PROC_ROOT=%s", fs.proc);
    snprintf(e_state, sizeof(e_state), "NPUVFIO_STATE_DIR=%s", fs.state_dir);
    char log[PATH_MAX + 16];
    snprintf(log, sizeof(log), "%s/runner.log", work);
    char *argv[32];
    size_t n = 0;
    argv[n++] = (char *)NPV_HW_RUNNER;
    argv[n++] = (char *)"--cli";
    argv[n++] = (char *)NPV_CLI_PATH;
    argv[n++] = (char *)"--build";
    argv[n++] = build;
    argv[n++] = (char *)"--out";
    argv[n++] = outdir;
    for (size_t i = 0; args[i] != NULL && n < 31; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
            _exit(126);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        putenv(e_sys);
        putenv(e_proc);
        putenv(e_state);
        execv(NPV_HW_RUNNER, argv);
        _exit(127);
    }
    return pid;
}

/* Wait (bounded) for the runner; its status, its output in r.out. */
static void finish(pid_t pid, int deadline_s)
{
    int wst = 0;
    time_t end = time(NULL) + deadline_s;
    pid_t w;
    while ((w = waitpid(pid, &wst, WNOHANG)) == 0 && time(NULL) < end)
        usleep(50 * 1000);
    if (w == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &wst, 0);
        r.status = -1;
    } else {
        r.status = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
    }
    char log[PATH_MAX + 16];
    snprintf(log, sizeof(log), "%s/runner.log", work);
    if (!read_file(log, r.out, sizeof(r.out)))
        r.out[0] = '\0';
}

static void run(const char *const *args)
{
    finish(start(args), 120);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void assert_driver(const char *dev, const char *want)
{
    char drv[64];
    fake_driver_of(&fs, dev, drv, sizeof(drv));
    ck_assert_msg(strcmp(drv, want) == 0, "%s: driver '%s', want '%s'\n%s", dev, drv, want, r.out);
}

static unsigned long pool_nr(void)
{
    char buf[64];
    ck_assert_int_ge(
        fake_read(&fs, "kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", buf, sizeof(buf)), 0);
    return strtoul(buf, NULL, 10);
}

static void record(char *buf, size_t len)
{
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/hw-record.json", outdir);
    ck_assert_msg(read_file(p, buf, len), "no record %s\n%s", p, r.out);
    ck_assert_msg(strlen(buf) + 1 < len, "record larger than the buffer");
    ck_assert_msg(json_valid_document(buf), "the record is not one JSON document:\n%s", buf);
}

/* A skipped device: reported with its reason, exit 3, and no file of the tree changed. */
static void check_skip(const char *pair, const char *reason)
{
    char *before = fake_snapshot(&fs);
    run(ARGS("--hugepages", "8", pair));
    char *after = fake_snapshot(&fs);
    ck_assert_msg(r.status == 3, "status %d\n%s", r.status, r.out);
    ck_assert_msg(strstr(r.out, "SKIPPED") && strstr(r.out, reason), "want '%s':\n%s", reason,
                  r.out);
    ck_assert_msg(strstr(r.out, "nothing touched"), "%s", r.out);
    ck_assert_msg(strcmp(before, after) == 0, "the tree changed:\n--- before\n%s\n--- after\n%s",
                  before, after);
    free(before);
    free(after);
    char rec[16384];
    record(rec, sizeof(rec));
    ck_assert_msg(strstr(rec, "\"status\": \"skipped\""), "%s", rec);
}

START_TEST(an_absent_device_is_reported_and_skipped)
{
    check_skip("edgetpu=0000:0a:00.0", "absent");
}
END_TEST

START_TEST(a_device_in_use_is_reported_and_skipped)
{
    /* The NIC's interface is up: the CLI's in-use guard refuses it. */
    ctest_tree("add_test(pass \"/bin/true\")\n"
               "set_tests_properties(pass PROPERTIES LABELS \"hw;edgetpu\")\n");
    fake_add_net(&fs, "0000:01:00.0", "eth0", true);
    check_skip("edgetpu=0000:01:00.0", "in use by the host: eth0 is up");
}
END_TEST

START_TEST(a_device_behind_no_iommu_is_reported_and_skipped)
{
    check_skip("edgetpu=0000:07:00.0", "no IOMMU: 0000:07:00.0: no IOMMU group: the IOMMU does "
                                       "not cover this device");
}
END_TEST

START_TEST(a_machine_without_iommu_is_reported_and_skipped)
{
    /* As the kernel shows it: no IOMMU unit, no group. */
    char p[PATH_MAX + 64];
    fake_remove_iommu(&fs);
    snprintf(p, sizeof(p), "%s/kernel/iommu_groups/5/devices/0000:05:00.0", fs.root);
    ck_assert(unlink(p) == 0);
    snprintf(p, sizeof(p), "%s/bus/pci/devices/0000:05:00.0/iommu_group", fs.root);
    ck_assert(unlink(p) == 0);
    check_skip("edgetpu=0000:05:00.0", "no IOMMU: 0000:05:00.0: no IOMMU group: this machine runs "
                                       "without an IOMMU");
}
END_TEST

START_TEST(a_malformed_pair_exits_2_before_anything_runs)
{
    static const char *const bad[] = {
        "edgetpu",          "edgetpu=",      "edgetpu=0000:05:00",   "edgetpu=zz:00.0",
        "tpu=0000:05:00.0", "=0000:05:00.0", "edgetpu=0000:05:00.0x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *before = fake_snapshot(&fs);
        /* A good pair first: nothing runs for it either. */
        run(ARGS("edgetpu=0000:05:00.0", bad[i]));
        char *after = fake_snapshot(&fs);
        ck_assert_msg(r.status == 2, "%s: status %d\n%s", bad[i], r.status, r.out);
        ck_assert_msg(strstr(r.out, "run-hw-tests: "), "%s", r.out);
        ck_assert_msg(strcmp(before, after) == 0, "%s changed the tree", bad[i]);
        ck_assert_msg(access(outdir, F_OK) != 0, "%s: output written", bad[i]);
        free(before);
        free(after);
    }
}
END_TEST

START_TEST(a_run_binds_runs_writes_junit_and_record_and_restores)
{
    ck_assert_uint_eq(pool_nr(), 0);
    run(ARGS("--hugepages", "8", "edgetpu=05:00.0"));
    ck_assert_msg(r.status == 0, "status %d\n%s", r.status, r.out);
    ck_assert_msg(strstr(r.out, "bound to vfio-pci (was apex)"), "%s", r.out);
    assert_driver("0000:05:00.0", "apex");
    ck_assert_uint_eq(pool_nr(), 0);
    ck_assert_msg(strstr(r.out, "restored hugepages to 0"), "%s", r.out);
    char junit[8192], p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/junit-edgetpu-0000_05_00.0.xml", outdir);
    ck_assert_msg(read_file(p, junit, sizeof(junit)), "no JUnit\n%s", r.out);
    ck_assert_msg(strstr(junit, "<testcase name=\"pass\""), "%s", junit);
    ck_assert_msg(!strstr(junit, "only_device_label") && !strstr(junit, "only_hw_label"), "%s",
                  junit);
    char rec[16384];
    record(rec, sizeof(rec));
    ck_assert_msg(strstr(rec, "\"status\": \"passed\""), "%s", rec);
    ck_assert_msg(strstr(rec, "\"vendor\": \"0x1ac1\"") && strstr(rec, "\"device\": \"0x089a\""),
                  "%s", rec);
    ck_assert_msg(strstr(rec, "{\"name\": \"pass\", \"result\": \"passed\", \"time_s\": "), "%s",
                  rec);
    /* The fake tree has no /dev/vfio: the identity is what sysfs gives, and the reason. */
    ck_assert_msg(strstr(rec, "\"backend_requested\": \"auto\"") &&
                      strstr(rec, "\"backend\": null") &&
                      strstr(rec, "\"identity\": {\"kind\":\"edgetpu\",\"read\":false,") &&
                      strstr(rec, "\"identity_error\": \"cannot "),
                  "%s", rec);
    ck_assert_msg(strstr(rec,
                         "\"cases\": [{\"suite\": \"pass\", \"name\": \"pass\", \"tcase\": null, "
                         "\"result\": \"passed\""),
                  "%s", rec);
    ck_assert_msg(strstr(rec, "\"kernel\": ") && strstr(rec, "\"iommu\": \"dmar0\"") &&
                      strstr(rec, "\"driver_before\": \"apex\"") &&
                      strstr(rec, "\"iommu_group\": \"5\""),
                  "%s", rec);
    /* The one-screen summary. */
    ck_assert_msg(strstr(r.out, "edgetpu  0000:05:00.0   passed        1      0      0"), "%s",
                  r.out);
    /* The state file the bind left is gone with the unbind. */
    snprintf(p, sizeof(p), "%s/0000:05:00.0", fs.state_dir);
    ck_assert_msg(access(p, F_OK) != 0, "state file left");
}
END_TEST

START_TEST(a_test_hanging_past_its_timeout_fails_the_run_and_the_machine_is_restored)
{
    ctest_tree("add_test(hang \"/bin/sleep\" \"60\")\n"
               "set_tests_properties(hang PROPERTIES LABELS \"hw;edgetpu\" TIMEOUT 2)\n");
    run(ARGS("--hugepages", "4", "edgetpu=0000:05:00.0"));
    ck_assert_msg(r.status == 1, "status %d\n%s", r.status, r.out);
    assert_driver("0000:05:00.0", "apex");
    ck_assert_uint_eq(pool_nr(), 0);
    ck_assert_msg(strstr(r.out, "failed: hang"), "%s", r.out);
    char rec[16384];
    record(rec, sizeof(rec));
    ck_assert_msg(strstr(rec, "{\"name\": \"hang\", \"result\": \"failed\""), "%s", rec);
}
END_TEST

static void sigterm_mid_test(int sig, int want_status)
{
    char mark[PATH_MAX + 16], body[4 * PATH_MAX];
    snprintf(mark, sizeof(mark), "%s/running", work);
    /* The test writes its pid and then sleeps: the runner is killed while it runs. */
    snprintf(body, sizeof(body),
             "add_test(sleeper \"/bin/sh\" \"-c\" \"echo $$ > %s.tmp; mv %s.tmp %s; exec sleep "
             "60\")\n"
             "set_tests_properties(sleeper PROPERTIES LABELS \"hw;edgetpu\" TIMEOUT 100)\n",
             mark, mark, mark);
    ctest_tree(body);
    pid_t pid = start(ARGS("--hugepages", "6", "edgetpu=0000:05:00.0"));
    char buf[64] = "";
    for (int i = 0; i < 600 && !read_file(mark, buf, sizeof(buf)); i++)
        usleep(50 * 1000);
    ck_assert_msg(buf[0] != '\0', "the test never started");
    pid_t test_pid = (pid_t)strtol(buf, NULL, 10);
    /* Mid-test: the device is on vfio-pci and the pool is grown. */
    char drv[64];
    fake_driver_of(&fs, "0000:05:00.0", drv, sizeof(drv));
    ck_assert_str_eq(drv, "vfio-pci");
    ck_assert_uint_eq(pool_nr(), 6);
    ck_assert_int_eq(kill(pid, sig), 0);
    finish(pid, 60);
    ck_assert_msg(r.status == want_status, "status %d\n%s", r.status, r.out);
    assert_driver("0000:05:00.0", "apex");
    ck_assert_uint_eq(pool_nr(), 0);
    /* The test's process is gone with the run. */
    bool gone = false;
    for (int i = 0; i < 100 && !gone; i++) {
        gone = kill(test_pid, 0) != 0 && errno == ESRCH;
        if (!gone)
            usleep(50 * 1000);
    }
    ck_assert_msg(gone, "test process %d still runs\n%s", (int)test_pid, r.out);
    char rec[16384];
    record(rec, sizeof(rec));
    ck_assert_msg(strstr(rec, "\"interrupted\": \"SIG"), "%s", rec);
}

START_TEST(sigterm_mid_test_restores_binding_and_hugepages)
{
    sigterm_mid_test(SIGTERM, 143);
}
END_TEST

START_TEST(sigint_mid_test_restores_binding_and_hugepages)
{
    sigterm_mid_test(SIGINT, 130);
}
END_TEST

START_TEST(a_device_already_on_vfio_is_run_and_left_on_vfio)
{
    ctest_tree("add_test(pass \"/bin/true\")\n"
               "set_tests_properties(pass PROPERTIES LABELS \"hw;edgetpu\")\n");
    fake_add_func(&fs, "0000:06:00.0", 0x1ac1, 0x089a, 0x088000, "vfio-pci", 6, 0);
    run(ARGS("edgetpu=0000:06:00.0"));
    ck_assert_msg(r.status == 0, "status %d\n%s", r.status, r.out);
    ck_assert_msg(strstr(r.out, "already on vfio-pci, left as is"), "%s", r.out);
    assert_driver("0000:06:00.0", "vfio-pci");
}
END_TEST

/*
 * A stand-in CLI: `--json info --open ADDR` answers as the real one does for
 * a device it opened (backend chosen, device object last); everything else
 * is the real CLI's.
 */
static void stand_in_cli(char *path, size_t len)
{
    snprintf(path, len, "%s/npuvfio-standin", work);
    char text[PATH_MAX + 1024];
    snprintf(text, sizeof(text),
             "#!/bin/sh\n"
             "if [ \"$1 $2 $3\" = \"--json info --open\" ]; then\n"
             "  echo '{\"address\":\"'$4'\",\"vfio\":{\"opened\":true,\"backend\":\"legacy\","
             "\"regions\":[]},\"device\":{\"kind\":\"edgetpu\",\"read\":true,\"pci_revision\":"
             "\"0x01\",\"version\":null,\"registers\":[],\"source\":\"s\",\"note\":\"n\"}}'\n"
             "  exit 0\n"
             "fi\n"
             "exec '%s' \"$@\"\n",
             NPV_CLI_PATH);
    write_file(path, text);
    ck_assert_int_eq(chmod(path, 0755), 0);
}

START_TEST(the_record_names_the_backend_the_library_chose_and_the_device_identity)
{
    char cli[PATH_MAX + 32];
    stand_in_cli(cli, sizeof(cli));
    /* After the fixed --cli: the last --cli given wins. */
    run(ARGS("--cli", cli, "edgetpu=0000:05:00.0"));
    ck_assert_msg(r.status == 0, "status %d\n%s", r.status, r.out);
    char rec[16384];
    record(rec, sizeof(rec));
    ck_assert_msg(strstr(rec, "\"backend_requested\": \"auto\"") &&
                      strstr(rec, "\"backend\": \"legacy\", \"identity\": {\"kind\":\"edgetpu\","
                                  "\"read\":true,\"pci_revision\":\"0x01\",") &&
                      strstr(rec, "\"identity_error\": null"),
                  "%s", rec);
    ck_assert_msg(!strstr(rec, "\"version\": null"), "%s", rec);
    /* The summary: the backend chosen, the identity. */
    ck_assert_msg(strstr(r.out, "backend auto requested"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "edgetpu  0000:05:00.0   passed        1      0      0  legacy"),
                  "%s", r.out);
    ck_assert_msg(strstr(r.out, "identity: PCI revision 0x01"), "%s", r.out);
}
END_TEST

/* ---- this binary as a Check suite under the runner ---- */

START_TEST(demo_passes)
{
    ck_assert_int_eq(1 + 1, 2);
}
END_TEST

START_TEST(demo_needs_the_model)
{
    /* What the harnesses' *_require_model do when a real device is named. */
    if (getenv("NPUVFIO_TEST_EDGETPU") != NULL) {
        printf("SKIPPED: the demo's model-only case\n");
        exit(NPV_TEST_SKIP);
    }
}
END_TEST

static int demo_suite(bool only_model)
{
    Suite *s = suite_create("demo");
    TCase *tc = tcase_create("demo");
    if (!only_model)
        tcase_add_test(tc, demo_passes);
    tcase_add_test(tc, demo_needs_the_model);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}

START_TEST(each_check_case_is_in_the_record_and_a_model_only_case_is_skipped)
{
    char self[PATH_MAX], body[2 * PATH_MAX + 512];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    ck_assert(n > 0);
    self[n] = '\0';
    snprintf(
        body, sizeof(body),
        "add_test(demo \"%s\" \"demo-suite\")\n"
        "set_tests_properties(demo PROPERTIES LABELS \"hw;edgetpu\" SKIP_RETURN_CODE 77)\n"
        "add_test(demo_model \"%s\" \"demo-suite-model\")\n"
        "set_tests_properties(demo_model PROPERTIES LABELS \"hw;edgetpu\" SKIP_RETURN_CODE 77)\n"
        "add_test(plain \"/bin/true\")\n"
        "set_tests_properties(plain PROPERTIES LABELS \"hw;edgetpu\")\n",
        self, self);
    ctest_tree(body);
    run(ARGS("edgetpu=0000:05:00.0"));
    ck_assert_msg(r.status == 0, "status %d\n%s", r.status, r.out);
    char rec[16384];
    record(rec, sizeof(rec));
    /* The suites: demo passed (its skipped case is no failure), demo_model all skipped. */
    ck_assert_msg(strstr(rec, "{\"name\": \"demo\", \"result\": \"passed\"") &&
                      strstr(rec, "{\"name\": \"demo_model\", \"result\": \"skipped\""),
                  "%s", rec);
    /* The cases: Check's TAP lines, one entry each; plain is one case. */
    ck_assert_msg(strstr(rec, "{\"suite\": \"demo\", \"name\": \"demo_passes\", \"tcase\": "
                              "\"demo\", \"result\": \"passed\", \"message\": null}"),
                  "%s", rec);
    ck_assert_msg(strstr(rec,
                         "{\"suite\": \"demo\", \"name\": \"demo_needs_the_model\", \"tcase\": "
                         "\"demo\", \"result\": \"skipped\", \"message\": \"Early exit with "
                         "return value 77\"}"),
                  "%s", rec);
    ck_assert_msg(strstr(rec, "{\"suite\": \"demo_model\", \"name\": \"demo_needs_the_model\", "
                              "\"tcase\": \"demo\", \"result\": \"skipped\""),
                  "%s", rec);
    ck_assert_msg(strstr(rec, "{\"suite\": \"plain\", \"name\": \"plain\", \"tcase\": null, "
                              "\"result\": \"passed\""),
                  "%s", rec);
    /* The summary counts cases: demo_passes and plain passed, two skipped. */
    ck_assert_msg(strstr(r.out, "edgetpu  0000:05:00.0   passed        2      0      2"), "%s",
                  r.out);
}
END_TEST

START_TEST(a_failing_case_is_named_in_the_summary)
{
    ctest_tree("add_test(chk \"/bin/sh\" \"-c\" \"test \\\"$CK_TAP_LOG_FILE_NAME\\\" = - && "
               "echo 'ok 1 - t.c:core:good: Passed' && "
               "echo 'not ok 2 - t.c:core:bad: want 3 <got 4>' && exit 1\")\n"
               "set_tests_properties(chk PROPERTIES LABELS \"hw;edgetpu\")\n");
    run(ARGS("edgetpu=0000:05:00.0"));
    ck_assert_msg(r.status == 1, "status %d\n%s", r.status, r.out);
    ck_assert_msg(strstr(r.out, "edgetpu  0000:05:00.0   failed        1      1      0"), "%s",
                  r.out);
    ck_assert_msg(strstr(r.out, "    failed: chk bad"), "%s", r.out);
    char rec[16384];
    record(rec, sizeof(rec));
    ck_assert_msg(strstr(rec, "{\"suite\": \"chk\", \"name\": \"bad\", \"tcase\": \"core\", "
                              "\"result\": \"failed\", \"message\": \"want 3 <got 4>\"}"),
                  "%s", rec);
    /* A suite that failed with every case passed still shows as failed. */
    ctest_tree("add_test(chk \"/bin/sh\" \"-c\" \"echo 'ok 1 - t.c:core:good: Passed'; exit 3\")\n"
               "set_tests_properties(chk PROPERTIES LABELS \"hw;edgetpu\")\n");
    run(ARGS("edgetpu=0000:05:00.0"));
    ck_assert_msg(r.status == 1, "status %d\n%s", r.status, r.out);
    record(rec, sizeof(rec));
    ck_assert_msg(strstr(rec, "{\"suite\": \"chk\", \"name\": \"chk\", \"tcase\": null, "
                              "\"result\": \"failed\", \"message\": \"the suite failed outside"),
                  "%s", rec);
}
END_TEST

/* ---- npuvfio cdi ---- */

static struct cli_result cr;

static void cdi(const char *const *args)
{
    const char *argv[16] = {"--sysfs-root", fs.root, "cdi"};
    size_t n = 3;
    for (size_t i = 0; args[i] != NULL && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    run_cli(&cr, NULL, argv);
}

/* Two functions on vfio-pci in groups 5 and 6, each with a VFIO cdev (vfio3, vfio4). */
static void cdi_setup(void)
{
    char p[PATH_MAX + 64];
    fake_add_func(&fs, "0000:08:00.0", 0x1ac1, 0x089a, 0x088000, "vfio-pci", 8, 0);
    fake_add_func(&fs, "0000:09:00.0", 0x1ac1, 0x089a, 0x088000, "vfio-pci", 9, 0);
    snprintf(p, sizeof(p), "%s/bus/pci/devices/0000:08:00.0/vfio-dev/vfio3", fs.root);
    char cmd[PATH_MAX + 128];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", p);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s/bus/pci/devices/0000:09:00.0/vfio-dev/vfio4'",
             fs.root);
    ck_assert_int_eq(system(cmd), 0);
}

/* The CDI schema's required fields and the spec's kind, in the output. */
static void check_spec_common(const char *out)
{
    ck_assert_msg(json_valid_document(out), "not JSON: %s", out);
    ck_assert_msg(strstr(out, "\"cdiVersion\":\"0.6.0\""), "%s", out);
    ck_assert_msg(strstr(out, "\"kind\":\"npuvfio.dev/npu\""), "%s", out);
    ck_assert_msg(strstr(out, "\"devices\":["), "%s", out);
    ck_assert_msg(
        strstr(out, "{\"name\":\"0000-08-00.0\",\"containerEdits\":{\"deviceNodes\":[{\"path\":"),
        "%s", out);
    ck_assert_msg(
        strstr(out, "{\"name\":\"0000-09-00.0\",\"containerEdits\":{\"deviceNodes\":[{\"path\":"),
        "%s", out);
}

START_TEST(cdi_legacy_exposes_the_group_nodes_and_the_container)
{
    cdi_setup();
    cdi(ARGS("--backend", "legacy", "0000:08:00.0", "09:00.0"));
    ck_assert_msg(cr.status == 0, "%d %s", cr.status, cr.err);
    check_spec_common(cr.out);
    ck_assert_msg(strstr(cr.out, "\"containerEdits\":{\"env\":[\"NPUVFIO_IOMMU=legacy\"],"
                                 "\"deviceNodes\":[{\"path\":\"/dev/vfio/vfio\""),
                  "%s", cr.out);
    ck_assert_msg(strstr(cr.out, "\"path\":\"/dev/vfio/8\",\"permissions\":\"rw\"") &&
                      strstr(cr.out, "\"path\":\"/dev/vfio/9\""),
                  "%s", cr.out);
    ck_assert_msg(!strstr(cr.out, "/dev/iommu") && !strstr(cr.out, "/dev/vfio/devices"), "%s",
                  cr.out);
}
END_TEST

START_TEST(cdi_iommufd_exposes_the_cdevs_and_dev_iommu)
{
    cdi_setup();
    cdi(ARGS("--backend", "iommufd", "0000:08:00.0", "0000:09:00.0"));
    ck_assert_msg(cr.status == 0, "%d %s", cr.status, cr.err);
    check_spec_common(cr.out);
    ck_assert_msg(strstr(cr.out, "\"env\":[\"NPUVFIO_IOMMU=iommufd\"],\"deviceNodes\":[{\"path\":"
                                 "\"/dev/iommu\""),
                  "%s", cr.out);
    ck_assert_msg(strstr(cr.out, "\"path\":\"/dev/vfio/devices/vfio3\"") &&
                      strstr(cr.out, "\"path\":\"/dev/vfio/devices/vfio4\""),
                  "%s", cr.out);
    ck_assert_msg(!strstr(cr.out, "/dev/vfio/vfio") && !strstr(cr.out, "/dev/vfio/8"), "%s",
                  cr.out);
}
END_TEST

START_TEST(cdi_refuses_a_device_not_on_vfio_and_a_malformed_address)
{
    cdi_setup();
    cdi(ARGS("--backend", "legacy", "0000:08:00.0", "0000:05:00.0"));
    ck_assert_int_eq(cr.status, 1);
    ck_assert_msg(strstr(cr.err, "0000:05:00.0 is on apex, not vfio-pci: bind it first"), "%s",
                  cr.err);
    ck_assert_str_eq(cr.out, "");
    cdi(ARGS("0000:08:00"));
    ck_assert_int_eq(cr.status, 2);
    cdi(ARGS("--backend", "vfio", "0000:08:00.0"));
    ck_assert_int_eq(cr.status, 2);
    /* iommufd asked for a device without a cdev. */
    fake_add_func(&fs, "0000:0b:00.0", 0x1ac1, 0x089a, 0x088000, "vfio-pci", 11, 0);
    cdi(ARGS("--backend", "iommufd", "0000:0b:00.0"));
    ck_assert_int_eq(cr.status, 1);
    ck_assert_msg(strstr(cr.err, "no VFIO device cdev"), "%s", cr.err);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("hw_runner");
    TCase *tc = tcase_create("fake sysfs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, an_absent_device_is_reported_and_skipped);
    tcase_add_test(tc, a_device_in_use_is_reported_and_skipped);
    tcase_add_test(tc, a_device_behind_no_iommu_is_reported_and_skipped);
    tcase_add_test(tc, a_machine_without_iommu_is_reported_and_skipped);
    tcase_add_test(tc, a_malformed_pair_exits_2_before_anything_runs);
    tcase_add_test(tc, a_run_binds_runs_writes_junit_and_record_and_restores);
    tcase_add_test(tc, a_test_hanging_past_its_timeout_fails_the_run_and_the_machine_is_restored);
    tcase_add_test(tc, sigterm_mid_test_restores_binding_and_hugepages);
    tcase_add_test(tc, sigint_mid_test_restores_binding_and_hugepages);
    tcase_add_test(tc, a_device_already_on_vfio_is_run_and_left_on_vfio);
    tcase_add_test(tc, the_record_names_the_backend_the_library_chose_and_the_device_identity);
    tcase_add_test(tc, each_check_case_is_in_the_record_and_a_model_only_case_is_skipped);
    tcase_add_test(tc, a_failing_case_is_named_in_the_summary);
    suite_add_tcase(s, tc);
    TCase *cdi_tc = tcase_create("cdi");
    tcase_add_checked_fixture(cdi_tc, setup, teardown);
    tcase_add_test(cdi_tc, cdi_legacy_exposes_the_group_nodes_and_the_container);
    tcase_add_test(cdi_tc, cdi_iommufd_exposes_the_cdevs_and_dev_iommu);
    tcase_add_test(cdi_tc, cdi_refuses_a_device_not_on_vfio_and_a_malformed_address);
    suite_add_tcase(s, cdi_tc);
    return s;
}

int main(int argc, char **argv)
{
    /* Run by the runner's ctest as the demo suite (a real device named: NPUVFIO_TEST_EDGETPU). */
    if (argc > 1 && strcmp(argv[1], "demo-suite") == 0)
        return demo_suite(false);
    if (argc > 1 && strcmp(argv[1], "demo-suite-model") == 0)
        return demo_suite(true);
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
