/* SPDX-License-Identifier: MIT */
/*
 * Emulated PCI configuration space of a vfio-user server's function: type 0
 * header, BARs that answer the sizing protocol, a PCI Express capability (a
 * driver clears Enable No Snoop in Device Control when the IOMMU does not
 * enforce coherency, so Device Control must exist and be writable) and an
 * MSI-X capability pointing into a BAR.
 */
#ifndef NPV_PCI_CONFIG_H
#define NPV_PCI_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <npuvfio/vfio_user_server.h>

#define NPV_PCI_CFG_PCIE_CAP 0x40u
#define NPV_PCI_CFG_MSIX_CAP 0x80u

/* Register offsets and bits used by the emulation (PCI Local Bus 3.0, PCIe Base 4.0). */
#define NPV_PCI_COMMAND            0x04u
#define NPV_PCI_STATUS             0x06u
#define NPV_PCI_BAR0               0x10u
#define NPV_PCI_ROM                0x30u
#define NPV_PCI_CAP_PTR            0x34u
#define NPV_PCI_STATUS_CAP_LIST    0x0010u
#define NPV_PCI_CAP_ID_PCIE        0x10u
#define NPV_PCI_CAP_ID_MSIX        0x11u
#define NPV_PCI_EXP_DEVCTL         0x08u
#define NPV_PCI_EXP_DEVCTL_NOSNOOP 0x0800u
#define NPV_PCI_MSIX_FLAGS         0x02u
#define NPV_PCI_MSIX_FLAGS_ENABLE  0x8000u
#define NPV_PCI_MSIX_FLAGS_MASKALL 0x4000u

struct npv_pci_config {
    uint8_t data[NPV_VUS_CONFIG_SIZE];
    uint8_t wmask[NPV_VUS_CONFIG_SIZE];
    uint64_t bar_size[NPV_VUS_NUM_BARS];
    uint32_t bar_flags[NPV_VUS_NUM_BARS];
    bool has_msix;
};

void npv_pci_config_init(struct npv_pci_config *pc, const struct npv_vus_config *cfg);
/* Bounds-checked; -EINVAL outside the space. */
int npv_pci_config_read(const struct npv_pci_config *pc, uint64_t off, void *buf, size_t len);
int npv_pci_config_write(struct npv_pci_config *pc, uint64_t off, const void *buf, size_t len);
uint16_t npv_pci_config_read16(const struct npv_pci_config *pc, uint32_t off);
/*
 * Whether the MSI-X Function Mask bit is set. The Enable bit is not a gate:
 * a vfio-user client, like kernel vfio-pci, enables vectors with SET_IRQS.
 */
bool npv_pci_config_msix_masked(const struct npv_pci_config *pc);

#endif
