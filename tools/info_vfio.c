/* SPDX-License-Identifier: MIT */
/* What VFIO says about an opened function: regions, IRQs, IOVA ranges, coherency. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <npuvfio/dev.h>
#include <npuvfio/domain.h>

#include "host_use.h"
#include "info_vfio.h"

#ifndef NPV_CLI_VFIO_OPEN
#define NPV_CLI_VFIO_OPEN 0
#endif

#if NPV_CLI_VFIO_OPEN

static const char *const irq_names[] = {"INTx", "MSI", "MSI-X", "ERR", "REQ"};
static const char *const region_names[] = {"BAR0", "BAR1", "BAR2",   "BAR3", "BAR4",
                                           "BAR5", "ROM",  "CONFIG", "VGA"};

#define MAX_RANGES 32

static void region_flags(uint32_t flags, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s", flags & NPV_REGION_READ ? "r" : "-",
             flags & NPV_REGION_WRITE ? "w" : "-", flags & NPV_REGION_MMAP ? "m" : "-");
}

/* PCI regions and IRQs have VFIO's fixed names; a platform device's are its n-th resource and line.
 */
static void region_name(const struct npv_dev_info *di, uint32_t i, char *buf, size_t len)
{
    if (di->flags & NPV_DEV_FLAG_PLATFORM)
        snprintf(buf, len, "reg%u", i);
    else
        snprintf(buf, len, "%s", i < 9 ? region_names[i] : "dev");
}

static void irq_name(const struct npv_dev_info *di, uint32_t i, char *buf, size_t len)
{
    if (di->flags & NPV_DEV_FLAG_PLATFORM)
        snprintf(buf, len, "irq%u", i);
    else
        snprintf(buf, len, "%s", i < 5 ? irq_names[i] : "dev");
}

static void print_text(struct npv_dev *dev, struct npv_domain *dom, const struct npv_dev_info *di)
{
    printf("  vfio:\n");
    printf("    backend:        %s\n", npv_transport_name(npv_dev_transport(dev)));
    printf("    reset:          %s\n", di->flags & NPV_DEV_FLAG_RESET ? "yes" : "no");
    printf("    coherent DMA:   %s\n", npv_dev_coherent(dev) ? "yes" : "no");
    /*
     * Open clears Enable No Snoop when the IOMMU does not enforce coherency and
     * fails if it cannot; a non-coherent device left with it set therefore has
     * no PCI Express capability, and so no No Snoop attribute to clear.
     */
    const char *ns = npv_dev_no_snoop_cleared(dev) ? "yes"
                     : npv_dev_coherent(dev)       ? "no (not needed: coherent)"
                                                   : "no (no PCIe capability: nothing to clear)";
    if (di->flags & NPV_DEV_FLAG_PCI)
        printf("    no-snoop off:   %s\n", ns);
    printf("    regions:\n");
    for (uint32_t i = 0; i < di->num_regions; i++) {
        struct npv_region_info ri;
        if (npv_dev_region_info(dev, i, &ri) < 0 || ri.size == 0)
            continue;
        char fl[8], nm[16];
        region_flags(ri.flags, fl, sizeof(fl));
        region_name(di, i, nm, sizeof(nm));
        printf("      %-6s size 0x%-10" PRIx64 " %s", nm, ri.size, fl);
        for (uint32_t a = 0; a < ri.nr_mmap_areas && a < NPV_REGION_MAX_SPARSE; a++)
            printf(" mmap[0x%" PRIx64 "+0x%" PRIx64 "]", ri.mmap_areas[a].offset,
                   ri.mmap_areas[a].size);
        printf("%s\n", ri.msix_mappable ? " msix-mappable" : "");
    }
    printf("    irqs:\n");
    for (uint32_t i = 0; i < di->num_irqs; i++) {
        struct npv_irq_info ii;
        if (npv_dev_irq_info(dev, i, &ii) < 0 || ii.count == 0)
            continue;
        char nm[16];
        irq_name(di, i, nm, sizeof(nm));
        printf("      %-6s count %u%s%s%s\n", nm, ii.count,
               ii.flags & NPV_IRQ_INFO_EVENTFD ? " eventfd" : "",
               ii.flags & NPV_IRQ_INFO_MASKABLE ? " maskable" : "",
               ii.flags & NPV_IRQ_INFO_AUTOMASKED ? " automasked" : "");
    }
    struct npv_iova_range r[MAX_RANGES];
    int nr = npv_domain_iova_ranges(dom, r, MAX_RANGES);
    printf("    iova ranges:\n");
    for (int i = 0; i < nr && i < MAX_RANGES; i++)
        printf("      0x%016" PRIx64 "-0x%016" PRIx64 "\n", r[i].start, r[i].last);
}

