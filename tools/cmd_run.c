/* SPDX-License-Identifier: MIT */
/*
 * npuvfio run: a device's sample workload through its driver, every result
 * compared with the CPU's. By default the device's model is started on a
 * private socket in a child process and driven over vfio-user; --socket
 * drives a model already running, --pci the hardware: a PCI function bound to
 * vfio-pci or a platform device (no ':' in its name) bound to vfio-platform.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "device_run.h"
#include "json_out.h"
#include "platform_cli.h"

static void help(void)
{
    printf("Usage: npuvfio run --device NAME [--iterations N] [--socket PATH | --pci ADDR]\n"
           "       npuvfio run --device edgetpu --model FILE.tflite [--input FILE]\n"
           "                   [--iterations N] [--socket PATH | --pci ADDR | ADDR]\n"
           "\n"
           "Run the device's sample workload through its driver and check every result\n"
           "against the same work done on the CPU; print the round-trip latency of one\n"
           "iteration (p50, p99), the rate and the device's own counters where it has\n"
           "them (aicore: its PMU counts). Exit status 1 when a job fails, a result\n"
           "differs, or ADDR names no device or a platform device not on vfio-platform;\n"
           "2 for a malformed ADDR.\n"
           "\n"
           "Without --socket or --pci, the device's model is started in a child process on\n"
           "a private socket and driven over vfio-user.\n"
           "\n"
           "  --device NAME     the device (see below)\n"
           "  --iterations N    iterations of the workload (default: the workload's own)\n"
           "  --socket PATH     drive a model already serving on PATH (npuvfio sim)\n"
           "  --pci ADDR        drive the hardware at ADDR: a PCI address (bound to\n"
           "                    vfio-pci) or a platform device name such as fdab0000.npu\n"
           "                    (the RK3588 NPU, bound to vfio-platform)\n"
           "  ADDR              the same as --pci ADDR\n"
           "  --model FILE      Edge TPU: run a model compiled by edgetpu_compiler\n"
           "                    (*_edgetpu.tflite) instead of the sample (default 10\n"
           "                    iterations). On the model, which is given the same file\n"
           "                    and checks every chunk and linked address, each output\n"
           "                    is compared with its data-path pattern: proof of where\n"
           "                    inputs were read and outputs written, NOT the network's\n"
           "                    answer. On a chip the report names the first output's\n"
           "                    top-5 with dequantised scores.\n"
           "  --input FILE      Edge TPU --model: the input bytes, every input layer's in\n"
           "                    order (exactly their size); default: generated per run\n"
           "\n"
           "Devices with a sample workload:\n");
    for (size_t i = 0; npv_device_at(i) != NULL; i++) {
        const struct npv_device_entry *e = npv_device_at(i);
        if (e->sample_run != NULL)
            printf("  %-10s %s\n", e->name, e->summary);
    }
}

static void print_text(const struct npv_device_entry *e, const char *where,
                       const struct npv_sample_result *r)
{
    double secs = (double)r->elapsed_ns / 1e9;
    printf("device:     %s (%s)\n", e->name, where);
    printf("workload:   %s\n", r->what);
    printf("iterations: %llu (%llu jobs); %s %s\n", (unsigned long long)r->iterations,
           (unsigned long long)r->jobs,
           r->mismatches == 0 ? "every result matches" : "RESULTS DIFFER from",
           r->reference[0] != '\0' ? r->reference : "the CPU reference");
    if (r->mismatches != 0)
        printf("mismatches: %llu bytes\n", (unsigned long long)r->mismatches);
    printf("latency:    p50 %.1f us, p99 %.1f us per iteration\n", (double)r->p50_ns / 1e3,
           (double)r->p99_ns / 1e3);
    if (secs > 0)
        printf("rate:       %.0f jobs/s, %.1f MB/s written by the device\n", (double)r->jobs / secs,
               (double)r->bytes / secs / 1e6);
    if (r->detail[0] != '\0')
        printf("counters:   %s\n", r->detail);
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
    if (r->reference[0] != '\0')
        json_kv_string(&j, "reference", r->reference);
    json_kv_int(&j, "iterations", (long long)r->iterations);
    json_kv_int(&j, "jobs", (long long)r->jobs);
    json_kv_int(&j, "bytes", (long long)r->bytes);
    json_kv_int(&j, "elapsed_ns", (long long)r->elapsed_ns);
    json_kv_int(&j, "p50_ns", (long long)r->p50_ns);
    json_kv_int(&j, "p99_ns", (long long)r->p99_ns);
    json_kv_int(&j, "mismatches", (long long)r->mismatches);
    if (r->detail[0] != '\0')
        json_kv_string(&j, "detail", r->detail);
    json_kv_bool(&j, "ok", r->mismatches == 0);
    json_end_object(&j);
    json_finish(&j);
}

/* The sample through the driver on socket or pci; print the report. */
static int run_on(struct npv_cli *cli, const struct npv_device_entry *e,
                  const struct device_where *w, const struct npv_sample_opts *opts)
{
    struct npv_sample_result res;
    const char *where = w->socket != NULL ? w->socket : w->hw;
    int ret = device_run_sample(cli, e, w, opts, &res);
    if (ret != CLI_OK)
        return ret;
    if (cli->json)
        print_json(e, where, &res);
    else
        print_text(e, where, &res);
    if (res.mismatches != 0) {
        cli_error(cli, "%llu bytes differ from %s", (unsigned long long)res.mismatches,
                  res.reference[0] != '\0' ? res.reference : "the CPU reference");
        return CLI_FAILED;
    }
    return CLI_OK;
}

