/* SPDX-License-Identifier: MIT */
/* Hugepage pools through sysfs: nr_hugepages to resize, free_hugepages to report. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <npuvfio/hugepages.h>

#include "pci_internal.h"

int npv_hugepage_size_parse(const char *text, uint64_t *bytes)
{
    if (text == NULL || bytes == NULL || !isdigit((unsigned char)text[0]))
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || v == 0)
        return -EINVAL;
    unsigned shift;
    if (strcasecmp(end, "k") == 0 || strcasecmp(end, "kb") == 0)
        shift = 10;
    else if (strcasecmp(end, "m") == 0 || strcasecmp(end, "mb") == 0)
        shift = 20;
    else if (strcasecmp(end, "g") == 0 || strcasecmp(end, "gb") == 0)
        shift = 30;
    else
        return -EINVAL;
    /* sysfs names pools in kB; a size that is not a power of two is no hugepage size. */
    if (v > (UINT64_MAX >> shift) || (v & (v - 1)) != 0)
        return -EINVAL;
    *bytes = (uint64_t)v << shift;
    return 0;
}

static int pool_path(struct npv_ctx *ctx, uint64_t page_size, int node, const char *attr, char *buf,
                     size_t len)
{
    if (page_size < 4096 || (page_size & (page_size - 1)) != 0)
        return -EINVAL;
    uint64_t kb = page_size >> 10;
    if (node < 0)
        return npv_sysfs_path(ctx, buf, len, "kernel/mm/hugepages/hugepages-%" PRIu64 "kB/%s", kb,
                              attr);
    return npv_sysfs_path(ctx, buf, len,
                          "devices/system/node/node%d/hugepages/hugepages-%" PRIu64 "kB/%s", node,
                          kb, attr);
}

static int read_attr(struct npv_ctx *ctx, uint64_t page_size, int node, const char *attr,
                     uint64_t *out)
{
    char path[NPV_SYSFS_PATH_MAX];
    int ret = pool_path(ctx, page_size, node, attr, path, sizeof(path));
    if (ret < 0)
        return ret;
    ret = npv_sysfs_read_u64(path, out);
    if (ret < 0)
        npv_debug(ctx, "%s: %s", path, npv_strerror(ret));
    return ret;
}

int npv_hugepages_read(struct npv_ctx *ctx, uint64_t page_size, int node, struct npv_hugepages *out)
{
    if (ctx == NULL || out == NULL)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    out->page_size = page_size;
    out->node = node < 0 ? -1 : node;
    int ret = read_attr(ctx, page_size, node, "nr_hugepages", &out->nr);
    if (ret < 0)
        return ret;
    return read_attr(ctx, page_size, node, "free_hugepages", &out->free);
}

int npv_hugepages_reserve(struct npv_ctx *ctx, uint64_t page_size, int node, uint64_t count,
                          struct npv_hugepages *out)
{
    if (ctx == NULL || out == NULL)
        return -EINVAL;
    char path[NPV_SYSFS_PATH_MAX], text[32];
    int ret = pool_path(ctx, page_size, node, "nr_hugepages", path, sizeof(path));
    if (ret < 0)
        return ret;
    snprintf(text, sizeof(text), "%" PRIu64 "\n", count);
    /*
     * The kernel allocates inside this write and keeps what it got; the pool
     * read back afterwards is the truth, not the number written.
     */
    ret = npv_sysfs_write_str(path, text);
    if (ret < 0) {
        npv_err(ctx, "%s: cannot write %" PRIu64 ": %s", path, count, npv_strerror(ret));
        return ret;
    }
    ret = npv_hugepages_read(ctx, page_size, node, out);
    if (ret < 0) {
        npv_err(ctx, "%s: cannot read the pool back: %s", path, npv_strerror(ret));
        return ret;
    }
    if (out->nr < count) {
        npv_info(ctx, "hugepages: asked for %" PRIu64 ", the kernel gave %" PRIu64, count, out->nr);
        return -ENOMEM;
    }
    return 0;
}
