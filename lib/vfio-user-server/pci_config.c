/* SPDX-License-Identifier: MIT */
/* Emulated PCI config space for vfio-user device models. */
#include <errno.h>
#include <string.h>

#include "pci_config.h"

static void put8(struct npv_pci_config *pc, uint32_t off, uint8_t v)
{
    pc->data[off] = v;
}

static void put16(struct npv_pci_config *pc, uint32_t off, uint16_t v)
{
    memcpy(pc->data + off, &v, 2);
}

static void put32(struct npv_pci_config *pc, uint32_t off, uint32_t v)
{
    memcpy(pc->data + off, &v, 4);
}

static void wmask16(struct npv_pci_config *pc, uint32_t off, uint16_t m)
{
    memcpy(pc->wmask + off, &m, 2);
}

static void wmask32(struct npv_pci_config *pc, uint32_t off, uint32_t m)
{
    memcpy(pc->wmask + off, &m, 4);
}

uint16_t npv_pci_config_read16(const struct npv_pci_config *pc, uint32_t off)
{
    uint16_t v = 0;
    if (off <= NPV_VUS_CONFIG_SIZE - 2)
        memcpy(&v, pc->data + off, 2);
    return v;
}

static uint32_t bar_offset(uint32_t i)
{
    return i == 6 ? NPV_PCI_ROM : NPV_PCI_BAR0 + 4 * i;
}

static void init_bars(struct npv_pci_config *pc, const struct npv_vus_config *cfg)
{
    for (uint32_t i = 0; i < NPV_VUS_NUM_BARS; i++) {
        const struct npv_vus_region *r = &cfg->bars[i];
        if (r->size == 0)
            continue;
        pc->bar_size[i] = r->size;
        uint32_t flags = 0;
        if (i == 6) {
            flags = 0; /* ROM enable bit stays 0: the ROM is read via the region */
        } else {
            if ((r->flags & NPV_VUS_REGION_64BIT) && i < 5)
                flags |= 0x4; /* 64-bit memory BAR */
            if (r->flags & NPV_VUS_REGION_PREFETCH)
                flags |= 0x8;
        }
        pc->bar_flags[i] = flags;
        put32(pc, bar_offset(i), flags);
        /* A BAR's low bits below its size read as zero whatever is written. */
        uint64_t mask = ~(r->size - 1);
        wmask32(pc, bar_offset(i), (uint32_t)mask & (i == 6 ? 0xfffff800u : 0xfffffff0u));
        if (flags & 0x4)
            wmask32(pc, bar_offset(i + 1), (uint32_t)(mask >> 32));
        if (flags & 0x4)
            i++; /* the upper half is not a BAR of its own */
    }
}

static void init_pcie(struct npv_pci_config *pc)
{
    uint32_t c = NPV_PCI_CFG_PCIE_CAP;
    put8(pc, c, NPV_PCI_CAP_ID_PCIE);
    put8(pc, c + 1, pc->has_msix ? NPV_PCI_CFG_MSIX_CAP : 0);
    put16(pc, c + 2, 0x0002);                  /* version 2, PCI Express Endpoint */
    put32(pc, c + 4, 1u << 28);                /* DevCap: Function Level Reset capable */
    put16(pc, c + NPV_PCI_EXP_DEVCTL, 0x2810); /* MRRS 512, No Snoop, Relaxed Ordering */
    wmask16(pc, c + NPV_PCI_EXP_DEVCTL, 0x7fff);
    put32(pc, c + 0x0c, 0x00000011); /* LinkCap: x1, 2.5 GT/s */
    put16(pc, c + 0x12, 0x0011);     /* LinkSta: x1, 2.5 GT/s */
    wmask16(pc, c + 0x10, 0x0fff);   /* LinkCtl */
    wmask16(pc, c + 0x28, 0xffff);   /* DevCtl2 */
}

static void init_msix(struct npv_pci_config *pc, const struct npv_vus_config *cfg)
{
    uint32_t c = NPV_PCI_CFG_MSIX_CAP;
    put8(pc, c, NPV_PCI_CAP_ID_MSIX);
    put8(pc, c + 1, 0);
    put16(pc, c + NPV_PCI_MSIX_FLAGS, (uint16_t)((cfg->msix_vectors - 1) & 0x7ff));
    wmask16(pc, c + NPV_PCI_MSIX_FLAGS, NPV_PCI_MSIX_FLAGS_ENABLE | NPV_PCI_MSIX_FLAGS_MASKALL);
    put32(pc, c + 4, cfg->msix_table_offset | (cfg->msix_bar & 7));
    put32(pc, c + 8, cfg->msix_pba_offset | (cfg->msix_bar & 7));
}

void npv_pci_config_init(struct npv_pci_config *pc, const struct npv_vus_config *cfg)
{
    memset(pc, 0, sizeof(*pc));
    pc->has_msix = cfg->msix_vectors > 0;
    put16(pc, 0x00, cfg->vendor_id);
    put16(pc, 0x02, cfg->device_id);
    /* Command: I/O, memory, bus master, SERR, INTx disable are writable. */
    wmask16(pc, NPV_PCI_COMMAND, 0x0547);
    put16(pc, NPV_PCI_STATUS, NPV_PCI_STATUS_CAP_LIST);
    put8(pc, 0x08, cfg->revision);
    put8(pc, 0x09, (uint8_t)(cfg->class_code));
    put8(pc, 0x0a, (uint8_t)(cfg->class_code >> 8));
    put8(pc, 0x0b, (uint8_t)(cfg->class_code >> 16));
    put8(pc, 0x0e, 0x00); /* header type 0, single function */
    put16(pc, 0x2c, cfg->subsys_vendor_id);
    put16(pc, 0x2e, cfg->subsys_id);
    pc->wmask[0x3c] = 0xff; /* interrupt line: scratch for the OS */
    put8(pc, 0x3d, 0x01);   /* INTA# */
    put8(pc, NPV_PCI_CAP_PTR, NPV_PCI_CFG_PCIE_CAP);
    init_bars(pc, cfg);
    init_pcie(pc);
    if (pc->has_msix)
        init_msix(pc, cfg);
}

int npv_pci_config_read(const struct npv_pci_config *pc, uint64_t off, void *buf, size_t len)
{
    if (off > NPV_VUS_CONFIG_SIZE || len > NPV_VUS_CONFIG_SIZE - off)
        return -EINVAL;
    memcpy(buf, pc->data + off, len);
    return 0;
}

int npv_pci_config_write(struct npv_pci_config *pc, uint64_t off, const void *buf, size_t len)
{
    if (off > NPV_VUS_CONFIG_SIZE || len > NPV_VUS_CONFIG_SIZE - off)
        return -EINVAL;
    const uint8_t *b = buf;
    for (size_t i = 0; i < len; i++) {
        size_t o = off + i;
        pc->data[o] = (uint8_t)((pc->data[o] & ~pc->wmask[o]) | (b[i] & pc->wmask[o]));
    }
    /* BAR flag bits are outside the write masks, so a sizing write keeps them. */
    return 0;
}

bool npv_pci_config_msix_masked(const struct npv_pci_config *pc)
{
    if (!pc->has_msix)
        return false;
    uint16_t f = npv_pci_config_read16(pc, NPV_PCI_CFG_MSIX_CAP + NPV_PCI_MSIX_FLAGS);
    return (f & NPV_PCI_MSIX_FLAGS_MASKALL) != 0;
}
