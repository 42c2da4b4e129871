/* SPDX-License-Identifier: MIT */
/*
 * The stats socket: a thread that accepts one client at a time on a Unix
 * stream socket, reads one command line, writes the reply and closes, as
 * DPDK's telemetry socket answers one command per request (DPDK
 * lib/telemetry/telemetry.c, client_handler; there over SOCK_SEQPACKET,
 * here over a stream so that `socat` and the CLI read it to EOF; model
 * choice). The thread only reads the queues' counters (npv_stats_format).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <npuvfio/stats.h>

#include "ctx_internal.h"
#include "deadline.h"

/* Each client gets this long to send its command and take the reply. */
#define CLIENT_DEADLINE_NS 1000000000ull

struct npv_stats_server {
    struct npv_ctx *ctx;
    int listen_fd;
    int stop_fd; /* eventfd: written once by npv_stats_server_stop */
    pthread_t thread;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

/* Wait until fd is ready for events or the deadline passes; also wakes on stop. */
static int wait_fd(struct npv_stats_server *s, int fd, short events, uint64_t deadline)
{
    for (;;) {
        uint64_t now = npv_now_ns();
        if (now >= deadline)
            return -ETIMEDOUT;
        uint64_t left_ms = (deadline - now + 999999) / 1000000;
        struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = s->stop_fd, .events = POLLIN}};
        int n = poll(p, 2, (int)left_ms);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (p[1].revents != 0)
            return -ECANCELED;
        if (p[0].revents != 0)
            return 0;
    }
}

static void serve_client(struct npv_stats_server *s, int fd)
{
    uint64_t deadline = npv_now_ns() + CLIENT_DEADLINE_NS;
    char cmd[64];
    size_t got = 0;
    while (got < sizeof(cmd) - 1 && memchr(cmd, '\n', got) == NULL) {
        if (wait_fd(s, fd, POLLIN, deadline) < 0)
            return;
        ssize_t r = read(fd, cmd + got, sizeof(cmd) - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    cmd[got] = '\0';
    cmd[strcspn(cmd, "\r\n")] = '\0';
    char *reply = NULL;
    size_t len = 0;
    int rc;
    if (strcmp(cmd, "json") == 0 || strcmp(cmd, "/") == 0 || cmd[0] == '\0')
        rc = npv_stats_format(s->ctx, NPV_STATS_JSON, &reply, &len);
    else if (strcmp(cmd, "prometheus") == 0)
        rc = npv_stats_format(s->ctx, NPV_STATS_PROMETHEUS, &reply, &len);
    else
        rc = asprintf(&reply, "{\"error\":\"unknown command; send json or prometheus\"}\n") < 0
                 ? -ENOMEM
                 : 0;
    if (rc < 0)
        return;
    if (len == 0)
        len = strlen(reply);
    size_t off = 0;
    while (off < len) {
        if (wait_fd(s, fd, POLLOUT, deadline) < 0)
            break;
        ssize_t w = send(fd, reply + off, len - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    free(reply);
}

static void *serve(void *arg)
{
    struct npv_stats_server *s = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = s->listen_fd, .events = POLLIN},
                              {.fd = s->stop_fd, .events = POLLIN}};
        int n = poll(p, 2, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || p[1].revents != 0)
            break;
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            continue;
        serve_client(s, fd);
        close(fd);
    }
    return NULL;
}

int npv_stats_serve(struct npv_ctx *ctx, const char *path, struct npv_stats_server **out)
{
    if (ctx == NULL || path == NULL || out == NULL)
        return -EINVAL;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return -EINVAL;
    struct npv_stats_server *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    s->ctx = ctx;
    snprintf(s->path, sizeof(s->path), "%s", path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int rc;
    s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->stop_fd < 0) {
        rc = -errno;
        goto err_free;
    }
    s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s->listen_fd < 0) {
        rc = -errno;
        goto err_stop;
    }
    unlink(path);
    if (bind(s->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s->listen_fd, 8) < 0) {
        rc = -errno;
        npv_err(ctx, "stats: cannot serve on %s: %s", path, strerror(-rc));
        goto err_sock;
    }
    rc = -pthread_create(&s->thread, NULL, serve, s);
    if (rc < 0)
        goto err_unlink;
    *out = s;
    return 0;

err_unlink:
    unlink(path);
err_sock:
    close(s->listen_fd);
err_stop:
    close(s->stop_fd);
err_free:
    free(s);
    return rc;
}

void npv_stats_server_stop(struct npv_stats_server *s)
{
    if (s == NULL)
        return;
    uint64_t one = 1;
    ssize_t w = write(s->stop_fd, &one, sizeof(one));
    (void)w;
    pthread_join(s->thread, NULL);
    close(s->listen_fd);
    close(s->stop_fd);
    unlink(s->path);
    free(s);
}
