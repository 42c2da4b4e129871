/* SPDX-License-Identifier: MIT */
/*
 * `npuvfio run --device edgetpu --model FILE.tflite` on the model (issue 21):
 * a real compiler output (tests/edgetpu/data, Apache-2.0) runs through the
 * driver, the model checks it against the same package, and the report says
 * every output matched the data-path pattern and that this is not the
 * network's answer; --input is taken when it has the inputs' size and refused
 * otherwise; --model is refused for other devices; `sim --package` serves a
 * model that checks the same way.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run_cli.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define SPLIT     NPV_EDGETPU_DATA "/split_concat_edgetpu.tflite"
#define MOBILENET NPV_EDGETPU_DATA "/mobilenet_v1_0.25_128_quant_edgetpu.tflite"

static struct cli_result r;

START_TEST(run_model_checks_the_data_path_and_says_it_is_not_the_answer)
{
    run_cli(&r, NULL,
            ARGS("run", "--device", "edgetpu", "--model", MOBILENET, "--iterations", "5"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "5 (5 jobs); every result matches the model's data-path pattern "
                                "(not the network's answer)") != NULL,
                  "%s", r.out);
    ck_assert_msg(strstr(r.out, "does not execute DarwiNN code") != NULL, "%s", r.out);
}
END_TEST

START_TEST(run_model_takes_an_input_file_of_the_inputs_size_only)
{
    char path[] = "/tmp/npv-etpu-input-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    uint8_t buf[384]; /* split/concat: 192 + 64 + 128 input bytes */
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (uint8_t)(i * 7);
    ck_assert_int_eq(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
    run_cli(&r, NULL, ARGS("run", "--device", "edgetpu", "--model", SPLIT, "--input", path));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "every result matches the model's data-path pattern") != NULL, "%s",
                  r.out);
    ck_assert_int_eq(write(fd, buf, 1), 1);
    run_cli(&r, NULL, ARGS("run", "--device", "edgetpu", "--model", SPLIT, "--input", path));
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "inputs are 384 bytes") != NULL, "%s", r.err);
    close(fd);
    unlink(path);
}
END_TEST

START_TEST(run_model_is_refused_for_other_devices_and_without_a_file)
{
    run_cli(&r, NULL, ARGS("run", "--device", "testdev", "--model", SPLIT));
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "--device edgetpu") != NULL, "%s", r.err);
    run_cli(&r, NULL, ARGS("run", "--device", "edgetpu", "--input", SPLIT));
    ck_assert_int_eq(r.status, 2);
    run_cli(&r, NULL, ARGS("run", "--device", "edgetpu", "--model", "/nonexistent.tflite"));
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "/nonexistent.tflite") != NULL, "%s", r.err);
}
END_TEST

START_TEST(sim_package_serves_a_model_that_checks_the_runs)
{
    char dir[] = "/tmp/npv-etpu-sim-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char sock[128];
    snprintf(sock, sizeof(sock), "%s/s", dir);
    const char *cli = getenv("NPUVFIO_CLI") ? getenv("NPUVFIO_CLI") : NPV_CLI_PATH;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl(cli, cli, "sim", "--device", "edgetpu", "--package", SPLIT, "--socket", sock,
              "--once", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 1000 && access(sock, F_OK) != 0; i++)
        usleep(10000);
    run_cli(&r, NULL,
            ARGS("run", "--device", "edgetpu", "--model", SPLIT, "--socket", sock, "--iterations",
                 "20"));
    int st;
    if (r.status != 0)
        kill(pid, SIGTERM);
    waitpid(pid, &st, 0);
    rmdir(dir);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "20 (20 jobs); every result matches the model's data-path") != NULL,
                  "%s", r.out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli_edgetpu_model");
    TCase *tc = tcase_create("run");
    tcase_add_test(tc, run_model_checks_the_data_path_and_says_it_is_not_the_answer);
    tcase_add_test(tc, run_model_takes_an_input_file_of_the_inputs_size_only);
    tcase_add_test(tc, run_model_is_refused_for_other_devices_and_without_a_file);
    tcase_add_test(tc, sim_package_serves_a_model_that_checks_the_runs);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
