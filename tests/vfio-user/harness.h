/* SPDX-License-Identifier: MIT */
/*
 * What the vfio-user suites share: a device server in a child process (the
 * testdev model, or a scripted fake speaking raw protocol), and the test
 * device opened over vfio-user and driven by its driver (libnpuvfio-testdev).
 */
#ifndef NPV_TEST_VU_HARNESS_H
#define NPV_TEST_VU_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <npuvfio/bar.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include <npuvfio/ring.h>
#include <npuvfio/testdev.h>

#include "child_server.h"

#include "regs.h"
#include "vfio_user_msg.h"

#define MS 1000000ull
/* Deadlines no healthy run comes near on a loaded machine; a test never waits them out. */
#define GENEROUS_NS (30000 * MS)

/* The testdev model, serving client after client. */
void vu_serve_testdev(const char *path, void *arg);
/* The same, refusing twin sockets: its DMA commands share the request socket. */
void vu_serve_testdev_single_socket(const char *path, void *arg);

/*
 * A scripted server speaking raw protocol: listens on path and, client after
 * client, calls script(sock, nth, arg) with the connection (nth counts from 0).
 */
struct vu_fake;
typedef void (*vu_script_fn)(int sock, unsigned nth, const struct vu_fake *f);
/* What the fake's VERSION reply says of twin sockets. */
enum vu_fake_twin {
    FAKE_TWIN_NONE,      /* not mentioned: one socket */
    FAKE_TWIN_OFFER,     /* supported, fd_index 0, a socketpair end as fd 0 */
    FAKE_TWIN_NO_INDEX,  /* supported, no fd_index: inconsistent */
    FAKE_TWIN_BAD_INDEX, /* supported, fd_index 3 with one fd: inconsistent */
};

struct vu_fake {
    vu_script_fn script;
    void *arg;
    uint16_t major;              /* what fake_next answers VERSION with */
    enum vu_fake_twin twin;      /* what it says of twin sockets */
    uint32_t max_data_xfer_size; /* 0: not stated */
    bool write_multiple;         /* offer REGION_WRITE_MULTI (posted writes) */
};
/* The fake's end of the twin socket once VERSION offered one, else -1 (in the child). */
extern int fake_twin_sock;
void vu_serve_fake(const char *path, void *arg);
/*
 * The next message the script must handle: VERSION and DEVICE_GET_INFO (a
 * non-PCI device with 9 regions and 5 IRQ indexes) are answered on the way.
 * 0, or -1 when the client left.
 */
int fake_next(int sock, const struct vu_fake *f, struct npv_vu_msg *m);
/* Reply to m with body (and fds); exits the child on error. */
void fake_reply(int sock, const struct npv_vu_msg *m, const void *body, size_t len);
void fake_reply_fds(int sock, const struct npv_vu_msg *m, const void *body, size_t len,
                    const int *fds, unsigned nr_fds);
/* Send a raw header + body. */
void fake_send(int sock, struct npv_vu_hdr *h, const void *body, size_t len);
/* Keep the connection open and do nothing until killed. */
void fake_hang(void) __attribute__((noreturn));

int count_fds(void);
int count_maps(void);
/*
 * Mappings a sanitizer runtime may add on its own while we run (ASan grows
 * its allocator and shadow lazily). A leak of ours is one or more mappings
 * per cycle, far above this over the cycles a test runs.
 */
#if defined(__SANITIZE_ADDRESS__)
#define MAPS_SLACK 8
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MAPS_SLACK 8
#endif
#endif
#ifndef MAPS_SLACK
#define MAPS_SLACK 0
#endif

/* The test device, driven by its driver with a ring of TD_ENTRIES descriptors. */
#define TD_ENTRIES 64u

struct td {
    struct npv_ctx *ctx;
    struct npv_domain *dom;
    struct npv_dev *dev;
    struct npv_bar *bar;     /* BAR0 of the test's own, for transport checks */
    struct npv_testdev *drv; /* NULL until td_enable */
    struct npv_ring *ring;
};

/* Open the device at path in a new domain and map BAR0. */
void td_open(struct td *t, const char *path);
/* Close the driver (if open) and the device. */
void td_close(struct td *t);
/*
 * Open the driver (ring of TD_ENTRIES, MSI-X vector 0 routed when irq), or
 * when it is open reset it and program its ring again; the engine runs after.
 */
void td_enable(struct td *t, bool irq);
/* Queue one job and ring the doorbell. */
void td_submit(struct td *t, const struct npv_testdev_desc *d);
/*
 * Reap every job submitted and not yet reaped, the last into *last. 0, or
 * -ETIMEDOUT when they did not all complete in time.
 */
int td_wait(struct td *t, uint64_t timeout_ns, struct npv_cpl *last);
/* The device's engine state (running, fault, last refused IOVA). */
struct npv_testdev_state td_state(struct td *t);

#endif
