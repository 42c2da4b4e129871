/* SPDX-License-Identifier: MIT */
#include <stddef.h>
#include <string.h>

#include "sample.h"

#define L1_MULT  728 /* ~1/90 in Q16: typical accumulators land in int8 range */
#define L1_SHIFT 16u
#define L2_MULT  520
#define L2_SHIFT 16u
#define L2_ZP    (-3)

static uint32_t xorshift(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *s = x;
    return x;
}

static void add_field(struct edgetpu_sample *s, uint32_t insn, size_t field_off, uint8_t base,
                      uint32_t offset)
{
    for (uint8_t half = 0; half < 2; half++) {
        struct npv_edgetpu_field *f = &s->fields[s->desc.nr_fields++];
        f->bit_offset = (uint32_t)(insn * NPV_EDGETPU_INSN_SIZE + field_off + 4u * half) * 8u;
        f->base = base;
        f->index = 0;
        f->half = half;
        f->offset = offset;
    }
}

void edgetpu_sample_init(struct edgetpu_sample *s, uint32_t seed)
{
    uint32_t st = seed ? seed : 1;
    memset(s, 0, sizeof(*s));
    for (uint32_t i = 0; i < EDGETPU_SAMPLE_HIDDEN * EDGETPU_SAMPLE_IN; i++)
        s->params[EDGETPU_SAMPLE_W1_OFF + i] = (uint8_t)(int8_t)((int)(xorshift(&st) % 64) - 32);
    for (uint32_t i = 0; i < EDGETPU_SAMPLE_HIDDEN; i++) {
        int32_t b = (int32_t)(xorshift(&st) % 4001) - 2000;
        memcpy(s->params + EDGETPU_SAMPLE_B1_OFF + 4 * i, &b, 4);
    }
    for (uint32_t i = 0; i < EDGETPU_SAMPLE_OUT * EDGETPU_SAMPLE_HIDDEN; i++)
        s->params[EDGETPU_SAMPLE_W2_OFF + i] = (uint8_t)(int8_t)((int)(xorshift(&st) % 64) - 32);
    for (uint32_t i = 0; i < EDGETPU_SAMPLE_OUT; i++) {
        int32_t b = (int32_t)(xorshift(&st) % 4001) - 2000;
        memcpy(s->params + EDGETPU_SAMPLE_B2_OFF + 4 * i, &b, 4);
    }
    s->insn[0] = (struct npv_edgetpu_insn){.opcode = NPV_EDGETPU_OP_FC,
                                           .flags = NPV_EDGETPU_FC_RELU,
                                           .rows = EDGETPU_SAMPLE_ROWS,
                                           .in_features = EDGETPU_SAMPLE_IN,
                                           .out_features = EDGETPU_SAMPLE_HIDDEN,
                                           .multiplier = L1_MULT,
                                           .shift = L1_SHIFT,
                                           .output_zero_point = 0};
    s->insn[1] = (struct npv_edgetpu_insn){.opcode = NPV_EDGETPU_OP_FC,
                                           .rows = EDGETPU_SAMPLE_ROWS,
                                           .in_features = EDGETPU_SAMPLE_HIDDEN,
                                           .out_features = EDGETPU_SAMPLE_OUT,
                                           .multiplier = L2_MULT,
                                           .shift = L2_SHIFT,
                                           .output_zero_point = L2_ZP};
    s->insn[2] =
        (struct npv_edgetpu_insn){.opcode = NPV_EDGETPU_OP_SC_HOST_INT, .output_zero_point = 0};
    add_field(s, 0, offsetof(struct npv_edgetpu_insn, input_lo), NPV_EDGETPU_BASE_INPUT, 0);
    add_field(s, 0, offsetof(struct npv_edgetpu_insn, weights_lo), NPV_EDGETPU_BASE_PARAMETER,
              EDGETPU_SAMPLE_W1_OFF);
    add_field(s, 0, offsetof(struct npv_edgetpu_insn, bias_lo), NPV_EDGETPU_BASE_PARAMETER,
              EDGETPU_SAMPLE_B1_OFF);
    add_field(s, 0, offsetof(struct npv_edgetpu_insn, output_lo), NPV_EDGETPU_BASE_SCRATCH, 0);
    add_field(s, 1, offsetof(struct npv_edgetpu_insn, input_lo), NPV_EDGETPU_BASE_SCRATCH, 0);
    add_field(s, 1, offsetof(struct npv_edgetpu_insn, weights_lo), NPV_EDGETPU_BASE_PARAMETER,
              EDGETPU_SAMPLE_W2_OFF);
    add_field(s, 1, offsetof(struct npv_edgetpu_insn, bias_lo), NPV_EDGETPU_BASE_PARAMETER,
              EDGETPU_SAMPLE_B2_OFF);
    add_field(s, 1, offsetof(struct npv_edgetpu_insn, output_lo), NPV_EDGETPU_BASE_OUTPUT, 0);
    s->desc.instructions = s->insn;
    s->desc.instructions_size = sizeof(s->insn);
    s->desc.fields = s->fields;
    s->desc.parameters = s->params;
    s->desc.parameters_size = sizeof(s->params);
    s->desc.scratch_size = EDGETPU_SAMPLE_ROWS * EDGETPU_SAMPLE_HIDDEN;
    s->desc.nr_inputs = 1;
    s->desc.nr_outputs = 1;
}

