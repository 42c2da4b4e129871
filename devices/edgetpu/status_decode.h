/* SPDX-License-Identifier: MIT */
/*
 * What the Edge TPU driver concludes from the values the chip writes into
 * its CSRs (bring-up polls, descriptor size, error registers, the SC_HOST_0
 * interrupt counter). The status block (completed head, fatal word) is read
 * by the ring engine (lib/ring, tests/fuzz/fuzz_ring_status). Pure
 * functions: the driver calls exactly these, and tests/fuzz feeds them
 * arbitrary values.
 */
#ifndef NPV_EDGETPU_STATUS_DECODE_H
#define NPV_EDGETPU_STATUS_DECODE_H

#include <stdbool.h>
#include <stdint.h>

#include <npuvfio/edgetpu.h>

/* A 64-bit CSR or a 32-bit SCU register: -ENODEV when all-ones (off the bus), else 0. */
int edgetpu_decode_csr(uint64_t v);
int edgetpu_decode_scu(uint32_t v);
/* A polled register reached (v & mask) == want; the in-reset marker never counts. */
bool edgetpu_reg_settled(uint64_t v, uint64_t mask, uint64_t want);
/* An init-done register (PAGE_TABLE_INIT, MSIX_TABLE_INIT) reads done. */
bool edgetpu_reg_init_done(uint64_t v);
/* IQ descriptor size and HIB error status at bring-up: 0 or -EPROTO. */
int edgetpu_decode_desc_size(uint64_t v);
int edgetpu_decode_bringup_error(uint64_t hib_error_status);

/*
 * The error registers read before a reset: hib_error_status that did not
 * read (all-ones) or reads the in-reset marker is none. True when e reports
 * an error worth keeping as the last one.
 */
bool edgetpu_decode_error(struct npv_edgetpu_error *e);

/*
 * SC_HOST_0 mode: SC_HOST_INT_COUNT field 0 counts requests the chip
 * finished (mod 2^16) since base, *reaped those whose completions the host
 * collected. Returns how many finished requests still have their status
 * block on the way (> 0: poll again); 0 when none. A counter behind the
 * host (requests that raised no SC_HOST_0) moves *reaped back to it.
 */
int edgetpu_sc_host_pending(uint64_t count_reg, uint32_t base, uint32_t *reaped);

/*
 * npv_bar_whole64's answer for a page of 64-bit CSRs: 0 when accesses stay
 * whole, -EOPNOTSUPP when the kernel would split them (refused: a torn CSR
 * write is a wrong value on the chip), or its error.
 */
int edgetpu_decode_whole64(int whole);

#endif
