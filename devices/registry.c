/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

#include <npuvfio/aicore.h>
#include <npuvfio/edgetpu.h>
#include <npuvfio/rknpu.h>
#include <npuvfio/testdev.h>

#include "aicore/model.h"
#include "aicore/regs.h"
#include "aicore/sample_run.h"
#include "edgetpu/model.h"
#include "edgetpu/regs.h"
#include "edgetpu/compiled_run.h"
#include "edgetpu/sample_run.h"
#include "registry.h"
#include "rknpu/model.h"
#include "rknpu/regs.h"
#include "rknpu/sample_run.h"
#include "testdev/model.h"
#include "testdev/sample.h"

static int testdev_model_create(struct npv_ctx *ctx, void **model, struct npv_vus **srv)
{
    struct npv_testdev_model *td;
    int r = npv_testdev_model_new(ctx, &td);
    if (r < 0)
        return r;
    *model = td;
    *srv = npv_testdev_model_server(td);
    return 0;
}

static void testdev_model_count_compute(void *model, struct npv_model_compute *c)
{
    npv_testdev_model_count_compute(model, c);
}

static void testdev_model_destroy(void *model)
{
    npv_testdev_model_free(model);
}

static int testdev_driver_open_deadline(struct npv_dev *dev, uint64_t deadline_ns, void **drv)
{
    struct npv_testdev *td;
    struct npv_testdev_config cfg = {.job_timeout_ns = deadline_ns};
    int r = npv_testdev_open(dev, &cfg, &td);
    if (r == 0)
        *drv = td;
    return r;
}

static int testdev_driver_open(struct npv_dev *dev, void **drv)
{
    return testdev_driver_open_deadline(dev, 0, drv);
}

static void testdev_driver_close(void *drv)
{
    npv_testdev_close(drv);
}

static int testdev_sample_run(void *drv, const struct npv_sample_opts *opts,
                              struct npv_sample_result *res)
{
    return npv_testdev_sample_run(drv, opts, res);
}

static int edgetpu_model_create(struct npv_ctx *ctx, void **model, struct npv_vus **srv)
{
    struct npv_edgetpu_model *m;
    int r = npv_edgetpu_model_new(ctx, &m);
    if (r < 0)
        return r;
    *model = m;
    *srv = npv_edgetpu_model_server(m);
    return 0;
}

static void edgetpu_model_count_compute(void *model, struct npv_model_compute *c)
{
    npv_edgetpu_model_count_compute(model, c);
}

static void edgetpu_model_destroy(void *model)
{
    npv_edgetpu_model_free(model);
}

static int edgetpu_driver_open_deadline(struct npv_dev *dev, uint64_t deadline_ns, void **drv)
{
    struct npv_edgetpu *tpu;
    struct npv_edgetpu_config cfg = {.request_timeout_ns = deadline_ns,
                                     .poll_timeout_ns = deadline_ns};
    int r = npv_edgetpu_open(dev, &cfg, &tpu);
    if (r == 0)
        *drv = tpu;
    return r;
}

static int edgetpu_driver_open(struct npv_dev *dev, void **drv)
{
    return edgetpu_driver_open_deadline(dev, 0, drv);
}

static void edgetpu_driver_close(void *drv)
{
    npv_edgetpu_close(drv);
}

static int edgetpu_sample(void *drv, const struct npv_sample_opts *opts,
                          struct npv_sample_result *res)
{
    if (opts != NULL && opts->model_path != NULL)
        return edgetpu_compiled_run(drv, opts, res);
    return edgetpu_sample_run(drv, opts, res, NULL);
}

static int rknpu_model_create(struct npv_ctx *ctx, void **model, struct npv_vus **srv)
{
    struct npv_rknpu_model *m;
    int r = npv_rknpu_model_new(ctx, &m);
    if (r < 0)
        return r;
    *model = m;
    *srv = npv_rknpu_model_server(m);
    return 0;
}

static void rknpu_model_count_compute(void *model, struct npv_model_compute *c)
{
    npv_rknpu_model_count_compute(model, c);
}

static void rknpu_model_destroy(void *model)
{
    npv_rknpu_model_free(model);
}

static int rknpu_driver_open_deadline(struct npv_dev *dev, uint64_t deadline_ns, void **drv)
{
    struct npv_rknpu *npu;
    struct npv_rknpu_config cfg = {.job_timeout_ns = deadline_ns, .reset_timeout_ns = deadline_ns};
    int r = npv_rknpu_open(dev, &cfg, &npu);
    if (r == 0)
        *drv = npu;
    return r;
}

static int rknpu_driver_open(struct npv_dev *dev, void **drv)
{
    return rknpu_driver_open_deadline(dev, 0, drv);
}

