/* SPDX-License-Identifier: MIT */
/* A loaded Edge TPU compiled model (npuvfio/edgetpu_model.h), inside: package.c, package_check.c.
 */
#ifndef NPV_EDGETPU_PACKAGE_INTERNAL_H
#define NPV_EDGETPU_PACKAGE_INTERNAL_H

#include <npuvfio/edgetpu_model.h>

/* Executables a package may carry: one of each type at most. */
#define PKG_MAX_EXES 3

struct npv_edgetpu_model_exe {
    struct npv_edgetpu_exe_info info;
    struct npv_edgetpu_chunk *chunks;       /* info.nr_chunks */
    struct npv_edgetpu_model_field *fields; /* every chunk's, chunk by chunk */
    struct npv_edgetpu_layer *inputs;       /* info.nr_inputs */
    struct npv_edgetpu_layer *outputs;      /* info.nr_outputs */
};

struct npv_edgetpu_model {
    uint8_t *file; /* our copy; every pointer above points into it */
    size_t size;
    struct npv_edgetpu_model_exe exes[PKG_MAX_EXES];
    unsigned nr_exes;
    struct npv_edgetpu_model_exe *main;
    struct npv_edgetpu_model_exe *caching; /* NULL for a stand-alone model */
};

/* Write the low 32 bits of v LSB first at bit offset bit of buf (libedgetpu
 * ExecutableUtil::CopyUint32). */
void edgetpu_pkg_put32(uint8_t *buf, uint32_t bit, uint32_t v);
/* The 32 bits at bit offset bit of buf, LSB first. */
uint32_t edgetpu_pkg_get32(const uint8_t *buf, uint32_t bit);

#endif