static void print_json(struct json_out *j, struct npv_dev *dev, struct npv_domain *dom,
                       const struct npv_dev_info *di)
{
    json_begin_object(j);
    json_kv_bool(j, "opened", true);
    json_kv_string(j, "backend", npv_transport_name(npv_dev_transport(dev)));
    json_kv_bool(j, "reset", di->flags & NPV_DEV_FLAG_RESET);
    json_kv_bool(j, "coherent", npv_dev_coherent(dev));
    json_kv_bool(j, "no_snoop_cleared", npv_dev_no_snoop_cleared(dev));
    json_key(j, "regions");
    json_begin_array(j);
    for (uint32_t i = 0; i < di->num_regions; i++) {
        struct npv_region_info ri;
        if (npv_dev_region_info(dev, i, &ri) < 0 || ri.size == 0)
            continue;
        char nm[16];
        region_name(di, i, nm, sizeof(nm));
        json_begin_object(j);
        json_kv_uint(j, "index", i);
        json_kv_string(j, "name", nm);
        json_kv_uint(j, "size", ri.size);
        json_kv_bool(j, "read", ri.flags & NPV_REGION_READ);
        json_kv_bool(j, "write", ri.flags & NPV_REGION_WRITE);
        json_kv_bool(j, "mmap", ri.flags & NPV_REGION_MMAP);
        json_kv_bool(j, "msix_mappable", ri.msix_mappable);
        json_key(j, "mmap_areas");
        json_begin_array(j);
        for (uint32_t a = 0; a < ri.nr_mmap_areas && a < NPV_REGION_MAX_SPARSE; a++) {
            json_begin_object(j);
            json_kv_uint(j, "offset", ri.mmap_areas[a].offset);
            json_kv_uint(j, "size", ri.mmap_areas[a].size);
            json_end_object(j);
        }
        json_end_array(j);
        json_end_object(j);
    }
    json_end_array(j);
    json_key(j, "irqs");
    json_begin_array(j);
    for (uint32_t i = 0; i < di->num_irqs; i++) {
        struct npv_irq_info ii;
        if (npv_dev_irq_info(dev, i, &ii) < 0)
            continue;
        char nm[16];
        irq_name(di, i, nm, sizeof(nm));
        json_begin_object(j);
        json_kv_uint(j, "index", i);
        json_kv_string(j, "name", nm);
        json_kv_uint(j, "count", ii.count);
        json_kv_bool(j, "eventfd", ii.flags & NPV_IRQ_INFO_EVENTFD);
        json_kv_bool(j, "maskable", ii.flags & NPV_IRQ_INFO_MASKABLE);
        json_kv_bool(j, "automasked", ii.flags & NPV_IRQ_INFO_AUTOMASKED);
        json_end_object(j);
    }
    json_end_array(j);
    struct npv_iova_range r[MAX_RANGES];
    int nr = npv_domain_iova_ranges(dom, r, MAX_RANGES);
    json_key(j, "iova_ranges");
    json_begin_array(j);
    for (int i = 0; i < nr && i < MAX_RANGES; i++) {
        json_begin_object(j);
        json_kv_uint(j, "start", r[i].start);
        json_kv_uint(j, "last", r[i].last);
        json_end_object(j);
    }
    json_end_array(j);
    json_end_object(j);
}

