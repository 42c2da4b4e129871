/* SPDX-License-Identifier: MIT */
/*
 * The vfio-user client: one connection per opened device.
 *
 * A receive thread owns the socket's read side: it hands each reply to the
 * request waiting for its message id. The server's DMA_READ / DMA_WRITE
 * commands are served from the connection's mapping table by a second
 * thread: with twin sockets (negotiated in VERSION) it reads them from the
 * second socket and answers there; on one socket the receive thread queues
 * them to it, so the receive thread never writes and keeps draining the
 * server's replies while a DMA reply is being sent (else both ends could
 * block writing large messages neither reads). Requests may be pipelined
 * from many threads; every one has a deadline, and a request that misses
 * its deadline ends the connection: the server may still act on it, so our
 * view of the device (its mappings above all) can no longer be trusted.
 * When the connection dies (EOF, error, protocol violation, timeout) every
 * pending and later request fails at once with the reason.
 */
#ifndef NPV_VFIO_USER_CLIENT_H
#define NPV_VFIO_USER_CLIENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "dev_internal.h"
#include "domain_internal.h"
#include "vfio_user_msg.h"

/* Regions and IRQ indexes beyond these are a server we do not believe. */
#define NPV_VU_CLIENT_MAX_REGIONS     64u
#define NPV_VU_CLIENT_MAX_IRQ_INDEXES 64u
/* Vectors of one IRQ index: the MSI-X limit. */
#define NPV_VU_CLIENT_MAX_VECTORS 2048u
/* What we accept in one message from the server (DMA_WRITE data, REGION_READ replies). */
#define NPV_VU_CLIENT_MAX_XFER (1u << 20)
/*
 * Writes gathered into one REGION_WRITE_MULTI at most: QEMU's vfio-user
 * client sends at most VFIO_USER_MULTI_MAX (200) per message
 * (hw/vfio-user/protocol.h); our server takes NPV_VU_MAX_WRITE_MULTI (256).
 */
#define NPV_VU_CLIENT_MAX_BATCH 200u
/* How long a batch waits for the next synchronous message before it leaves on its own (model
 * choice). */
#define NPV_VU_CLIENT_BATCH_HOLD_NS 50000u
/* Region info replies with their capability chain stay far below this. */
#define NPV_VU_CLIENT_MAX_REGION_INFO 4096u

struct vu_request;
struct vu_dma_cmd;

/* DMA commands queued on one socket beyond this are a server flooding us. */
#define NPV_VU_CLIENT_MAX_DMA_QUEUE 64u

/* A DMA mapping as the server was told of it, for serving DMA_READ/WRITE. */
struct vu_mapping {
    npv_iova_t iova;
    uint64_t len;
    void *vaddr;
    unsigned prot;
};

struct vu_region {
    bool known;      /* region info fetched */
    int fd;          /* mmap fd from the region info reply, -1 when none */
    uint64_t offset; /* mmap offset of the region in fd */
};

struct vu_client {
    struct npv_dev *dev;
    int sock;
    struct npv_vu_caps server_caps; /* negotiated: the server's limits */

    pthread_mutex_t lock;      /* requests, dead, ids, regions, mappings */
    pthread_cond_t cond;       /* a reply arrived or the connection died (CLOCK_MONOTONIC) */
    pthread_mutex_t send_lock; /* one message at a time on the socket */
    struct vu_request *pending;
    uint16_t next_id;
    int dead; /* 0 alive, else the negative errno every request gets */
    pthread_t rx_thread;
    bool rx_running;

    /*
     * Serving the server's DMA commands. dma_sock/dma_send_lock are where the
     * replies go: the twin socket and its own lock, or sock and send_lock.
     */
    int twin_sock; /* -1 on one socket */
    int dma_sock;
    pthread_mutex_t *dma_send_lock;
    pthread_mutex_t twin_send_lock;
    pthread_cond_t dma_cond; /* a command was queued or the connection died */
    struct vu_dma_cmd *dma_queue, **dma_queue_tail;
    unsigned dma_queued;
    pthread_t dma_thread;
    bool dma_running;

