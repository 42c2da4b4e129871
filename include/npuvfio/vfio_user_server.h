/* SPDX-License-Identifier: MIT */
/*
 * npv_vus: the vfio-user server framework our device models are built on.
 *
 * A model describes one PCI function (ids, BARs, MSI-X) and gets a server
 * that speaks the vfio-user protocol on a UNIX socket: config space with the
 * MSI-X and PCI Express capabilities, regions backed by shared memory (offered
 * to the client as sparse mmap areas) and/or trapped accesses that reach the
 * model's callback with their exact width, the client's DMA mappings (mmapped
 * from the fds the client passes), interrupts through the client's eventfds.
 *
 * One event loop per device (npv_vus_run) serves one client at a time; a
 * process that accepts connections itself (an owner serving many clients)
 * hands each to a server of its own with npv_vus_serve_fd, one thread each,
 * and answers those it turns away with npv_vus_refuse_fd. A
 * client that offers twin sockets gets a second socket in the VERSION reply,
 * which carries the server's DMA_READ/DMA_WRITE commands and their replies;
 * without it they share the request socket, and the loop hands their
 * replies to the waiting DMA call. DEVICE_FEATURE, migration and dirty-page
 * logging are answered with ENOSYS. The
 * model may run threads of its own (a doorbell poller): the DMA and IRQ calls
 * below are thread-safe. On client disconnect the server unmaps all DMA,
 * closes the IRQ eventfds, keeps the device state, and accepts the next one.
 *
 * Every value the client sends is checked; a malformed or hostile client gets
 * an error reply or is disconnected.
 */
#ifndef NPUVFIO_VFIO_USER_SERVER_H
#define NPUVFIO_VFIO_USER_SERVER_H

#include <stdbool.h>
#include <npuvfio/common.h>
#include <npuvfio/ctx.h>

