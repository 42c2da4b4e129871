/* SPDX-License-Identifier: MIT */
/*
 * The first hour of a new user (issue 19, section 3): no wrong advice, no
 * measurement of nothing.
 *  - npuvfio-bench with one allowed CPU refuses (exit 1, nothing measured)
 *    instead of "pinning" the device side to a CPU it may not use and
 *    printing zeros as figures and targets "met" from them;
 *  - run/demo on a PCI function that is no NPU (a virtio NIC that is up)
 *    names what it is and advises no bind; an NPU without an IOMMU gets no
 *    "npuvfio bind" advice from run or info --open;
 *  - sim --help lists the vendor:device each model really presents (read
 *    back over vfio-user);
 *  - a second client of a sim hears "busy: one client at a time" at once,
 *    and the sim logs connects and disconnects at --log info;
 *  - run --device rknpu against an edgetpu socket names what answers, and
 *    a run over vfio-user says nothing about IOTLB misses or pins.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
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
#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/domain.h>

#include "fake_sysfs.h"
#include "run_cli.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static struct cli_result r;

static const char *cli_path(void)
{
    const char *env = getenv("NPUVFIO_CLI");
    return env != NULL && *env != '\0' ? env : NPV_CLI_PATH;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Read a whole (small) file into buf, NUL-terminated. */
static void slurp(const char *path, char *buf, size_t len)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* ---- a sim in a child process, its stderr in a file ---- */

struct sim {
    pid_t pid;
    char dir[64];
    char sock[128];
    char log[128];
};

static void sim_start(struct sim *s, const char *device)
{
    snprintf(s->dir, sizeof(s->dir), "/tmp/npv-first-hour-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(s->dir));
    snprintf(s->sock, sizeof(s->sock), "%s/%s.sock", s->dir, device);
    snprintf(s->log, sizeof(s->log), "%s/sim.log", s->dir);
    fflush(NULL);
    s->pid = fork();
    ck_assert_int_ge(s->pid, 0);
    if (s->pid == 0) {
        int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0) {
            dup2(fd, STDERR_FILENO);
            dup2(fd, STDOUT_FILENO);
        }
        unsetenv("NPUVFIO_LOG");
        execl(cli_path(), "npuvfio", "--log", "info", "sim", "--device", device, "--socket",
              s->sock, (char *)NULL);
        _exit(127);
    }
    double give_up = now_s() + 20;
    struct stat st;
    while (stat(s->sock, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        int status;
        ck_assert_msg(waitpid(s->pid, &status, WNOHANG) == 0, "sim %s exited before listening",
                      device);
        ck_assert_msg(now_s() < give_up, "sim %s did not listen within 20 s", device);
        usleep(2000);
    }
}

/* Stop the sim and return what it logged. */
static void sim_stop(struct sim *s, char *log, size_t len)
{
    kill(s->pid, SIGTERM);
    waitpid(s->pid, NULL, 0);
    if (log != NULL)
        slurp(s->log, log, len);
    unlink(s->log);
    unlink(s->sock);
    rmdir(s->dir);
}

/* ---- bench with one allowed CPU ---- */

#ifdef NPV_BENCH_PATH
START_TEST(bench_with_one_allowed_cpu_refuses_instead_of_measuring_nothing)
{
    cpu_set_t allowed;
    ck_assert_int_eq(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
    int cpu = 0;
    while (!CPU_ISSET(cpu, &allowed))
        cpu++;
    char out[] = "/tmp/npv-first-hour-bench-XXXXXX";
    int fd = mkstemp(out);
    ck_assert_int_ge(fd, 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (sched_setaffinity(0, sizeof(one), &one) != 0)
            _exit(126);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        const char *bench = getenv("NPUVFIO_BENCH");
        if (bench == NULL || *bench == '\0')
            bench = NPV_BENCH_PATH;
        execl(bench, "npuvfio-bench", "--quick", "--reps", "1", "--duration", "1", "--qd", "1",
              "--mode", "poll", "--no-devices", (char *)NULL);
        _exit(127);
    }
    int status;
    double t0 = now_s();
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    double took = now_s() - t0;
    char text[65536];
    slurp(out, text, sizeof(text));
    close(fd);
    unlink(out);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1,
                  "one allowed CPU must exit 1 (nothing measured), got status %d:\n%s", status,
                  text);
    char want[64];
    snprintf(want, sizeof(want), "only CPU %d is allowed", cpu);
    ck_assert_msg(strstr(text, want) != NULL, "no clear refusal naming CPU %d:\n%s", cpu, text);
    ck_assert_msg(strstr(text, "nothing measured") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "hwloc-pinned") == NULL, "claims a pinned device side:\n%s", text);
    ck_assert_msg(strstr(text, " 0 ns") == NULL && strstr(text, " 0.00 ") == NULL &&
                      strstr(text, "yes") == NULL,
                  "prints zeros or a met target:\n%s", text);
    ck_assert_msg(took < 10, "the refusal took %.1f s", took);
}
END_TEST

