/* SPDX-License-Identifier: MIT */
/*
 * npuvfio serve: own one RKNPU and serve it to other processes, each a
 * virtual RKNPU over vfio-user in an IOMMU domain of its own (serve/owner.h,
 * docs/sharing.md).
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/rknpu.h>
#include <npuvfio/stats.h>

#include "cli.h"
#include "device_run.h"
#include "owner.h"
#include "platform_cli.h"

/* The signal handler's only way to reach the running owner. */
static struct npv_owner *volatile serve_owner;

static void on_signal(int sig)
{
    (void)sig;
    struct npv_owner *o = serve_owner;
    if (o != NULL)
        npv_owner_stop(o); /* an eventfd write: async-signal-safe */
}

static void help(void)
{
    printf(
        "Usage: npuvfio serve --device rknpu (--model | --pci ADDR | ADDR | --device-socket PATH)\n"
        "                     --socket PATH [--group NAME] [--max-clients N] [--max-jobs N]\n"
        "                     [--max-bytes SIZE] [--batch N] [--job-timeout MS]\n"
        "                     [--stats-socket PATH]\n"
        "\n"
        "Own one NPU and share it: every process that connects to PATH gets a virtual\n"
        "device of the same kind over vfio-user (an unchanged driver opens it with\n"
        "npv_dev_open_vfio_user), isolated in an IOMMU domain of its own: its runs reach\n"
        "only the memory it mapped. Clients take turns on the device (round robin, up to\n"
        "--batch runs a turn). Runs until SIGTERM or SIGINT, then prints each client's\n"
        "counters; exits 1 when the device is lost (its model's server went away, a\n"
        "core no reset revives), dropping every client. Only the RKNPU can be shared\n"
        "(docs/sharing.md says why not the Edge TPU or the AICore yet).\n"
        "\n"
        "  --device NAME         rknpu\n"
        "  --model               start the device's model in a child and own it\n"
        "  --pci ADDR, ADDR      own the hardware: a platform device such as fdab0000.npu\n"
        "                        (on vfio-platform) or a PCI address (on vfio-pci)\n"
        "  --device-socket PATH  own a model already serving on PATH (npuvfio sim)\n"
        "  --socket PATH         where clients connect (created mode 0600: this user only)\n"
        "  --group NAME          let group NAME connect too (mode 0660, that group)\n"
        "  --max-clients N       clients at once, 1-16, one domain each (default 16);\n"
        "                        one more is refused: its open fails with EUSERS\n"
        "  --max-jobs N          runs of one client on the device at once, 1-3 (default\n"
        "                        3); its others wait in the owner for its next turn\n"
        "  --max-bytes SIZE      bytes one client may map (K, M, G suffixes; default 4G);\n"
        "                        a map over it fails with EDQUOT (the client's driver\n"
        "                        maps when it first switches to its domain: its job\n"
        "                        fails with EDQUOT)\n"
        "                        A client's mappings are capped at its share of the\n"
        "                        owner's open-file limit (ulimit -n; at most 1024):\n"
        "                        one more fails with ENOSPC\n"
        "  --batch N             runs of one client per turn, so the device switches\n"
        "                        domains once per turn (default 0: all it has waiting)\n"
        "  --job-timeout MS      a run's deadline on the device (default 1000)\n"
        "  --stats-socket PATH   serve the counters there (npuvfio stats PATH): the\n"
        "                        device's cores and, per client, runs, maps, waits and\n"
        "                        switches\n");
}

static int parse_uint(struct npv_cli *cli, const char *opt, const char *arg, unsigned long long max,
                      unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    unsigned long long mult = 1;
    if (strcmp(opt, "--max-bytes") == 0 && end != arg && *end != '\0' && end[1] == '\0') {
        mult = *end == 'K' || *end == 'k'   ? 1ull << 10
               : *end == 'M' || *end == 'm' ? 1ull << 20
               : *end == 'G' || *end == 'g' ? 1ull << 30
                                            : 0;
        if (mult != 0)
            end++;
    }
    if (errno != 0 || end == arg || *end != '\0' || arg[0] == '-' || mult == 0 || v > max / mult ||
        v * mult > max)
        return cli_usage(cli, "%s %s: not a number up to %llu", opt, arg, max);
    *out = v * mult;
    return CLI_OK;
}

