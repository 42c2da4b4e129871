/* SPDX-License-Identifier: MIT */
/*
 * Which device an opened function is, and its identity and version registers
 * read by a peek: one read per named register through the region, nothing
 * written. A driver's open would say the same for some devices, but it resets
 * cores on the way (rknpu, edgetpu): a runner's record must not disturb the
 * device it describes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <npuvfio/rknpu.h>

#include "aicore/regs.h"
#include "info_device.h"
#include "registry.h"
#include "rknpu/regs.h"
#include "testdev/regs.h"

/* QEMU's edu (hw/misc/edu.c): PCI 1234:11e8. */
#define EDU_VENDOR 0x1234u
#define EDU_DEVICE 0x11e8u
/* docs/specs/edu.rst: "0x00 (RO) : identification (0xRRrr00ed)", RR major, rr minor. */
#define EDU_REG_IDENT 0x00u

static void add_reg(struct info_device *id, const char *name, uint32_t region, uint64_t off,
                    uint32_t width)
{
    if (id->nregs >= INFO_DEVICE_MAX_REGS)
        return;
    struct info_reg *r = &id->regs[id->nregs++];
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->region = region;
    r->offset = off;
    r->width = width;
}

static void init_common(struct info_device *id)
{
    memset(id, 0, sizeof(*id));
    id->revision = -1;
}

void info_device_init_pci(struct info_device *id, uint16_t vendor, uint16_t device)
{
    init_common(id);
    if (vendor == EDU_VENDOR && device == EDU_DEVICE) {
        id->kind = "edu";
        id->source = "QEMU docs/specs/edu.rst, hw/misc/edu.c edu_mmio_read: BAR0 0x00 "
                     "identification 0xRRrr00ed (RR major, rr minor)";
        add_reg(id, "identification", 0, EDU_REG_IDENT, 4);
        return;
    }
    const struct npv_device_entry *e = npv_device_by_pci_id(vendor, device);
    if (e == NULL)
        e = npv_device_by_model_id(vendor, device);
    if (e == NULL)
        return;
    id->kind = e->name;
    if (strcmp(e->name, "testdev") == 0) {
        id->source = "devices/testdev/regs.h (this project's device): BAR0 TESTDEV_REG_ID";
        id->note = "the testdev has no version register: its PCI revision ID stands for one";
        add_reg(id, "ID", 0, TESTDEV_REG_ID, 4);
    } else if (strcmp(e->name, "edgetpu") == 0) {
        id->source = "gasket apex_driver.c, libedgetpu beagle_csr_offsets.h (no version register)";
        id->note = "the Apex names no version or revision register in its public sources (the "
                   "eFuse unique id at BAR2 0x1a2dc is a per-chip serial, not read): the PCI "
                   "revision ID stands for the version";
    } else if (strcmp(e->name, "rknpu") == 0) {
        /* The PCI-shaped stand-in: three 64 KiB core windows back to back in BAR0 (peek). */
        id->source = "rocket rocket_registers.h VERSION/VERSION_NUM, rocket_core.c "
                     "rocket_core_init; vendor rknpu_drv.c rknpu_get_hw_version; read on the "
                     "PCI stand-in model";
    } else if (strcmp(e->name, "aicore") == 0) {
        if (vendor == AICORE_PCI_VENDOR && device == AICORE_PCI_DEVICE) {
            id->source = "devices/aicore/regs.h: the stand-in model's BAR0 AICORE_REG_ID and "
                         "AICORE_REG_VERSION (model choice), not an Ascend part's registers";
            add_reg(id, "ID", AICORE_BAR_GLOBAL, AICORE_REG_ID, 8);
            add_reg(id, "VERSION", AICORE_BAR_GLOBAL, AICORE_REG_VERSION, 8);
        } else {
            id->source = "none public";
            id->note = "an Ascend part's version is its firmware's, asked through the vendor "
                       "driver's mailbox; no register this project knows: the PCI revision ID "
                       "only";
        }
    }
}

void info_device_init_platform(struct info_device *id, const struct npv_platform_dev *d)
{
    init_common(id);
    const struct npv_platform_npu *npu = npv_platform_known_npu(d);
    if (npu == NULL || strcmp(npu->family, "rknpu") != 0)
        return;
    id->kind = "rknpu";
    id->source = "rocket rocket_registers.h VERSION/VERSION_NUM, rocket_core.c rocket_core_init; "
                 "vendor rknpu_drv.c rknpu_get_hw_version";
}

/*
 * The RKNPU's cores as the driver finds them (devices/rknpu/driver.c
 * find_cores): one region holding the three 64 KiB windows (the model's BAR0)
 * or one region per core (the device tree's three reg windows).
 */
static void rknpu_regs(struct info_device *id, struct npv_dev *dev)
{
    struct npv_dev_info info;
    struct npv_region_info ri;
    if (npv_dev_info(dev, &info) < 0 || info.num_regions == 0 ||
        npv_dev_region_info(dev, 0, &ri) < 0)
        return;
    bool one = ri.size >= (uint64_t)NPV_RKNPU_NUM_CORES * RKNPU_CORE_WINDOW_SIZE;
    for (uint32_t c = 0; c < NPV_RKNPU_NUM_CORES; c++) {
        uint32_t region = one ? 0 : c;
        uint64_t base = one ? (uint64_t)RKNPU_CORE_BASE(c) : 0;
        if (!one && (c >= info.num_regions || npv_dev_region_info(dev, c, &ri) < 0 ||
                     ri.size < RKNPU_CORE_WINDOW_SIZE))
            break;
        char name[32];
        snprintf(name, sizeof(name), "core%u.PC_VERSION", c);
        add_reg(id, name, region, base + RKNPU_PC_VERSION, 4);
        snprintf(name, sizeof(name), "core%u.PC_VERSION_NUM", c);
        add_reg(id, name, region, base + RKNPU_PC_VERSION_NUM, 4);
    }
}

