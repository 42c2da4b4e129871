/* SPDX-License-Identifier: MIT */
/*
 * The chip's CSRs are input: all-ones means the chip left the bus, DEADFEED
 * means a block is in reset (the value reads return then), and any other
 * value must be in range before it decides anything.
 */
#include <errno.h>

#include "regs.h"
#include "status_decode.h"

int edgetpu_decode_csr(uint64_t v)
{
    return v == ~0ull ? -ENODEV : 0;
}

int edgetpu_decode_scu(uint32_t v)
{
    return v == UINT32_MAX ? -ENODEV : 0;
}

bool edgetpu_reg_settled(uint64_t v, uint64_t mask, uint64_t want)
{
    return v != EDGETPU_DEADFEED && (v & mask) == want;
}

bool edgetpu_reg_init_done(uint64_t v)
{
    return v != 0 && v != EDGETPU_DEADFEED;
}

int edgetpu_decode_desc_size(uint64_t v)
{
    return v == EDGETPU_IQ_DESC_SIZE_VALUE ? 0 : -EPROTO; /* libedgetpu refuses any other */
}

int edgetpu_decode_bringup_error(uint64_t hib_error_status)
{
    return hib_error_status == 0 ? 0 : -EPROTO;
}

bool edgetpu_decode_error(struct npv_edgetpu_error *e)
{
    if (e->hib_error_status == ~0ull || e->hib_error_status == EDGETPU_DEADFEED)
        e->hib_error_status = 0;
    return e->hib_error_status != 0 || e->fatal_word != 0 || e->scalar_core_error != 0;
}

int edgetpu_sc_host_pending(uint64_t count_reg, uint32_t base, uint32_t *reaped)
{
    uint32_t finished = ((uint32_t)count_reg - base) & 0xffff;
    /* Both count mod 2^16: the signed difference says who is ahead. */
    int16_t ahead = (int16_t)(uint16_t)(finished - *reaped);
    if (ahead > 0)
        return ahead;
    if (ahead < 0)
        *reaped = finished; /* requests that raised no SC_HOST_0 */
    return 0;
}

int edgetpu_decode_whole64(int whole)
{
    return whole < 0 ? whole : whole == 0 ? -EOPNOTSUPP : 0;
}