static void rknpu_driver_close(void *drv)
{
    npv_rknpu_close(drv);
}

static int rknpu_sample(void *drv, const struct npv_sample_opts *opts,
                        struct npv_sample_result *res)
{
    return rknpu_sample_run(drv, opts, res);
}

static int aicore_model_create(struct npv_ctx *ctx, void **model, struct npv_vus **srv)
{
    struct npv_aicore_model *m;
    int r = npv_aicore_model_new(ctx, NULL, &m);
    if (r < 0)
        return r;
    *model = m;
    *srv = npv_aicore_model_server(m);
    return 0;
}

/*
 * The default part's shapes, at 3 clusters instead of 24: a full cluster, one
 * with a fused AIV (its AIC waits on one vector task, not two), and one fused
 * off whole, as the default part's cluster AICORE_DEFAULT_ABSENT_CLUSTER.
 * The Ctrl and Pmu windows are mapped (the model's default), so a poll pass
 * costs no call; what scales with the sub-cores is the work of a run
 * (handshake, tasks, PMU) the walk repeats at every failure point: 5
 * usable instead of 69.
 */
static int aicore_model_create_small(struct npv_ctx *ctx, void **model, struct npv_vus **srv)
{
    enum { clusters = 3 };
    uint64_t all = (1ull << (clusters * AICORE_SUBCORES_PER_CLUSTER)) - 1;
    uint64_t fused = 1ull << npv_aicore_phys_aiv(clusters, 1, 1);
    fused |= 1ull << npv_aicore_phys_aic(clusters, 2);
    fused |=
        1ull << npv_aicore_phys_aiv(clusters, 2, 0) | 1ull << npv_aicore_phys_aiv(clusters, 2, 1);
    struct npv_aicore_model_config cfg = {.clusters = clusters,
                                          .custom_topology = true,
                                          .present = {all & ~fused, 0},
                                          .power_on = {all, 0}};
    struct npv_aicore_model *m;
    int r = npv_aicore_model_new(ctx, &cfg, &m);
    if (r < 0)
        return r;
    *model = m;
    *srv = npv_aicore_model_server(m);
    return 0;
}

static void aicore_model_count_compute(void *model, struct npv_model_compute *c)
{
    npv_aicore_model_count_compute(model, c);
}

static void aicore_model_destroy(void *model)
{
    npv_aicore_model_free(model);
}

static int aicore_driver_open_deadline(struct npv_dev *dev, uint64_t deadline_ns, void **drv)
{
    struct npv_aicore *ac;
    struct npv_aicore_config cfg = {.task_timeout_ns = deadline_ns,
                                    .handshake_timeout_ns = deadline_ns,
                                    .poll_timeout_ns = deadline_ns};
    int r = npv_aicore_open(dev, &cfg, &ac);
    if (r == 0)
        *drv = ac;
    return r;
}

static int aicore_driver_open(struct npv_dev *dev, void **drv)
{
    return aicore_driver_open_deadline(dev, 0, drv);
}

static void aicore_driver_close(void *drv)
{
    npv_aicore_close(drv);
}

static int aicore_sample(void *drv, const struct npv_sample_opts *opts,
                         struct npv_sample_result *res)
{
    return aicore_sample_run(drv, opts, res);
}