static void compose_version(struct info_device *id)
{
    if (id->kind == NULL || id->nregs == 0 || id->regs[0].err < 0)
        return;
    uint64_t v = id->regs[0].value;
    if (strcmp(id->kind, "edu") == 0) {
        snprintf(id->version, sizeof(id->version), "%u.%u", (unsigned)(v >> 24) & 0xffu,
                 (unsigned)(v >> 16) & 0xffu);
    } else if (strcmp(id->kind, "aicore") == 0 && id->nregs >= 2 && id->regs[1].err == 0) {
        /* AICORE_REG_VERSION: major << 16 | minor. */
        v = id->regs[1].value;
        snprintf(id->version, sizeof(id->version), "%u.%u", (unsigned)(v >> 16) & 0xffffu,
                 (unsigned)v & 0xffffu);
    } else if (strcmp(id->kind, "rknpu") == 0) {
        /* Both drivers' version: PC_VERSION + (PC_VERSION_NUM & 0xffff), per core. */
        size_t n = 0;
        for (size_t i = 0; i + 1 < id->nregs && n < sizeof(id->version); i += 2) {
            if (id->regs[i].err < 0 || id->regs[i + 1].err < 0)
                break;
            uint32_t ver =
                (uint32_t)id->regs[i].value + ((uint32_t)id->regs[i + 1].value & 0xffffu);
            n += (size_t)snprintf(id->version + n, sizeof(id->version) - n, "%s0x%08x",
                                  i ? " " : "", ver);
        }
    }
}

void info_device_peek(struct info_device *id, struct npv_dev *dev)
{
    struct npv_dev_info info;
    if (npv_dev_info(dev, &info) == 0 && (info.flags & NPV_DEV_FLAG_PCI)) {
        uint8_t rev;
        if (npv_dev_config_read(dev, 0x08, &rev, 1) == 0) /* PCI header: Revision ID */
            id->revision = rev;
    }
    if (id->kind != NULL && strcmp(id->kind, "rknpu") == 0)
        rknpu_regs(id, dev);
    for (size_t i = 0; i < id->nregs; i++) {
        struct info_reg *r = &id->regs[i];
        if (r->width == 8) {
            uint64_t v;
            r->err = npv_dev_region_read(dev, r->region, r->offset, &v, 8);
            r->value = r->err == 0 ? v : 0;
        } else {
            uint32_t v;
            r->err = npv_dev_region_read(dev, r->region, r->offset, &v, 4);
            r->value = r->err == 0 ? v : 0;
        }
    }
    id->peeked = true;
    compose_version(id);
}

void info_device_json(struct json_out *j, const struct info_device *id)
{
    char buf[32];
    json_begin_object(j);
    json_kv_string(j, "kind", id->kind);
    json_kv_bool(j, "read", id->peeked);
    json_key(j, "pci_revision");
    if (id->revision < 0) {
        json_null(j);
    } else {
        snprintf(buf, sizeof(buf), "0x%02x", (unsigned)id->revision);
        json_string(j, buf);
    }
    json_kv_string(j, "version", id->version[0] ? id->version : NULL);
    json_key(j, "registers");
    json_begin_array(j);
    for (size_t i = 0; id->peeked && i < id->nregs; i++) {
        const struct info_reg *r = &id->regs[i];
        json_begin_object(j);
        json_kv_string(j, "name", r->name);
        json_kv_uint(j, "region", r->region);
        snprintf(buf, sizeof(buf), "0x%" PRIx64, r->offset);
        json_kv_string(j, "offset", buf);
        json_kv_uint(j, "width", r->width);
        snprintf(buf, sizeof(buf), "0x%0*" PRIx64, (int)r->width * 2, r->value);
        json_kv_string(j, "value", r->err == 0 ? buf : NULL);
        if (r->err < 0)
            json_kv_string(j, "error", npv_strerror(r->err));
        json_end_object(j);
    }
    json_end_array(j);
    json_kv_string(j, "source", id->source);
    json_kv_string(j, "note", id->note);
    json_end_object(j);
}

void info_device_text(const struct info_device *id)
{
    printf("  device:\n");
    printf("    kind:           %s\n", id->kind ? id->kind : "unknown to npuvfio");
    if (id->revision >= 0)
        printf("    pci revision:   0x%02x\n", (unsigned)id->revision);
    if (id->version[0])
        printf("    version:        %s\n", id->version);
    for (size_t i = 0; id->peeked && i < id->nregs; i++) {
        const struct info_reg *r = &id->regs[i];
        if (r->err < 0)
            printf("    %-22s region %u+0x%-6" PRIx64 " unreadable: %s\n", r->name, r->region,
                   r->offset, npv_strerror(r->err));
        else
            printf("    %-22s region %u+0x%-6" PRIx64 " 0x%0*" PRIx64 "\n", r->name, r->region,
                   r->offset, (int)r->width * 2, r->value);
    }
    if (id->source)
        printf("    source:         %s\n", id->source);
    if (id->note)
        printf("    note:           %s\n", id->note);
}
