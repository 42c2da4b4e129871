/* SPDX-License-Identifier: MIT */
/*
 * npuvfio run: a device's sample workload through its driver, every result
 * compared with the CPU's. By default the device's model is started on a
 * private socket in a child process and driven over vfio-user; --socket
 * drives a model already running, --pci a device bound to vfio-pci.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/dev.h>
#include <npuvfio/domain.h>

#include "cli.h"
#include "json_out.h"
#include "registry.h"

#define MODEL_START_TIMEOUT_NS (10ull * 1000000000ull)

struct model_child {
    pid_t pid;
    char dir[64];
    char path[108];
};

static void help(void)
{
    printf("Usage: npuvfio run --device NAME [--iterations N] [--socket PATH | --pci ADDR]\n"
           "\n"
           "Run the device's sample workload through its driver and check every result\n"
           "against the same work done on the CPU; print the round-trip latency of one\n"
           "iteration (p50, p99) and the rate. Exit status 1 when a job fails or a result\n"
           "differs.\n"
           "\n"
           "Without --socket or --pci, the device's model is started in a child process on\n"
           "a private socket and driven over vfio-user.\n"
           "\n"
           "  --device NAME     the device (see below)\n"
           "  --iterations N    iterations of the workload (default: the workload's own)\n"
           "  --socket PATH     drive a model already serving on PATH (npuvfio sim)\n"
           "  --pci ADDR        drive the device at ADDR, bound to vfio-pci\n"
           "\n"
           "Devices with a sample workload:\n");
    for (size_t i = 0; npv_device_at(i) != NULL; i++) {
        const struct npv_device_entry *e = npv_device_at(i);
        if (e->sample_run != NULL)
            printf("  %-10s %s\n", e->name, e->summary);
    }
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void model_stop(struct model_child *m)
{
    if (m->pid > 0) {
        kill(m->pid, SIGTERM);
        waitpid(m->pid, NULL, 0);
        m->pid = 0;
    }
    if (m->path[0] != '\0')
        unlink(m->path);
    if (m->dir[0] != '\0')
        rmdir(m->dir);
}

/* The model in a child that dies with us, serving one client; returns once it listens. */
static int model_start(struct npv_cli *cli, const struct npv_device_entry *e, struct model_child *m)
{
    snprintf(m->dir, sizeof(m->dir), "/tmp/npuvfio-run-XXXXXX");
    if (mkdtemp(m->dir) == NULL) {
        m->dir[0] = '\0';
        return cli_fail(cli, "a private socket directory in /tmp", -errno);
    }
    snprintf(m->path, sizeof(m->path), "%s/%s.sock", m->dir, e->name);
    fflush(NULL);
    m->pid = fork();
    if (m->pid < 0)
        return cli_fail(cli, "fork", -errno);
    if (m->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int r = npv_device_serve(e, m->path, true);
        if (r < 0)
            fprintf(stderr, "npuvfio run: %s model: %s\n", e->name, npv_strerror(r));
        _exit(r < 0 ? 1 : 0);
    }
    uint64_t deadline = mono_ns() + MODEL_START_TIMEOUT_NS;
    for (;;) {
        struct stat st;
        int status;
        if (stat(m->path, &st) == 0 && S_ISSOCK(st.st_mode))
            return CLI_OK;
        if (waitpid(m->pid, &status, WNOHANG) == m->pid) {
            m->pid = 0;
            cli_error(cli, "the %s model exited before it listened", e->name);
            return CLI_FAILED;
        }
        if (mono_ns() > deadline) {
            cli_error(cli, "the %s model did not listen on %s within 10 s", e->name, m->path);
            return CLI_FAILED;
        }
        struct timespec nap = {.tv_sec = 0, .tv_nsec = 2000000};
        nanosleep(&nap, NULL);
    }
}

static void print_text(const struct npv_device_entry *e, const char *where,
                       const struct npv_sample_result *r)
{
    double secs = (double)r->elapsed_ns / 1e9;
    printf("device:     %s (%s)\n", e->name, where);
    printf("workload:   %s\n", r->what);
    printf("iterations: %llu (%llu jobs); %s\n", (unsigned long long)r->iterations,
           (unsigned long long)r->jobs,
           r->mismatches == 0 ? "every result matches the CPU reference"
                              : "RESULTS DIFFER from the CPU reference");
    if (r->mismatches != 0)
        printf("mismatches: %llu bytes\n", (unsigned long long)r->mismatches);
    printf("latency:    p50 %.1f us, p99 %.1f us per iteration\n", (double)r->p50_ns / 1e3,
           (double)r->p99_ns / 1e3);
    if (secs > 0)
        printf("rate:       %.0f jobs/s, %.1f MB/s written by the device\n", (double)r->jobs / secs,
               (double)r->bytes / secs / 1e6);
}

