/* SPDX-License-Identifier: MIT */
/*
 * An open-loop load generator for examples/inference_server.c: requests
 * leave on a fixed schedule (request i at start + i / rate) over several
 * connections whether or not earlier ones were answered, and each latency is
 * measured from the request's SCHEDULED send time, so a server that falls
 * behind is charged for the queue it builds (no coordinated omission).
 *
 *   inference_load --device rknpu --socket /tmp/infer.sock --rates 500,2000 \
 *       --duration 3 --check --json out.json
 *
 * Prints per rate: requests sent and answered and their rates, replies by
 * class, and p50 / p99 / p99.9 / max latency of the successful ones. With
 * --check every output is compared with the CPU reference of its input
 * (inference_work.h: the same arithmetic the device does, computed here).
 *
 * Needs nothing of npuvfio but inference_proto.h and inference_work.h.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "inference_proto.h"
#include "inference_work.h"

#define MS       1000000ull
#define MAX_CONN 64u

struct opts {
    enum infer_device device;
    const char *socket, *json;
    double rates[16];
    unsigned nr_rates, connections;
    double duration_s;
    uint64_t count, seed, drain_ns;
    bool check;
};

enum { ST_UNSENT = 0, ST_SENT, ST_ANSWERED };

/* One rate's run. */
struct run {
    const struct opts *o;
    double rate;
    uint64_t total, start_ns;
    uint64_t *sched_ns; /* [total] */
    uint64_t *lat_ns;   /* [total] */
    int32_t *status;    /* [total] */
    _Atomic uint8_t *state;
    uint8_t *wrong; /* [total] */
    atomic_ullong last_send_ns, last_reply_ns, send_errors;
};

