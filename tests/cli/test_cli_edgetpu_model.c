/* SPDX-License-Identifier: MIT */
/*
 * `npuvfio run --device edgetpu --model FILE.tflite` on the model (issue 21):
 * a real compiler output (tests/edgetpu/data, Apache-2.0) runs through the
 * driver, the model checks it against the same package, and the report says
 * every output matched the data-path pattern and that this is not the
 * network's answer; --input is taken when it has the inputs' size and refused
 * otherwise; --model is refused for other devices; `sim --package` serves a
 * model that checks the same way.
 *
 * Group `hardware` (labels hw, edgetpu): the same command on a chip bound to
 * vfio-pci and named by NPUVFIO_TEST_EDGETPU=ADDR, where the outputs are the
 * network's: the report names MobileNet's top-5 classes with dequantised
 * scores and split/concat's every value. SKIPPED without a chip. What only a
 * chip proves, the values themselves, is not checked (nothing here knows the
 * network's answer for these inputs).
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "npv_test.h"
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

/* The chip named by NPUVFIO_TEST_EDGETPU, or NULL. */
static const char *chip(void)
{
    const char *hw = getenv("NPUVFIO_TEST_EDGETPU");
    return hw != NULL && hw[0] != '\0' ? hw : NULL;
}

/*
 * On a chip the report is the network's: "nothing (a chip: the network's
 * outputs)" as its reference and, for MobileNet's 1001 classes, five
 * "index score" pairs after "top-5 of <layer>:" (compiled_run.c top5).
 */
START_TEST(run_model_on_a_chip_prints_the_top5_classes)
{
    run_cli(&r, NULL,
            ARGS("run", "--device", "edgetpu", "--model", MOBILENET, "--iterations", "5", chip()));
    ck_assert_msg(r.status == 0, "%s%s", r.out, r.err);
    ck_assert_msg(strstr(r.out, "5 (5 jobs); every result matches nothing (a chip: the network's "
                                "outputs)") != NULL,
                  "%s", r.out);
    const char *line = strstr(r.out, "counters:   top-5 of ");
    ck_assert_msg(line != NULL, "%s", r.out);
    /* The pairs follow the line's last colon (a layer name may hold one). */
    const char *end = strchr(line, '\n') != NULL ? strchr(line, '\n') : line + strlen(line);
    const char *top = end;
    while (top > line && *top != ':')
        top--;
    ck_assert_msg(top > line + strlen("counters:"), "%s", line);
    unsigned idx[5];
    float score[5];
    int got = sscanf(top + 1, " %u %f %u %f %u %f %u %f %u %f", &idx[0], &score[0], &idx[1],
                     &score[1], &idx[2], &score[2], &idx[3], &score[3], &idx[4], &score[4]);
    ck_assert_msg(got == 10, "top-5 line: %s", top);
    for (int k = 0; k < 5; k++) {
        ck_assert_msg(idx[k] < 1001, "class %u of 1001", idx[k]);
        /* Dequantised softmax scores, best first. */
        ck_assert_msg(score[k] >= 0.0f && score[k] <= 1.0f, "score %f", (double)score[k]);
        if (k > 0)
            ck_assert_msg(score[k] <= score[k - 1], "top-5 out of order: %s", top);
    }
}
END_TEST

/* split/concat: 5 small outputs; the first one's values printed (no top-5 for 10 or fewer). */
START_TEST(run_model_on_a_chip_runs_split_concat_with_an_input_file)
{
    char path[] = "/tmp/npv-etpu-input-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    uint8_t buf[384]; /* split/concat: 192 + 64 + 128 input bytes */
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (uint8_t)(i * 7);
    ck_assert_int_eq(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
    close(fd);
    run_cli(&r, NULL,
            ARGS("run", "--device", "edgetpu", "--model", SPLIT, "--input", path, "--iterations",
                 "20", chip()));
    unlink(path);
    ck_assert_msg(r.status == 0, "%s%s", r.out, r.err);
    ck_assert_msg(strstr(r.out, "20 (20 jobs); every result matches nothing (a chip") != NULL, "%s",
                  r.out);
    ck_assert_msg(strstr(r.out, "counters:   ") != NULL, "%s", r.out);
}
END_TEST

static void model_cases(TCase *tc)
{
    tcase_add_test(tc, run_model_checks_the_data_path_and_says_it_is_not_the_answer);
    tcase_add_test(tc, run_model_takes_an_input_file_of_the_inputs_size_only);
    tcase_add_test(tc, run_model_is_refused_for_other_devices_and_without_a_file);
    tcase_add_test(tc, sim_package_serves_a_model_that_checks_the_runs);
}

static void chip_cases(TCase *tc)
{
    tcase_add_test(tc, run_model_on_a_chip_prints_the_top5_classes);
    tcase_add_test(tc, run_model_on_a_chip_runs_split_concat_with_an_input_file);
}

static const char *no_chip(void)
{
    return chip() != NULL ? NULL
                          : "no Edge TPU named: set NPUVFIO_TEST_EDGETPU=ADDR (bound to vfio-pci) "
                            "to run `npuvfio run --device edgetpu --model` on a chip";
}

int main(int argc, char **argv)
{
    /* The model cases start their own model: they run whether or not a chip is named. */
    const struct npv_test_group groups[] = {
        {NULL, NULL, model_cases},
        {"hardware", no_chip, chip_cases},
    };
    return npv_test_main_groups(argc, argv, "cli_edgetpu_model", groups,
                                sizeof(groups) / sizeof(groups[0]), NULL, NULL);
}
