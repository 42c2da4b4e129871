/* SPDX-License-Identifier: MIT */
/* One device driven end to end: its model on a private socket, its driver, its sample. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/dev.h>
#include <npuvfio/domain.h>
#include <npuvfio/platform.h>

#include "device_run.h"
#include "host_use.h"
#include "platform_cli.h"

#define MODEL_START_TIMEOUT_NS (10ull * 1000000000ull)

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void model_stop(struct model_child *m)
{
    if (m->pid > 0) {
        kill(m->pid, SIGTERM);
        waitpid(m->pid, NULL, 0);
        m->pid = 0;
    }
    if (m->path[0] != '\0')
        unlink(m->path);
    if (m->dir[0] != '\0')
        rmdir(m->dir);
}

int model_start(struct npv_cli *cli, const struct npv_device_entry *e, struct model_child *m)
{
    snprintf(m->dir, sizeof(m->dir), "/tmp/npuvfio-run-XXXXXX");
    if (mkdtemp(m->dir) == NULL) {
        m->dir[0] = '\0';
        return cli_fail(cli, "a private socket directory in /tmp", -errno);
    }
    snprintf(m->path, sizeof(m->path), "%s/%s.sock", m->dir, e->name);
    fflush(NULL);
    m->pid = fork();
    if (m->pid < 0)
        return cli_fail(cli, "fork", -errno);
    if (m->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int r = npv_device_serve(e, m->path, true);
        if (r < 0)
            fprintf(stderr, "npuvfio %s: %s model: %s\n", cli->cmd, e->name, npv_strerror(r));
        _exit(r < 0 ? 1 : 0);
    }
    uint64_t deadline = mono_ns() + MODEL_START_TIMEOUT_NS;
    for (;;) {
        struct stat st;
        int status;
        if (stat(m->path, &st) == 0 && S_ISSOCK(st.st_mode))
            return CLI_OK;
        if (waitpid(m->pid, &status, WNOHANG) == m->pid) {
            m->pid = 0;
            cli_error(cli, "the %s model exited before it listened", e->name);
            return CLI_FAILED;
        }
        if (mono_ns() > deadline) {
            cli_error(cli, "the %s model did not listen on %s within 10 s", e->name, m->path);
            return CLI_FAILED;
        }
        struct timespec nap = {.tv_sec = 0, .tv_nsec = 2000000};
        nanosleep(&nap, NULL);
    }
}

/* Whether vendor:device is e: one of its PCI ids, or its model's (a model seen as PCI in a VM). */
static bool entry_has_id(const struct npv_device_entry *e, uint16_t v, uint16_t d)
{
    if (e->model_create != NULL && e->model_id.vendor == v && e->model_id.device == d)
        return true;
    for (size_t k = 0; k < NPV_DEVICE_MAX_PCI_IDS && e->pci_ids[k].vendor != 0; k++)
        if (e->pci_ids[k].vendor == v && e->pci_ids[k].device == d)
            return true;
    return false;
}

/*
 * A PCI function about to be driven as e: it must be e by its ids (the
 * device table, devices/registry.c) before any bind is advised, and the
 * advice must be one that can work: not without an IOMMU, not for a device
 * the host is using (host_use.c).
 */
static int check_pci_function(struct npv_cli *cli, const struct npv_device_entry *e,
                              const char *canon)
{
    struct npv_pci_func f;
    int r = npv_pci_func_read(cli->ctx, canon, &f);
    if (r < 0)
        return cli_fail(cli, canon, r);
    const char *drv = f.driver[0] != '\0' ? f.driver : "no driver";
    if (!entry_has_id(e, f.vendor, f.device)) {
        const struct npv_device_entry *is = npv_device_by_pci_id(f.vendor, f.device);
        if (is == NULL)
            is = npv_device_by_model_id(f.vendor, f.device);
        if (is != NULL)
            cli_error(cli, "%s is %04x:%04x, a %s, not %s (try --device %s)", canon, f.vendor,
                      f.device, is->name, e->name, is->name);
        else
            cli_error(cli,
                      "%s is %04x:%04x (class %06x, on %s), not %s: no device npuvfio drives "
                      "(npuvfio list --npu shows those)",
                      canon, f.vendor, f.device, f.class_code, drv, e->name);
        return CLI_FAILED;
    }
    if (f.vfio_bound)
        return CLI_OK;
    char why[512];
    if (host_no_iommu_reason(cli, "pci", canon, why, sizeof(why))) {
        cli_error(cli, "%s: on %s, not vfio-pci, and vfio-pci cannot take it here: %s", canon, drv,
                  why);
        return CLI_FAILED;
    }
    struct host_use use;
    if (host_use_check(cli, "pci", canon, &use) == 0 && use.n > 0) {
        cli_error(cli, "%s: on %s and in use by the host (%s): leave it to the host", canon, drv,
                  use.reasons[0]);
        return CLI_FAILED;
    }
    cli_error(cli, "%s: on %s, not vfio-pci: npuvfio bind %s", canon, drv, canon);
    return CLI_FAILED;
}