#ifdef __cplusplus
extern "C" {
#endif

struct npv_vus;

/* BAR regions 0-5 and the expansion ROM (6); config space (7) is the framework's. */
#define NPV_VUS_NUM_BARS    7u
#define NPV_VUS_MAX_AREAS   16u
#define NPV_VUS_CONFIG_SIZE 4096u /* PCIe: extended config space */

/*
 * A trapped access: len bytes at off of region index, exactly as the client
 * sent them (one 8-byte REGION_WRITE is one call with len 8). For a read, fill
 * buf. Return 0 or a negative errno (sent to the client as an error reply).
 * Called on the event loop thread.
 */
typedef int (*npv_vus_access_fn)(void *arg, uint32_t index, uint64_t off, void *buf, size_t len,
                                 bool is_write);

enum {
    NPV_VUS_REGION_READ = 1u << 0,
    NPV_VUS_REGION_WRITE = 1u << 1,
    NPV_VUS_REGION_64BIT = 1u << 2,    /* a 64-bit memory BAR (takes two BAR slots) */
    NPV_VUS_REGION_PREFETCH = 1u << 3, /* prefetchable BAR */
};

struct npv_vus_area {
    uint64_t offset;
    uint64_t size;
};

struct npv_vus_region {
    uint64_t size; /* 0: region absent. BARs: a power of two >= 4096 */
    uint32_t flags;
    /*
     * Shared memory: the framework creates a memfd of size bytes; the areas
     * listed are offered to the client for mmap (page-aligned). Accesses by
     * message to pages of the memory without an access callback read and
     * write the memory itself.
     */
    bool shared;
    uint32_t nr_areas;
    struct npv_vus_area areas[NPV_VUS_MAX_AREAS];
    /* Trapped accesses (outside the mmap areas); NULL: plain memory or RAZ/WI. */
    npv_vus_access_fn access;
};

/*
 * Prot bits of a client's DMA mapping, as the device sees it: the vfio-user
 * DMA_MAP flags READ (bit 0) and WRITE (bit 1) (vfio-user spec, "DMA_MAP").
 */
enum {
    NPV_VUS_DMA_READ = 1u << 0,  /* the device may read the client's memory */
    NPV_VUS_DMA_WRITE = 1u << 1, /* the device may write it */
};

struct npv_vus_config {
    uint16_t vendor_id, device_id;
    uint16_t subsys_vendor_id, subsys_id;
    uint32_t class_code; /* 24 bits */
    uint8_t revision;
    struct npv_vus_region bars[NPV_VUS_NUM_BARS];
    /* MSI-X: vectors (0 = none), table and PBA in BAR msix_bar; handled by the framework. */
    uint32_t msix_vectors;
    uint32_t msix_bar;
    uint32_t msix_table_offset;
    uint32_t msix_pba_offset;
    /* Model callbacks, all optional, called on the event loop thread. */
    void *arg;
    int (*reset)(void *arg);       /* DEVICE_RESET; a negative errno fails it */
    void (*connect)(void *arg);    /* a client finished VERSION */
    void (*disconnect)(void *arg); /* the client left; DMA is already unmapped */
    /*
     * Refuse twin-socket mode even when the client offers it: DMA_READ/WRITE
     * commands then share the request socket (interop testing; a client that
     * mishandles the second socket).
     */
    bool single_socket;
    /*
     * The client's DMA_MAP, checked and entered in the table (the server's own
     * mmap made), before the reply: vaddr is the server's mmap of the client's
     * memory (NULL for a mapping without fd), fd the client's fd, valid only
     * during the call (dup it to keep it; -1 without), prot NPV_VUS_DMA_READ |
     * NPV_VUS_DMA_WRITE. Return 0, or a negative errno: the mapping is undone
     * and the client's DMA_MAP fails with that error. NULL: every map accepted.
     * Called on the event loop thread, no server lock held.
     */
    int (*dma_map)(void *arg, npv_iova_t iova, uint64_t size, unsigned prot, void *vaddr, int fd,
                   uint64_t fd_offset);
    /*
     * A mapping leaves (DMA_UNMAP, or the client left: then before
     * `disconnect`): called after it left the table and before the server
     * munmaps vaddr, so the model may wait here for its own device's use of
     * the memory to end. Event loop thread, no server lock held.
     */
    void (*dma_unmap)(void *arg, npv_iova_t iova, uint64_t size);
};

/*
 * Create a server for the function cfg describes (cfg is copied).
 * Thread-safety: one thread serves a server (npv_vus_run or npv_vus_serve_fd)
 * and its callbacks run there; the calls marked thread-safe may come from
 * others. Different servers share nothing but ctx.
 */
NPV_API int npv_vus_new(struct npv_ctx *ctx, const struct npv_vus_config *cfg,
                        struct npv_vus **out);
/* Stop serving, release everything. NULL is a no-op. Not concurrent with npv_vus_run. */
NPV_API void npv_vus_free(struct npv_vus *srv);

/* Server-side view of a shared region's memory, or NULL. */
NPV_API void *npv_vus_region_mem(struct npv_vus *srv, uint32_t index);

/*
 * Create the listening socket at path, mode 0600. A socket at path that a
 * server still answers on is -EADDRINUSE (one server per path); a stale one
 * (nothing listening) is replaced; any other file is -EEXIST.
 * -ENAMETOOLONG when path does not fit.
 */
NPV_API int npv_vus_listen(struct npv_vus *srv, const char *path);
/*
 * Serve clients until npv_vus_stop(), or until the first client leaves when
 * once is set. Returns 0, or a negative errno when the loop itself fails.
 * Removes the socket file before returning if it is still the one we bound
 * (same device and inode): a server that replaced it keeps its socket.
 */
NPV_API int npv_vus_run(struct npv_vus *srv, bool once);
/*
 * Serve one client on fd, a connected socket the caller accepted (ownership
 * passes: the server closes it), on the calling thread, until the client
 * leaves or npv_vus_stop. Needs no listening socket; not concurrent with
 * npv_vus_run or another npv_vus_serve_fd of srv. Returns 0 or a negative errno.
 */
NPV_API int npv_vus_serve_fd(struct npv_vus *srv, int fd);
/*
 * Answer a client on fd (connected, not served) that the server will not
 * serve: read its VERSION for at most timeout_ms and reply with error err
 * (a positive errno, e.g. EUSERS), then close fd. The client's
 * npv_dev_open_vfio_user then fails with -err.
 * A negative err is taken as its magnitude; 0 or one of npuvfio's own codes
 * (not an errno a peer knows) is sent as EINVAL. timeout_ms < 0 waits without
 * bound (not on an accept loop). A client that sends nothing in time, or
 * whose first message is not a command, is closed without a reply. Logs the
 * refusal at info level. Thread-safe (fd is the caller's to give away).
 */
NPV_API void npv_vus_refuse_fd(struct npv_ctx *ctx, int fd, int err, int timeout_ms);
/*
 * Make npv_vus_run or npv_vus_serve_fd return (a served client is dropped).
 * Async-signal-safe, any thread. It stays in force: a later npv_vus_run or
 * npv_vus_serve_fd of srv returns at once, so a stop that races the start of
 * one is not lost.
 */
NPV_API void npv_vus_stop(struct npv_vus *srv);
/* Drop the current client (fault injection: a surprise disconnect). Thread-safe. */
NPV_API void npv_vus_disconnect(struct npv_vus *srv);
NPV_API bool npv_vus_connected(struct npv_vus *srv);

/*
 * DMA into the client's memory. Between npv_vus_dma_begin() and
 * npv_vus_dma_end() the mapping table cannot change (an unmap waits), so a
 * pointer from npv_vus_dma_ptr() stays valid until end. Keep the section
 * short: the client's DMA_UNMAP waits for it, as the spec requires.
 */
NPV_API void npv_vus_dma_begin(struct npv_vus *srv);
NPV_API void npv_vus_dma_end(struct npv_vus *srv);
/*
 * The host pointer for [iova, iova+len) in one mmapped mapping allowing prot
 * (NPV_VUS_DMA_READ, NPV_VUS_DMA_WRITE, as the device sees it). -EFAULT when any byte is unmapped
 * or the mapping lacks prot (an IOMMU fault), -ENOTSUP when the mapping has no
 * fd (use npv_vus_dma_read/write). Only between begin and end.
 */
NPV_API int npv_vus_dma_ptr(struct npv_vus *srv, npv_iova_t iova, uint64_t len, unsigned prot,
                            void **ptr);
/*
 * Copy from / to client memory, through the mapping or, for a mapping without
 * an fd, with DMA_READ/DMA_WRITE messages to the client (not from the event
 * loop thread: -EDEADLK). -EFAULT for an unmapped range. Take begin/end
 * themselves; do not call them inside a begin/end section.
 */
NPV_API int npv_vus_dma_read(struct npv_vus *srv, npv_iova_t iova, void *buf, uint64_t len);
NPV_API int npv_vus_dma_write(struct npv_vus *srv, npv_iova_t iova, const void *buf, uint64_t len);
NPV_API size_t npv_vus_dma_count(struct npv_vus *srv);
/*
 * The mapping table's generation: it changes with every DMA_MAP, DMA_UNMAP
 * and client loss. A pointer from npv_vus_dma_ptr() may be kept across
 * begin/end sections and used again in a later section only while this value,
 * read inside that section, is the one it was taken under: an unmap cannot
 * run while a section is open, so inside the section the check is final.
 * Thread-safe; outside a section the value is only a hint.
 */
NPV_API uint64_t npv_vus_dma_generation(struct npv_vus *srv);

/*
 * Raise vector vec of IRQ index (VFIO numbering: 2 = MSI-X). A masked vector
 * (SET_IRQS mask or the MSI-X table's mask bit) becomes pending and fires on
 * unmask. No eventfd set: the interrupt is lost, as on hardware with MSI-X
 * disabled. -EINVAL for a bad index or vector. Thread-safe.
 */
NPV_API int npv_vus_irq_raise(struct npv_vus *srv, uint32_t index, uint32_t vec);
/*
 * The device lost its MSI-X state (a device-internal reset that takes the
 * MSI-X table with it): every MSI-X vector's eventfd is dropped, its mask and
 * pending state cleared, and the emulated table zeroed, so interrupts are
 * lost until the client sets its vectors again (SET_IRQS). Thread-safe.
 */
NPV_API void npv_vus_msix_reset(struct npv_vus *srv);

/* The config space as the client last left it (for models that look at the command register). */
NPV_API uint16_t npv_vus_pci_command(struct npv_vus *srv);

#ifdef __cplusplus
}
#endif

#endif
