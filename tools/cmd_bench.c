/* SPDX-License-Identifier: MIT */
/*
 * npuvfio bench: run npuvfio-bench with the same arguments. The bench is a
 * program of its own because it links DPDK (for its rte_ring peer), which the
 * CLI and the library never do.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define BENCH_PROGRAM "npuvfio-bench"

int cmd_bench(struct npv_cli *cli, int argc, char **argv)
{
    (void)argc;
    char self[PATH_MAX];
    char path[PATH_MAX + sizeof("/../bench/" BENCH_PROGRAM)];
    argv[0] = (char *)BENCH_PROGRAM;
    /* Next to this program (installed), then the build tree's bench/, then $PATH. */
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = 0;
        const char *dir = dirname(self);
        snprintf(path, sizeof(path), "%s/%s", dir, BENCH_PROGRAM);
        if (access(path, X_OK) == 0)
            execv(path, argv);
        snprintf(path, sizeof(path), "%s/../bench/%s", dir, BENCH_PROGRAM);
        if (access(path, X_OK) == 0)
            execv(path, argv);
    }
    execvp(BENCH_PROGRAM, argv);
    cli_error(cli, "cannot run %s: %s", BENCH_PROGRAM, strerror(errno));
    return CLI_FAILED;
}
