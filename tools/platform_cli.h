/* SPDX-License-Identifier: MIT */
/*
 * Platform devices in the npuvfio commands: a device is named by its sysfs
 * name ("fdab0000.npu"); PCI addresses keep their form. list shows the
 * platform devices VFIO could take or that are known NPUs, info and
 * bind/unbind take either kind.
 */
#ifndef NPV_PLATFORM_CLI_H
#define NPV_PLATFORM_CLI_H

#include <stdbool.h>
#include <npuvfio/platform.h>

#include "cli.h"
#include "info_vfio.h"
#include "json_out.h"

enum cli_dev_kind { CLI_DEV_PCI, CLI_DEV_PLATFORM };

/*
 * A device argument: a platform device when bus/platform/devices/TEXT
 * exists, else a PCI address (canonical form in canon, NPV_PLATFORM_NAME_LEN
 * bytes). Prints the error and returns CLI_USAGE when TEXT is malformed as
 * both, CLI_FAILED when no such device exists.
 */
int cli_resolve_device(struct npv_cli *cli, const char *text, char *canon, enum cli_dev_kind *kind);

/* The platform devices list shows, read once: malloc'd, free() it. */
struct platform_listing {
    struct npv_platform_dev *devs;
    size_t n;
};
int platform_listing_read(struct npv_cli *cli, struct platform_listing *l);
void platform_listing_text(const struct platform_listing *l, bool npu_only);
/* "platform_devices": [...] into the open JSON object. */
void platform_listing_json(struct json_out *j, const struct platform_listing *l, bool npu_only);

/* npuvfio info for a platform device. */
int platform_info(struct npv_cli *cli, const char *name, enum info_open_mode mode);

#endif
