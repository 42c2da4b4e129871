/* SPDX-License-Identifier: MIT */
/* Platform devices in list, info, bind and unbind. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/pci.h>

#include "info_vfio.h"
#include "platform_cli.h"

#define MAX_BLOCKERS 64

int cli_resolve_device(struct npv_cli *cli, const char *text, char *canon, enum cli_dev_kind *kind)
{
    struct npv_platform_dev pd;
    if (npv_platform_name_valid(text) && npv_platform_dev_read(cli->ctx, text, &pd) == 0) {
        memcpy(canon, pd.name, sizeof(pd.name));
        *kind = CLI_DEV_PLATFORM;
        return CLI_OK;
    }
    /*
     * Platform device names on device-tree machines have no colon
     * ("fdab0000.npu"); text with one was meant as a PCI address and hears
     * about that.
     */
    struct npv_pci_addr a;
    if (strchr(text, ':') == NULL && npv_pci_addr_parse(text, &a) < 0) {
        /* A well-formed platform name may just be absent (1); anything else is a typo (2). */
        bool name_ok = npv_platform_name_valid(text);
        cli_error(cli,
                  "%s: no such device: not a PCI address (DDDD:BB:DD.F) and not a platform "
                  "device in %s/bus/platform/devices",
                  text, npv_ctx_sysfs_root(cli->ctx));
        return name_ok ? CLI_FAILED : CLI_USAGE;
    }
    *kind = CLI_DEV_PCI;
    return cli_pci_function(cli, text, canon);
}

/* VFIO can take only a device in an IOMMU group; a known NPU is shown even without one. */
static bool listed(const struct npv_platform_dev *d)
{
    return d->iommu_group >= 0 || d->vfio_bound || npv_platform_known_npu(d) != NULL;
}

int platform_listing_read(struct npv_cli *cli, struct platform_listing *l)
{
    struct npv_platform_dev *all;
    size_t n;
    l->devs = NULL;
    l->n = 0;
    int ret = npv_platform_list(cli->ctx, &all, &n);
    if (ret < 0)
        return ret;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (listed(&all[i]))
            all[kept++] = all[i];
    l->devs = all;
    l->n = kept;
    return 0;
}

void platform_listing_text(const struct platform_listing *l, bool npu_only)
{
    size_t shown = 0;
    for (size_t i = 0; i < l->n; i++) {
        const struct npv_platform_dev *d = &l->devs[i];
        const struct npv_platform_npu *npu = npv_platform_known_npu(d);
        if (npu_only && npu == NULL)
            continue;
        if (shown++ == 0)
            printf("\nplatform devices:\n%-24s %-16s %-5s %-4s %-32s %s\n", "NAME", "DRIVER",
                   "GROUP", "VFIO", "NPU", "COMPATIBLE");
        char group[16] = "-", mark[96] = "";
        if (d->iommu_group >= 0)
            snprintf(group, sizeof(group), "%d", d->iommu_group);
        if (npu != NULL)
            snprintf(mark, sizeof(mark), "%s (%s)", npu->family, npu->model);
        printf("%-24s %-16s %-5s %-4s %-32s %s\n", d->name, d->driver[0] ? d->driver : "-", group,
               d->vfio_bound ? "yes" : "no", mark, d->compatible[0] ? d->compatible : "-");
    }
}

static void json_compatible(struct json_out *j, const char *joined)
{
    json_key(j, "compatible");
    json_begin_array(j);
    char one[NPV_PLATFORM_COMPAT_LEN];
    for (const char *p = joined; *p != '\0';) {
        size_t len = strcspn(p, " ");
        snprintf(one, sizeof(one), "%.*s", (int)len, p);
        json_string(j, one);
        p += len;
        while (*p == ' ')
            p++;
    }
    json_end_array(j);
}

static void json_npu(struct json_out *j, const struct npv_platform_dev *d)
{
    const struct npv_platform_npu *npu = npv_platform_known_npu(d);
    json_kv_string(j, "npu", npu ? npu->family : NULL);
    json_kv_string(j, "npu_model", npu ? npu->model : NULL);
}

