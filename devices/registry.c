/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "edgetpu/model.h"
#include "edgetpu/regs.h"
#include "registry.h"
#include "testdev/model.h"
#include "testdev/regs.h"

static int testdev_create(struct npv_ctx *ctx, void **model, struct npv_vus **srv)
{
    struct npv_testdev_model *td;
    int r = npv_testdev_model_new(ctx, &td);
    if (r < 0)
        return r;
    *model = td;
    *srv = npv_testdev_model_server(td);
    return 0;
}

static void testdev_destroy(void *model)
{
    npv_testdev_model_free(model);
}

static int edgetpu_create(struct npv_ctx *ctx, void **model, struct npv_vus **srv)
{
    struct npv_edgetpu_model *m;
    int r = npv_edgetpu_model_new(ctx, &m);
    if (r < 0)
        return r;
    *model = m;
    *srv = npv_edgetpu_model_server(m);
    return 0;
}

static void edgetpu_destroy(void *model)
{
    npv_edgetpu_model_free(model);
}

static const struct npv_device_model models[] = {
    {
        .name = "testdev",
        .summary = "generic DMA test engine: descriptor ring, mmapped doorbell, MSI-X",
        .vendor_id = TESTDEV_PCI_VENDOR,
        .device_id = TESTDEV_PCI_DEVICE,
        .class_code = TESTDEV_PCI_CLASS,
        .create = testdev_create,
        .destroy = testdev_destroy,
    },
    {
        .name = "edgetpu",
        .summary = "Coral Edge TPU (Apex): BAR2 CSRs, device MMU, instruction queue, int8 executor",
        .vendor_id = EDGETPU_PCI_VENDOR,
        .device_id = EDGETPU_PCI_DEVICE,
        .class_code = EDGETPU_PCI_CLASS,
        .create = edgetpu_create,
        .destroy = edgetpu_destroy,
    },
};

const struct npv_device_model *npv_device_model_find(const char *name)
{
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
        if (strcmp(models[i].name, name) == 0)
            return &models[i];
    return NULL;
}

const struct npv_device_model *npv_device_model_at(size_t i)
{
    return i < sizeof(models) / sizeof(models[0]) ? &models[i] : NULL;
}
