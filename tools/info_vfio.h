/* SPDX-License-Identifier: MIT */
/* The VFIO half of `npuvfio info`: open a vfio-pci or vfio-platform device and describe it. */
#ifndef NPV_INFO_VFIO_H
#define NPV_INFO_VFIO_H

#include <stdbool.h>

#include "cli.h"
#include "info_device.h"
#include "json_out.h"

/*
 * Open canon (bound to vfio-pci, or with platform to vfio-platform) in a fresh domain and print its
 * backend, regions, IRQs, IOVA ranges and coherency: text on stdout, or as the value of the current
 * JSON key when j is not NULL; while it is open, peek id's registers (id may be NULL). Returns 0,
 * or a negative errno after printing the reason as part of the report (and copying it to why).
 */
int info_vfio(struct npv_cli *cli, const char *canon, bool platform, struct json_out *j, char *why,
              size_t len, struct info_device *id);

enum info_open_mode {
    INFO_OPEN_AUTO,     /* open when the device is on its VFIO driver */
    INFO_OPEN_REQUIRED, /* --open: a device that cannot be opened fails the command */
    INFO_OPEN_NEVER,    /* --no-open */
};

/*
 * The rest of `info` after the device's own part: the VFIO part as mode asks
 * (bound: the device is on its VFIO driver), then the device part (id:
 * its kind, PCI revision and version registers, peeked while open; the
 * "device" key, last of the document), the end of the JSON document (j not
 * NULL: its top-level object is still open), and the one error line. Returns
 * the exit status.
 */
int info_vfio_finish(struct npv_cli *cli, const char *name, bool platform, bool bound,
                     enum info_open_mode mode, struct json_out *j, struct info_device *id);

#endif