static const struct npv_device_entry devices[] = {
    {
        .name = "testdev",
        .summary = "generic DMA test engine: descriptor ring, mmapped doorbell, MSI-X",
        .pci_ids = {{NPV_TESTDEV_VENDOR_ID, NPV_TESTDEV_DEVICE_ID}},
        .class_code = NPV_TESTDEV_CLASS,
        .model_id = {NPV_TESTDEV_VENDOR_ID, NPV_TESTDEV_DEVICE_ID},
        .model_create = testdev_model_create,
        .model_destroy = testdev_model_destroy,
        .model_count_compute = testdev_model_count_compute,
        .driver_open = testdev_driver_open,
        .driver_open_deadline = testdev_driver_open_deadline,
        .driver_close = testdev_driver_close,
        .sample_run = testdev_sample_run,
    },
    {
        .name = "edgetpu",
        .summary = "Coral Edge TPU (Apex, Global Unichip Corp.)",
        .pci_ids = {{EDGETPU_PCI_VENDOR, EDGETPU_PCI_DEVICE}},
        .class_code = EDGETPU_PCI_CLASS,
        .model_id = {EDGETPU_PCI_VENDOR, EDGETPU_PCI_DEVICE},
        .model_create = edgetpu_model_create,
        .model_destroy = edgetpu_model_destroy,
        .model_count_compute = edgetpu_model_count_compute,
        .driver_open = edgetpu_driver_open,
        .driver_open_deadline = edgetpu_driver_open_deadline,
        .driver_close = edgetpu_driver_close,
        .sample_run = edgetpu_sample,
    },
    {
        .name = "rknpu",
        .summary = "Rockchip RK3588 NPU (3 cores; a platform device, model PCI-shaped)",
        /*
         * The RK3588 NPU is a platform device (no PCI id): vfio-platform is its
         * path. Its model is a PCI-shaped stand-in whose made-up id
         * (RKNPU_PCI_VENDOR:RKNPU_PCI_DEVICE, regs.h) must not be listed here as
         * the NPU's: no PCI function is this device.
         */
        .class_code = RKNPU_PCI_CLASS,
        .model_id = {RKNPU_PCI_VENDOR, RKNPU_PCI_DEVICE},
        .model_create = rknpu_model_create,
        .model_destroy = rknpu_model_destroy,
        .model_count_compute = rknpu_model_count_compute,
        .driver_open = rknpu_driver_open,
        .driver_open_deadline = rknpu_driver_open_deadline,
        .driver_close = rknpu_driver_close,
        .sample_run = rknpu_sample,
    },
    {
        .name = "aicore",
        .summary = "Huawei Ascend AICore-class (Ascend 310, 910); model: the stand-in of regs.h",
        .pci_ids = {{0x19e5, 0xd100}, {0x19e5, 0xd801}, {AICORE_PCI_VENDOR, AICORE_PCI_DEVICE}},
        .class_code = AICORE_PCI_CLASS,
        .model_id = {AICORE_PCI_VENDOR, AICORE_PCI_DEVICE},
        .model_create = aicore_model_create,
        .model_destroy = aicore_model_destroy,
        .model_count_compute = aicore_model_count_compute,
        .model_create_small = aicore_model_create_small,
        .driver_open = aicore_driver_open,
        .driver_open_deadline = aicore_driver_open_deadline,
        .driver_close = aicore_driver_close,
        .sample_run = aicore_sample,
    },
};

#define NR_DEVICES (sizeof(devices) / sizeof(devices[0]))

const struct npv_device_entry *npv_device_find(const char *name)
{
    for (size_t i = 0; i < NR_DEVICES; i++)
        if (strcmp(devices[i].name, name) == 0)
            return &devices[i];
    return NULL;
}

const struct npv_device_entry *npv_device_by_pci_id(uint16_t vendor, uint16_t device)
{
    for (size_t i = 0; i < NR_DEVICES; i++)
        for (size_t k = 0; k < NPV_DEVICE_MAX_PCI_IDS && devices[i].pci_ids[k].vendor != 0; k++)
            if (devices[i].pci_ids[k].vendor == vendor && devices[i].pci_ids[k].device == device)
                return &devices[i];
    return NULL;
}

const struct npv_device_entry *npv_device_by_model_id(uint16_t vendor, uint16_t device)
{
    for (size_t i = 0; i < NR_DEVICES; i++)
        if (devices[i].model_create != NULL && devices[i].model_id.vendor == vendor &&
            devices[i].model_id.device == device)
            return &devices[i];
    return NULL;
}

const struct npv_device_entry *npv_device_at(size_t i)
{
    return i < NR_DEVICES ? &devices[i] : NULL;
}

static int serve_model(const struct npv_device_entry *e,
                       int (*create)(struct npv_ctx *, void **, struct npv_vus **),
                       const char *socket_path, bool once, struct npv_model_compute *compute)
{
    if (create == NULL)
        return -ENOTSUP;
    struct npv_ctx *ctx;
    void *model;
    struct npv_vus *srv;
    int r = npv_ctx_new(&ctx);
    if (r < 0)
        return r;
    r = create(ctx, &model, &srv);
    if (r < 0)
        goto out_ctx;
    if (compute != NULL && e->model_count_compute != NULL)
        e->model_count_compute(model, compute);
    r = npv_vus_listen(srv, socket_path);
    if (r == 0)
        r = npv_vus_run(srv, once);
    e->model_destroy(model);
out_ctx:
    npv_ctx_free(ctx);
    return r;
}

int npv_device_serve(const struct npv_device_entry *e, const char *socket_path, bool once)
{
    return serve_model(e, e->model_create, socket_path, once, NULL);
}

int npv_device_serve_counted(const struct npv_device_entry *e, const char *socket_path, bool once,
                             struct npv_model_compute *compute)
{
    return serve_model(e, e->model_create, socket_path, once, compute);
}

int npv_device_serve_small(const struct npv_device_entry *e, const char *socket_path, bool once)
{
    return serve_model(e, e->model_create_small ? e->model_create_small : e->model_create,
                       socket_path, once, NULL);
}
