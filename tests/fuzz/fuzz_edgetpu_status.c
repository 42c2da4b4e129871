/* SPDX-License-Identifier: MIT */
/*
 * The Edge TPU driver's reading of what the chip writes into its CSRs
 * (devices/edgetpu/status_decode.c): byte 0 bit 0 picks the part.
 *  clear  the registers: 8-byte values, each through the all-ones checks,
 *         the poll predicates (mask and want from the next bytes), the
 *         descriptor size and bring-up HIB error checks, and the error
 *         snapshot taken before a reset (4 values per snapshot).
 *  set    SC_HOST_0 completion (wait_sc_host): bytes 1-4 the counter's
 *         value at open, then a script of 3-byte steps, op and a 16-bit n:
 *           op % 4 == 0  the host submits n % 64 requests
 *           op % 4 == 1  the chip finishes n % 64 of them (counter += that)
 *           op % 4 == 2  the host reaps n % 64 completions of finished ones
 *           op % 4 == 3  the counter reads n, any value (a wild chip)
 *         and the driver asks what is pending after each step.
 * Aborts when an all-ones read is not -ENODEV, the in-reset marker or a
 * masked mismatch passes a poll, a wrong size or HIB error passes bring-up,
 * an error snapshot keeps a no-error or drops an error; for SC_HOST_0 when,
 * with an honest counter, pending is not exactly finished minus reaped (a
 * lost wakeup or a spin), or when with any counter the host ends up ahead
 * of the chip or pending leaves [0, 32767].
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include "regs.h"
#include "status_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one_register(uint64_t v, uint64_t mask, uint64_t want)
{
    int r = edgetpu_decode_csr(v);
    require(r == (v == ~0ull ? -ENODEV : 0), "a 64-bit CSR read", v);
    r = edgetpu_decode_scu((uint32_t)v);
    require(r == ((uint32_t)v == UINT32_MAX ? -ENODEV : 0), "a 32-bit SCU read", v);
    bool settled = edgetpu_reg_settled(v, mask, want);
    if (v == EDGETPU_DEADFEED || (v & mask) != want)
        require(!settled, "a poll passed on the in-reset marker or a mismatch", v);
    else
        require(settled, "a poll missed its value", v);
    require(edgetpu_reg_init_done(v) == (v != 0 && v != EDGETPU_DEADFEED), "init done", v);
    r = edgetpu_decode_desc_size(v);
    require(r == 0 ? v == EDGETPU_IQ_DESC_SIZE_VALUE : r == -EPROTO, "descriptor size", v);
    r = edgetpu_decode_bringup_error(v);
    require(r == 0 ? v == 0 : r == -EPROTO, "a HIB error at bring-up", v);
}

static void registers(const uint8_t *data, size_t size)
{
    for (size_t at = 0; at + 24 <= size; at += 24)
        one_register(fuzz_rd64(data + at), fuzz_rd64(data + at + 8), fuzz_rd64(data + at + 16));
    for (size_t at = 0; at + 32 <= size; at += 32) {
        struct npv_edgetpu_error e = {
            .hib_error_status = fuzz_rd64(data + at),
            .page_fault_address = fuzz_rd64(data + at + 8),
            .scalar_core_error = fuzz_rd64(data + at + 16),
            .fatal_word = (uint32_t)fuzz_rd64(data + at + 24),
        };
        uint64_t hib = e.hib_error_status;
        bool keep = edgetpu_decode_error(&e);
        bool hib_real = hib != 0 && hib != ~0ull && hib != EDGETPU_DEADFEED;
        require(e.hib_error_status == (hib_real ? hib : 0), "HIB error normalised wrongly", hib);
        require(keep == (hib_real || e.fatal_word != 0 || e.scalar_core_error != 0),
                "an error snapshot kept or dropped wrongly", hib);
    }
}

static void sc_host(const uint8_t *data, size_t size)
{
    if (size < 4)
        return;
    uint32_t base;
    memcpy(&base, data, sizeof(base));
    base &= 0xffff; /* chip_init keeps field 0 */
    uint64_t submitted = 0, finished = 0, reaped_total = 0;
    uint32_t counter = base, reaped = 0;
    bool honest = true;
    for (size_t at = 4; at + 3 <= size; at += 3) {
        uint8_t op = data[at];
        uint32_t n = (uint32_t)(data[at + 1] | data[at + 2] << 8);
        uint32_t k = n % 64;
        switch (op % 4) {
        case 0:
            submitted += k;
            break;
        case 1:
            k = k < submitted - finished ? k : (uint32_t)(submitted - finished);
            finished += k;
            counter += k;
            break;
        case 2:
            k = k < finished - reaped_total ? k : (uint32_t)(finished - reaped_total);
            reaped_total += k;
            reaped += k; /* wait_sc_host: sc_host_reaped += what the ring returned */
            break;
        default:
            counter = n;
            honest = false;
            break;
        }
        int p = edgetpu_sc_host_pending(counter, base, &reaped);
        require(p >= 0 && p <= INT16_MAX, "pending out of range", p);
        uint32_t chip = (counter - base) & 0xffff;
        require((int16_t)(uint16_t)(chip - reaped) >= 0, "the host ahead of the chip", reaped);
        require(p == (int16_t)(uint16_t)(chip - reaped), "pending is not chip minus host", p);
        if (honest && finished - reaped_total <= INT16_MAX)
            require((uint64_t)p == finished - reaped_total, "a lost wakeup or a spin", (uint64_t)p);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        sc_host(data + 1, size - 1);
    else
        registers(data + 1, size - 1);
    return 0;
}
