/* SPDX-License-Identifier: MIT */
/* What the platform-bus modules share. */
#ifndef NPV_PLATFORM_INTERNAL_H
#define NPV_PLATFORM_INTERNAL_H

#include <npuvfio/platform.h>

#include "sysfs_internal.h"

/*
 * Check that name is a platform device name and the device exists, logging
 * why not: -EINVAL malformed, -ENODEV absent.
 */
int npv_platform_resolve(struct npv_ctx *ctx, const char *name);

#endif
