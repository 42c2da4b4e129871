/* SPDX-License-Identifier: MIT */
/*
 * npuvfio demo: the whole stack in one command. Every device of the device
 * table that has a model, a driver and a sample workload is run as `npuvfio
 * run` runs one (its model on a private socket, its driver over vfio-user,
 * every result checked on the CPU); the results make one table, followed by
 * what the host offers (`npuvfio status`). Devices the tree cannot run yet are
 * listed with what they lack. --device NAME [ADDR] runs one device, on the
 * hardware at ADDR when an address is given: a PCI function bound to
 * vfio-pci, or a platform device (the RK3588 NPU, "fdab0000.npu") bound to
 * vfio-platform.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/host.h>
#include <npuvfio/platform.h>

#include "cli.h"
#include "device_run.h"
#include "json_out.h"

enum row_state { ROW_OK, ROW_MISMATCH, ROW_FAILED, ROW_SKIPPED };

struct demo_row {
    const struct npv_device_entry *e;
    char transport[64];
    enum row_state state;
    char reason[96]; /* why a device was skipped */
    struct npv_sample_result res;
};

static void help(void)
{
    printf("Usage: npuvfio demo [--json] [--iterations N] [--device NAME [ADDR]]\n"
           "\n"
           "Run the stack end to end: for every device in the device table that has a model,\n"
           "a driver and a sample workload, start its model on a private socket, run the\n"
           "sample workload through the driver over vfio-user, check every result against\n"
           "the CPU, and print one table (device, transport, check, p50/p99 latency of one\n"
           "iteration, rate); devices that cannot run yet are listed with what they lack.\n"
           "Then print what this host offers (npuvfio status).\n"
           "\n"
           "  --device NAME [ADDR]  only this device; with ADDR, the hardware instead of the\n"
           "                        model: a PCI address (bound to vfio-pci) or a platform\n"
           "                        device name such as fdab0000.npu (bound to vfio-platform)\n"
           "  --iterations N        iterations of each workload (default: the workload's own)\n"
           "  --json                one JSON document: {\"devices\": [...], \"host\": {...}}\n"
           "\n"
           "Exit status 1 when a device that ran failed or a result differs from the CPU's,\n"
           "or when ADDR names no device or a platform device not on vfio-platform; 2 for a\n"
           "malformed ADDR. Skipped devices do not fail the demo.\n"
           "\n"
           "Devices:\n");
    for (size_t i = 0; npv_device_at(i) != NULL; i++)
        printf("  %-10s %s\n", npv_device_at(i)->name, npv_device_at(i)->summary);
}

/* What e lacks to run on a model (on_hw false) or on hardware; "" when nothing. */
static void missing_parts(const struct npv_device_entry *e, bool on_hw, char *buf, size_t len)
{
    const char *parts[3];
    size_t n = 0;
    if (!on_hw && e->model_create == NULL)
        parts[n++] = "model";
    if (e->driver_open == NULL)
        parts[n++] = "driver";
    if (e->sample_run == NULL)
        parts[n++] = "sample workload";
    buf[0] = '\0';
    if (n == 0)
        return;
    snprintf(buf, len, "no %s%s%s%s%s yet", parts[0],
             n == 3   ? ", "
             : n == 2 ? " or "
                      : "",
             n > 1 ? parts[1] : "", n == 3 ? " or " : "", n == 3 ? parts[2] : "");
}

static void run_row(struct npv_cli *cli, struct demo_row *row, const struct device_where *hw,
                    const struct npv_sample_opts *opts)
{
    missing_parts(row->e, hw != NULL, row->reason, sizeof(row->reason));
    if (row->reason[0] != '\0') {
        row->state = ROW_SKIPPED;
        snprintf(row->transport, sizeof(row->transport), "-");
        return;
    }
    int ret;
    if (hw != NULL) {
        snprintf(row->transport, sizeof(row->transport), "%s %s",
                 hw->platform ? "vfio-platform" : "vfio-pci", hw->hw);
        ret = device_run_sample(cli, row->e, hw, opts, &row->res);
    } else {
        struct model_child m = {0};
        snprintf(row->transport, sizeof(row->transport), "vfio-user (model)");
        ret = model_start(cli, row->e, &m);
        struct device_where model = {.socket = m.path};
        if (ret == CLI_OK)
            ret = device_run_sample(cli, row->e, &model, opts, &row->res);
        model_stop(&m);
    }
    if (ret != CLI_OK)
        row->state = ROW_FAILED;
    else
        row->state = row->res.mismatches == 0 ? ROW_OK : ROW_MISMATCH;
}

static double jobs_per_s(const struct npv_sample_result *r)
{
    return r->elapsed_ns > 0 ? (double)r->jobs * 1e9 / (double)r->elapsed_ns : 0;
}

