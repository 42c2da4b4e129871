/* SPDX-License-Identifier: MIT */
/*
 * Counting the system calls of a measured loop, exactly, without changing
 * what the calls do.
 *
 * The measured code runs on a thread of its own that installs a seccomp
 * filter returning SECCOMP_RET_USER_NOTIF for every system call but exit(2)
 * (its own end), with SECCOMP_FILTER_FLAG_NEW_LISTENER and without TSYNC: only
 * that thread is filtered. A supervisor thread, created before and so not
 * filtered, receives each notification, increments the counter and answers
 * with SECCOMP_USER_NOTIF_FLAG_CONTINUE, so the call then runs in the kernel
 * as it would have. The counter is incremented before the call proceeds, so
 * the measured thread, reading it with plain loads before and after its loop
 * (no system call), sees every call its loop made. A loop without system
 * calls never enters the kernel and runs at full speed.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench.h"

#if defined(__x86_64__)
#define SC_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SC_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

struct sc_state {
    void (*fn)(void *arg, const uint64_t *counter, const int *last_nr);
    void *arg;
    int listener; /* -1 until the filtered thread published it; -2 on failure */
    int err;
    int stop;
    uint64_t count;
    int last_nr;
};

#ifdef SC_AUDIT_ARCH
static void *sc_measured(void *arg)
{
    struct sc_state *s = arg;
    struct sock_filter insns[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SC_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_exit, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
    };
    struct sock_fprog prog = {.len = sizeof(insns) / sizeof(insns[0]), .filter = insns};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        s->err = -errno;
        __atomic_store_n(&s->listener, -2, __ATOMIC_RELEASE);
        return NULL;
    }
    long fd =
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (fd < 0) {
        s->err = -errno;
        __atomic_store_n(&s->listener, -2, __ATOMIC_RELEASE);
        return NULL;
    }
    /* From here every system call waits for the supervisor, which waits for this store. */
    __atomic_store_n(&s->listener, (int)fd, __ATOMIC_RELEASE);
    s->fn(s->arg, &s->count, &s->last_nr);
    return NULL;
}

static void *sc_supervisor(void *arg)
{
    struct sc_state *s = arg;
    int fd;
    uint64_t give_up = bench_now() + 10000000000ull;
    while ((fd = __atomic_load_n(&s->listener, __ATOMIC_ACQUIRE)) == -1) {
        if (bench_now() > give_up)
            return NULL;
    }
    if (fd < 0)
        return NULL;
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, 10);
        if (r <= 0 || !(p.revents & POLLIN))
            continue;
        struct seccomp_notif req;
        memset(&req, 0, sizeof(req));
        if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0)
            continue;
        __atomic_store_n(&s->last_nr, req.data.nr, __ATOMIC_RELAXED);
        __atomic_fetch_add(&s->count, 1, __ATOMIC_RELEASE);
        struct seccomp_notif_resp resp = {
            .id = req.id, .val = 0, .error = 0, .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE};
        (void)ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    }
    return NULL;
}

int syscount_run(void (*fn)(void *arg, const uint64_t *counter, const int *last_nr), void *arg)
{
    struct sc_state s = {.fn = fn, .arg = arg, .listener = -1, .last_nr = -1};
    pthread_t sup, meas;
    int rc = -pthread_create(&sup, NULL, sc_supervisor, &s);
    if (rc < 0)
        return rc;
    rc = -pthread_create(&meas, NULL, sc_measured, &s);
    if (rc < 0) {
        __atomic_store_n(&s.listener, -2, __ATOMIC_RELEASE);
        pthread_join(sup, NULL);
        return rc;
    }
    /* The measured thread's exit path makes calls too; the supervisor serves them until here. */
    pthread_join(meas, NULL);
    __atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
    pthread_join(sup, NULL);
    int fd = __atomic_load_n(&s.listener, __ATOMIC_ACQUIRE);
    if (fd >= 0)
        close(fd);
    return s.err;
}
#else
int syscount_run(void (*fn)(void *arg, const uint64_t *counter, const int *last_nr), void *arg)
{
    (void)fn;
    (void)arg;
    return -ENOTSUP;
}
#endif
