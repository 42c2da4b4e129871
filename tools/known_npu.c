/* SPDX-License-Identifier: MIT */
/* Which PCI functions are devices npuvfio drives: the device table's ids (devices/registry.c). */
#include <stdio.h>

#include "cli.h"
#include "registry.h"

const char *cli_known_npu(uint16_t vendor, uint16_t device)
{
    const struct npv_device_entry *e = npv_device_by_pci_id(vendor, device);
    return e != NULL ? e->name : NULL;
}

void cli_print_known_npus(void)
{
    for (size_t i = 0; npv_device_at(i) != NULL; i++) {
        const struct npv_device_entry *e = npv_device_at(i);
        if (e->pci_ids[0].vendor == 0)
            continue;
        char ids[64] = "";
        size_t n = 0;
        for (size_t k = 0; k < NPV_DEVICE_MAX_PCI_IDS && e->pci_ids[k].vendor != 0; k++)
            n += (size_t)snprintf(ids + n, sizeof(ids) - n, "%s%04x:%04x", k ? "," : "",
                                  e->pci_ids[k].vendor, e->pci_ids[k].device);
        printf("  %-9s %-20s %s\n", e->name, ids, e->summary);
    }
}
