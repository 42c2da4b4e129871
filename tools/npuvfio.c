/* SPDX-License-Identifier: MIT */
/* npuvfio: global options, the command table (commands.def) and error reporting. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/common.h>
#include <npuvfio/ctx.h>

#include "cli.h"

struct command {
    const char *name;
    int (*fn)(struct npv_cli *cli, int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
#define NPV_COMMAND(name, fn, summary) {#name, fn, summary},
#include "commands.def"
#undef NPV_COMMAND
};

static void usage(FILE *f)
{
    fprintf(f, "Usage: npuvfio [OPTIONS] COMMAND [ARGS]\n"
               "\n"
               "User-space VFIO driver stack for NPUs: discover, bind and inspect devices,\n"
               "run device models as vfio-user servers, and benchmark rings.\n"
               "\n"
               "Commands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\n"
            "Options:\n"
            "  -h, --help              show this help (and COMMAND --help for a command's)\n"
            "  -V, --version           print the version\n"
            "      --log LEVEL         error, warn, info or debug (default warn; env NPUVFIO_LOG)\n"
            "      --json              print one JSON document instead of tables\n"
            "      --sysfs-root PATH   read sysfs under PATH instead of /sys\n"
            "                          (env NPUVFIO_SYSFS_ROOT)\n"
            "      --proc-root PATH    read /proc under PATH (mounts, meminfo, open files)\n"
            "                          (env NPUVFIO_PROC_ROOT)\n"
            "\n"
            "Exit status: 0 done, 1 the operation failed, 2 the command line was wrong.\n");
}

void cli_error(struct npv_cli *cli, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "npuvfio%s%s: ", cli->cmd ? " " : "", cli->cmd ? cli->cmd : "");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_usage(struct npv_cli *cli, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    cli_error(cli, "%s (try 'npuvfio%s%s --help')", msg, cli->cmd ? " " : "",
              cli->cmd ? cli->cmd : "");
    return CLI_USAGE;
}

int cli_fail(struct npv_cli *cli, const char *subject, int err)
{
    if (cli->last_err[0] != '\0')
        cli_error(cli, "%s", cli->last_err);
    else
        cli_error(cli, "%s: %s", subject, npv_strerror(err));
    cli_clear_error(cli);
    return CLI_FAILED;
}

void cli_clear_error(struct npv_cli *cli)
{
    cli->last_err[0] = '\0';
}

int cli_pci_function(struct npv_cli *cli, const char *text, char *canon)
{
    struct npv_pci_addr a;
    if (npv_pci_addr_parse(text, &a) < 0) {
        /* The address is part of the command line: a typo there is a usage error (2). */
        cli_error(cli, "%s: malformed PCI address (expected DDDD:BB:DD.F)", text);
        return CLI_USAGE;
    }
    npv_pci_addr_format(&a, canon, NPV_PCI_ADDR_LEN);
    struct npv_pci_func f;
    int ret = npv_pci_func_read(cli->ctx, canon, &f);
    if (ret == -ENODEV) {
        cli_error(cli, "%s: no such PCI function (not in %s/bus/pci/devices)", canon,
                  npv_ctx_sysfs_root(cli->ctx));
        return CLI_FAILED;
    }
    if (ret < 0)
        return cli_fail(cli, canon, ret);
    return CLI_OK;
}

int cli_getopt(struct npv_cli *cli, int argc, char **argv, const char *shortopts,
               const struct option *longopts)
{
    int c = getopt_long(argc, argv, shortopts, longopts, NULL);
    if (c == '?') {
        const char *arg = argv[optind - 1];
        if (optopt != 0)
            cli_usage(cli, "unknown option '-%c'", optopt);
        else
            cli_usage(cli, "unknown option '%s'", arg);
    } else if (c == ':') {
        cli_usage(cli, "option '%s' needs an argument", argv[optind - 1]);
        c = '?';
    }
    return c;
}

/* Library messages: errors are kept for the command's one-line report, the rest printed. */
static void log_sink(void *user, enum npv_log_level level, const char *msg)
{
    struct npv_cli *cli = user;
    if (level == NPV_LOG_ERROR) {
        snprintf(cli->last_err, sizeof(cli->last_err), "%s", msg);
        if (npv_ctx_log_level(cli->ctx) < NPV_LOG_DEBUG)
            return;
    }
    static const char *const tags[] = {"error", "warn", "info", "debug"};
    fprintf(stderr, "npuvfio: %s: %s\n", tags[(unsigned)level < 4 ? level : 3], msg);
}

int main(int argc, char **argv)
{
    struct npv_cli cli = {0};
    enum { OPT_LOG = 256, OPT_JSON, OPT_SYSFS, OPT_PROC };
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"log", required_argument, NULL, OPT_LOG},
        {"json", no_argument, NULL, OPT_JSON},
        {"sysfs-root", required_argument, NULL, OPT_SYSFS},
        {"proc-root", required_argument, NULL, OPT_PROC},
        {NULL, 0, NULL, 0},
    };
    const char *log_name = NULL, *sysfs_root = NULL;

    /* Read the options before the context so a bad NPUVFIO_LOG cannot hide --help. */
    opterr = 0;
    int c;
    while ((c = cli_getopt(&cli, argc, argv, "+:hV", opts)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            return CLI_OK;
        case 'V':
            printf("npuvfio %s\n", npv_version());
            return CLI_OK;
        case OPT_LOG:
            log_name = optarg;
            break;
        case OPT_JSON:
            cli.json = true;
            break;
        case OPT_SYSFS:
            sysfs_root = optarg;
            break;
        case OPT_PROC:
            cli.proc_root = optarg;
            break;
        default:
            return CLI_USAGE;
        }
    }
    if (optind >= argc)
        return cli_usage(&cli, "no command given");
    if (cli.proc_root == NULL) {
        const char *env = getenv("NPUVFIO_PROC_ROOT");
        cli.proc_root = env != NULL && *env != '\0' ? env : "/proc";
    }
    int cmd_idx = optind;
    const char *name = argv[cmd_idx];
    const struct command *cmd = NULL;
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(commands[i].name, name) == 0)
            cmd = &commands[i];
    if (cmd == NULL)
        return cli_usage(&cli, "unknown command '%s'", name);

    int level = NPV_LOG_WARN;
    if (log_name != NULL && (level = npv_log_level_parse(log_name)) < 0)
        return cli_usage(&cli, "--log %s: expected error, warn, info or debug", log_name);
    int ret = npv_ctx_new(&cli.ctx);
    if (ret < 0) {
        if (ret == -EINVAL)
            return cli_usage(&cli, "bad environment: NPUVFIO_LOG must be error, warn, info or "
                                   "debug, NPUVFIO_IOMMU auto, legacy or iommufd");
        cli_error(&cli, "cannot create the library context: %s", npv_strerror(ret));
        return CLI_FAILED;
    }
    npv_ctx_set_log_sink(cli.ctx, log_sink, &cli);
    if (log_name != NULL)
        npv_ctx_set_log_level(cli.ctx, (enum npv_log_level)level);
    if (sysfs_root != NULL && (ret = npv_ctx_set_sysfs_root(cli.ctx, sysfs_root)) < 0) {
        npv_ctx_free(cli.ctx);
        return cli_usage(&cli, "--sysfs-root %s: %s", sysfs_root, npv_strerror(ret));
    }

    cli.cmd = cmd->name;
    /* The subcommand sees argv from its own name on, with getopt rescanned from scratch. */
    optind = 0;
    ret = cmd->fn(&cli, argc - cmd_idx, argv + cmd_idx);
    npv_ctx_free(cli.ctx);
    return ret;
}
