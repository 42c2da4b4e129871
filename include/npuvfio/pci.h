/* SPDX-License-Identifier: MIT */
/*
 * PCI functions as sysfs shows them: addresses, IOMMU groups, drivers, and
 * binding to vfio-pci. Every path is read under the context's sysfs root, so
 * the same code runs against a fake tree in tests.
 *
 * Thread-safety: the calls keep no state; concurrent binds of one function
 * race as they would from a shell.
 */
#ifndef NPUVFIO_PCI_H
#define NPUVFIO_PCI_H

#include <stdbool.h>
#include <npuvfio/common.h>
#include <npuvfio/ctx.h>

#ifdef __cplusplus
extern "C" {
#endif

struct npv_pci_addr {
    uint32_t domain; /* 16 bits in practice; sysfs allows more */
    uint8_t bus, dev, fn;
};

#define NPV_PCI_ADDR_LEN   16 /* "0000:00:00.0" plus room for 32-bit domains */
#define NPV_PCI_DRIVER_LEN 64

/* Parse "DDDD:BB:DD.F" (or "BB:DD.F", domain 0). -EINVAL when malformed. */
NPV_API int npv_pci_addr_parse(const char *text, struct npv_pci_addr *addr);
/* Canonical "dddd:bb:dd.f" into buf (at least NPV_PCI_ADDR_LEN). */
NPV_API void npv_pci_addr_format(const struct npv_pci_addr *addr, char *buf, size_t len);

struct npv_pci_func {
    char addr[NPV_PCI_ADDR_LEN];
    uint16_t vendor, device;
    uint16_t subsystem_vendor, subsystem_device;
    uint32_t class_code;
    char driver[NPV_PCI_DRIVER_LEN]; /* "" when unbound */
    int iommu_group;                 /* -1 without an IOMMU group */
    int numa_node;                   /* sysfs numa_node; -1: no affinity known */
    bool vfio_bound;                 /* driver is vfio-pci */
};

/* Read one function. -EINVAL malformed address, -ENODEV no such function. */
NPV_API int npv_pci_func_read(struct npv_ctx *ctx, const char *addr, struct npv_pci_func *func);

/*
 * Every PCI function, sorted by address, in a malloc'd array (*out, free()
 * it) of *count entries.
 */
NPV_API int npv_pci_list(struct npv_ctx *ctx, struct npv_pci_func **out, size_t *count);

/*
 * The functions of addr's IOMMU group (including addr), sorted by address,
 * malloc'd. -ENOENT when the function has no IOMMU group.
 */
NPV_API int npv_pci_group_members(struct npv_ctx *ctx, const char *addr, struct npv_pci_func **out,
                                  size_t *count);

/*
 * Whether VFIO would let user space use addr's group: every other member is
 * unbound, on vfio-pci, or on a driver VFIO tolerates (pci-stub, pcieport).
 * Returns 1 viable, 0 not (the blocking functions written to blockers, up to
 * max, and counted in *nblockers), negative errno on error.
 */
NPV_API int npv_pci_group_viable(struct npv_ctx *ctx, const char *addr,
                                 struct npv_pci_func *blockers, size_t max, size_t *nblockers);

/*
 * Bind addr to vfio-pci: remember its current driver, set driver_override,
 * unbind, drivers_probe, then wait (bounded) until the driver link says
 * vfio-pci. Refuses with -NPV_ENOTVIABLE when another group member is on a
 * host driver. -EINVAL malformed, -ENODEV missing, -ETIMEDOUT when the bind
 * did not take effect.
 */
NPV_API int npv_pci_bind_vfio(struct npv_ctx *ctx, const char *addr);
/* Undo npv_pci_bind_vfio: clear driver_override and rebind the remembered driver. */
NPV_API int npv_pci_unbind_vfio(struct npv_ctx *ctx, const char *addr);

/*
 * The same, with the previous driver remembered in state_dir: one file per
 * function, named by its address, holding the driver's name (an empty line
 * when the function was unbound). state_dir NULL means $NPUVFIO_STATE_DIR,
 * else /run/npuvfio. npv_pci_bind_vfio/npv_pci_unbind_vfio use NULL. Unbind
 * without a state file clears driver_override and lets drivers_probe pick the
 * driver the kernel's id tables choose. Unbind of a function that is not on a
 * VFIO driver (and has no vfio-pci override) is a no-op returning 0.
 */
NPV_API int npv_pci_bind_vfio_state(struct npv_ctx *ctx, const char *addr, const char *state_dir);
NPV_API int npv_pci_unbind_vfio_state(struct npv_ctx *ctx, const char *addr, const char *state_dir);

#ifdef __cplusplus
}
#endif

#endif