/* The bench's command-line mistakes read as npuvfio's: one line, a hint, exit 2. */
START_TEST(bench_usage_errors_are_one_line_like_npuvfio)
{
    char out[] = "/tmp/npv-first-hour-bench-XXXXXX";
    int fd = mkstemp(out);
    ck_assert_int_ge(fd, 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        const char *bench = getenv("NPUVFIO_BENCH");
        execl(bench != NULL && *bench != '\0' ? bench : NPV_BENCH_PATH, "npuvfio-bench",
              "--no-such-option", (char *)NULL);
        _exit(127);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    char text[8192];
    slurp(out, text, sizeof(text));
    close(fd);
    unlink(out);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 2, "status %d", status);
    ck_assert_str_eq(text, "npuvfio-bench: unknown option '--no-such-option' (try "
                           "'npuvfio-bench --help')\n");
}
END_TEST
#endif

/* ---- advice on a device that is no NPU, and without an IOMMU ---- */

static struct fake_sysfs fs;

static void fs_setup(void)
{
    fake_sysfs_init(&fs);
    fake_add_driver(&fs, "vfio-pci");
    fake_add_id(&fs, 0x1af4, 0x1041, "virtio-pci");
    fake_add_id(&fs, 0x1ac1, 0x089a, "apex");
    /* A virtio network card with eth0 up, as on a cloud VM; an Edge TPU on apex. */
    fake_add_func(&fs, "0000:00:03.0", 0x1af4, 0x1041, 0x020000, "virtio-pci", 3, -1);
    fake_add_net(&fs, "0000:00:03.0", "eth0", true);
    fake_add_func(&fs, "0000:01:00.0", 0x1ac1, 0x089a, 0x0000ff, "apex", 4, -1);
    fake_kernel_start(&fs);
}

static void fs_teardown(void)
{
    fake_sysfs_destroy(&fs);
}

static void assert_no_bind_advice(const char *what)
{
    ck_assert_msg(r.status == 1, "%s: exit %d; stderr: %s", what, r.status, r.err);
    ck_assert_msg(strstr(r.err, "bind") == NULL, "%s advises a bind:\n%s", what, r.err);
}

START_TEST(run_and_demo_on_a_nic_name_it_and_advise_no_bind)
{
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "run", "--device", "edgetpu", "--pci", "0000:00:03.0"));
    assert_no_bind_advice("run --pci on a NIC");
    ck_assert_msg(strstr(r.err, "1af4:1041") && strstr(r.err, "not edgetpu"), "%s", r.err);

    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "demo", "--device", "edgetpu", "0000:00:03.0"));
    assert_no_bind_advice("demo on a NIC");
    ck_assert_msg(strstr(r.err, "1af4:1041") && strstr(r.err, "not edgetpu"), "%s", r.err);

    /* An NPU of another kind is named as that kind. */
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "run", "--device", "aicore", "--pci", "0000:01:00.0"));
    assert_no_bind_advice("run --device aicore on an Edge TPU");
    ck_assert_msg(strstr(r.err, "edgetpu") && strstr(r.err, "not aicore"), "%s", r.err);

    /* The NPU itself, on its kernel driver with an IOMMU: the bind is the advice. */
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "run", "--device", "edgetpu", "--pci", "0000:01:00.0"));
    ck_assert_msg(r.status == 1 && strstr(r.err, "npuvfio bind 0000:01:00.0"), "%s", r.err);
}
END_TEST

/* An NPU the host is using (here: an interface of its driver is up) gets no bind advice. */
START_TEST(a_device_in_use_gets_no_bind_advice)
{
    fake_add_net(&fs, "0000:01:00.0", "tpu0", true);
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "run", "--device", "edgetpu", "--pci", "0000:01:00.0"));
    assert_no_bind_advice("run --pci on a device in use");
    ck_assert_msg(strstr(r.err, "in use by the host") && strstr(r.err, "tpu0 is up"), "%s", r.err);
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "info", "--open", "0000:01:00.0"));
    assert_no_bind_advice("info --open on a device in use");
    ck_assert_msg(strstr(r.err, "tpu0 is up"), "%s", r.err);
}
END_TEST