void edgetpu_sample_input(uint32_t n, int8_t x[EDGETPU_SAMPLE_INPUT_BYTES])
{
    uint32_t st = n * 2654435761u + 12345u;
    for (uint32_t i = 0; i < EDGETPU_SAMPLE_INPUT_BYTES; i++)
        x[i] = (int8_t)((int)(xorshift(&st) % 128) - 64);
}

/* The documented arithmetic, written out on its own (not shared with the model's executor). */
static void fc_ref(const int8_t *x, const int8_t *w, const uint8_t *bias_bytes, int8_t *y,
                   uint32_t nin, uint32_t nout, int32_t mult, uint32_t shift, int32_t zp, int relu)
{
    for (uint32_t r = 0; r < EDGETPU_SAMPLE_ROWS; r++)
        for (uint32_t o = 0; o < nout; o++) {
            int32_t b;
            memcpy(&b, bias_bytes + 4 * o, 4);
            int64_t acc = b;
            for (uint32_t i = 0; i < nin; i++)
                acc += (int64_t)x[r * nin + i] * w[o * nin + i];
            int64_t v = (int64_t)(int32_t)acc * mult;
            if (shift > 0)
                v = (v + ((int64_t)1 << (shift - 1))) >> shift;
            v += zp;
            if (relu && v < zp)
                v = zp;
            if (v > 127)
                v = 127;
            if (v < -128)
                v = -128;
            y[r * nout + o] = (int8_t)v;
        }
}

void edgetpu_sample_reference(const struct edgetpu_sample *s,
                              const int8_t x[EDGETPU_SAMPLE_INPUT_BYTES],
                              int8_t y[EDGETPU_SAMPLE_OUTPUT_BYTES])
{
    int8_t h[EDGETPU_SAMPLE_ROWS * EDGETPU_SAMPLE_HIDDEN];
    fc_ref(x, (const int8_t *)(s->params + EDGETPU_SAMPLE_W1_OFF),
           s->params + EDGETPU_SAMPLE_B1_OFF, h, EDGETPU_SAMPLE_IN, EDGETPU_SAMPLE_HIDDEN, L1_MULT,
           L1_SHIFT, 0, 1);
    fc_ref(h, (const int8_t *)(s->params + EDGETPU_SAMPLE_W2_OFF),
           s->params + EDGETPU_SAMPLE_B2_OFF, y, EDGETPU_SAMPLE_HIDDEN, EDGETPU_SAMPLE_OUT, L2_MULT,
           L2_SHIFT, L2_ZP, 0);
}
