/* SPDX-License-Identifier: MIT */
/*
 * A hostile vfio-user client, for every device model: a raw socket in the
 * test process speaking the protocol by hand (helpers vu_raw_*), against a
 * device server in a child process, and the protocol probes every model must
 * pass (vu_hostile_add_cases): malformed and out-of-order messages, bad
 * lengths and fds, bad region / IRQ / DMA arguments, unsupported commands.
 * Each probe expects an error reply or a disconnect; afterwards a
 * well-formed client is still served (it reads the target's ID register) and
 * the server holds no more fds than before.
 *
 * One target per test process: vu_hostile_set_target() first, then
 * vu_hostile_start / vu_hostile_stop as the TCase fixture (vu_hostile_add_cases
 * installs it). Device-specific cases in the same suite use the same server
 * through vu_hostile_path() / vu_hostile_pid() and the vu_raw_* helpers.
 */
#ifndef NPV_TEST_VU_HOSTILE_H
#define NPV_TEST_VU_HOSTILE_H

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "child_server.h"
#include "vfio_user_msg.h"

#define VU_RAW_TIMEOUT_NS (20ll * 1000000000ll)

struct vu_hostile_target {
    /* Start the device's server in a child process (returns once it listens). */
    void (*start)(struct vu_server *s);
    /* A register a well-formed client reads: region, offset, width and its value. */
    uint32_t id_region;
    uint64_t id_offset;
    uint32_t id_width;
    uint64_t id_value;
    /* Size of region 0, for the probes past its end. */
    uint64_t region0_size;
};

void vu_hostile_set_target(const struct vu_hostile_target *t);
void vu_hostile_start(void);
void vu_hostile_stop(void);
const char *vu_hostile_path(void);
pid_t vu_hostile_pid(void);
/* Add the protocol probes to tc, with vu_hostile_start/stop as its fixture. */
void vu_hostile_add_cases(TCase *tc);
/* Handshake, device info, the target's ID register. */
void vu_hostile_well_formed_client_is_served(void);

/* ---- the raw client ---- */
int vu_raw_conn(void);
/* Send a command and receive its reply. Returns 0, or the recv error (disconnect). */
int vu_raw_xfer(int fd, uint16_t cmd, const void *body, size_t len, const int *fds, unsigned nfds,
                struct npv_vu_msg *rep);
/* Expect an error reply with errno err. */
void vu_raw_expect_error(int fd, uint16_t cmd, const void *body, size_t len, uint32_t err);
/* Expect that the server closes the connection (after optional error replies); closes fd. */
void vu_raw_expect_disconnect(int fd);
/* VERSION proposing max_msg_fds 8. */
int vu_raw_handshake(void);
/* VERSION with json (NULL: no version data); the reply stays in *rep, its capabilities in caps. */
int vu_raw_handshake_with(const char *json, struct npv_vu_caps *caps, struct npv_vu_msg *rep);
/* A region access of width bytes: 0 (and *v for a read) or the errno the server replied. */
uint32_t vu_raw_access(int fd, uint32_t region, uint64_t off, uint32_t width, bool write,
                       uint64_t *v);
uint64_t vu_raw_read(int fd, uint32_t region, uint64_t off, uint32_t width);
void vu_raw_write(int fd, uint32_t region, uint64_t off, uint32_t width, uint64_t v);
/* DMA_MAP without an fd: the server reaches the memory only by messages. */
void vu_raw_dma_map_nofd(int fd, uint64_t address, uint64_t size);
/* DMA_MAP of a new memfd of size bytes at iova; returns the client's view (munmap it). */
void *vu_raw_dma_map_memfd(int fd, uint64_t iova, size_t size);
/* The server's open fds once it is steady without a client, and a wait for them to return. */
int vu_raw_baseline_fds(void);
void vu_raw_expect_fds_back_to(int baseline);

#endif
