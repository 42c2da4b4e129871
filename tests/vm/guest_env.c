/* SPDX-License-Identifier: MIT */
/*
 * guest_env: the guest offers what the backend under test needs, so a failure
 * of the library tests is not a kernel or set-up fault in disguise.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/domain.h>
#include <npuvfio/pci.h>
#include "guest_tap.h"

static bool is_chr(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISCHR(st.st_mode);
}

int main(void)
{
    const char *backend = getenv("NPVTEST_BACKEND");
    const char *edu = getenv("NPVTEST_EDU");
    struct tap t = {.prefix = backend ? backend : "?"};
    struct npv_ctx *ctx = NULL;

    tap_check(&t, backend && edu && *edu, "guest found edu (%s)", edu ? edu : "none");
    if (!tap_check(&t, npv_ctx_new(&ctx) == 0, "npv_ctx_new"))
        return tap_done(&t);
    struct npv_pci_func f = {0};
    int rc = edu ? npv_pci_func_read(ctx, edu, &f) : -ENODEV;
    tap_check(&t, rc == 0 && f.vfio_bound && f.iommu_group >= 0,
              "edu is bound to vfio-pci in IOMMU group %d (rc=%d driver=%s)", f.iommu_group, rc,
              f.driver);
    if (backend && strcmp(backend, "iommufd") == 0) {
        tap_check(&t, npv_build_has_iommufd(), "library built with iommufd support");
        tap_check(&t, is_chr("/dev/iommu"), "/dev/iommu exists");
    } else {
        char grp[64];
        snprintf(grp, sizeof(grp), "/dev/vfio/%d", f.iommu_group);
        tap_check(&t, is_chr("/dev/vfio/vfio"), "/dev/vfio/vfio exists");
        tap_check(&t, is_chr(grp), "%s exists", grp);
    }

    /* AUTO takes iommufd exactly when kernel, device and build all offer it. */
    char cdev_dir[96];
    snprintf(cdev_dir, sizeof(cdev_dir), "/sys/bus/pci/devices/%s/vfio-dev", edu ? edu : "-");
    struct stat st;
    bool want_iommufd = npv_build_has_iommufd() && is_chr("/dev/iommu") && stat(cdev_dir, &st) == 0;
    struct npv_domain *dom = NULL;
    struct npv_dev *dev = NULL;
    npv_ctx_set_iommu_backend(ctx, NPV_IOMMU_AUTO);
    rc = npv_domain_new(ctx, NULL, &dom);
    if (rc == 0 && edu)
        rc = npv_dev_open_pci(ctx, edu, dom, NULL, &dev);
    enum npv_transport want = want_iommufd ? NPV_TRANSPORT_IOMMUFD : NPV_TRANSPORT_LEGACY;
    tap_check(&t, rc == 0 && dev && npv_dev_transport(dev) == want,
              "the auto backend picks %s here (%s)", npv_transport_name(want), npv_strerror(rc));
    npv_dev_close(dev);
    npv_domain_put(dom);
    npv_ctx_free(ctx);
    return tap_done(&t);
}
