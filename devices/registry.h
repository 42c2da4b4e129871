/* SPDX-License-Identifier: MIT */
/*
 * The device model registry: every model the simulator runner can start
 * (`npuvfio sim --device NAME`), by name. A model family adds one entry in
 * registry.c; nothing else in the tree names models.
 */
#ifndef NPV_DEVICES_REGISTRY_H
#define NPV_DEVICES_REGISTRY_H

#include <stddef.h>
#include <stdint.h>
#include <npuvfio/ctx.h>
#include <npuvfio/vfio_user_server.h>

struct npv_device_model {
    const char *name;
    const char *summary;
    uint16_t vendor_id, device_id;
    uint32_t class_code;
    /* Build the model and its vfio-user server (not yet listening). */
    int (*create)(struct npv_ctx *ctx, void **model, struct npv_vus **srv);
    /* Stop the model's threads and free it with its server. */
    void (*destroy)(void *model);
};

/* The entry named name, or NULL. */
const struct npv_device_model *npv_device_model_find(const char *name);
/* Entries in registration order; NULL past the end. */
const struct npv_device_model *npv_device_model_at(size_t i);

#endif