struct conn {
    struct run *run;
    unsigned id;
    int fd;
    pthread_t sender, receiver;
    atomic_bool sender_done;
    atomic_ullong sent, answered;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
    struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ull),
                          .tv_nsec = (long)(t % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static int connect_to(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    /* A server that stops reading cannot hold a sender forever. */
    struct timeval tv = {.tv_sec = 5};
    if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
        connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    return fd;
}

static int send_all(int fd, const uint8_t *p, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -errno;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void *sender_main(void *arg)
{
    struct conn *c = arg;
    struct run *run = c->run;
    uint32_t in_len = infer_input_bytes(run->o->device);
    uint8_t frame[INFER_REQ_HDR_BYTES + INFER_RK_INPUT + INFER_ETPU_INPUT];
    for (uint64_t i = c->id; i < run->total; i += run->o->connections) {
        sleep_until(run->sched_ns[i]);
        infer_put_le32(frame, in_len);
        infer_put_le32(frame + 4, (uint32_t)i);
        infer_input(run->o->device, run->o->seed + i, frame + INFER_REQ_HDR_BYTES);
        /* Sent before the send: the reply may arrive before send() returns. */
        atomic_store(&run->state[i], ST_SENT);
        atomic_fetch_add(&c->sent, 1);
        if (send_all(c->fd, frame, INFER_REQ_HDR_BYTES + in_len) < 0) {
            atomic_store(&run->state[i], ST_UNSENT);
            atomic_fetch_sub(&c->sent, 1);
            atomic_fetch_add(&run->send_errors, 1);
            break;
        }
        atomic_store(&run->last_send_ns, now_ns());
    }
    atomic_store(&c->sender_done, true);
    return NULL;
}

/* Read exactly len bytes before deadline: 1, 0 on EOF, negative errno. */
static int recv_exact(int fd, uint8_t *p, size_t len, uint64_t deadline)
{
    size_t got = 0;
    while (got < len) {
        uint64_t t = now_ns();
        if (t >= deadline)
            return -ETIMEDOUT;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int n = poll(&pf, 1, (int)((deadline - t) / MS) + 1);
        if (n < 0 && errno != EINTR)
            return -errno;
        if (n <= 0)
            continue;
        ssize_t r = recv(fd, p + got, len - got, MSG_DONTWAIT);
        if (r == 0)
            return 0;
        if (r < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            return -errno;
        }
        got += (size_t)r;
    }
    return 1;
}

/* The receiver ends when its sender is done and every request sent was answered, or at the
 * deadline. */
static uint64_t receive_deadline(const struct run *run)
{
    return run->sched_ns[run->total - 1] + run->o->drain_ns;
}

static void *receiver_main(void *arg)
{
    struct conn *c = arg;
    struct run *run = c->run;
    enum infer_device d = run->o->device;
    uint32_t out_len = infer_output_bytes(d);
    uint8_t hdr[INFER_REP_HDR_BYTES], out[INFER_RK_OUTPUT + INFER_ETPU_OUTPUT];
    uint8_t in[INFER_RK_INPUT + INFER_ETPU_INPUT], want[INFER_RK_OUTPUT + INFER_ETPU_OUTPUT];
    uint64_t deadline = receive_deadline(run);
    for (;;) {
        if (atomic_load(&c->sender_done) && atomic_load(&c->answered) == atomic_load(&c->sent))
            break;
        /* Look again every 100 ms whether the sender has finished. */
        uint64_t step = now_ns() + 100 * MS;
        struct pollfd pf = {.fd = c->fd, .events = POLLIN};
        int n = poll(&pf, 1, 100);
        if (n == 0) {
            if (step >= deadline && now_ns() >= deadline)
                break;
            continue;
        }
        if (recv_exact(c->fd, hdr, sizeof(hdr), deadline) != 1)
            break;
        int32_t st = (int32_t)infer_get_le32(hdr);
        uint32_t tag = infer_get_le32(hdr + 4), len = infer_get_le32(hdr + 8);
        if ((st == 0 && len != out_len) || (st != 0 && len != 0) || len > sizeof(out))
            break; /* a reply that breaks the format: the stream is lost */
        if (len > 0 && recv_exact(c->fd, out, len, deadline) != 1)
            break;
        uint64_t t = now_ns();
        if (tag >= run->total || tag % run->o->connections != c->id ||
            atomic_load(&run->state[tag]) != ST_SENT)
            break; /* a tag never sent on this connection, or answered twice */
        atomic_store(&run->state[tag], ST_ANSWERED);
        run->status[tag] = st;
        run->lat_ns[tag] = t - run->sched_ns[tag];
        if (st == 0 && run->o->check) {
            infer_input(d, run->o->seed + tag, in);
            infer_reference(d, in, want);
            run->wrong[tag] = memcmp(out, want, out_len) != 0;
        }
        atomic_store(&run->last_reply_ns, t);
        atomic_fetch_add(&c->answered, 1);
    }
    shutdown(c->fd, SHUT_RDWR);
    return NULL;
}

struct result {
    double rate, sent_per_s, answered_per_s;
    uint64_t sent, answered, ok, timeout, invalid, busy, shutdown, other, wrong, missing,
        send_errors;
    double p50_us, p99_us, p999_us, max_us;
};

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The nearest-rank percentile of n sorted values. */
static double pct_us(const uint64_t *v, uint64_t n, double p)
{
    if (n == 0)
        return 0;
    uint64_t k = (uint64_t)ceil(p / 100.0 * (double)n);
    k = k == 0 ? 0 : k - 1;
    return (double)v[k < n ? k : n - 1] / 1000.0;
}

static void summarise(struct run *run, struct result *res)
{
    *res = (struct result){.rate = run->rate, .send_errors = run->send_errors};
    uint64_t *ok_lat = malloc(sizeof(uint64_t) * run->total);
    uint64_t n = 0;
    for (uint64_t i = 0; i < run->total; i++) {
        uint8_t s = atomic_load(&run->state[i]);
        if (s == ST_UNSENT)
            continue;
        res->sent++;
        if (s != ST_ANSWERED) {
            res->missing++;
            continue;
        }
        res->answered++;
        int32_t st = run->status[i];
        if (st == 0 && run->wrong[i]) {
            res->wrong++;
        } else if (st == 0) {
            res->ok++;
            if (ok_lat != NULL)
                ok_lat[n++] = run->lat_ns[i];
        } else if (st == -ETIMEDOUT) {
            res->timeout++;
        } else if (st == -EINVAL || st == -EMSGSIZE) {
            res->invalid++;
        } else if (st == -EAGAIN) {
            res->busy++;
        } else if (st == -ESHUTDOWN) {
            res->shutdown++;
        } else {
            res->other++;
        }
    }
    if (ok_lat != NULL) {
        qsort(ok_lat, n, sizeof(uint64_t), cmp_u64);
        res->p50_us = pct_us(ok_lat, n, 50);
        res->p99_us = pct_us(ok_lat, n, 99);
        res->p999_us = pct_us(ok_lat, n, 99.9);
        res->max_us = n > 0 ? (double)ok_lat[n - 1] / 1000.0 : 0;
    }
    free(ok_lat);
    uint64_t ls = run->last_send_ns, lr = run->last_reply_ns;
    if (ls > run->start_ns)
        res->sent_per_s = (double)res->sent * 1e9 / (double)(ls - run->start_ns);
    if (lr > run->start_ns)
        res->answered_per_s = (double)res->answered * 1e9 / (double)(lr - run->start_ns);
}

static int run_rate(const struct opts *o, double rate, struct result *res)
{
    struct run run = {.o = o, .rate = rate};
    run.total = o->count != 0 ? o->count : (uint64_t)llround(rate * o->duration_s);
    if (run.total == 0 || run.total > UINT32_MAX)
        return -EINVAL;
    run.sched_ns = calloc(run.total, sizeof(uint64_t));
    run.lat_ns = calloc(run.total, sizeof(uint64_t));
    run.status = calloc(run.total, sizeof(int32_t));
    run.state = calloc(run.total, sizeof(*run.state));
    run.wrong = calloc(run.total, 1);
    struct conn *conns = calloc(o->connections, sizeof(*conns));
    int err = 0;
    if (!run.sched_ns || !run.lat_ns || !run.status || !run.state || !run.wrong || !conns) {
        err = -ENOMEM;
        goto out;
    }
    unsigned opened = 0;
    for (; opened < o->connections; opened++) {
        int fd = connect_to(o->socket);
        if (fd < 0) {
            err = fd;
            fprintf(stderr, "inference_load: %s: %s\n", o->socket, strerror(-fd));
            break;
        }
        conns[opened] = (struct conn){.run = &run, .id = opened, .fd = fd};
    }
    if (err == 0) {
        /* The schedule starts 20 ms out, so every thread is waiting when it begins. */
        run.start_ns = now_ns() + 20 * MS;
        for (uint64_t i = 0; i < run.total; i++)
            run.sched_ns[i] = run.start_ns + (uint64_t)((double)i * 1e9 / rate);
        unsigned started = 0;
        for (; started < opened; started++) {
            struct conn *c = &conns[started];
            int r = pthread_create(&c->receiver, NULL, receiver_main, c);
            if (r == 0 && (r = pthread_create(&c->sender, NULL, sender_main, c)) != 0) {
                /* No sender: the receiver sees nothing to wait for and ends. */
                atomic_store(&c->sender_done, true);
                pthread_join(c->receiver, NULL);
            }
            if (r != 0) {
                err = -r;
                break;
            }
        }
        for (unsigned k = 0; k < started; k++) {
            pthread_join(conns[k].sender, NULL);
            pthread_join(conns[k].receiver, NULL);
        }
        if (err == 0)
            summarise(&run, res);
    }
    for (unsigned k = 0; k < opened; k++)
        close(conns[k].fd);
out:
    free(conns);
    free(run.sched_ns);
    free(run.lat_ns);
    free(run.status);
    free((void *)run.state);
    free(run.wrong);
    return err;
}

static void print_result(const struct result *r)
{
    printf("rate %.0f/s: sent %llu (%.1f/s), answered %llu (%.1f/s): ok %llu, timeout %llu, "
           "invalid %llu, busy %llu, shutdown %llu, other %llu, wrong %llu, missing %llu, "
           "send errors %llu\n",
           r->rate, (unsigned long long)r->sent, r->sent_per_s, (unsigned long long)r->answered,
           r->answered_per_s, (unsigned long long)r->ok, (unsigned long long)r->timeout,
           (unsigned long long)r->invalid, (unsigned long long)r->busy,
           (unsigned long long)r->shutdown, (unsigned long long)r->other,
           (unsigned long long)r->wrong, (unsigned long long)r->missing,
           (unsigned long long)r->send_errors);
    printf("  latency from scheduled send (ok replies): p50 %.1f us, p99 %.1f us, p99.9 %.1f us, "
           "max %.1f us\n",
           r->p50_us, r->p99_us, r->p999_us, r->max_us);
}

static int write_json(const struct opts *o, const struct result *res, unsigned n)
{
    FILE *f = fopen(o->json, "w");
    if (f == NULL)
        return -errno;
    fprintf(f, "{\"device\": \"%s\", \"connections\": %u, \"check\": %s, \"runs\": [",
            o->device == INFER_EDGETPU ? "edgetpu" : "rknpu", o->connections,
            o->check ? "true" : "false");
    for (unsigned i = 0; i < n; i++) {
        const struct result *r = &res[i];
        fprintf(f,
                "%s{\"rate\": %.3f, \"sent\": %llu, \"answered\": %llu, \"ok\": %llu, "
                "\"timeout\": %llu, \"invalid\": %llu, \"busy\": %llu, \"shutdown\": %llu, "
                "\"other\": %llu, \"wrong\": %llu, \"missing\": %llu, \"send_errors\": %llu, "
                "\"sent_per_s\": %.3f, \"answered_per_s\": %.3f, \"p50_us\": %.3f, "
                "\"p99_us\": %.3f, \"p999_us\": %.3f, \"max_us\": %.3f}",
                i > 0 ? ", " : "", r->rate, (unsigned long long)r->sent,
                (unsigned long long)r->answered, (unsigned long long)r->ok,
                (unsigned long long)r->timeout, (unsigned long long)r->invalid,
                (unsigned long long)r->busy, (unsigned long long)r->shutdown,
                (unsigned long long)r->other, (unsigned long long)r->wrong,
                (unsigned long long)r->missing, (unsigned long long)r->send_errors, r->sent_per_s,
                r->answered_per_s, r->p50_us, r->p99_us, r->p999_us, r->max_us);
    }
    fprintf(f, "]}\n");
    return fclose(f) == 0 ? 0 : -errno;
}

static void usage(FILE *f)
{
    fprintf(f, "Usage: inference_load --device edgetpu|rknpu --socket PATH\n"
               "                      (--rate R | --rates R1,R2,...) (--duration S | --count N)\n"
               "                      [--connections C] [--check] [--json FILE]\n"
               "\n"
               "Drive inference_server open-loop: request i leaves at start + i/R whatever\n"
               "came back; latency counts from that scheduled time.\n"
               "\n"
               "  --rate R          requests per second (one run)\n"
               "  --rates LIST      several runs, one per rate, one after the other\n"
               "  --duration S      seconds per run (default 3)\n"
               "  --count N         requests per run instead of rate x duration\n"
               "  --connections C   connections, request i on connection i mod C (default 4)\n"
               "  --check           compare every output with the CPU reference\n"
               "  --json FILE       write the results as JSON\n"
               "  --drain-ms N      wait this long after the last scheduled send (default 5000)\n"
               "  --seed N          first input number (default 0)\n"
               "\n"
               "Exit status: 0 when every request of every run was answered ok (and exact\n"
               "with --check), 1 otherwise, 2 a usage error.\n");
}

static int parse_rates(const char *s, struct opts *o)
{
    char *end;
    o->nr_rates = 0;
    for (;;) {
        double r = strtod(s, &end);
        if (end == s || !(r > 0) || o->nr_rates == sizeof(o->rates) / sizeof(o->rates[0]))
            return -1;
        o->rates[o->nr_rates++] = r;
        if (*end == '\0')
            return 0;
        if (*end != ',')
            return -1;
        s = end + 1;
    }
}

static int parse(int argc, char **argv, struct opts *o)
{
    static const struct option longs[] = {
        {"device", required_argument, NULL, 'd'},
        {"socket", required_argument, NULL, 's'},
        {"rate", required_argument, NULL, 'r'},
        {"rates", required_argument, NULL, 'R'},
        {"duration", required_argument, NULL, 't'},
        {"count", required_argument, NULL, 'n'},
        {"connections", required_argument, NULL, 'c'},
        {"check", no_argument, NULL, 'k'},
        {"json", required_argument, NULL, 'j'},
        {"drain-ms", required_argument, NULL, 'D'},
        {"seed", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (struct opts){.connections = 4, .duration_s = 3, .drain_ns = 5000 * MS};
    bool have_device = false;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        char *end = NULL;
        switch (ch) {
        case 'd':
            if (infer_device_parse(optarg, &o->device) < 0)
                return 2;
            have_device = true;
            break;
        case 's':
            o->socket = optarg;
            break;
        case 'r':
        case 'R':
            if (parse_rates(optarg, o) < 0 || (ch == 'r' && o->nr_rates != 1))
                return 2;
            break;
        case 't':
            o->duration_s = strtod(optarg, &end);
            if (*end != '\0' || !(o->duration_s > 0))
                return 2;
            break;
        case 'n':
        case 'c':
        case 'D':
        case 'S': {
            unsigned long long v = strtoull(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0')
                return 2;
            if (ch == 'n')
                o->count = v;
            else if (ch == 'c')
                o->connections = (unsigned)v;
            else if (ch == 'D')
                o->drain_ns = v * MS;
            else
                o->seed = v;
            break;
        }
        case 'k':
            o->check = true;
            break;
        case 'j':
            o->json = optarg;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            return 2;
        }
    }
    if (!have_device || o->socket == NULL || o->nr_rates == 0 || optind != argc ||
        o->connections == 0 || o->connections > MAX_CONN)
        return 2;
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o;
    if (parse(argc, argv, &o) != 0) {
        usage(stderr);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    struct result res[16];
    bool clean = true;
    for (unsigned i = 0; i < o.nr_rates; i++) {
        int r = run_rate(&o, o.rates[i], &res[i]);
        if (r < 0) {
            fprintf(stderr, "inference_load: rate %.0f: %s\n", o.rates[i], strerror(-r));
            return 1;
        }
        print_result(&res[i]);
        fflush(stdout);
        clean =
            clean && res[i].ok == res[i].sent && res[i].send_errors == 0 &&
            res[i].sent == (o.count != 0 ? o.count : (uint64_t)llround(o.rates[i] * o.duration_s));
    }
    if (o.json != NULL) {
        int r = write_json(&o, res, o.nr_rates);
        if (r < 0) {
            fprintf(stderr, "inference_load: %s: %s\n", o.json, strerror(-r));
            return 1;
        }
    }
    return clean ? 0 : 1;
}
