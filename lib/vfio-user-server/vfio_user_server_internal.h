/* SPDX-License-Identifier: MIT */
/* The vfio-user server's state, shared by its files (one per concept). */
#ifndef NPV_VFIO_USER_SERVER_INTERNAL_H
#define NPV_VFIO_USER_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <npuvfio/vfio_user_server.h>

#include "pci_config.h"
#include "unix_listen.h"
#include "vfio_user_msg.h"

/* What this server accepts from a client at most. */
#define NPV_VUS_MAX_FDS  8u
#define NPV_VUS_MAX_XFER (1u << 20)
/* The spec's default: a client that does not ask for max_dma_maps is told nothing and assumes it.
 */
#define NPV_VUS_MAX_DMA_MAPS 65535u
#define NPV_VUS_MSG_TIMEOUT  (5ll * 1000000000ll) /* rest of a message once its first byte came */
/* A second client: how long the current one may still leave, then how long its VERSION may take. */
#define NPV_VUS_BUSY_GRACE        (100ll * 1000000ll)
#define NPV_VUS_BUSY_RECV_TIMEOUT (200ll * 1000000ll)

struct npv_vus_mapping {
    uint64_t iova;
    uint64_t size;
    uint32_t prot; /* NPV_VU_DMA_FLAG_* */
    void *addr;    /* mmapped client memory, or NULL (message DMA) */
    bool accepted; /* the model's dma_map took it: its dma_unmap is owed */
};

struct npv_vus_irq_vec {
    int fd; /* eventfd from SET_IRQS, -1 none */
    bool masked;
    bool pending;
};

struct npv_vus_bar {
    struct npv_vus_region r;
    int memfd; /* shared memory, -1 none */
    void *mem; /* server's mapping of memfd */
};

struct npv_vus {
    struct npv_ctx *ctx;
    struct npv_vus_config cfg;
    struct npv_vus_bar bars[NPV_VUS_NUM_BARS];
    struct npv_pci_config pci;

    int listen_fd;                     /* listener.fd while listening, else -1 */
    struct npv_unix_listener listener; /* npv_vus_listen's */
    int stop_fd;                       /* eventfd: npv_vus_stop() */

    /*
     * The connection. conn_lock guards conn_fd against a close by another
     * thread (npv_vus_disconnect, message DMA); send_lock keeps the bytes of
     * concurrent messages from interleaving.
     */
    pthread_mutex_t conn_lock;
    pthread_mutex_t send_lock;
    int conn_fd;
    /*
     * Bumped with both locks held as each client is accepted. Message DMA
     * takes it with its mapping and sends only while it is unchanged: a
     * round trip begun for a client that left must never reach the next one
     * (that client would read a stray command, or another client's data).
     */
    _Atomic uint64_t conn_gen;
    bool versioned;
    bool kick;               /* npv_vus_disconnect asked for a drop */
    struct npv_vu_caps peer; /* the event loop's: model threads read peer_max_xfer */
    /*
     * The client's max_data_xfer_size, for model threads' message DMA
     * (__atomic): a thread may read it while the loop accepts the next
     * client; a value of the client before is harmless, its send is refused
     * by conn_gen.
     */
    uint64_t peer_max_xfer;
    bool write_multi; /* "write_multiple" negotiated: REGION_WRITE_MULTI is served */
    /*
     * The first failure of a write sent with no reply, as a positive errno,
     * reported in the reply to the next REGION_WRITE_MULTI (the client's
     * fence). Per connection; only the receive loop touches it.
     */
    int posted_err;
    pthread_t loop_thread;
    bool loop_running;

    /* DMA: sorted by iova, non-overlapping; rwlock: readers are the model's DMA. */
    pthread_rwlock_t dma_lock;
    struct npv_vus_mapping *maps;
    size_t nr_maps, cap_maps;
    /* Bumped under the write lock on every table change: models cache translations against it. */
    uint64_t dma_gen;

