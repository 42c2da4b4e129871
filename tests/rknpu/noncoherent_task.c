/* SPDX-License-Identifier: MIT */
#include "noncoherent_task.h"

#include <errno.h>
#include <string.h>

#include "rknpu/model_internal.h"

/* The model's own walk (model_core.c apply_words), keeping what the decode needs. */
int nc_task_decode(const uint64_t *words, uint32_t count, struct nc_task *out)
{
    static uint32_t regs[RKNPU_CORE_WINDOW_SIZE / 4];
    static uint32_t written[RKNPU_CORE_WINDOW_SIZE / 4 / 32];
    memset(out, 0, sizeof(*out));
    memset(written, 0, sizeof(written));
    uint32_t enable = 0;
    bool started = false;
    for (uint32_t i = 0; i < count && !started; i++) {
        uint16_t tgt = rknpu_regcmd_target(words[i]);
        uint16_t reg = rknpu_regcmd_reg(words[i]);
        uint32_t val = rknpu_regcmd_value(words[i]);
        if (tgt == 0 || tgt == (RKNPU_TGT_BARRIER | RKNPU_TGT_WRITE))
            continue;
        if (tgt == (RKNPU_TGT_OP_EN | RKNPU_TGT_WRITE)) {
            enable = val;
            started = true;
            continue;
        }
        if (!(tgt & RKNPU_TGT_WRITE) || (reg & 3u)) /* reg < 64 KiB: 16 bits */
            return -EINVAL;
        if (tgt == (RKNPU_TGT_PC | RKNPU_TGT_WRITE)) {
            if (reg == RKNPU_PC_BASE_ADDRESS)
                out->next_base = val & RKNPU_PC_BASE_ADDRESS_MASK;
            else if (reg == RKNPU_PC_REGISTER_AMOUNTS)
                out->next_amount = val & RKNPU_PC_REGISTER_AMOUNTS_MASK;
            continue;
        }
        regs[reg / 4u] = val;
        written[reg / 128u] |= 1u << ((reg / 4u) % 32u);
    }
    struct rknpu_matmul mm;
    if (!started || rknpu_matmul_decode(regs, written, enable, &mm) < 0)
        return -EINVAL;
    out->reads[out->nr_reads++] = (struct nc_range){mm.a, rknpu_matmul_a_bytes(&mm)};
    out->reads[out->nr_reads++] = (struct nc_range){mm.b, rknpu_matmul_b_bytes(&mm)};
    if (mm.has_bias)
        out->reads[out->nr_reads++] = (struct nc_range){mm.bias, rknpu_matmul_bias_bytes(&mm)};
    /* C as model_core.c write_c writes it: dense, or surface by surface at DST_SURF_STRIDE. */
    uint64_t nc = rknpu_matmul_c_bytes(&mm), surf = (uint64_t)mm.m * 16u;
    if (mm.c_surface == surf) {
        out->writes[out->nr_writes++] = (struct nc_range){mm.c, nc};
        return 0;
    }
    if (nc / surf > NC_MAX_RANGES)
        return -EINVAL;
    for (uint64_t i = 0; i < nc / surf; i++)
        out->writes[out->nr_writes++] =
            (struct nc_range){(uint32_t)(mm.c + i * mm.c_surface), surf};
    return 0;
}
