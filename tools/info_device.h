/* SPDX-License-Identifier: MIT */
/*
 * The device part of `npuvfio info --open`: which device this is and what its
 * identity and version registers read, for the hardware runner's record.
 * Read-only: a peek of named registers through the region (pread, or the
 * vfio-user REGION_READ), never a driver's open, which resets cores.
 */
#ifndef NPV_INFO_DEVICE_H
#define NPV_INFO_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include <npuvfio/dev.h>
#include <npuvfio/platform.h>

#include "json_out.h"

#define INFO_DEVICE_MAX_REGS 8

struct info_reg {
    char name[32];
    uint32_t region;
    uint64_t offset;
    uint32_t width; /* bytes: 4 or 8 */
    uint64_t value;
    int err; /* 0, or the read's negative errno */
};

struct info_device {
    const char *kind;   /* "edu", "testdev", "edgetpu", "rknpu", "aicore"; NULL: unknown */
    const char *source; /* the public source (or our spec) that names the registers */
    const char *note;   /* what is not read and why; NULL */
    bool peeked;        /* the device was open and the registers were read */
    int revision;       /* PCI revision ID from config space; -1: not PCI or not read */
    char version[48];   /* the registers' version as the drivers compose it; "" none */
    size_t nregs;
    struct info_reg regs[INFO_DEVICE_MAX_REGS];
};

/* What to read for a PCI function by its ids, or a platform device (NULL: none we know). */
void info_device_init_pci(struct info_device *id, uint16_t vendor, uint16_t device);
void info_device_init_platform(struct info_device *id, const struct npv_platform_dev *d);

/* Read id's registers (and the PCI revision) from the opened dev; errors land per register. */
void info_device_peek(struct info_device *id, struct npv_dev *dev);

/* The "device" object (JSON, as the current key's value) or the text lines. */
void info_device_json(struct json_out *j, const struct info_device *id);
void info_device_text(const struct info_device *id);

#endif
