/* SPDX-License-Identifier: MIT */
/*
 * The owner: its listening socket (who may connect is the socket's mode and
 * group), the accept loop that gives each client its virtual RKNPU, and the
 * counters. docs/sharing.md has the design and the security model.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctx_internal.h"
#include <npuvfio/stats.h>
#include <npuvfio/vfio_user_server.h>

#include "owner_internal.h"
#include "unix_listen.h"

static void emit_client(npv_stats_emit_fn emit, void *arg, const struct npv_owner_client_stats *st)
{
    char entity[32];
    snprintf(entity, sizeof(entity), "client%llu", (unsigned long long)st->id);
    const struct {
        const char *name;
        uint64_t value;
    } c[] = {
        {"pid", (uint64_t)st->pid},
        {"uid", (uint64_t)st->uid},
        {"domain", st->domain_id},
        {"connected", st->connected},
        {"runs", st->runs},
        {"runs_ok", st->runs_ok},
        {"runs_failed", st->runs_failed},
        {"runs_dropped", st->runs_dropped},
        {"runs_peak", st->runs_peak},
        {"maps_refused", st->maps_refused},
        {"mapped_bytes", st->mapped_bytes},
        {"maps", st->maps},
        {"wait_ns", st->wait_ns},
        {"switches", st->switches},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
        emit(arg, entity, c[i].name, c[i].value);
}

/*
 * The "serve" source of the stats endpoint (npuvfio stats): every client's
 * counters, departed ones included, as client<id>. Called under the
 * registry lock; takes o->lock, under which nothing calls npv_stats_*.
 */
static void stats_source(void *user, npv_stats_emit_fn emit, void *arg)
{
    struct npv_owner *o = user;
    pthread_mutex_lock(&o->lock);
    for (unsigned i = 0; i < o->nr_history; i++)
        emit_client(emit, arg, &o->history[(o->history_head + i) % OWNER_HISTORY]);
    for (unsigned s = 0; s < NPV_RKNPU_MAX_DOMAINS; s++)
        if (o->slots[s] != NULL)
            emit_client(emit, arg, &o->slots[s]->st);
    emit(arg, "owner", "clients", o->nr_clients);
    emit(arg, "owner", "runs_on_device", o->on_device);
    /* The device's: the domains that exist (one per client) and its switches between them. */
    emit(arg, "owner", "domains_live", o->device.domains_live);
    emit(arg, "owner", "domain_switches", o->device.domain_switches);
    pthread_mutex_unlock(&o->lock);
}

/* OWNER_MAX_MAPS: one client's share of the owner's fds. */
static size_t client_max_maps(unsigned max_clients)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        rl.rlim_cur = 1024; /* the usual soft limit */
    uint64_t fds = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
    uint64_t share = fds > OWNER_FD_RESERVE ? (fds - OWNER_FD_RESERVE) / max_clients : 0;
    uint64_t maps = share > OWNER_CLIENT_FDS ? share - OWNER_CLIENT_FDS : 0;
    return maps < OWNER_MAX_MAPS ? (size_t)maps : OWNER_MAX_MAPS;
}

int npv_owner_new(struct npv_ctx *ctx, struct npv_rknpu *npu, const struct npv_owner_opts *opts,
                  struct npv_owner **out)
{
    if (ctx == NULL || npu == NULL || opts == NULL || opts->socket_path == NULL ||
        opts->max_clients > NPV_RKNPU_MAX_DOMAINS || opts->max_jobs > OWNER_VCORES ||
        opts->max_bytes > NPV_RKNPU_DOMAIN_SIZE || out == NULL)
        return -EINVAL;
    struct npv_owner *o = calloc(1, sizeof(*o));
    if (o == NULL)
        return -ENOMEM;
    o->ctx = ctx;
    o->npu = npu;
    o->opts = *opts;
    if (o->opts.max_clients == 0)
        o->opts.max_clients = NPV_RKNPU_MAX_DOMAINS;
    if (o->opts.max_jobs == 0)
        o->opts.max_jobs = OWNER_VCORES;
    if (o->opts.max_bytes == 0)
        o->opts.max_bytes = NPV_RKNPU_DOMAIN_SIZE;
    o->max_maps = client_max_maps(o->opts.max_clients);
    if (o->max_maps < 16)
        npv_warn(ctx,
                 "serve: RLIMIT_NOFILE leaves each of %u clients %zu mappings: raise it "
                 "(ulimit -n) or lower --max-clients",
                 o->opts.max_clients, o->max_maps);
    o->listener.fd = -1;
    o->last_slot = -1;
    o->reqs_tail = &o->reqs;
    o->socket_path = strdup(opts->socket_path);
    o->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int r = o->socket_path && o->stop_fd >= 0 ? 0 : -ENOMEM;
    /* Who may connect: the owner's user (0600), or its group too (0660). */
    if (r == 0)
        r = npv_unix_listen(o->socket_path, opts->socket_gid >= 0 ? 0660 : 0600, opts->socket_gid,
                            16, &o->listener);
    if (r < 0) {
        if (o->stop_fd >= 0)
            close(o->stop_fd);
        free(o->socket_path);
        free(o);
        return r;
    }
    o->opts.socket_path = o->socket_path;
    pthread_mutex_init(&o->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&o->sched_cond, &attr);
    pthread_cond_init(&o->done_cond, &attr);
    pthread_condattr_destroy(&attr);
    r = npv_stats_add_source(ctx, "serve", stats_source, o);
    if (r < 0) {
        npv_owner_free(o);
        return r;
    }
    o->stats_source = true;
    *out = o;
    return 0;
}

