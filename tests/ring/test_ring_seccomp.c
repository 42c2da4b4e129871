/* SPDX-License-Identifier: MIT */
/*
 * Polling mode makes no system call: N submit + poll round trips, every job
 * with a deadline armed (claiming and polling read the vDSO clock), run under
 * a seccomp filter that kills the process on any system call but the two the
 * test needs to report back.
 *
 * The filter (BPF, installed with seccomp(SECCOMP_SET_MODE_FILTER) and no
 * TSYNC, so only the calling thread is filtered):
 *   - an architecture other than the build's: kill the process;
 *   - write(2) whose fd argument is the result pipe: allow;
 *   - exit_group(2): allow;
 *   - anything else: SECCOMP_RET_KILL_PROCESS.
 * Everything (context, ring, fake device) is set up in a forked child before
 * the filter goes on. The device is a thread created before the filter, so
 * it is not filtered and may spin freely. The child's filtered thread runs
 * the round trips, writes the count to the pipe and leaves with
 * syscall(SYS_exit_group, 42) (no atexit handlers, which would make system
 * calls). The parent passes the test only when the child exited with 42 and
 * reported N; a system call shows up as death by SIGSYS. The same round
 * trips through an npv_share by its one thread (npuvfio/share.h) make none
 * either: its uncontended lock and its polled wait stay in user space.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/ring.h>
#include <npuvfio/share.h>

#include "fake_dev.h"

#if defined(__x86_64__)
#define BUILD_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define BUILD_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#define ROUND_TRIPS 20000u
#define CHILD_OK    42

#ifdef BUILD_AUDIT_ARCH
static int install_filter(int pipe_fd)
{
    struct sock_filter insns[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, BUILD_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_exit_group, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_write, 0, 3),
        /* Low 32 bits of the fd argument (little-endian). */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)pipe_fd, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    };
    struct sock_fprog prog = {.len = sizeof(insns) / sizeof(insns[0]), .filter = insns};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -errno;
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
        return -errno;
    return 0;
}

static void quiet_log(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

/* One thread's requests through an npv_share over the ring (npuvfio/share.h). */
static int share_submit(void *drv, const void *req, uint64_t cookie)
{
    void *slot;
    int rc = npv_ring_next(drv, cookie, &slot);
    if (rc < 0)
        return rc;
    memcpy(slot, req, sizeof(struct fake_desc));
    return npv_ring_submit(drv) == 1 ? 0 : -EIO;
}

static int share_poll(void *drv, struct npv_cpl *cpl, unsigned max)
{
    return npv_ring_poll(drv, cpl, max);
}

static const struct npv_share_ops share_ops = {.submit = share_submit, .poll = share_poll};

/* The child: returns only on set-up failure. through_share: every round trip via an npv_share. */
static void child_run(int pipe_fd, bool through_share)
{
    struct npv_ctx *ctx;
    struct fake_dev dev;
    struct npv_ring_config cfg;
    struct npv_ring *ring;
    if (npv_ctx_new(&ctx) < 0)
        return;
    npv_ctx_set_log_sink(ctx, quiet_log, NULL);
    fake_dev_init(&dev, 64, &cfg);
    if (npv_ring_new(ctx, &cfg, &ring) < 0 || fake_dev_start(&dev) < 0)
        return;
    struct npv_share *share;
    if (npv_share_new(&share_ops, ring, &share) < 0)
        return;
    /* Touch the clock once so the vDSO page is faulted in before the filter. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if (install_filter(pipe_fd) < 0)
        return;

    uint64_t done = 0;
    struct npv_cpl cpl[1];
    for (uint32_t i = 0; through_share && i < ROUND_TRIPS; i++) {
        struct fake_desc d = {.seq = i, .fail = 0, .payload = i};
        struct npv_share_ticket t;
        if (npv_share_submit(share, &d, i, &t) != 0 ||
            npv_share_wait(share, &t, 10ull * 1000000000ull) != 1)
            break;
        if (t.cpl.cookie != i || t.cpl.status != 0)
            break;
        done++;
    }
    for (uint32_t i = 0; !through_share && i < ROUND_TRIPS; i++) {
        void *slot;
        /* Every job has a deadline (the ring default, or its own): claiming reads the clock. */
        int rc = i % 2 ? npv_ring_next_timed(ring, i, 10ull * 1000000000ull, &slot)
                       : npv_ring_next(ring, i, &slot);
        if (rc < 0)
            break;
        struct fake_desc *d = slot;
        d->seq = i;
        d->fail = 0;
        d->payload = i;
        if (npv_ring_submit(ring) != 1)
            break;
        int got = 0;
        if (i % 4 < 2) {
            got = npv_ring_wait(ring, NPV_RING_WAIT_POLL, 1, 10ull * 1000000000ull, cpl, 1);
        } else {
            /* A caller's own poll loop: the engine checks deadlines in it (vDSO clock). */
            for (uint64_t spins = 0; got == 0 && spins < (1ull << 32); spins++)
                got = npv_ring_poll(ring, cpl, 1);
        }
        if (got != 1 || cpl[0].cookie != i || cpl[0].status != 0)
            break;
        done++;
    }
    if (dev.bad_descs != 0)
        done = 0;
    (void)!write(pipe_fd, &done, sizeof(done));
    syscall(SYS_exit_group, CHILD_OK);
}

static void run_filtered(bool through_share)
{
    int p[2];
    ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(p[0]);
        child_run(p[1], through_share);
        _exit(1);
    }
    close(p[1]);
    uint64_t done = 0;
    ssize_t n = read(p[0], &done, sizeof(done));
    close(p[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status))
        ck_abort_msg("child killed by signal %d%s after the filter went on", WTERMSIG(status),
                     WTERMSIG(status) == SIGSYS ? " (SIGSYS: a system call was made)" : "");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == CHILD_OK,
                  "child did not reach the agreed exit (status %#x)", status);
    ck_assert_int_eq(n, (ssize_t)sizeof(done));
    ck_assert_uint_eq(done, ROUND_TRIPS);
}

START_TEST(ring_poll_round_trips_make_no_system_calls)
{
    run_filtered(false);
}
END_TEST

/* One thread through an npv_share: its lock, uncontended, and its polled wait make none either. */
START_TEST(share_round_trips_of_one_thread_make_no_system_calls)
{
    run_filtered(true);
}
END_TEST
#endif

int main(void)
{
#ifndef BUILD_AUDIT_ARCH
    fprintf(stderr, "SKIP: no seccomp filter written for this architecture\n");
    return 77;
#else
    Suite *s = suite_create("ring_seccomp");
    TCase *tc = tcase_create("poll");
    tcase_add_test(tc, ring_poll_round_trips_make_no_system_calls);
    tcase_add_test(tc, share_round_trips_of_one_thread_make_no_system_calls);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
#endif
}
