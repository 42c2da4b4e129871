/* SPDX-License-Identifier: MIT */
/* Checks the CLI suites share: one-line errors, lines of output, bind's state files. */
#ifndef NPV_TEST_CLI_CHECKS_H
#define NPV_TEST_CLI_CHECKS_H

#include <stddef.h>

#include "fake_sysfs.h"
#include "run_cli.h"

/* The command failed with exactly one line on stderr, starting with prefix. */
void check_one_line_error(const struct cli_result *r, const char *prefix);
/* The whole line of text holding needle into buf, or NULL when there is none. */
const char *line_of(const char *text, const char *needle, char *buf, size_t len);
/* The first line of name's file in fs's state directory, or "<missing>". */
void state_file_of(const struct fake_sysfs *fs, const char *name, char *buf, size_t len);

#endif
