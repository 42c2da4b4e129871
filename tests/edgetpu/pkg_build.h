/* SPDX-License-Identifier: MIT */
/*
 * Tests' own builder of small compiled-model files (a TFLite flatbuffer with
 * edgetpu-custom-op operators, FlexBuffers custom options, a DWN1 package),
 * so each refusal and each consistency check of the loader meets a file made
 * to break exactly that rule. Back-to-front like FlatBuffers builders, no
 * alignment (our reader needs none). Layouts: TFLite schema.fbs,
 * libedgetpu executable.fbs and tflite/custom_op_data.cc, flexbuffers.h.
 */
#ifndef NPV_TEST_PKG_BUILD_H
#define NPV_TEST_PKG_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What to make of the one executable (or the package around it). */
struct pkg_spec {
    int16_t type;            /* ExecutableType; -1: two executables, caching + execution-only */
    int32_t batch;           /* batch_size */
    bool dram_params;        /* use_tpu_dram_for_parameters */
    int32_t virtual_chip;    /* Package.virtual_chip_id */
    bool multi_chip;         /* one entry in multi_chip_package */
    unsigned nr_ops;         /* edgetpu-custom-op operators in the graph */
    unsigned nr_chips;       /* entries of custom options key "6" (0: key absent) */
    int32_t field_bit[4];    /* the bit offsets of in-lo, in-hi, out-lo, out-hi */
    const char *field_layer; /* the input fields' layer name ("in") */
    int32_t field_batch;     /* the input fields' batch */
    int16_t field_desc;      /* the first field's Description (1, input) */
    uint64_t token;          /* parameter_caching_token of the caching executable */
    bool dup_layer;          /* two input layers named "in" */
};

/* The defaults: a valid stand-alone model, 64-byte chunk, fields at bits 3, 40, 77, 200. */
void pkg_spec_default(struct pkg_spec *s);
/* Build the file; returns its size, *out malloc'ed. */
size_t pkg_build(const struct pkg_spec *s, uint8_t **out);

#endif