/* 0, or accept4's error (the connection, if any, stays queued). */
static int accept_one(struct npv_owner *o)
{
    int fd = accept4(o->listener.fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct ucred cred = {.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        npv_warn(o->ctx, "serve: SO_PEERCRED: %s", npv_strerror(-errno));
    owner_client_start(o, fd, cred.pid, cred.uid);
    return 0;
}

/* How long the accept loop leaves a queued connection when it has no fd for it. */
#define ACCEPT_BACKOFF_MS 100

int npv_owner_run(struct npv_owner *o)
{
    int r = -pthread_create(&o->sched_thread, NULL, owner_sched_main, o);
    if (r < 0)
        return r;
    o->sched_started = true;
    bool backoff = false, starved = false;
    for (;;) {
        struct pollfd p[2] = {
            {.fd = o->stop_fd, .events = POLLIN},
            {.fd = o->listener.fd, .events = POLLIN},
        };
        /*
         * Out of fds, the connection stays queued and the listener stays
         * readable: polling it again at once would spin a core until a
         * client leaves. Only a stop is watched for a while.
         */
        int n = poll(p, backoff ? 1 : 2, backoff ? ACCEPT_BACKOFF_MS : -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            r = -errno;
            break;
        }
        if (p[0].revents & POLLIN)
            break;
        if (backoff) {
            backoff = false;
            continue;
        }
        if (p[1].revents & POLLIN) {
            int e = accept_one(o);
            backoff = e == -EMFILE || e == -ENFILE || e == -ENOBUFS || e == -ENOMEM;
            if (backoff && !starved)
                npv_warn(o->ctx, "serve: accepting a client: %s: it waits until one leaves",
                         npv_strerror(e));
            if (e == 0 || backoff)
                starved = backoff;
        }
    }
    /* No new clients; every client's server stops, and its thread releases it. */
    pthread_mutex_lock(&o->lock);
    for (unsigned s = 0; s < NPV_RKNPU_MAX_DOMAINS; s++)
        if (o->slots[s] != NULL && o->slots[s]->srv != NULL)
            npv_vus_stop(o->slots[s]->srv);
    o->sched_stop = true;
    pthread_cond_broadcast(&o->sched_cond);
    pthread_mutex_unlock(&o->lock);
    pthread_join(o->sched_thread, NULL);
    o->sched_started = false;
    pthread_mutex_lock(&o->lock);
    /* Refusals use the context: each ends within its 1 s. */
    while (o->refusing != 0)
        pthread_cond_wait(&o->done_cond, &o->lock);
    if (r == 0)
        r = o->device_err;
    pthread_mutex_unlock(&o->lock);
    return r;
}

void npv_owner_stop(struct npv_owner *o)
{
    uint64_t one = 1;
    ssize_t n = write(o->stop_fd, &one, sizeof(one));
    (void)n;
}

void npv_owner_free(struct npv_owner *o)
{
    if (o == NULL)
        return;
    if (o->stats_source)
        npv_stats_remove_source(o->ctx, "serve");
    npv_unix_listener_close(&o->listener); /* its file only if still ours */
    close(o->stop_fd);
    pthread_cond_destroy(&o->sched_cond);
    pthread_cond_destroy(&o->done_cond);
    pthread_mutex_destroy(&o->lock);
    free(o->socket_path);
    free(o);
}

size_t npv_owner_clients(struct npv_owner *o, struct npv_owner_client_stats *out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&o->lock);
    for (unsigned i = 0; i < o->nr_history; i++, n++)
        if (n < max)
            out[n] = o->history[(o->history_head + i) % OWNER_HISTORY];
    size_t live_from = n;
    for (unsigned s = 0; s < NPV_RKNPU_MAX_DOMAINS; s++) {
        if (o->slots[s] == NULL)
            continue;
        if (n < max)
            out[n] = o->slots[s]->st;
        n++;
    }
    pthread_mutex_unlock(&o->lock);
    /* Live clients in connection order after the departed ones. */
    size_t end = n < max ? n : max;
    for (size_t i = live_from + 1; i < end; i++)
        for (size_t j = i; j > live_from && out[j - 1].id > out[j].id; j--) {
            struct npv_owner_client_stats t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}
