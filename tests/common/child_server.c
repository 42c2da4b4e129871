/* SPDX-License-Identifier: MIT */
#include "child_server.h"

#include <check.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Far beyond any healthy start on a loaded machine. */
#define START_DEADLINE_NS (30ull * 1000000000ull)

static void nap_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Fork the child serving on s->path and wait until it listens. */
static void serve_at(struct vu_server *s, vu_server_fn fn, void *arg)
{
    pid_t parent = getpid();
    s->pid = fork();
    ck_assert_int_ge(s->pid, 0);
    if (s->pid == 0) {
        /* A failing test exits without teardown: the server must not outlive it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        fn(s->path, arg);
        _exit(0);
    }
    uint64_t deadline = mono_ns() + START_DEADLINE_NS;
    for (;;) {
        struct stat st;
        int status;
        ck_assert_msg(waitpid(s->pid, &status, WNOHANG) == 0, "server child died at start");
        if (stat(s->path, &st) == 0 && S_ISSOCK(st.st_mode))
            break;
        ck_assert_msg(mono_ns() < deadline, "server socket never appeared");
        nap_ms(5);
    }
}

void vu_server_start(struct vu_server *s, vu_server_fn fn, void *arg)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->dir, sizeof(s->dir), "/tmp/npv-vu-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(s->dir));
    snprintf(s->path, sizeof(s->path), "%s/dev.sock", s->dir);
    serve_at(s, fn, arg);
}

void vu_server_crash(struct vu_server *s)
{
    ck_assert_int_gt(s->pid, 0);
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

void vu_server_restart(struct vu_server *s, vu_server_fn fn, void *arg)
{
    ck_assert_int_eq(s->pid, 0);
    /* A killed server leaves its socket file behind, as any crashed process would. */
    unlink(s->path);
    serve_at(s, fn, arg);
}

void vu_server_kill(struct vu_server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
    if (s->path[0] != '\0') {
        unlink(s->path);
        s->path[0] = '\0';
    }
    if (s->dir[0] != '\0') {
        rmdir(s->dir);
        s->dir[0] = '\0';
    }
}