static void print_clients(struct npv_owner *o)
{
    struct npv_owner_client_stats st[80];
    size_t n = npv_owner_clients(o, st, 80);
    if (n > 80)
        n = 80;
    printf("%-6s %-7s %-6s %-5s %8s %8s %7s %7s %4s %7s %10s %8s %10s\n", "client", "pid", "domain",
           "state", "runs", "ok", "failed", "dropped", "peak", "refused", "mapped", "switches",
           "wait_ms");
    for (size_t i = 0; i < n; i++)
        printf("%-6llu %-7d %-6u %-5s %8llu %8llu %7llu %7llu %4llu %7llu %10llu %8llu %10.3f\n",
               (unsigned long long)st[i].id, (int)st[i].pid, st[i].domain_id,
               st[i].connected ? "here" : "left", (unsigned long long)st[i].runs,
               (unsigned long long)st[i].runs_ok, (unsigned long long)st[i].runs_failed,
               (unsigned long long)st[i].runs_dropped, (unsigned long long)st[i].runs_peak,
               (unsigned long long)st[i].maps_refused, (unsigned long long)st[i].mapped_bytes,
               (unsigned long long)st[i].switches, (double)st[i].wait_ns / 1e6);
    fflush(stdout);
}

int cmd_serve(struct npv_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"device", required_argument, NULL, 'd'},
        {"model", no_argument, NULL, 'm'},
        {"pci", required_argument, NULL, 'p'},
        {"device-socket", required_argument, NULL, 'D'},
        {"socket", required_argument, NULL, 's'},
        {"group", required_argument, NULL, 'g'},
        {"max-clients", required_argument, NULL, 'C'},
        {"max-jobs", required_argument, NULL, 'J'},
        {"max-bytes", required_argument, NULL, 'B'},
        {"batch", required_argument, NULL, 'b'},
        {"job-timeout", required_argument, NULL, 't'},
        {"stats-socket", required_argument, NULL, 'S'},
        {NULL, 0, NULL, 0},
    };
    const char *device = NULL, *pci = NULL, *dev_socket = NULL, *path = NULL, *group = NULL;
    const char *stats_path = NULL;
    bool model = false;
    unsigned long long v;
    struct npv_owner_opts oo = {.socket_gid = -1};
    int c;

    while ((c = cli_getopt(cli, argc, argv, ":h", opts)) != -1) {
        switch (c) {
        case 'h':
            help();
            return CLI_OK;
        case 'd':
            device = optarg;
            break;
        case 'm':
            model = true;
            break;
        case 'p':
            pci = optarg;
            break;
        case 'D':
            dev_socket = optarg;
            break;
        case 's':
            path = optarg;
            break;
        case 'g':
            group = optarg;
            break;
        case 'C':
            if (parse_uint(cli, "--max-clients", optarg, NPV_RKNPU_MAX_DOMAINS, &v) != CLI_OK)
                return CLI_USAGE;
            if (v == 0)
                return cli_usage(cli, "--max-clients must be 1-16");
            oo.max_clients = (unsigned)v;
            break;
        case 'J':
            if (parse_uint(cli, "--max-jobs", optarg, 3, &v) != CLI_OK)
                return CLI_USAGE;
            if (v == 0)
                return cli_usage(cli, "--max-jobs must be 1-3");
            oo.max_jobs = (unsigned)v;
            break;
        case 'B':
            if (parse_uint(cli, "--max-bytes", optarg, NPV_RKNPU_DOMAIN_SIZE, &v) != CLI_OK)
                return CLI_USAGE;
            if (v == 0)
                return cli_usage(cli, "--max-bytes must be above 0");
            oo.max_bytes = v;
            break;
        case 'b':
            if (parse_uint(cli, "--batch", optarg, 1024, &v) != CLI_OK)
                return CLI_USAGE;
            oo.batch = (unsigned)v;
            break;
        case 't':
            if (parse_uint(cli, "--job-timeout", optarg, 3600000, &v) != CLI_OK)
                return CLI_USAGE;
            if (v == 0)
                return cli_usage(cli, "--job-timeout must be above 0");
            oo.job_timeout_ns = v * 1000000ull;
            break;
        case 'S':
            stats_path = optarg;
            break;
        default:
            return CLI_USAGE;
        }
    }
    if (optind < argc && pci == NULL)
        pci = argv[optind++]; /* [ADDR]: the same as --pci ADDR */
    if (optind < argc)
        return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
    if (device == NULL)
        return cli_usage(cli, "--device is required");
    if (strcmp(device, "rknpu") != 0)
        return cli_usage(cli,
                         "only --device rknpu can be served (docs/sharing.md: the %s has "
                         "no per-client IOMMU domains)",
                         device);
    if (path == NULL)
        return cli_usage(cli, "--socket is required");
    if ((int)model + (pci != NULL) + (dev_socket != NULL) != 1)
        return cli_usage(cli, "give exactly one of --model, --pci ADDR (or ADDR), --device-socket");
    if (group != NULL) {
        struct group *gr = getgrnam(group);
        if (gr == NULL)
            return cli_usage(cli, "--group %s: no such group", group);
        oo.socket_gid = (long)gr->gr_gid;
    }
    oo.socket_path = path;
    const struct npv_device_entry *e = npv_device_find(device);
    if (e == NULL)
        return cli_usage(cli, "no device named '%s'", device);

    struct model_child child = {.pid = 0};
    struct device_where w = {.socket = dev_socket};
    char canon[NPV_PLATFORM_NAME_LEN];
    int ret = CLI_OK;
    if (model) {
        ret = model_start(cli, e, &child);
        if (ret != CLI_OK)
            return ret;
        w.socket = child.path;
    } else if (pci != NULL) {
        ret = device_where_hw(cli, e, pci, canon, &w);
        if (ret != CLI_OK)
            return ret;
    }

    struct npv_domain *dom = NULL;
    struct npv_dev *dev = NULL;
    struct npv_rknpu *npu = NULL;
    struct npv_owner *o = NULL;
    struct npv_stats_server *stats = NULL;
    ret = device_open(cli, e, &w, &dom, &dev);
    if (ret != CLI_OK)
        goto out;
    int r = npv_rknpu_open(dev, NULL, &npu);
    if (r < 0) {
        ret = cli_fail(cli, "rknpu", r);
        goto out;
    }
    r = npv_owner_new(cli->ctx, npu, &oo, &o);
    if (r == -EADDRINUSE) {
        cli_error(cli, "an owner is already serving on %s", path);
        ret = CLI_FAILED;
        goto out;
    }
    if (r < 0) {
        ret = cli_fail(cli, path, r);
        goto out;
    }
    if (stats_path != NULL) {
        r = npv_stats_serve(cli->ctx, stats_path, &stats);
        if (r < 0) {
            ret = cli_fail(cli, stats_path, r);
            goto out;
        }
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    serve_owner = o;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* On stdout, once the socket listens: a script may wait for this line. */
    printf("npuvfio serve: rknpu (%s) serving on %s\n",
           model ? "model" : (pci != NULL ? w.hw : dev_socket), path);
    fflush(stdout);
    r = npv_owner_run(o);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    serve_owner = NULL;
    print_clients(o);
    if (r < 0)
        ret = cli_fail(cli, "serve", r);
out:
    npv_stats_server_stop(stats);
    npv_owner_free(o);
    npv_rknpu_close(npu);
    if (dev != NULL)
        npv_dev_close(dev);
    npv_domain_put(dom);
    model_stop(&child);
    return ret;
}