START_TEST(without_an_iommu_nothing_advises_a_bind)
{
    char p[4200];
    fake_remove_iommu(&fs);
    snprintf(p, sizeof(p), "%s/bus/pci/devices/0000:01:00.0/iommu_group", fs.root);
    ck_assert_int_eq(unlink(p), 0);
    run_cli(&r, NULL,
            ARGS("--sysfs-root", fs.root, "run", "--device", "edgetpu", "--pci", "0000:01:00.0"));
    ck_assert_msg(r.status == 1 && strstr(r.err, "IOMMU"), "exit %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.err, "npuvfio bind") == NULL, "advises a bind without IOMMU: %s", r.err);
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "info", "--open", "0000:01:00.0"));
    ck_assert_msg(r.status == 1 && strstr(r.err, "IOMMU"), "exit %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.err, "npuvfio bind") == NULL, "info --open advises a bind: %s", r.err);
}
END_TEST

/* ---- small CLI: list --npu with none, the NUMA column, hugepages --size/--json ---- */

START_TEST(list_says_no_npus_and_shows_sysfs_numa_nodes)
{
    struct fake_sysfs bare;
    fake_sysfs_init(&bare);
    fake_add_func(&bare, "0000:00:03.0", 0x1af4, 0x1041, 0x020000, "virtio-pci", 3, -1);
    fake_add_func(&bare, "0000:00:04.0", 0x1af4, 0x1042, 0x010000, "virtio-pci", 4, 1);
    run_cli(&r, NULL, ARGS("--sysfs-root", bare.root, "list", "--npu"));
    ck_assert_msg(r.status == 0 && strcmp(r.out, "no NPUs found\n") == 0, "exit %d: [%s] %s",
                  r.status, r.out, r.err);
    /* NUMA: sysfs's numa_node, "-" for its -1 (documented in list --help). */
    run_cli(&r, NULL, ARGS("--sysfs-root", bare.root, "list"));
    ck_assert_int_eq(r.status, 0);
    char a[64], b[64];
    const char *l3 = strstr(r.out, "0000:00:03.0"), *l4 = strstr(r.out, "0000:00:04.0");
    ck_assert_ptr_nonnull(l3);
    ck_assert_ptr_nonnull(l4);
    ck_assert_int_eq(sscanf(l3, "%*s %*s %*s %*s %*s %63s", a), 1);
    ck_assert_int_eq(sscanf(l4, "%*s %*s %*s %*s %*s %63s", b), 1);
    ck_assert_msg(strcmp(a, "-") == 0 && strcmp(b, "1") == 0, "NUMA %s and %s:\n%s", a, b, r.out);
    run_cli(&r, NULL, ARGS("list", "--help"));
    ck_assert_msg(strstr(r.out, "numa_node") != NULL, "list --help does not say what NUMA is");
    fake_sysfs_destroy(&bare);
}
END_TEST

START_TEST(hugepages_size_without_a_pool_is_a_usage_error_and_json_works)
{
    fake_add_pool(&fs, -1, 2048, 8, false);
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "hugepages", "--size", "4M"));
    ck_assert_msg(r.status == 2 && strstr(r.err, "no 4M hugepages") && strstr(r.err, "2M"),
                  "exit %d: %s", r.status, r.err);
    run_cli(&r, NULL, ARGS("--sysfs-root", fs.root, "hugepages", "--json"));
    ck_assert_msg(r.status == 0 && r.out[0] == '{' && strstr(r.out, "\"reserved\":8"), "%s %s",
                  r.out, r.err);
}
END_TEST

/* ---- sim: the ids it lists are the ones its models present ---- */

START_TEST(sim_help_lists_the_ids_the_models_present)
{
    run_cli(&r, NULL, ARGS("sim", "--help"));
    ck_assert_int_eq(r.status, 0);
    const char *models = strstr(r.out, "Models");
    ck_assert_ptr_nonnull(models);
    unsigned checked = 0;
    for (const char *line = strchr(models, '\n'); line != NULL && line[1] != '\0';
         line = strchr(line + 1, '\n')) {
        char name[32];
        unsigned v, d;
        if (sscanf(line + 1, " %31s %4x:%4x", name, &v, &d) != 3)
            continue;
        struct sim s;
        sim_start(&s, name);
        struct npv_ctx *ctx;
        struct npv_domain *dom;
        struct npv_dev *dev;
        struct npv_dev_info info;
        ck_assert_int_eq(npv_ctx_new(&ctx), 0);
        ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
        int rc = npv_dev_open_vfio_user(ctx, s.sock, dom, NULL, &dev);
        ck_assert_msg(rc == 0, "%s: open: %d", name, rc);
        ck_assert_int_eq(npv_dev_info(dev, &info), 0);
        npv_dev_close(dev);
        npv_domain_put(dom);
        npv_ctx_free(ctx);
        sim_stop(&s, NULL, 0);
        ck_assert_msg(info.vendor_id == v && info.device_id == d,
                      "sim --help lists %s as %04x:%04x; the model presents %04x:%04x", name, v, d,
                      info.vendor_id, info.device_id);
        checked++;
    }
    ck_assert_msg(checked >= 4, "only %u models listed:\n%s", checked, r.out);
}
END_TEST