int device_where_hw(struct npv_cli *cli, const struct npv_device_entry *e, const char *text,
                    char *canon, struct device_where *w)
{
    enum cli_dev_kind kind;
    int st = cli_resolve_device(cli, text, canon, &kind);
    if (st != CLI_OK)
        return st;
    *w = (struct device_where){.hw = canon, .platform = kind == CLI_DEV_PLATFORM};
    if (!w->platform)
        return check_pci_function(cli, e, canon);
    /* vfio-platform takes the device only through a bind (driver_override), never by itself. */
    struct npv_platform_dev pd;
    int r = npv_platform_dev_read(cli->ctx, canon, &pd);
    if (r < 0)
        return cli_fail(cli, canon, r);
    if (!pd.vfio_bound) {
        cli_error(cli, "%s: platform device on %s, not on vfio-platform (npuvfio bind %s)", canon,
                  pd.driver[0] != '\0' ? pd.driver : "no driver", canon);
        return CLI_FAILED;
    }
    return CLI_OK;
}

static int open_where(struct npv_cli *cli, const struct device_where *w, struct npv_domain *dom,
                      struct npv_dev **dev)
{
    if (w->socket != NULL)
        return npv_dev_open_vfio_user(cli->ctx, w->socket, dom, NULL, dev);
    if (w->platform)
        return npv_dev_open_platform(cli->ctx, w->hw, dom, NULL, dev);
    return npv_dev_open_pci(cli->ctx, w->hw, dom, NULL, dev);
}

/*
 * Whether the device opened at where is e: its config space's vendor:device
 * is one of e's PCI ids or e's model's. When it is not, say what it is (the
 * device table's entry for its id) instead of letting e's driver fail on it.
 * A device without readable ids (a platform device) is e's driver's to judge.
 */
static bool device_is(struct npv_cli *cli, const struct npv_device_entry *e, struct npv_dev *dev,
                      const char *where)
{
    struct npv_dev_info info;
    if (npv_dev_info(dev, &info) < 0 || info.vendor_id == 0)
        return true;
    uint16_t v = info.vendor_id, d = info.device_id;
    if (e->model_id.vendor == v && e->model_id.device == d)
        return true;
    for (size_t k = 0; k < NPV_DEVICE_MAX_PCI_IDS && e->pci_ids[k].vendor != 0; k++)
        if (e->pci_ids[k].vendor == v && e->pci_ids[k].device == d)
            return true;
    const struct npv_device_entry *model = npv_device_by_model_id(v, d);
    const struct npv_device_entry *hw = npv_device_by_pci_id(v, d);
    if (model != NULL)
        cli_error(cli, "%s answers as %04x:%04x, the %s model, not %s (try --device %s)", where, v,
                  d, model->name, e->name, model->name);
    else if (hw != NULL)
        cli_error(cli, "%s answers as %04x:%04x, a %s, not %s (try --device %s)", where, v, d,
                  hw->name, e->name, hw->name);
    else
        cli_error(cli, "%s answers as %04x:%04x (class %06x), no device npuvfio knows, not %s",
                  where, v, d, info.class_code, e->name);
    return false;
}

int device_open(struct npv_cli *cli, const struct npv_device_entry *e, const struct device_where *w,
                struct npv_domain **dom, struct npv_dev **dev)
{
    const char *where = w->socket != NULL ? w->socket : w->hw;
    int r = npv_domain_new(cli->ctx, NULL, dom);
    if (r < 0)
        return cli_fail(cli, "domain", r);
    r = open_where(cli, w, *dom, dev);
    if (r < 0) {
        npv_domain_put(*dom);
        return cli_fail(cli, where, r);
    }
    if (!device_is(cli, e, *dev, where)) {
        npv_dev_close(*dev);
        npv_domain_put(*dom);
        return CLI_FAILED;
    }
    return CLI_OK;
}

int device_run_sample(struct npv_cli *cli, const struct npv_device_entry *e,
                      const struct device_where *w, const struct npv_sample_opts *opts,
                      struct npv_sample_result *res)
{
    struct npv_domain *dom;
    struct npv_dev *dev;
    void *drv;
    int ret = device_open(cli, e, w, &dom, &dev);
    if (ret != CLI_OK)
        return ret;
    int r = e->driver_open(dev, &drv);
    if (r < 0) {
        ret = cli_fail(cli, e->name, r);
        goto out_dev;
    }
    r = e->sample_run(drv, opts, res);
    e->driver_close(drv);
    if (r < 0)
        ret = cli_fail(cli, "sample workload", r);
out_dev:
    npv_dev_close(dev);
    npv_domain_put(dom);
    return ret;
}
