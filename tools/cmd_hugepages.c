/* SPDX-License-Identifier: MIT */
/* npuvfio hugepages: resize a hugepage pool and report what the kernel actually gave. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <npuvfio/hugepages.h>

#include "cli.h"
#include "json_out.h"

/* A request may grow the pool by at most this share of MemAvailable without --force. */
#define MAX_SHARE_PERCENT 50

static void help(void)
{
    printf("Usage: npuvfio hugepages [N|AMOUNT] [--size 2M|1G] [--node NODE] [--dry-run]\n"
           "                         [--force] [--json]\n"
           "\n"
           "Set the hugepage pool of one page size to N pages (a plain number) or to\n"
           "AMOUNT of memory (a number with a unit: 512M, 2G, 1T; K, M, G, T are powers\n"
           "of 1024, an optional B or iB is accepted; it must be a whole number of\n"
           "pages) and report what the kernel reserved (nr_hugepages) and how many are\n"
           "free (free_hugepages). The kernel may give fewer pages than asked (fragmented\n"
           "or short memory): the report says how many and the exit status is 1. Without\n"
           "N, only report the pool.\n"
           "\n"
           "Hugepages are taken from the host's memory and kept from every other use:\n"
           "a pool larger than 50%% of MemAvailable plus what the hugepage pools hold now\n"
           "(Hugetlb; both from /proc/meminfo, see --proc-root) is refused without\n"
           "--force, and so is any request when MemAvailable cannot be read.\n"
           "\n"
           "  --dry-run     print the change and the memory check, change nothing\n"
           "  --force       reserve even beyond that share\n"
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

/*
 * The page sizes this machine has pools of ("2M, 1G"), from the names of
 * SYSFS/kernel/mm/hugepages/hugepages-NkB (Documentation/admin-guide/mm/hugetlbpage.rst).
 */
static void pool_sizes(struct npv_cli *cli, char *buf, size_t len)
{
    char dir[4200];
    snprintf(dir, sizeof(dir), "%s/kernel/mm/hugepages", npv_ctx_sysfs_root(cli->ctx));
    buf[0] = '\0';
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        unsigned long long kb;
        char unit[4];
        if (sscanf(e->d_name, "hugepages-%llu%3s", &kb, unit) != 2 || strcmp(unit, "kB") != 0)
            continue;
        char name[32];
        size_name((uint64_t)kb << 10, name, sizeof(name));
        int w = snprintf(buf + n, len - n, "%s%s", n ? ", " : "", name);
        if (w < 0 || (size_t)w >= len - n)
            break;
        n += (size_t)w;
    }
    closedir(d);
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

/*
 * A plain number is a page count (as nr_hugepages takes it); a number with a
 * unit is an amount of memory, which must be a whole number of pages.
 * Returns 0, or -EINVAL malformed, -ERANGE not whole pages or too large.
 */
static int parse_amount(const char *arg, uint64_t page, uint64_t *pages)
{
    char *end;
    if (arg[0] < '0' || arg[0] > '9')
        return -EINVAL;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    if (errno != 0)
        return -EINVAL;
    if (*end == '\0') {
        *pages = v;
        return 0;
    }
    unsigned shift;
    switch (*end | 0x20) {
    case 'k':
        shift = 10;
        break;
    case 'm':
        shift = 20;
        break;
    case 'g':
        shift = 30;
        break;
    case 't':
        shift = 40;
        break;
    default:
        return -EINVAL;
    }
    end++;
    if ((end[0] | 0x20) == 'i' && (end[1] | 0x20) == 'b')
        end += 2;
    else if ((end[0] | 0x20) == 'b')
        end++;
    if (*end != '\0')
        return -EINVAL;
    if (v > (UINT64_MAX >> shift))
        return -ERANGE;
    uint64_t bytes = (uint64_t)v << shift;
    if (bytes % page != 0)
        return -ERANGE;
    *pages = bytes / page;
    return 0;
}

/*
 * The memory hugepages could have: MemAvailable plus Hugetlb (what every
 * pool holds now, all sizes), from PROC/meminfo; -errno when unreadable.
 * Counting the pools in keeps the check the same when a request is repeated
 * (MemAvailable alone shrinks by what the pool already took).
 */
static int hugepage_budget(struct npv_cli *cli, uint64_t *avail, uint64_t *pools)
{
    char p[4096], line[256];
    snprintf(p, sizeof(p), "%s/meminfo", cli->proc_root);
    FILE *f = fopen(p, "re");
    if (f == NULL)
        return -errno;
    bool have_avail = false;
    unsigned long long kb;
    *pools = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1 && kb <= (UINT64_MAX >> 11)) {
            *avail = (uint64_t)kb << 10;
            have_avail = true;
        } else if (sscanf(line, "Hugetlb: %llu kB", &kb) == 1 && kb <= (UINT64_MAX >> 11)) {
            *pools = (uint64_t)kb << 10;
        }
    }
    fclose(f);
    return have_avail ? 0 : -ENOENT;
}