static void print_table(const struct demo_row *rows, size_t n)
{
    printf("%-9s %-22s %-34s %10s %10s %14s\n", "device", "transport", "check", "p50", "p99",
           "rate");
    for (size_t i = 0; i < n; i++) {
        const struct demo_row *w = &rows[i];
        char check[64];
        switch (w->state) {
        case ROW_OK:
            snprintf(check, sizeof(check), "matches CPU, %llu iterations",
                     (unsigned long long)w->res.iterations);
            break;
        case ROW_MISMATCH:
            snprintf(check, sizeof(check), "DIFFERS: %llu bytes",
                     (unsigned long long)w->res.mismatches);
            break;
        case ROW_FAILED:
            snprintf(check, sizeof(check), "FAILED (error on stderr)");
            break;
        case ROW_SKIPPED:
            printf("%-9s %-22s skipped: %s\n", w->e->name, w->transport, w->reason);
            continue;
        }
        if (w->state == ROW_FAILED) {
            printf("%-9s %-22s %s\n", w->e->name, w->transport, check);
            continue;
        }
        printf("%-9s %-22s %-34s %7.1f us %7.1f us %7.0f jobs/s\n", w->e->name, w->transport, check,
               (double)w->res.p50_ns / 1e3, (double)w->res.p99_ns / 1e3, jobs_per_s(&w->res));
    }
}

static void print_json(struct npv_cli *cli, const struct demo_row *rows, size_t n)
{
    static const char *const states[] = {"ok", "differs", "failed", "skipped"};
    struct json_out j;
    json_init(&j, stdout);
    json_begin_object(&j);
    json_key(&j, "devices");
    json_begin_array(&j);
    for (size_t i = 0; i < n; i++) {
        const struct demo_row *w = &rows[i];
        json_begin_object(&j);
        json_kv_string(&j, "device", w->e->name);
        json_kv_string(&j, "check", states[w->state]);
        if (w->state == ROW_SKIPPED) {
            json_kv_string(&j, "reason", w->reason);
        } else {
            json_kv_string(&j, "transport", w->transport);
        }
        if (w->state == ROW_OK || w->state == ROW_MISMATCH) {
            json_kv_string(&j, "workload", w->res.what);
            json_kv_uint(&j, "iterations", w->res.iterations);
            json_kv_uint(&j, "jobs", w->res.jobs);
            json_kv_uint(&j, "mismatches", w->res.mismatches);
            json_kv_uint(&j, "p50_ns", w->res.p50_ns);
            json_kv_uint(&j, "p99_ns", w->res.p99_ns);
            json_kv_uint(&j, "jobs_per_s", (uint64_t)jobs_per_s(&w->res));
        }
        json_end_object(&j);
    }
    json_end_array(&j);
    struct npv_host_info h;
    json_key(&j, "host");
    if (npv_host_probe(cli->ctx, &h) == 0)
        status_write_json(&j, &h);
    else
        json_null(&j);
    json_end_object(&j);
    json_finish(&j);
}

int cmd_demo(struct npv_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"json", no_argument, NULL, 'j'},
        {"device", required_argument, NULL, 'd'},
        {"iterations", required_argument, NULL, 'n'},
        {NULL, 0, NULL, 0},
    };
    const char *device = NULL, *addr = NULL;
    struct npv_sample_opts sopts = {0};
    char canon[NPV_PLATFORM_NAME_LEN];
    struct device_where hw = {0};
    int c;

    while ((c = cli_getopt(cli, argc, argv, ":h", opts)) != -1) {
        switch (c) {
        case 'h':
            help();
            return CLI_OK;
        case 'j':
            cli->json = true;
            break;
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
        default:
            return CLI_USAGE;
        }
    }
    if (optind < argc && device == NULL)
        return cli_usage(cli, "an address needs --device NAME");
    if (optind < argc)
        addr = argv[optind++];
    if (optind < argc)
        return cli_usage(cli, "unexpected argument '%s'", argv[optind]);

    const struct npv_device_entry *one = NULL;
    if (device != NULL) {
        one = npv_device_find(device);
        if (one == NULL)
            return cli_usage(cli, "no device named '%s'", device);
        char why[96];
        missing_parts(one, addr != NULL, why, sizeof(why));
        if (why[0] != '\0')
            return cli_usage(cli, "%s cannot run%s: %s", device, addr ? " on hardware" : "", why);
        if (addr != NULL) {
            int st = device_where_hw(cli, one, addr, canon, &hw);
            if (st != CLI_OK)
                return st;
        }
    }
    size_t n = 0;
    while (npv_device_at(n) != NULL)
        n++;
    struct demo_row *rows = calloc(n, sizeof(*rows));
    if (rows == NULL)
        return cli_fail(cli, "demo", -ENOMEM);
    if (one != NULL) {
        rows[0].e = one;
        n = 1;
    } else {
        for (size_t i = 0; i < n; i++)
            rows[i].e = npv_device_at(i);
    }

    int ret = CLI_OK;
    for (size_t i = 0; i < n; i++) {
        run_row(cli, &rows[i], addr != NULL ? &hw : NULL, &sopts);
        if (rows[i].state == ROW_FAILED || rows[i].state == ROW_MISMATCH)
            ret = CLI_FAILED;
    }
    if (cli->json) {
        print_json(cli, rows, n);
        free(rows);
        return ret;
    }
    print_table(rows, n);
    free(rows);
    printf("\nWhat this host offers (npuvfio status):\n");
    fflush(stdout);
    char *status_argv[] = {"status", NULL};
    optind = 0;
    const char *cmd = cli->cmd;
    cli->cmd = "status";
    int st = cmd_status(cli, 1, status_argv);
    cli->cmd = cmd;
    return ret != CLI_OK ? ret : st;
}