int info_vfio(struct npv_cli *cli, const char *canon, bool platform, struct json_out *j,
              char *why_out, size_t len, struct info_device *id)
{
    struct npv_domain *dom = NULL;
    struct npv_dev *dev = NULL;
    struct npv_dev_info di;
    const char *stage = "domain";
    int ret = npv_domain_new(cli->ctx, NULL, &dom);
    if (ret == 0) {
        stage = "open";
        ret = platform ? npv_dev_open_platform(cli->ctx, canon, dom, NULL, &dev)
                       : npv_dev_open_pci(cli->ctx, canon, dom, NULL, &dev);
    }
    if (ret == 0) {
        stage = "device info";
        ret = npv_dev_info(dev, &di);
    }
    if (ret == 0) {
        if (id != NULL)
            info_device_peek(id, dev);
        if (j != NULL)
            print_json(j, dev, dom, &di);
        else
            print_text(dev, dom, &di);
    } else {
        /* The library's messages start with the address the CLI's own line already names. */
        const char *reason = cli->last_err[0] ? cli->last_err : npv_strerror(ret);
        size_t clen = strlen(canon);
        if (strncmp(reason, canon, clen) == 0 && strncmp(reason + clen, ": ", 2) == 0)
            reason += clen + 2;
        char why[sizeof(cli->last_err) + 64];
        snprintf(why, sizeof(why), "cannot %s: %s", stage, reason);
        snprintf(why_out, len, "%s", why);
        if (j != NULL) {
            json_begin_object(j);
            json_kv_bool(j, "opened", false);
            json_kv_string(j, "error", why);
            json_end_object(j);
        } else {
            printf("  vfio:           %s\n", why);
        }
        cli_clear_error(cli);
    }
    npv_dev_close(dev);
    npv_domain_put(dom);
    return ret;
}

#else

/* Built without the device layer (lib/vfio_pci_open.c absent at configure time). */
int info_vfio(struct npv_cli *cli, const char *canon, bool platform, struct json_out *j,
              char *why_out, size_t len, struct info_device *id)
{
    (void)cli;
    (void)canon;
    (void)platform;
    (void)id;
    const char *why = "this build has no kernel VFIO device layer";
    snprintf(why_out, len, "%s", why);
    if (j != NULL) {
        json_begin_object(j);
        json_kv_bool(j, "opened", false);
        json_kv_string(j, "error", why);
        json_end_object(j);
    } else {
        printf("  vfio:           %s\n", why);
    }
    return -ENOTSUP;
}

#endif

int info_vfio_finish(struct npv_cli *cli, const char *name, bool platform, bool bound,
                     enum info_open_mode mode, struct json_out *j, struct info_device *id)
{
    const char *driver = platform ? "vfio-platform" : "vfio-pci";
    int status = CLI_OK;
    char why[640];
    snprintf(why, sizeof(why), "not bound to %s; run npuvfio bind %s", driver, name);
    bool want_open = mode == INFO_OPEN_REQUIRED || (mode == INFO_OPEN_AUTO && bound);
    if (want_open && !bound) {
        /* Advise a bind only where one can work (cmd_bind.c refuses the same cases). */
        const char *bus = platform ? "platform" : "pci";
        char reason[512];
        struct host_use use;
        if (host_no_iommu_reason(cli, bus, name, reason, sizeof(reason)))
            snprintf(why, sizeof(why), "not bound to %s, and %s cannot take it here: %s", driver,
                     driver, reason);
        else if (host_use_check(cli, bus, name, &use) == 0 && use.n > 0)
            snprintf(why, sizeof(why), "not bound to %s; in use by the host (%s)", driver,
                     use.reasons[0]);
        char not_bound[64];
        snprintf(not_bound, sizeof(not_bound), "not bound to %s", driver);
        if (j != NULL) {
            json_key(j, "vfio");
            json_begin_object(j);
            json_kv_bool(j, "opened", false);
            json_kv_string(j, "error", not_bound);
            json_end_object(j);
        } else {
            printf("  vfio:           %s\n", not_bound);
        }
        status = CLI_FAILED;
    } else if (want_open) {
        if (j != NULL)
            json_key(j, "vfio");
        int ret = info_vfio(cli, name, platform, j, why, sizeof(why), id);
        if (ret < 0 && mode == INFO_OPEN_REQUIRED)
            status = CLI_FAILED;
    }
    if (id != NULL && j != NULL) {
        json_key(j, "device");
        info_device_json(j, id);
    } else if (id != NULL && id->peeked) {
        info_device_text(id);
    }
    if (j != NULL) {
        json_end_object(j);
        json_finish(j);
    }
    fflush(stdout);
    if (status != CLI_OK)
        cli_error(cli, "%s: VFIO: %s", name, why);
    return status;
}
