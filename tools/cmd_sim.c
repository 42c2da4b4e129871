/* SPDX-License-Identifier: MIT */
/* npuvfio sim: run a device model as a vfio-user server in the foreground. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/vfio_user_server.h>

#include "cli.h"
#include "registry.h"

/* The signal handler's only way to reach the running server. */
static struct npv_vus *volatile sim_server;

static void on_signal(int sig)
{
    (void)sig;
    struct npv_vus *srv = sim_server;
    if (srv != NULL)
        npv_vus_stop(srv); /* an eventfd write: async-signal-safe */
}

static void help(void)
{
    printf("Usage: npuvfio sim --device NAME --socket PATH [--once] [--package FILE]...\n"
           "\n"
           "Run a device model as a vfio-user server on the UNIX socket PATH (created\n"
           "mode 0600) until SIGTERM or SIGINT. A server still listening on PATH makes\n"
           "it refuse to start; a stale socket is replaced. On exit the socket is removed\n"
           "if it is still ours. Any vfio-user client can drive it, e.g.\n"
           "npv_dev_open_vfio_user(), one client at a time: a second one is answered at\n"
           "once with EBUSY (\"busy: one client at a time\"). `npuvfio --log info sim ...`\n"
           "logs each connect, disconnect and refusal.\n"
           "\n"
           "  --device NAME   the model to run (see below)\n"
           "  --socket PATH   where to listen\n"
           "  --once          exit when the first client disconnects\n"
           "  --package FILE  edgetpu: a compiled model (*_edgetpu.tflite) the model checks\n"
           "                  runs against (every fetched chunk bit by bit outside its\n"
           "                  linked fields, every linked address through the page table,\n"
           "                  parameters cached per token); outputs get the data-path\n"
           "                  pattern, never the network's answer. Repeatable (up to 16)\n"
           "\n"
           "Models (name, the vendor:device their config space presents):\n");
    for (size_t i = 0; npv_device_at(i) != NULL; i++) {
        const struct npv_device_entry *m = npv_device_at(i);
        if (m->model_create != NULL)
            printf("  %-10s %04x:%04x  %s\n", m->name, m->model_id.vendor, m->model_id.device,
                   m->summary);
    }
}

int cmd_sim(struct npv_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},          {"device", required_argument, NULL, 'd'},
        {"socket", required_argument, NULL, 's'},  {"once", no_argument, NULL, 'o'},
        {"package", required_argument, NULL, 'k'}, {NULL, 0, NULL, 0},
    };
    const char *device = NULL, *path = NULL;
    bool once = false;
    char packages[8192] = "";
    int c;

    while ((c = cli_getopt(cli, argc, argv, ":h", opts)) != -1) {
        switch (c) {
        case 'h':
            help();
            return CLI_OK;
        case 'd':
            device = optarg;
            break;
        case 's':
            path = optarg;
            break;
        case 'o':
            once = true;
            break;
        case 'k':
            if (strchr(optarg, ':') != NULL)
                return cli_usage(cli, "--package %s: a path with ':' cannot be given", optarg);
            if (strlen(packages) + strlen(optarg) + 2 > sizeof(packages))
                return cli_usage(cli, "--package: too many or too long paths");
            if (packages[0] != '\0')
                strcat(packages, ":");
            strcat(packages, optarg);
            break;
        default:
            return CLI_USAGE;
        }
    }
    if (optind < argc)
        return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
    if (device == NULL)
        return cli_usage(cli, "--device is required");
    if (path == NULL)
        return cli_usage(cli, "--socket is required");
    const struct npv_device_entry *model = npv_device_find(device);
    if (model == NULL || model->model_create == NULL)
        return cli_usage(cli, "no device model named '%s'", device);

    if (packages[0] != '\0' && strcmp(model->name, "edgetpu") != 0)
        return cli_usage(cli, "--package is for --device edgetpu");
    /* The Edge TPU model reads its packages at creation (devices/edgetpu/model_pkg.h). */
    if (packages[0] != '\0' && setenv("NPV_EDGETPU_MODEL_PACKAGES", packages, 1) != 0)
        return cli_fail(cli, "setenv", -errno);

    void *m;
    struct npv_vus *srv;
    int r = model->model_create(cli->ctx, &m, &srv);
    if (r < 0)
        return cli_fail(cli, device, r);
    r = npv_vus_listen(srv, path);
    if (r < 0) {
        model->model_destroy(m);
        if (r == -EADDRINUSE) {
            cli_error(cli, "another server is listening on %s", path);
            return CLI_FAILED;
        }
        return cli_fail(cli, path, r);
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sim_server = srv;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    fprintf(stderr, "npuvfio sim: %s listening on %s\n", model->name, path);
    r = npv_vus_run(srv, once);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    sim_server = NULL;
    model->model_destroy(m);
    if (r < 0)
        return cli_fail(cli, path, r);
    return CLI_OK;
}