void platform_listing_json(struct json_out *j, const struct platform_listing *l, bool npu_only)
{
    json_key(j, "platform_devices");
    json_begin_array(j);
    for (size_t i = 0; i < l->n; i++) {
        const struct npv_platform_dev *d = &l->devs[i];
        if (npu_only && npv_platform_known_npu(d) == NULL)
            continue;
        json_begin_object(j);
        json_kv_string(j, "name", d->name);
        json_kv_string(j, "driver", d->driver[0] ? d->driver : NULL);
        json_key(j, "iommu_group");
        if (d->iommu_group < 0)
            json_null(j);
        else
            json_int(j, d->iommu_group);
        json_kv_bool(j, "vfio_bound", d->vfio_bound);
        json_npu(j, d);
        json_compatible(j, d->compatible);
        json_end_object(j);
    }
    json_end_array(j);
}

/* ---- info ---- */

struct group_view {
    struct npv_group_member blockers[MAX_BLOCKERS];
    size_t nblockers;
    int viable; /* 1, 0, or negative errno */
};

static void print_text_head(const struct npv_platform_dev *d, const struct group_view *g)
{
    const struct npv_platform_npu *npu = npv_platform_known_npu(d);
    printf("%s  platform device%s%s%s%s\n", d->name, npu ? "  npu: " : "", npu ? npu->family : "",
           npu ? ", " : "", npu ? npu->model : "");
    printf("  compatible:     %s\n",
           d->compatible[0] ? d->compatible : "none (no device-tree node)");
    printf("  driver:         %s\n", d->driver[0] ? d->driver : "none");
    if (d->iommu_group < 0) {
        printf("  iommu group:    none (no IOMMU for it: vfio-platform cannot take it)\n");
        return;
    }
    printf("  iommu group:    %d\n", d->iommu_group);
    if (g->viable == 1) {
        printf("  viable:         yes\n");
    } else if (g->viable == 0) {
        printf("  viable:         no:");
        for (size_t i = 0; i < g->nblockers && i < MAX_BLOCKERS; i++)
            printf("%s %s (%s)", i ? "," : "", g->blockers[i].name, g->blockers[i].driver);
        printf(" on a host driver\n");
    } else {
        printf("  viable:         unknown (%s)\n", npv_strerror(g->viable));
    }
}

static void print_json_head(struct json_out *j, const struct npv_platform_dev *d,
                            const struct group_view *g)
{
    json_kv_string(j, "name", d->name);
    json_kv_string(j, "bus", "platform");
    json_kv_string(j, "driver", d->driver[0] ? d->driver : NULL);
    json_kv_bool(j, "vfio_bound", d->vfio_bound);
    json_npu(j, d);
    json_compatible(j, d->compatible);
    json_key(j, "iommu_group");
    if (d->iommu_group < 0) {
        json_null(j);
        return;
    }
    json_begin_object(j);
    json_kv_int(j, "id", d->iommu_group);
    json_key(j, "viable");
    if (g->viable < 0)
        json_null(j);
    else
        json_bool(j, g->viable == 1);
    json_key(j, "blockers");
    json_begin_array(j);
    for (size_t i = 0; i < g->nblockers && i < MAX_BLOCKERS; i++) {
        json_begin_object(j);
        json_kv_string(j, "name", g->blockers[i].name);
        json_kv_string(j, "driver", g->blockers[i].driver);
        json_end_object(j);
    }
    json_end_array(j);
    json_end_object(j);
}

int platform_info(struct npv_cli *cli, const char *name, enum info_open_mode mode)
{
    struct npv_platform_dev d;
    int ret = npv_platform_dev_read(cli->ctx, name, &d);
    if (ret < 0)
        return cli_fail(cli, name, ret);
    struct group_view g = {.viable = -ENOENT};
    if (d.iommu_group >= 0) {
        g.viable =
            npv_platform_group_viable(cli->ctx, name, g.blockers, MAX_BLOCKERS, &g.nblockers);
        cli_clear_error(cli);
    }
    struct json_out j;
    if (cli->json) {
        json_init(&j, stdout);
        json_begin_object(&j);
        print_json_head(&j, &d, &g);
    } else {
        print_text_head(&d, &g);
    }
    struct info_device id;
    info_device_init_platform(&id, &d);
    return info_vfio_finish(cli, name, true, d.vfio_bound, mode, cli->json ? &j : NULL, &id);
}