static void print_json(const struct npv_device_entry *e, const char *where,
                       const struct npv_sample_result *r)
{
    struct json_out j;
    json_init(&j, stdout);
    json_begin_object(&j);
    json_kv_string(&j, "device", e->name);
    json_kv_string(&j, "where", where);
    json_kv_string(&j, "workload", r->what);
    json_kv_int(&j, "iterations", (long long)r->iterations);
    json_kv_int(&j, "jobs", (long long)r->jobs);
    json_kv_int(&j, "bytes", (long long)r->bytes);
    json_kv_int(&j, "elapsed_ns", (long long)r->elapsed_ns);
    json_kv_int(&j, "p50_ns", (long long)r->p50_ns);
    json_kv_int(&j, "p99_ns", (long long)r->p99_ns);
    json_kv_int(&j, "mismatches", (long long)r->mismatches);
    json_kv_bool(&j, "ok", r->mismatches == 0);
    json_end_object(&j);
    json_finish(&j);
}

/* Open the device, the driver on it, run the sample; print. */
static int run_on(struct npv_cli *cli, const struct npv_device_entry *e, const char *socket,
                  const char *pci, const struct npv_sample_opts *opts)
{
    struct npv_domain *dom;
    struct npv_dev *dev;
    void *drv;
    struct npv_sample_result res;
    const char *where = socket != NULL ? socket : pci;
    int r = npv_domain_new(cli->ctx, NULL, &dom);
    if (r < 0)
        return cli_fail(cli, "domain", r);
    r = socket != NULL ? npv_dev_open_vfio_user(cli->ctx, socket, dom, NULL, &dev)
                       : npv_dev_open_pci(cli->ctx, pci, dom, NULL, &dev);
    if (r < 0) {
        npv_domain_put(dom);
        return cli_fail(cli, where, r);
    }
    int ret = CLI_OK;
    r = e->driver_open(dev, &drv);
    if (r < 0) {
        ret = cli_fail(cli, e->name, r);
        goto out_dev;
    }
    r = e->sample_run(drv, opts, &res);
    e->driver_close(drv);
    if (r < 0) {
        ret = cli_fail(cli, "sample workload", r);
        goto out_dev;
    }
    if (cli->json)
        print_json(e, where, &res);
    else
        print_text(e, where, &res);
    if (res.mismatches != 0) {
        cli_error(cli, "%llu bytes differ from the CPU reference",
                  (unsigned long long)res.mismatches);
        ret = CLI_FAILED;
    }
out_dev:
    npv_dev_close(dev);
    npv_domain_put(dom);
    return ret;
}

int cmd_run(struct npv_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"device", required_argument, NULL, 'd'},
        {"iterations", required_argument, NULL, 'n'},
        {"socket", required_argument, NULL, 's'},
        {"pci", required_argument, NULL, 'p'},
        {NULL, 0, NULL, 0},
    };
    const char *device = NULL, *socket = NULL, *pci = NULL;
    struct npv_sample_opts sopts = {0};
    int c;

    while ((c = cli_getopt(cli, argc, argv, ":h", opts)) != -1) {
        switch (c) {
        case 'h':
            help();
            return CLI_OK;
        case 'd':
            device = optarg;
            break;
        case 'n': {
            char *end;
            errno = 0;
            unsigned long n = strtoul(optarg, &end, 10);
            if (errno != 0 || *end != '\0' || end == optarg || n == 0 || n > 100000000ul ||
                optarg[0] == '-')
                return cli_usage(cli, "--iterations %s: expected 1..100000000", optarg);
            sopts.iterations = (unsigned)n;
            break;
        }
        case 's':
            socket = optarg;
            break;
        case 'p':
            pci = optarg;
            break;
        default:
            return CLI_USAGE;
        }
    }
    if (optind < argc)
        return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
    if (device == NULL)
        return cli_usage(cli, "--device is required");
    if (socket != NULL && pci != NULL)
        return cli_usage(cli, "--socket and --pci exclude each other");
    const struct npv_device_entry *e = npv_device_find(device);
    if (e == NULL || e->sample_run == NULL)
        return cli_usage(cli, "no device with a sample workload named '%s'", device);
    if (socket == NULL && pci == NULL && e->model_create == NULL)
        return cli_usage(cli, "%s has no model to start: give --pci or --socket", device);

    if (socket != NULL || pci != NULL)
        return run_on(cli, e, socket, pci, &sopts);
    struct model_child m = {0};
    int ret = model_start(cli, e, &m);
    if (ret == CLI_OK)
        ret = run_on(cli, e, m.path, NULL, &sopts);
    model_stop(&m);
    return ret;
}