    /*
     * Posted writes (negotiated "write_multiple"): trapped BAR writes go out
     * as REGION_WRITE with NO_REPLY. The counters are under send_lock:
     * posted_sent counts them, posted_fenced is posted_sent when the last
     * command that orders them was sent, posted_done when the last reply to
     * such a command arrived (the server works in order, so by then it has
     * carried out every earlier write). posted_err (under lock) is the first
     * failure a fence reported, for the next synchronous call.
     *
     * Batching (under send_lock): consecutive posted writes are gathered in
     * batch[] and leave as one REGION_WRITE_MULTI: as the fence (with a
     * reply) in front of the next command, read or flush; without a reply
     * when the batch is full or the caller is about to wait for the device
     * (vu_kick: an IRQ wait, a ring doorbell). dev->batch_pending says a
     * batch is held. batch_max 0: every posted write leaves on its own
     * (NPUVFIO_VU_BATCH=0, or a server without write_multiple).
     */
    bool posted;
    uint64_t posted_sent, posted_fenced, posted_done;
    int posted_err;
    unsigned batch_n, batch_max;
    uint64_t batch_gen; /* batches sent so far (under send_lock) */
    /*
     * The flusher: a thread that sends a batch still held NPV_VU_CLIENT_BATCH_HOLD_NS
     * after its first write, for a caller that polls host memory after
     * writing registers (nothing of ours sees it wait). batch_cond (with
     * send_lock) wakes it when a batch starts or the client closes.
     */
    pthread_cond_t batch_cond;
    pthread_t flusher;
    bool flusher_running, flusher_stop;
    uint16_t noreply_id; /* ids of messages sent with NO_REPLY (under send_lock) */
    struct npv_vu_write_one batch[NPV_VU_CLIENT_MAX_BATCH];

    struct vu_region regions[NPV_VU_CLIENT_MAX_REGIONS];
    uint32_t num_regions;
    uint32_t num_irqs;

    struct npv_iommu_sink sink;
    struct vu_mapping *maps;
    size_t nr_maps, cap_maps;
};

/*
 * Send one command and wait for its reply (deadline: the device's request
 * timeout). fds ride as SCM_RIGHTS. On success *reply owns the reply body
 * and fds (release with npv_vu_msg_release); an error reply is returned as
 * -errno. reply may be NULL when only success matters and the reply must
 * have an empty body.
 */
int npv_vu_client_call(struct vu_client *c, uint16_t cmd, const void *req, size_t req_len,
                       const int *fds, unsigned nr_fds, struct npv_vu_msg *reply);
/* Same, with the request in pieces (header struct + data). */
int npv_vu_client_callv(struct vu_client *c, uint16_t cmd, const struct iovec *iov, unsigned iovcnt,
                        const int *fds, unsigned nr_fds, struct npv_vu_msg *reply);

/* Mark the connection dead with err and wake every waiter. Idempotent: the first reason wins. */
void npv_vu_client_kill(struct vu_client *c, int err);

/* The DMA side (vfio_user_client_dma.c). */
void npv_vu_client_sink_init(struct vu_client *c);
void npv_vu_client_maps_free(struct vu_client *c);
/* Serve a DMA_READ/DMA_WRITE command from the server; called by the DMA thread. */
void npv_vu_client_serve_dma(struct vu_client *c, const struct npv_vu_msg *m);
/*
 * Twin sockets: read the server's commands from c->twin_sock and answer them
 * there until the socket fails or breaks the protocol, then kill the
 * connection. The DMA thread's body; exposed for the fuzzer.
 */
void npv_vu_client_serve_twin(struct vu_client *c);

/*
 * Pure parsers of the server's replies (vfio_user_client_parse.c), exposed
 * for the fuzzers. Each returns 0, -NPV_EPEERPROTO (malformed) or
 * -EPROTONOSUPPORT (a major version we do not speak).
 */
int npv_vu_parse_version_reply(const void *body, size_t len, struct npv_vu_caps *caps,
                               uint16_t *minor);
/*
 * A region info reply for region index. mmap_offset gets the region's mmap
 * offset. has_fd says whether the reply carried a file descriptor; without
 * one the region is reported without NPV_REGION_MMAP. *needed gets the
 * size the server asked for when the reply was cut short (else 0).
 */
int npv_vu_parse_region_info(const void *body, size_t len, uint32_t index, bool has_fd,
                             struct npv_region_info *info, uint64_t *mmap_offset, uint32_t *needed);
int npv_vu_parse_device_info(const void *body, size_t len, struct npv_dev_info *info);
int npv_vu_parse_irq_info(const void *body, size_t len, uint32_t index, struct npv_irq_info *info);

#endif