    /* Message DMA: one outstanding server->client request at a time. */
    pthread_mutex_t dma_msg_lock; /* serialises requesters */
    /*
     * Twin-socket mode: our end of the second socket, -1 on one socket. The
     * requester holding dma_msg_lock sends on it and reads the reply itself.
     * Changed only with dma_msg_lock and then conn_lock held.
     */
    int twin_fd;
    pthread_mutex_t wait_lock;
    pthread_cond_t wait_cond;
    uint16_t next_msg_id;
    bool waiting;
    uint16_t wait_id;
    uint16_t wait_cmd;
    bool wait_done;
    int wait_err;
    struct npv_vu_msg wait_reply;

    /* IRQs, guarded by irq_lock (raised from model threads). */
    pthread_mutex_t irq_lock;
    uint32_t irq_count[NPV_VU_PCI_NUM_IRQS];
    struct npv_vus_irq_vec *irqs[NPV_VU_PCI_NUM_IRQS];
    uint8_t *msix_table; /* 16 bytes per vector */
};

/* Dispatch one received command; replies on the connection. 0, or <0: drop the client. */
int npv_vus_handle(struct npv_vus *srv, struct npv_vu_msg *m);
/* Send a success reply with payload to command m. */
int npv_vus_reply(struct npv_vus *srv, const struct npv_vu_msg *m, const void *body, size_t len,
                  const int *fds, unsigned nr_fds);
int npv_vus_send_locked(struct npv_vus *srv, struct npv_vu_hdr *hdr, const struct iovec *iov,
                        unsigned iovcnt, const int *fds, unsigned nr_fds);
/* As npv_vus_send_locked, but -ENOTCONN unless the client is still the one of conn_gen. */
#define NPV_VUS_ANY_CONN UINT64_MAX
int npv_vus_send_to(struct npv_vus *srv, uint64_t conn_gen, struct npv_vu_hdr *hdr,
                    const struct iovec *iov, unsigned iovcnt, const int *fds, unsigned nr_fds);
/* Serve the current conn_fd until it closes or fails. */
void npv_vus_serve_conn(struct npv_vus *srv);
/* Make fd the connection (tests and fuzzers use a socketpair end). */
void npv_vus_set_conn(struct npv_vus *srv, int fd);
/* Tear down per-connection state: DMA, IRQ fds, waiter. */
void npv_vus_drop_conn(struct npv_vus *srv);

/* vfio_user_server_dma.c */
int npv_vus_handle_dma_map(struct npv_vus *srv, struct npv_vu_msg *m);
int npv_vus_handle_dma_unmap(struct npv_vus *srv, struct npv_vu_msg *m);
void npv_vus_dma_unmap_all(struct npv_vus *srv);
/* A DMA_READ/WRITE reply arrived: hand it to the waiter. Takes the message's contents. */
void npv_vus_dma_reply(struct npv_vus *srv, struct npv_vu_msg *m);
void npv_vus_dma_abort_wait(struct npv_vus *srv);

/* vfio_user_server_irq.c */
int npv_vus_irq_init(struct npv_vus *srv);
void npv_vus_irq_fini(struct npv_vus *srv);
int npv_vus_handle_irq_info(struct npv_vus *srv, struct npv_vu_msg *m);
int npv_vus_handle_set_irqs(struct npv_vus *srv, struct npv_vu_msg *m);
void npv_vus_irq_close_all(struct npv_vus *srv);
/* MSI-X table/PBA access in the MSI-X BAR; 1 when [off, off+len) is not the table's. */
int npv_vus_msix_access(struct npv_vus *srv, uint64_t off, void *buf, size_t len, bool is_write);

/* vfio_user_server_region.c */
int npv_vus_regions_init(struct npv_vus *srv);
void npv_vus_regions_fini(struct npv_vus *srv);
int npv_vus_handle_region_info(struct npv_vus *srv, struct npv_vu_msg *m);
int npv_vus_handle_region_rw(struct npv_vus *srv, struct npv_vu_msg *m);
int npv_vus_handle_write_multi(struct npv_vus *srv, struct npv_vu_msg *m);
/* A write sent with no reply failed with err (positive errno): keep the first. */
void npv_vus_note_posted_error(struct npv_vus *srv, int err);

#endif
