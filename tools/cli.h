/* SPDX-License-Identifier: MIT */
/* What every npuvfio subcommand shares: the context, output mode and error reporting. */
#ifndef NPV_CLI_H
#define NPV_CLI_H

#include <stdbool.h>
#include <npuvfio/ctx.h>
#include <npuvfio/pci.h>

/* Exit statuses: 0 done, 1 the operation failed, 2 the command line was wrong. */
enum { CLI_OK = 0, CLI_FAILED = 1, CLI_USAGE = 2 };

struct npv_cli {
    struct npv_ctx *ctx;
    const char *cmd; /* the running subcommand, for messages */
    bool json;
    /* Where /proc is read (mountinfo, meminfo, open files): --proc-root, for fake trees. */
    const char *proc_root;
    /*
     * The library's last error message. Library errors are not printed as
     * they happen: the command prints one line per failure, built from it.
     */
    char last_err[512];
};

#define NPV_COMMAND(name, fn, summary) int fn(struct npv_cli *cli, int argc, char **argv);
#include "commands.def"
#undef NPV_COMMAND

/* "npuvfio CMD: message" on stderr. */
void cli_error(struct npv_cli *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A command-line mistake: one line with a hint to --help; returns CLI_USAGE. */
int cli_usage(struct npv_cli *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * A failed library call: prints the library's own message when it logged one,
 * else "subject: strerror(err)". Returns CLI_FAILED.
 */
int cli_fail(struct npv_cli *cli, const char *subject, int err);
void cli_clear_error(struct npv_cli *cli);

/*
 * Check a PCI address argument and that the function exists: canonical form
 * in canon. Prints the error and returns CLI_USAGE when it is malformed,
 * CLI_FAILED when it is missing, CLI_OK otherwise.
 */
int cli_pci_function(struct npv_cli *cli, const char *text, char *canon);

/* The name of the device table's entry for a PCI vendor:device, or NULL (devices/registry.c). */
const char *cli_known_npu(uint16_t vendor, uint16_t device);
/* Print the device table's PCI ids, "  name  vvvv:dddd[, ...]  summary" a line. */
void cli_print_known_npus(void);

/* The host facts (npuvfio status --json) as one JSON object written into j. */
struct json_out;
struct npv_host_info;
void status_write_json(struct json_out *j, const struct npv_host_info *h);

/*
 * getopt_long for a subcommand: reports unknown options and missing arguments
 * as one-line usage errors. Returns the option, -1 at the end, or '?' after
 * printing the error.
 */
struct option;
int cli_getopt(struct npv_cli *cli, int argc, char **argv, const char *shortopts,
               const struct option *longopts);

#endif
