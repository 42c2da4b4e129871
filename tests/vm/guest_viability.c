/* SPDX-License-Identifier: MIT */
/*
 * guest_viability: the library refuses a function whose IOMMU group is not
 * viable, and names the function that blocks it.
 *
 * On q35 the ICH9 functions 00:1f.{0,2,3} share one IOMMU group (they sit on
 * the root bus with no ACS between them). The guest's /init binds the SATA
 * controller (NPVTEST_SATA) to vfio-pci and leaves the SMBus controller
 * (NPVTEST_SMBUS) on i2c-i801, a driver that does DMA through the kernel's
 * default domain; the kernel then will not hand the group to user space.
 * Also: a function on no driver at all (pci-testdev, NPVTEST_TESTDEV) is
 * refused, and neither refusal leaks an fd or a mapping.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/domain.h>
#include <npuvfio/pci.h>
#include "guest_edu.h"
#include "guest_tap.h"

struct log_capture {
    char text[8192];
    size_t len;
};

static void capture(void *user, enum npv_log_level level, const char *msg)
{
    struct log_capture *c = user;
    tap_diag("lib[%d]: %s", (int)level, msg);
    int n = snprintf(c->text + c->len, sizeof(c->text) - c->len, "%s\n", msg);
    if (n > 0)
        c->len += (size_t)n < sizeof(c->text) - c->len ? (size_t)n : sizeof(c->text) - c->len - 1;
}

static bool env_ok(const char *v)
{
    return v != NULL && *v != '\0';
}

/* Open addr; it must fail with want (0: any error), naming blocker in the log when given. */
static void check_refused(struct tap *t, struct npv_ctx *ctx, struct log_capture *log,
                          const char *addr, int want, const char *blocker, const char *why)
{
    struct npv_domain *dom = NULL;
    struct npv_dev *dev = NULL;
    /* A first refusal may grow the allocator's own arenas (ASan maps a region per size class on
     * first use), which is not a leak; the second, identical one is the one measured. */
    if (npv_domain_new(ctx, NULL, &dom) == 0) {
        npv_dev_open_pci(ctx, addr, dom, NULL, &dev);
        npv_dev_close(dev);
        npv_domain_put(dom);
        dom = NULL;
        dev = NULL;
    }
    int fds0 = count_fds(), maps0 = count_maps();
    int rc = npv_domain_new(ctx, NULL, &dom);
    if (!tap_check(t, rc == 0, "npv_domain_new (%s)", npv_strerror(rc)))
        return;
    log->len = 0;
    log->text[0] = '\0';
    rc = npv_dev_open_pci(ctx, addr, dom, NULL, &dev);
    tap_check(t, want ? rc == want : rc < 0, "open %s (%s) is refused: %d %s", addr, why, rc,
              npv_strerror(rc));
    tap_check(t, dev == NULL, "no device handed out on refusal");
    if (blocker)
        tap_check(t, strstr(log->text, blocker) != NULL, "the refusal names the blocker %s",
                  blocker);
    npv_dev_close(dev);
    npv_domain_put(dom);
    int fds1 = count_fds(), maps1 = count_maps();
    tap_check(t, fds1 == fds0 && maps1 == maps0,
              "the refused open leaks nothing: fds %d -> %d, maps %d -> %d", fds0, fds1, maps0,
              maps1);
}

int main(void)
{
    const char *backend = getenv("NPVTEST_BACKEND");
    const char *sata = getenv("NPVTEST_SATA"), *smbus = getenv("NPVTEST_SMBUS");
    const char *testdev = getenv("NPVTEST_TESTDEV");
    struct tap t = {.prefix = backend ? backend : "?"};
    static struct log_capture log;
    struct npv_ctx *ctx = NULL;

    if (!tap_check(&t, env_ok(backend) && env_ok(sata) && env_ok(smbus) && env_ok(testdev),
                   "guest found ICH9 SATA (%s), SMBus (%s) and pci-testdev (%s)", sata ? sata : "-",
                   smbus ? smbus : "-", testdev ? testdev : "-"))
        return tap_done(&t);
    int rc = npv_ctx_new(&ctx);
    if (!tap_check(&t, rc == 0, "npv_ctx_new (%s)", npv_strerror(rc)))
        return tap_done(&t);
    npv_ctx_set_log_sink(ctx, capture, &log);
    npv_ctx_set_iommu_backend(ctx, strcmp(backend, "iommufd") == 0 ? NPV_IOMMU_IOMMUFD
                                                                   : NPV_IOMMU_LEGACY);

    struct npv_pci_func *members = NULL;
    size_t nmembers = 0;
    rc = npv_pci_group_members(ctx, sata, &members, &nmembers);
    bool has_smbus = false;
    for (size_t i = 0; rc == 0 && i < nmembers; i++)
        has_smbus |= strcmp(members[i].addr, smbus) == 0;
    tap_check(&t, rc == 0 && nmembers >= 2 && has_smbus,
              "SATA's IOMMU group has %zu functions, SMBus among them (%s)", nmembers,
              npv_strerror(rc));
    free(members);

    struct npv_pci_func blockers[4];
    size_t nblockers = 0;
    rc = npv_pci_group_viable(ctx, sata, blockers, 4, &nblockers);
    tap_check(&t,
              rc == 0 && nblockers == 1 && strcmp(blockers[0].addr, smbus) == 0 &&
                  strcmp(blockers[0].driver, "i801_smbus") == 0,
              "npv_pci_group_viable says not viable, blocker %s on %s (rc=%d, %zu blockers)",
              nblockers ? blockers[0].addr : "-", nblockers ? blockers[0].driver : "-", rc,
              nblockers);

    check_refused(&t, ctx, &log, sata, -NPV_ENOTVIABLE, smbus, "group not viable");
    tap_check(&t, strstr(npv_strerror(-NPV_ENOTVIABLE), "group") != NULL,
              "npv_strerror(-NPV_ENOTVIABLE) speaks of the group: \"%s\"",
              npv_strerror(-NPV_ENOTVIABLE));
    check_refused(&t, ctx, &log, testdev, -ENODEV, NULL, "not bound to vfio-pci");

    /* Binding another member must be refused too: SMBus still blocks the group. */
    char lpc[NPV_PCI_ADDR_LEN];
    snprintf(lpc, sizeof(lpc), "%.10s.0", sata); /* 00:1f.0, the LPC bridge */
    log.len = 0;
    rc = npv_pci_bind_vfio(ctx, lpc);
    tap_check(&t, rc == -NPV_ENOTVIABLE && strstr(log.text, smbus) != NULL,
              "npv_pci_bind_vfio(%s) is refused naming %s: %d %s", lpc, smbus, rc,
              npv_strerror(rc));
    struct npv_pci_func f = {0};
    rc = npv_pci_func_read(ctx, lpc, &f);
    tap_check(&t, rc == 0 && !f.vfio_bound, "%s stays off vfio-pci (driver \"%s\")", lpc, f.driver);

    npv_ctx_free(ctx);
    return tap_done(&t);
}
