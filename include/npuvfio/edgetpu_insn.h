/* SPDX-License-Identifier: MIT */
/*
 * The instruction format the npuvfio Edge TPU model executes, for programs
 * that build their own executables (npv_edgetpu_load takes a chunk of these).
 *
 * The real DarwiNN instruction stream is undocumented and only Google's
 * edgetpu_compiler produces it; a real chip does not run this format. The
 * driver API (npuvfio/edgetpu.h) is the same for both: a chunk is a sequence
 * of 64-byte instructions, and addresses inside it are device VAs written as
 * two 32-bit halves that the driver patches at load time from the
 * executable's fields (a bit offset plus the half), as the real stack
 * patches MOVI immediates.
 *
 * NPV_EDGETPU_OP_FC: int8 fully connected layer, also a 1x1 convolution over
 * NHWC pixels (rows = pixels):
 *   for r < rows, o < out_features:
 *     acc = bias[o] + sum_i input[r][i] * weights[o][i]          (int32, wraps)
 *     v   = (int64)acc * multiplier, then arithmetic shift right by shift
 *           with rounding half up (add 1 << (shift-1) first when shift > 0)
 *     v  += output_zero_point; ReLU: v = max(v, output_zero_point)
 *     output[r][o] = clamp(v, -128, 127)
 *   input int8 [rows][in_features], weights int8 [out][in], bias int32 [out]
 *   (little-endian), output int8 [rows][out_features]; each a contiguous
 *   range of device VA.
 * NPV_EDGETPU_OP_SC_HOST_INT: raise scalar-core host interrupt `arg` (0..3):
 *   its 16-bit counter in sc_host_int_count advances, its status bit is set,
 *   and its vector (from the packed INTVECCTL) fires when enabled. An
 *   executable ends with SC_HOST_INT 0: that is how the chip says it is done.
 * Anything else: Error_ScalarCore BAD_INSTRUCTION, the queue's fatal error.
 *
 * Types and constants only: no symbols, nothing to link.
 */
#ifndef NPUVFIO_EDGETPU_INSN_H
#define NPUVFIO_EDGETPU_INSN_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

enum npv_edgetpu_opcode {
    NPV_EDGETPU_OP_NOP = 0,
    NPV_EDGETPU_OP_FC = 1,
    NPV_EDGETPU_OP_SC_HOST_INT = 2,
};

#define NPV_EDGETPU_FC_RELU (1u << 0)

#define NPV_EDGETPU_INSN_SIZE   64u
#define NPV_EDGETPU_FC_MAX_DIM  4096u
#define NPV_EDGETPU_FC_MAX_ROWS 4096u
#define NPV_EDGETPU_CHUNK_MAX   (64u * 1024u)

struct npv_edgetpu_insn {
    uint32_t opcode;
    uint32_t flags; /* NPV_EDGETPU_FC_* */
    uint32_t input_lo, input_hi;
    uint32_t weights_lo, weights_hi;
    uint32_t bias_lo, bias_hi;
    uint32_t output_lo, output_hi;
    uint32_t rows;
    uint32_t in_features;
    uint32_t out_features;
    int32_t multiplier;
    uint32_t shift;            /* 0..62 */
    int32_t output_zero_point; /* also the SC_HOST_INT interrupt number */
};
static_assert(sizeof(struct npv_edgetpu_insn) == NPV_EDGETPU_INSN_SIZE, "instruction is 64 bytes");
static_assert(offsetof(struct npv_edgetpu_insn, input_lo) == 8, "instruction layout");
static_assert(offsetof(struct npv_edgetpu_insn, output_lo) == 32, "instruction layout");
static_assert(offsetof(struct npv_edgetpu_insn, rows) == 40, "instruction layout");
static_assert(offsetof(struct npv_edgetpu_insn, output_zero_point) == 60, "instruction layout");

#endif
