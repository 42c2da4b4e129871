/* SPDX-License-Identifier: MIT */
/* The VFIO half of `npuvfio info`: open a vfio-pci or vfio-platform device and describe it. */
#ifndef NPV_INFO_VFIO_H
#define NPV_INFO_VFIO_H

#include <stdbool.h>

#include "cli.h"
#include "json_out.h"

/*
 * Open canon (bound to vfio-pci, or with platform to vfio-platform) in a fresh domain and print its
 * backend, regions, IRQs, IOVA ranges and coherency: text on stdout, or as the value of the current
 * JSON key when j is not NULL. Returns 0, or a negative errno after printing the reason as part of
 * the report (and copying it to why).
 */
int info_vfio(struct npv_cli *cli, const char *canon, bool platform, struct json_out *j, char *why,
              size_t len);

#endif
