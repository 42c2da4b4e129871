/* SPDX-License-Identifier: MIT */
/*
 * The hostile-client probing every device server in the tree passes (the
 * testdev model first, then each device model): a raw vfio-user client in
 * the test process against the server in a child, with malformed messages,
 * bad region / IRQ / DMA requests and what other clients send. After each
 * probe a well-formed client is still served, and the server holds no more
 * fds than before.
 *
 * Use: describe the server (how to serve, one ID register a well-formed
 * client reads back, that register's region size), call vu_hostile_add_tests()
 * with two case groups; add device-specific probes to them with the raw
 * client below (vu_hostile_srv is the server of the running case).
 */
#ifndef NPV_TEST_VU_HOSTILE_H
#define NPV_TEST_VU_HOSTILE_H

#include <check.h>
#include <stdbool.h>
#include <stdint.h>

#include "child_server.h"
#include "vfio_user_msg.h"

#define VU_RAW_TIMEOUT_NS (20ll * 1000000000ll)

struct vu_hostile_target {
    vu_server_fn serve; /* runs in the child: serve on path until killed */
    void *arg;
    uint32_t id_region; /* a register a well-formed client reads: region, offset, width, value */
    uint64_t id_offset;
    uint32_t id_width;
    uint64_t id_value;
    uint64_t region_size; /* the size of id_region */
};

extern struct vu_server vu_hostile_srv;

/* The protocol probes into protocol, the interoperability ones into interop; fixtures included. */
void vu_hostile_add_tests(TCase *protocol, TCase *interop, const struct vu_hostile_target *t);
/* The fixture vu_hostile_add_tests installs, for more case groups on the same target. */
void vu_hostile_setup(void);
void vu_hostile_teardown(void);

void vu_hostile_well_formed_client_is_served(void);
int vu_hostile_baseline_fds(void);
void vu_hostile_expect_fds_back_to(int baseline);

/* The raw client. */
int vu_raw_conn(void);
/* Send a command and receive its reply. Returns 0, or the recv error (disconnect). */
int vu_raw_xfer(int fd, uint16_t cmd, const void *body, size_t len, const int *fds, unsigned nfds,
                struct npv_vu_msg *rep);
void vu_raw_expect_error(int fd, uint16_t cmd, const void *body, size_t len, uint32_t err);
void vu_raw_expect_disconnect(int fd);
int vu_raw_handshake(void);
int vu_raw_handshake_with(const char *json, struct npv_vu_caps *caps, struct npv_vu_msg *rep);
/* A region access of width <= 8: 0 (and *v for a read), or the errno the server replied. */
uint32_t vu_raw_access(int fd, uint32_t region, uint64_t off, uint32_t width, bool write,
                       uint64_t *v);
uint64_t vu_raw_read(int fd, uint32_t region, uint64_t off, uint32_t width);
void vu_raw_write(int fd, uint32_t region, uint64_t off, uint32_t width, uint64_t v);
void vu_raw_dma_map_nofd(int fd, uint64_t address, uint64_t size);

#endif
