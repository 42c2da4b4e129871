/* SPDX-License-Identifier: MIT */
/*
 * The device table: every device npuvfio knows, by name and by PCI id, with
 * what the tree has for it: a model the simulator runner can start (`npuvfio
 * sim --device NAME`), a driver, and a sample workload with its CPU check
 * (`npuvfio run --device NAME`). The CLI and the bench find devices here
 * only; a device family adds one entry in registry.c. The library (lib/)
 * knows no device.
 */
#ifndef NPV_DEVICES_REGISTRY_H
#define NPV_DEVICES_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/vfio_user_server.h>

#include "model_compute.h"
#include "sample_workload.h"

#define NPV_DEVICE_MAX_PCI_IDS 4

struct npv_device_pci_id {
    uint16_t vendor, device; /* 0:0 ends the list */
};

struct npv_device_entry {
    const char *name;
    const char *summary;
    /* The PCI functions that are this device; none for a platform device. */
    struct npv_device_pci_id pci_ids[NPV_DEVICE_MAX_PCI_IDS];
    uint32_t class_code; /* what the model reports; 0 without a model */
    /*
     * The vendor:device the model's config space presents: the same constants
     * its npv_vus_config uses (model.c); 0:0 without a model. A platform
     * device's PCI-shaped model has one although pci_ids is empty.
     */
    struct npv_device_pci_id model_id;

    /* The model: build it and its vfio-user server (not yet listening). NULL: no model yet. */
    int (*model_create)(struct npv_ctx *ctx, void **model, struct npv_vus **srv);
    /* Stop the model's threads and free it with its server. */
    void (*model_destroy)(void *model);
    /*
     * Have the model add its workers' compute time to *c (model_compute.h)
     * from now on; before it listens. NULL: the model does not measure it.
     */
    void (*model_count_compute)(void *model, struct npv_model_compute *c);
    /*
     * The model at the smallest size that still takes every path of its driver
     * (freed with model_destroy), for the failure walk, which walks paths, not
     * their repetitions over many identical units. NULL: model_create is that.
     */
    int (*model_create_small)(struct npv_ctx *ctx, void **model, struct npv_vus **srv);

    /* The driver on an opened device, with its defaults. NULL: no driver yet. */
    int (*driver_open)(struct npv_dev *dev, void **drv);
    /*
     * The driver with every deadline of its config (job or request, reset,
     * handshake, register poll) set to deadline_ns; 0: the defaults. For
     * tests that wait deadlines out by design (the failure walk).
     */
    int (*driver_open_deadline)(struct npv_dev *dev, uint64_t deadline_ns, void **drv);
    void (*driver_close)(void *drv);

    /* The sample workload on an open driver. NULL: none yet. */
    int (*sample_run)(void *drv, const struct npv_sample_opts *opts, struct npv_sample_result *res);
};

/* The entry named name, or NULL. */
const struct npv_device_entry *npv_device_find(const char *name);
/* The entry whose PCI ids include vendor:device, or NULL. */
const struct npv_device_entry *npv_device_by_pci_id(uint16_t vendor, uint16_t device);
/* The entry whose model presents vendor:device (model_id), or NULL. */
const struct npv_device_entry *npv_device_by_model_id(uint16_t vendor, uint16_t device);
/* Entries in registration order; NULL past the end. */
const struct npv_device_entry *npv_device_at(size_t i);

/*
 * Run e's model as a vfio-user server on socket_path in the calling thread,
 * until the first client leaves (once) or forever; for a child process or a
 * thread of its own. -ENOTSUP when e has no model; else 0 or a negative errno.
 */
int npv_device_serve(const struct npv_device_entry *e, const char *socket_path, bool once);
/*
 * npv_device_serve with the model's compute time added to *compute (which may
 * be memory shared with the process that reads it), when e's model measures it.
 */
int npv_device_serve_counted(const struct npv_device_entry *e, const char *socket_path, bool once,
                             struct npv_model_compute *compute);
/* The same with e's small model (model_create_small, else model_create). */
int npv_device_serve_small(const struct npv_device_entry *e, const char *socket_path, bool once);

#endif
