/* SPDX-License-Identifier: MIT */
/* The NPUs we drive (and our test device), by PCI vendor:device. */
#include <stddef.h>

#include <npuvfio/pci.h>

struct known_npu {
    uint16_t vendor, device;
    const char *family;
};

/*
 * The RK3588 NPU is a platform device (MMIO on the SoC, no PCI id), so it
 * never appears here; vfio-platform is its path.
 */
static const struct known_npu known_npus[] = {
    {0x1ac1, 0x089a, "edgetpu"}, /* Global Unichip Corp. Coral Edge TPU (Apex) */
    {0x1234, 0x4e50, "testdev"}, /* our generic test device (devices/testdev/regs.h) */
    {0x19e5, 0xd100, "aicore"},  /* Huawei Ascend 310 */
    {0x19e5, 0xd801, "aicore"},  /* Huawei Ascend 910 */
};

const char *npv_pci_known_npu(uint16_t vendor, uint16_t device)
{
    for (size_t i = 0; i < sizeof(known_npus) / sizeof(known_npus[0]); i++)
        if (known_npus[i].vendor == vendor && known_npus[i].device == device)
            return known_npus[i].family;
    return NULL;
}
