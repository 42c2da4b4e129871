/* SPDX-License-Identifier: MIT */
/* npuvfio hugepages: resize a hugepage pool and report what the kernel actually gave. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <npuvfio/hugepages.h>

#include "cli.h"
#include "json_out.h"

static void help(void)
{
    printf("Usage: npuvfio hugepages [N] [--size 2M|1G] [--node NODE] [--json]\n"
           "\n"
           "Set the hugepage pool of one page size to N pages and report what the kernel\n"
           "reserved (nr_hugepages) and how many are free (free_hugepages). The kernel may\n"
           "give fewer pages than asked (fragmented or short memory): the report says how\n"
           "many and the exit status is 1. Without N, only report the pool.\n"
           "\n"
           "  --size SIZE   page size: 2M (default) or 1G (also 2048kB, 1GB, ...)\n"
           "  --node NODE   the pool of NUMA node NODE\n"
           "                (SYSFS/devices/system/node/nodeNODE/hugepages/...);\n"
           "                default: the machine-wide pool (SYSFS/kernel/mm/hugepages/...)\n"
           "  --json        one JSON document\n");
}

static void size_name(uint64_t bytes, char *buf, size_t len)
{
    if (bytes % NPV_HUGEPAGE_1G == 0)
        snprintf(buf, len, "%" PRIu64 "G", bytes >> 30);
    else if (bytes % (1u << 20) == 0)
        snprintf(buf, len, "%" PRIu64 "M", bytes >> 20);
    else
        snprintf(buf, len, "%" PRIu64 "k", bytes >> 10);
}

static void report(struct npv_cli *cli, const struct npv_hugepages *hp, bool asked, uint64_t want)
{
    char size[32];
    size_name(hp->page_size, size, sizeof(size));
    if (cli->json) {
        struct json_out j;
        json_init(&j, stdout);
        json_begin_object(&j);
        json_kv_string(&j, "size", size);
        json_kv_uint(&j, "page_size", hp->page_size);
        json_key(&j, "node");
        if (hp->node < 0)
            json_null(&j);
        else
            json_int(&j, hp->node);
        json_key(&j, "requested");
        if (asked)
            json_uint(&j, want);
        else
            json_null(&j);
        json_kv_uint(&j, "reserved", hp->nr);
        json_kv_uint(&j, "free", hp->free);
        json_kv_bool(&j, "short", asked && hp->nr < want);
        json_end_object(&j);
        json_finish(&j);
        return;
    }
    char where[32] = "all nodes";
    if (hp->node >= 0)
        snprintf(where, sizeof(where), "node %d", hp->node);
    if (asked)
        printf("hugepages %s (%s): requested %" PRIu64 ", reserved %" PRIu64 ", free %" PRIu64 "\n",
               size, where, want, hp->nr, hp->free);
    else
        printf("hugepages %s (%s): reserved %" PRIu64 ", free %" PRIu64 "\n", size, where, hp->nr,
               hp->free);
}

int cmd_hugepages(struct npv_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"size", required_argument, NULL, 's'},
        {"node", required_argument, NULL, 'n'},
        {"json", no_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    uint64_t size = NPV_HUGEPAGE_2M;
    int node = -1;
    int c;
    char *end;
    while ((c = cli_getopt(cli, argc, argv, ":h", opts)) != -1) {
        switch (c) {
        case 'h':
            help();
            return CLI_OK;
        case 's':
            if (npv_hugepage_size_parse(optarg, &size) < 0)
                return cli_usage(cli, "--size %s: expected a size such as 2M or 1G", optarg);
            break;
        case 'n': {
            errno = 0;
            long v = strtol(optarg, &end, 10);
            if (errno != 0 || end == optarg || *end != '\0' || v < 0 || v > 65535)
                return cli_usage(cli, "--node %s: expected a NUMA node number", optarg);
            node = (int)v;
            break;
        }
        case 'j':
            cli->json = true;
            break;
        default:
            return CLI_USAGE;
        }
    }
    if (optind + 1 < argc)
        return cli_usage(cli, "unexpected argument '%s'", argv[optind + 1]);

    char sname[32];
    size_name(size, sname, sizeof(sname));
    struct npv_hugepages hp;
    if (optind == argc) {
        int ret = npv_hugepages_read(cli->ctx, size, node, &hp);
        if (ret == -ENOENT) {
            cli_error(cli, "no %s hugepage pool%s in %s", sname, node >= 0 ? " on that node" : "",
                      npv_ctx_sysfs_root(cli->ctx));
            return CLI_FAILED;
        }
        if (ret < 0)
            return cli_fail(cli, "hugepages", ret);
        report(cli, &hp, false, 0);
        return CLI_OK;
    }

    const char *arg = argv[optind];
    errno = 0;
    unsigned long long want = strtoull(arg, &end, 10);
    if (errno != 0 || end == arg || *end != '\0' || arg[0] == '-')
        return cli_usage(cli, "'%s': expected a number of pages", arg);
    int ret = npv_hugepages_reserve(cli->ctx, size, node, want, &hp);
    if (ret == -ENOMEM) {
        report(cli, &hp, true, want);
        cli_error(cli, "short: the kernel reserved %" PRIu64 " of %llu %s pages", hp.nr, want,
                  sname);
        return CLI_FAILED;
    }
    if (ret == -ENOENT) {
        cli_error(cli, "no %s hugepage pool%s in %s", sname, node >= 0 ? " on that node" : "",
                  npv_ctx_sysfs_root(cli->ctx));
        return CLI_FAILED;
    }
    if (ret < 0)
        return cli_fail(cli, "hugepages", ret);
    report(cli, &hp, true, want);
    return CLI_OK;
}
