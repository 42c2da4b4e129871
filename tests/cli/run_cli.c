/* SPDX-License-Identifier: MIT */
/* fork/exec of the CLI with both output streams captured and a deadline. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "run_cli.h"

#define DEADLINE_S 60

static const char *cli_path(void)
{
    const char *env = getenv("NPUVFIO_CLI");
    return env != NULL && *env != '\0' ? env : NPV_CLI_PATH;
}

static void child(int out, int err, const char *const *env, const char *const *args)
{
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    /* The caller's settings must not leak into a test's expectations. */
    unsetenv("NPUVFIO_SYSFS_ROOT");
    unsetenv("NPUVFIO_STATE_DIR");
    unsetenv("NPUVFIO_LOG");
    unsetenv("NPUVFIO_IOMMU");
    for (size_t i = 0; env != NULL && env[i] != NULL; i++)
        putenv((char *)env[i]);
    char *argv[64];
    size_t n = 0;
    argv[n++] = (char *)"npuvfio";
    for (size_t i = 0; args[i] != NULL && n < 63; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    execv(cli_path(), argv);
    dprintf(STDERR_FILENO, "exec %s: %s\n", cli_path(), strerror(errno));
    _exit(127);
}

struct cli_result *run_cli(struct cli_result *r, const char *const *env, const char *const *args)
{
    int po[2], pe[2];
    memset(r, 0, sizeof(*r));
    ck_assert(pipe2(po, O_CLOEXEC) == 0 && pipe2(pe, O_CLOEXEC) == 0);
    /*
     * No Check call may run in the child: the fake kernel's thread may hold
     * Check's lock at the fork, and the child would wait for it forever.
     */
    pid_t pid = fork();
    if (pid == 0)
        child(po[1], pe[1], env, args);
    ck_assert(pid > 0);
    close(po[1]);
    close(pe[1]);
    struct pollfd pfd[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    char *buf[2] = {r->out, r->err};
    size_t len[2] = {0, 0};
    int open_fds = 2;
    time_t deadline = time(NULL) + DEADLINE_S;
    while (open_fds > 0 && time(NULL) < deadline) {
        if (poll(pfd, 2, 1000) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; i++) {
            if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = read(pfd[i].fd, buf[i] + len[i], CLI_OUT_MAX - 1 - len[i]);
            if (n <= 0) {
                close(pfd[i].fd);
                pfd[i].fd = -1;
                open_fds--;
            } else {
                len[i] += (size_t)n;
            }
        }
    }
    r->out[len[0]] = '\0';
    r->err[len[1]] = '\0';
    int wst;
    if (open_fds > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &wst, 0);
        r->status = -1;
    } else {
        ck_assert(waitpid(pid, &wst, 0) == pid);
        r->status = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
    }
    for (int i = 0; i < 2; i++)
        if (pfd[i].fd >= 0)
            close(pfd[i].fd);
    return r;
}

int count_lines(const char *s)
{
    int n = 0;
    for (const char *p = s; *p; p++)
        if (*p == '\n')
            n++;
    size_t l = strlen(s);
    if (l > 0 && s[l - 1] != '\n')
        n++;
    return n;
}
