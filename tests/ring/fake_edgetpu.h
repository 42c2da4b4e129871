/* SPDX-License-Identifier: MIT */
/*
 * An in-process device shaped like the Edge TPU's instruction queue
 * (google-coral/libedgetpu: driver/hardware_structures.h HostQueueDescriptor
 * and HostQueueStatusBlock, driver/mmio/host_queue.h HostQueue::Enqueue and
 * ProcessStatusBlock), strict like the hardware:
 *   - 16-byte descriptors {u64 address, u32 size_in_bytes, u32 reserved};
 *   - a 16-byte status block {u32 completed_head, u32 fatal_error, u64 reserved}
 *     whose completed head is a ring index, masked to the ring size;
 *   - a 64-bit tail doorbell that takes the masked index; one slot stays free;
 *   - a sticky fatal_error that stays set, and stops the queue, until reset.
 * The fake carries a sequence number in `address` and checks it, so a
 * descriptor written to the wrong slot is caught; a tail written unmasked
 * (>= entries) or a non-zero reserved word is a fatal error, as a strict
 * device would treat it.
 */
#ifndef NPV_TEST_FAKE_EDGETPU_H
#define NPV_TEST_FAKE_EDGETPU_H

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>

#include <npuvfio/ring.h>

#define ETPU_ENTRIES  256u
#define ETPU_TAIL_OFF 0x485a8u /* instruction_queue_tail (libedgetpu beagle_csr_offsets.h) */
#define ETPU_BAR_SIZE 0x49000u

/* fatal_error codes the fake writes. */
#define ETPU_FATAL_INJECTED 0x1u
#define ETPU_FATAL_BAD_TAIL 0x2u
#define ETPU_FATAL_BAD_DESC 0x3u

struct etpu_desc {
    uint64_t address;
    uint32_t size_in_bytes;
    uint32_t reserved;
};
static_assert(sizeof(struct etpu_desc) == 16, "HostQueueDescriptor is 16 bytes");

struct etpu_status {
    uint32_t completed_head;
    uint32_t fatal_error;
    uint64_t reserved;
};
static_assert(sizeof(struct etpu_status) == 16, "HostQueueStatusBlock is 16 bytes");

struct fake_etpu {
    uint32_t entries;           /* ETPU_ENTRIES, or fewer to wrap often */
    uint64_t wraps;             /* times the completed head wrapped to slot 0 */
    struct etpu_desc *ring;     /* one page */
    struct etpu_status *status; /* its own page, as libedgetpu lays them out */
    uint8_t *bar_mem;
    uint8_t direct[ETPU_BAR_SIZE / 4096]; /* every page mapped */
    struct npv_bar bar;
    uint32_t fetched;    /* ring index of the next descriptor to fetch */
    uint64_t expect_seq; /* the address the next descriptor must carry */
    bool resync;
    bool hang;
    uint32_t fatal_after; /* nonzero: raise ETPU_FATAL_INJECTED after this many more */
    unsigned resets;
};

/* entries: a power of two up to ETPU_ENTRIES (the hardware's is 256). */
void fake_etpu_init(struct fake_etpu *d, uint32_t entries, struct npv_ring_config *cfg);
void fake_etpu_fini(struct fake_etpu *d);
uint64_t fake_etpu_tail(const struct fake_etpu *d);
/* Fetch and complete up to max descriptors between the head and the tail; returns how many. */
uint32_t fake_etpu_step(struct fake_etpu *d, uint32_t max);
void fake_etpu_write_head(struct fake_etpu *d, uint32_t head);

#endif