/* ---- sim: one client at a time, said at once; connects logged ---- */

START_TEST(a_second_client_hears_busy_at_once_and_the_sim_logs_connects)
{
    struct sim s;
    sim_start(&s, "edgetpu");
    struct npv_ctx *ctx;
    struct npv_domain *dom;
    struct npv_dev *dev;
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
    ck_assert_int_eq(npv_dev_open_vfio_user(ctx, s.sock, dom, NULL, &dev), 0);

    double t0 = now_s();
    run_cli(&r, NULL, ARGS("run", "--device", "edgetpu", "--socket", s.sock));
    double took = now_s() - t0;
    ck_assert_msg(r.status == 1 && strstr(r.err, "busy: one client at a time"), "exit %d: %s",
                  r.status, r.err);
    ck_assert_msg(took < 2.5, "the busy answer took %.1f s", took);

    npv_dev_close(dev);
    /* The first client gone, the next one is served. */
    run_cli(&r, NULL, ARGS("run", "--device", "edgetpu", "--iterations", "20", "--socket", s.sock));
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    npv_domain_put(dom);
    npv_ctx_free(ctx);

    char log[16384];
    sim_stop(&s, log, sizeof(log));
    ck_assert_msg(strstr(log, "client connected") && strstr(log, "client disconnected") &&
                      strstr(log, "busy, one client at a time"),
                  "sim --log info logged:\n%s", log);
}
END_TEST

/* ---- run against the wrong model: name what answers ---- */

START_TEST(run_names_what_a_socket_answers_as)
{
    struct sim s;
    sim_start(&s, "edgetpu");
    run_cli(&r, NULL, ARGS("run", "--device", "rknpu", "--socket", s.sock));
    ck_assert_msg(r.status == 1 && strstr(r.err, "1ac1:089a") && strstr(r.err, "edgetpu") &&
                      strstr(r.err, "not rknpu"),
                  "exit %d: %s", r.status, r.err);
    /* The right device runs, and over vfio-user nothing speaks of IOTLB misses or pins. */
    run_cli(&r, NULL, ARGS("run", "--device", "edgetpu", "--iterations", "20", "--socket", s.sock));
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.err, "IOTLB") == NULL && strstr(r.err, "/proc/sys/vm") == NULL,
                  "warns over vfio-user: %s", r.err);
    sim_stop(&s, NULL, 0);
}
END_TEST

static Suite *first_hour_suite(void)
{
    Suite *s = suite_create("cli_first_hour");
    TCase *t = tcase_create("first_hour");
    tcase_set_timeout(t, 60);
#ifdef NPV_BENCH_PATH
    tcase_add_test(t, bench_with_one_allowed_cpu_refuses_instead_of_measuring_nothing);
    tcase_add_test(t, bench_usage_errors_are_one_line_like_npuvfio);
#endif
    tcase_add_test(t, sim_help_lists_the_ids_the_models_present);
    tcase_add_test(t, a_second_client_hears_busy_at_once_and_the_sim_logs_connects);
    tcase_add_test(t, run_names_what_a_socket_answers_as);
    suite_add_tcase(s, t);
    TCase *a = tcase_create("advice");
    tcase_add_checked_fixture(a, fs_setup, fs_teardown);
    tcase_add_test(a, run_and_demo_on_a_nic_name_it_and_advise_no_bind);
    tcase_add_test(a, without_an_iommu_nothing_advises_a_bind);
    tcase_add_test(a, a_device_in_use_gets_no_bind_advice);
    tcase_add_test(a, list_says_no_npus_and_shows_sysfs_numa_nodes);
    tcase_add_test(a, hugepages_size_without_a_pool_is_a_usage_error_and_json_works);
    suite_add_tcase(s, a);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(first_hour_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
