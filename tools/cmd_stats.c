/* SPDX-License-Identifier: MIT */
/* npuvfio stats: read the counters a process serves with npv_stats_serve (stats.h). */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* A reply is read within this long (the server gives each client 1 s). */
#define REPLY_TIMEOUT_MS 2000

static volatile sig_atomic_t stats_stop;

static void on_signal(int sig)
{
    (void)sig;
    stats_stop = 1;
}

static void help(void)
{
    printf("Usage: npuvfio stats SOCKET [--prometheus] [--watch [--interval S] [--count N]]\n"
           "\n"
           "Read the live counters a program serves on the UNIX socket SOCKET with\n"
           "npv_stats_serve() (npv_stats_serve(3)): per device and per queue the\n"
           "requests, completions by result (ok, dev_error, timeout, cancelled, fault),\n"
           "jobs in flight, device resets, a latency histogram (log-linear buckets,\n"
           "3 significant bits), the context's DMA maps, bytes and domain switches,\n"
           "and the named counters the program adds with npv_stats_add_source()\n"
           "(npv_stats_add_source(3)): the JSON's \"sources\" member, per source, per\n"
           "entity (a client, say) and per counter, or npuvfio_SOURCE_COUNTER gauges.\n"
           "Prints the reply as served: one JSON object, or with --prometheus the\n"
           "Prometheus text exposition format.\n"
           "\n"
           "  --prometheus    ask for Prometheus text instead of JSON\n"
           "  --watch         print again every interval until SIGINT or SIGTERM\n"
           "  --interval S    seconds between reads with --watch (default 1)\n"
           "  --count N       with --watch, stop after N reads\n"
           "\n"
           "Exit status: 0 read, 1 the socket did not answer, 2 a usage error.\n");
}

/* One request: connect, send the command line, read to EOF. 0 or a negative errno. */
static int ask(const char *path, const char *cmd, char **out)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int rc = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        send(fd, cmd, strlen(cmd), MSG_NOSIGNAL) < 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    size_t cap = 1 << 14, len = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        if (len + 1 == cap) {
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int n = poll(&p, 1, REPLY_TIMEOUT_MS);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n == 0 ? -ETIMEDOUT : -errno;
            break;
        }
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            break;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    if (buf == NULL)
        return -ENOMEM;
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[len] = '\0';
    *out = buf;
    return 0;
}

int cmd_stats(struct npv_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},        {"prometheus", no_argument, NULL, 'p'},
        {"watch", no_argument, NULL, 'w'},       {"interval", required_argument, NULL, 'i'},
        {"count", required_argument, NULL, 'c'}, {NULL, 0, NULL, 0},
    };
    bool prometheus = false, watch = false;
    double interval = 1.0;
    long count = 0;
    int c;
    while ((c = cli_getopt(cli, argc, argv, ":h", opts)) != -1) {
        char *end;
        switch (c) {
        case 'h':
            help();
            return CLI_OK;
        case 'p':
            prometheus = true;
            break;
        case 'w':
            watch = true;
            break;
        case 'i':
            interval = strtod(optarg, &end);
            if (*end != '\0' || !(interval > 0 && interval <= 3600))
                return cli_usage(cli, "--interval %s: expected seconds in (0, 3600]", optarg);
            break;
        case 'c':
            count = strtol(optarg, &end, 10);
            if (*end != '\0' || count <= 0)
                return cli_usage(cli, "--count %s: expected a positive number", optarg);
            break;
        default:
            return CLI_USAGE;
        }
    }
    if (optind >= argc)
        return cli_usage(cli, "SOCKET is required");
    if (optind + 1 < argc)
        return cli_usage(cli, "unexpected argument '%s'", argv[optind + 1]);
    const char *path = argv[optind];
    const char *cmd = prometheus ? "prometheus\n" : "json\n";

    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    if (watch) {
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
    }
    int status = CLI_OK;
    for (long n = 1; !stats_stop; n++) {
        char *reply = NULL;
        int r = ask(path, cmd, &reply);
        if (r < 0) {
            status = cli_fail(cli, path, r);
            break;
        }
        fputs(reply, stdout);
        fflush(stdout);
        free(reply);
        if (!watch || (count > 0 && n >= count))
            break;
        struct timespec ts = {.tv_sec = (time_t)interval,
                              .tv_nsec = (long)((interval - (double)(time_t)interval) * 1e9)};
        nanosleep(&ts, NULL);
    }
    if (watch) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
    }
    return status;
}