static double mib(uint64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

/*
 * The pool's new size against the memory the host has for it. Prints why
 * and returns CLI_FAILED when refused; prints the check on dry runs.
 */
static int check_memory(struct npv_cli *cli, uint64_t page, uint64_t want, bool force, bool dry_run,
                        const char *sname)
{
    if (want == 0)
        return CLI_OK;
    bool overflow = want > UINT64_MAX / page;
    uint64_t bytes = overflow ? UINT64_MAX : want * page;
    uint64_t avail = 0, pools = 0;
    int ret = hugepage_budget(cli, &avail, &pools);
    if (ret < 0) {
        if (force)
            return CLI_OK;
        cli_error(cli,
                  "cannot read MemAvailable from %s/meminfo (%s) to check %" PRIu64
                  " %s pages against free memory; --force to reserve without the check",
                  cli->proc_root, npv_strerror(ret), want, sname);
        return CLI_FAILED;
    }
    uint64_t budget = avail + pools;
    uint64_t limit = budget / 100 * MAX_SHARE_PERCENT + budget % 100 * MAX_SHARE_PERCENT / 100;
    if (dry_run)
        printf("  memory: %" PRIu64 " %s pages take %.0f MiB; MemAvailable %.0f MiB + "
               "hugepage pools %.0f MiB, allowed without --force %.0f MiB (%d%%)\n",
               want, sname, mib(bytes), mib(avail), mib(pools), mib(limit), MAX_SHARE_PERCENT);
    if (overflow || bytes > limit) {
        if (force)
            return CLI_OK;
        cli_error(cli,
                  "%" PRIu64 " %s pages (%.0f MiB) is more than %d%% of MemAvailable plus the "
                  "hugepage pools (%.0f of %.0f MiB): the host would be left short; --force to "
                  "reserve anyway",
                  want, sname, mib(bytes), MAX_SHARE_PERCENT, mib(limit), mib(avail + pools));
        return CLI_FAILED;
    }
    return CLI_OK;
}

int cmd_hugepages(struct npv_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"size", required_argument, NULL, 's'},
        {"node", required_argument, NULL, 'n'},
        {"json", no_argument, NULL, 'j'},
        {"dry-run", no_argument, NULL, 'd'},
        {"force", no_argument, NULL, 'f'},
        {NULL, 0, NULL, 0},
    };
    bool dry_run = false, force = false;
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
        case 'd':
            dry_run = true;
            break;
        case 'f':
            force = true;
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
    /*
     * A page size the machine has no pool of is a command-line mistake here
     * (exit 2); a node without one is a fact about that node (exit 1, below). Only the directory is
     * looked at: reading nr_hugepages before a write is a dry run's business (a fake tree answers
     * it as the kernel would).
     */
    char pool[4200];
    struct stat st;
    snprintf(pool, sizeof(pool), "%s/kernel/mm/hugepages/hugepages-%" PRIu64 "kB",
             npv_ctx_sysfs_root(cli->ctx), size >> 10);
    if (node < 0 && stat(pool, &st) != 0 && errno == ENOENT) {
        char sizes[128];
        pool_sizes(cli, sizes, sizeof(sizes));
        return cli_usage(cli, "--size %s: this machine has no %s hugepages (%s%s)", sname, sname,
                         sizes[0] != '\0' ? "its sizes: " : "no hugepage pool at all", sizes);
    }
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
    uint64_t want;
    int pret = parse_amount(arg, size, &want);
    if (pret == -ERANGE)
        return cli_usage(cli, "'%s': not a whole number of %s pages", arg, sname);
    if (pret < 0)
        return cli_usage(cli, "'%s': expected a number of pages or an amount such as 2G", arg);
    int ret;
    if (dry_run) {
        /* Only a dry run reads the pool first: a real run's write is its own answer. */
        struct npv_hugepages now;
        ret = npv_hugepages_read(cli->ctx, size, node, &now);
        if (ret == -ENOENT) {
            cli_error(cli, "no %s hugepage pool%s in %s", sname, node >= 0 ? " on that node" : "",
                      npv_ctx_sysfs_root(cli->ctx));
            return CLI_FAILED;
        }
        if (ret < 0)
            return cli_fail(cli, "hugepages", ret);
        char where[32] = "all nodes";
        if (node >= 0)
            snprintf(where, sizeof(where), "node %d", node);
        printf("hugepages %s (%s): would set the pool from %" PRIu64 " to %" PRIu64
               " pages; nothing changed (--dry-run)\n",
               sname, where, now.nr, want);
    }
    fflush(stdout); /* the plan before a refusal, also when stdout is a pipe */
    ret = check_memory(cli, size, want, force, dry_run, sname);
    if (ret != CLI_OK || dry_run)
        return ret;
    ret = npv_hugepages_reserve(cli->ctx, size, node, want, &hp);
    if (ret == -ENOMEM) {
        report(cli, &hp, true, want);
        cli_error(cli, "short: the kernel reserved %" PRIu64 " of %" PRIu64 " %s pages", hp.nr,
                  want, sname);
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
