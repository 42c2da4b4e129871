/* SPDX-License-Identifier: MIT */
/*
 * An in-process stand-in for a ring-shaped device: plain memory for the ring,
 * the status block and a one-page "BAR" holding the doorbell. The test drives
 * it step by step (fake_dev_step) or lets a thread play the device
 * (fake_dev_start). Its descriptor carries a sequence number the device
 * checks, so a slot written to the wrong place is caught.
 */
#ifndef NPV_TEST_FAKE_DEV_H
#define NPV_TEST_FAKE_DEV_H

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <npuvfio/ring.h>

#define FAKE_DB_OFF 0x40u

struct fake_desc {
    uint64_t seq;  /* the job's number as the test counts them */
    uint32_t fail; /* nonzero: the device reports this error word */
    uint32_t pad0;
    uint64_t payload; /* written back to the status block's "last" field */
    uint64_t pad1;
};
static_assert(sizeof(struct fake_desc) == 32, "fake descriptor is 32 bytes");

struct fake_status {
    uint32_t head;
    uint32_t error;
    uint32_t error_index;
    uint32_t pad;
    uint64_t last_payload;
    uint8_t rest[40];
};
static_assert(sizeof(struct fake_status) == 64, "fake status block is one cache line");

struct fake_dev {
    uint32_t entries;
    struct fake_desc *ring;
    struct fake_status *status;
    uint8_t *bar_mem;
    uint8_t direct[1];
    struct npv_bar bar;
    /* Device state. */
    uint32_t consumed;   /* device index of the next descriptor to fetch */
    uint64_t expect_seq; /* the seq the next descriptor must carry */
    uint32_t bad_descs;  /* descriptors with an unexpected seq */
    bool hang;           /* stop completing */
    bool resync;         /* after a reset: take the next seq as it comes */
    /*
     * A per-job error word without an index (ring.h's contract for it): at a
     * failing descriptor the device writes the head over the jobs before it,
     * then the word, and completes the failed job only once the host has
     * cleared the word. false: word and error_index, then the head.
     */
    bool no_index;
    bool halted; /* no_index: stopped at a failed descriptor until the word is cleared */
    unsigned resets;
    int reset_rc; /* what the reset callback returns (then cleared to 0) */
    /* Called by the reset callback once the device is enabled again (NULL: none). */
    void (*on_enable)(struct fake_dev *d);
    void *user;
    int irq_fd;    /* >= 0: an eventfd written once per step that completed something */
    bool borrowed; /* ring and status belong to the test (fake_dev_use_memory) */
    /* Thread mode. */
    pthread_t thread;
    bool stop;
    bool running;
};

/* Allocate memory for a ring of entries and fill a ring config (reset wired up). */
void fake_dev_init(struct fake_dev *d, uint32_t entries, struct npv_ring_config *cfg);
void fake_dev_fini(struct fake_dev *d);
/*
 * Run on the test's memory instead (e.g. npv_dma buffers, so the config can
 * name them for cache maintenance); updates cfg.
 */
void fake_dev_use_memory(struct fake_dev *d, struct npv_ring_config *cfg, void *ring, void *status);
/* The doorbell value the driver last wrote. */
uint32_t fake_dev_doorbell(const struct fake_dev *d);
/* Fetch and complete up to max announced descriptors; returns how many. */
uint32_t fake_dev_step(struct fake_dev *d, uint32_t max);
/* Write a completed head directly (a lying device). */
void fake_dev_write_head(struct fake_dev *d, uint32_t head);
/* A thread completes descriptors as they are announced, until fake_dev_stop. */
int fake_dev_start(struct fake_dev *d);
void fake_dev_stop(struct fake_dev *d);

#endif
