/* SPDX-License-Identifier: MIT */
/*
 * The model's side of compiled models (internal): what the Edge TPU model can
 * check of a chunk the driver made it fetch, given the same package, and the
 * data-path pattern it writes in place of outputs it cannot compute (it does
 * not execute DarwiNN code).
 *
 * Called by the model (model_pkg.c) on every chunk of a package it runs.
 */
#ifndef NPV_EDGETPU_PACKAGE_CHECK_H
#define NPV_EDGETPU_PACKAGE_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <npuvfio/edgetpu_model.h>

/* The addresses a linked chunk carries, halves joined per buffer. */
struct edgetpu_pkg_addrs {
    uint64_t *inputs;  /* [nr_inputs * batch_size], caller's; input i, batch b at i * batch + b */
    uint64_t *outputs; /* [nr_outputs * batch_size], caller's */
    bool *input_seen;  /* the same shape: a field of that buffer is in the chunk */
    bool *output_seen;
    uint64_t parameters, scratch;
    bool parameters_seen, scratch_seen;
};

/*
 * Whether a fetched chunk (len bytes) is chunk i of exe as the driver must
 * link it: the same size, every bit equal to the bitstream except the bits of
 * the fields the link patches (input and output fields always; parameter
 * fields when the executable has parameters, scratch fields when it has
 * scratch: libedgetpu InstructionBuffers::LinkInstructionBuffers links only
 * valid buffers, so other fields stay as compiled). 0, -EMSGSIZE for another
 * size, -EPROTO for a differing bit (*bad_bit = the first one, when not NULL),
 * -EINVAL, -ERANGE for a chunk past the last.
 */
int edgetpu_pkg_check_chunk(const struct npv_edgetpu_model_exe *exe, uint32_t i,
                            const void *fetched, size_t len, uint64_t *bad_bit);

/*
 * The addresses a fetched chunk i carries in its patched fields (a half that
 * no field carries is 0). Call after edgetpu_pkg_check_chunk succeeded; a's
 * arrays are the caller's, sized as above, and are cleared first.
 */
int edgetpu_pkg_chunk_addrs(const struct npv_edgetpu_model_exe *exe, uint32_t i,
                            const void *fetched, size_t len, struct edgetpu_pkg_addrs *a);

/*
 * The documented data-path pattern of output layer o for one batch element:
 * h = FNV-1a 64 over the bytes of every input layer in order (size_bytes of
 * each, from inputs[i]), then the output layer's name and its NUL; byte k of
 * the output is byte k % 8 (little-endian) of splitmix64(h + k / 8). Writes
 * len bytes into dst (len is normally the layer's size_bytes). It proves that
 * the inputs were read from and the output written to the linked addresses;
 * it is never the network's answer. 0, -EINVAL, -ERANGE for o past the last.
 */
int edgetpu_pkg_pattern(const struct npv_edgetpu_model_exe *exe, uint32_t o,
                        const uint8_t *const *inputs, uint8_t *dst, size_t len);

#endif