int cmd_run(struct npv_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"device", required_argument, NULL, 'd'},
        {"iterations", required_argument, NULL, 'n'},
        {"socket", required_argument, NULL, 's'},
        {"pci", required_argument, NULL, 'p'},
        {"model", required_argument, NULL, 'm'},
        {"input", required_argument, NULL, 'i'},
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
        case 'm':
            sopts.model_path = optarg;
            break;
        case 'i':
            sopts.input_path = optarg;
            break;
        default:
            return CLI_USAGE;
        }
    }
    if (optind < argc && pci == NULL && socket == NULL)
        pci = argv[optind++]; /* [ADDR]: the same as --pci ADDR */
    if (optind < argc)
        return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
    if (device == NULL)
        return cli_usage(cli, "--device is required");
    if (socket != NULL && pci != NULL)
        return cli_usage(cli, "--socket and --pci exclude each other");
    const struct npv_device_entry *e = npv_device_find(device);
    if (e == NULL || e->sample_run == NULL)
        return cli_usage(cli, "no device with a sample workload named '%s'", device);
    if ((sopts.model_path != NULL || sopts.input_path != NULL) && strcmp(e->name, "edgetpu") != 0)
        return cli_usage(cli, "--model and --input are for --device edgetpu");
    if (sopts.input_path != NULL && sopts.model_path == NULL)
        return cli_usage(cli, "--input needs --model");
    if (socket == NULL && pci == NULL && e->model_create == NULL)
        return cli_usage(cli, "%s has no model to start: give --pci or --socket", device);

    struct device_where w = {.socket = socket};
    if (pci != NULL) {
        char canon[NPV_PLATFORM_NAME_LEN];
        int st = device_where_hw(cli, e, pci, canon, &w);
        return st != CLI_OK ? st : run_on(cli, e, &w, &sopts);
    }
    if (socket != NULL)
        return run_on(cli, e, &w, &sopts);
    struct model_child m = {0};
    /* The model checks every run against the same package (devices/edgetpu/model_pkg.h). */
    if (sopts.model_path != NULL && setenv("NPV_EDGETPU_MODEL_PACKAGES", sopts.model_path, 1) != 0)
        return cli_fail(cli, "setenv", -errno);
    int ret = model_start(cli, e, &m);
    w.socket = m.path;
    if (ret == CLI_OK)
        ret = run_on(cli, e, &w, &sopts);
    model_stop(&m);
    return ret;
}
