/* SPDX-License-Identifier: MIT */
/* Run the built npuvfio binary with fork/exec and capture what it says. */
#ifndef NPV_TEST_RUN_CLI_H
#define NPV_TEST_RUN_CLI_H

#define CLI_OUT_MAX 65536

struct cli_result {
    int status; /* exit status; 128 + signal when killed; -1 when it missed the deadline */
    char out[CLI_OUT_MAX];
    char err[CLI_OUT_MAX];
};

/*
 * Run npuvfio (NPUVFIO_CLI, else the path CMake compiled in) with the
 * NULL-terminated args, with env entries ("NAME=value", NULL-terminated,
 * may be NULL) added to a cleaned environment. Bounded by a generous
 * deadline. Returns r for chaining.
 */
struct cli_result *run_cli(struct cli_result *r, const char *const *env, const char *const *args);

/* Number of lines in s (a final line without newline counts). */
int count_lines(const char *s);

#endif
