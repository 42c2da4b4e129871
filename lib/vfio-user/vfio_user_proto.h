/* SPDX-License-Identifier: MIT */
/*
 * The vfio-user wire format (QEMU docs/interop/vfio-user.rst, protocol 0.x),
 * shared by our client (vfio_user_client.c) and our server framework
 * (vfio_user_server*.c).
 *
 * The structs are our own, with the spec's layout, instead of reusing
 * linux/vfio.h: the protocol is a socket format, not an ioctl ABI, and must
 * compile on hosts whose uapi headers lack (or differ in) VFIO symbols. All
 * names carry the NPV_VU_ / npv_vu_ prefix so this header can sit next to
 * linux/vfio.h in one translation unit. Values are in host byte order (the
 * spec: both ends run on one host).
 *
 * Every struct has a static_assert on size and offsets: these are bytes a
 * hostile peer controls, and the parsers index into them.
 */
#ifndef NPV_VFIO_USER_PROTO_H
#define NPV_VFIO_USER_PROTO_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define NPV_VU_MAJOR 0
#define NPV_VU_MINOR 0

/* Command ids. 14 (DIRTY_PAGES) was removed from the spec and is never sent. */
enum npv_vu_cmd {
    NPV_VU_CMD_VERSION = 1,
    NPV_VU_CMD_DMA_MAP = 2,
    NPV_VU_CMD_DMA_UNMAP = 3,
    NPV_VU_CMD_DEVICE_GET_INFO = 4,
    NPV_VU_CMD_DEVICE_GET_REGION_INFO = 5,
    NPV_VU_CMD_DEVICE_GET_REGION_IO_FDS = 6,
    NPV_VU_CMD_DEVICE_GET_IRQ_INFO = 7,
    NPV_VU_CMD_DEVICE_SET_IRQS = 8,
    NPV_VU_CMD_REGION_READ = 9,
    NPV_VU_CMD_REGION_WRITE = 10,
    NPV_VU_CMD_DMA_READ = 11,
    NPV_VU_CMD_DMA_WRITE = 12,
    NPV_VU_CMD_DEVICE_RESET = 13,
    NPV_VU_CMD_REGION_WRITE_MULTI = 15,
    NPV_VU_CMD_DEVICE_FEATURE = 16,
    NPV_VU_CMD_MIG_DATA_READ = 17,
    NPV_VU_CMD_MIG_DATA_WRITE = 18,
    NPV_VU_CMD_MAX = 18,
};

/* Header flags: bits 0-3 type, bit 4 no-reply, bit 5 error. */
#define NPV_VU_F_TYPE_MASK    0xfu
#define NPV_VU_F_TYPE_COMMAND 0x0u
#define NPV_VU_F_TYPE_REPLY   0x1u
#define NPV_VU_F_NO_REPLY     (1u << 4)
#define NPV_VU_F_ERROR        (1u << 5)

/* Every message starts with this; size counts the header too. */
struct npv_vu_hdr {
    uint16_t msg_id; /* chosen by the sender of a command, echoed in its reply */
    uint16_t cmd;
    uint32_t size;
    uint32_t flags;
    uint32_t error; /* errno, meaningful when NPV_VU_F_ERROR is set in a reply */
};
static_assert(sizeof(struct npv_vu_hdr) == 16, "vfio-user header is 16 bytes");
static_assert(offsetof(struct npv_vu_hdr, cmd) == 2, "vfio-user header layout");
static_assert(offsetof(struct npv_vu_hdr, size) == 4, "vfio-user header layout");
static_assert(offsetof(struct npv_vu_hdr, flags) == 8, "vfio-user header layout");
static_assert(offsetof(struct npv_vu_hdr, error) == 12, "vfio-user header layout");

/* VERSION, both ways: followed by an optional NUL-terminated JSON object. */
struct npv_vu_version {
    uint16_t major;
    uint16_t minor;
    /* char data[]: {"capabilities": {...}} */
};
static_assert(sizeof(struct npv_vu_version) == 4, "vfio-user VERSION layout");

/* Capability defaults the spec gives when a key is absent. */
#define NPV_VU_DEFAULT_MAX_MSG_FDS        1u
#define NPV_VU_DEFAULT_MAX_DATA_XFER_SIZE (1u << 20)
#define NPV_VU_DEFAULT_MAX_DMA_MAPS       65535u
#define NPV_VU_DEFAULT_PGSIZES            4096u

/* What our side accepts at most, whatever a peer proposes. */
#define NPV_VU_MAX_MSG_FDS        16u
#define NPV_VU_MAX_DATA_XFER_SIZE (64u << 20)
/* Version data longer than this is refused: the JSON we expect is tiny. */
#define NPV_VU_MAX_VERSION_DATA 4096u

/* DMA_MAP request (32 bytes); the fd, if the memory is mappable, rides as SCM_RIGHTS. */
#define NPV_VU_DMA_FLAG_READ  (1u << 0)
#define NPV_VU_DMA_FLAG_WRITE (1u << 1)

struct npv_vu_dma_map {
    uint32_t argsz;
    uint32_t flags;
    uint64_t offset;  /* into the passed fd; 0 without fd */
    uint64_t address; /* IOVA */
    uint64_t size;
};
static_assert(sizeof(struct npv_vu_dma_map) == 32, "vfio-user DMA_MAP layout");
static_assert(offsetof(struct npv_vu_dma_map, offset) == 8, "vfio-user DMA_MAP layout");
static_assert(offsetof(struct npv_vu_dma_map, address) == 16, "vfio-user DMA_MAP layout");
static_assert(offsetof(struct npv_vu_dma_map, size) == 24, "vfio-user DMA_MAP layout");

/*
 * DMA_UNMAP request and reply (the reply echoes the entry). Must match a map
 * exactly, or carry FLAG_ALL with address and size 0 (QEMU's vfio-user
 * container and libvfio-user's client send it to drop every mapping). The
 * flag values are linux/vfio.h's VFIO_DMA_UNMAP_FLAG_*.
 */
#define NPV_VU_DMA_UNMAP_FLAG_GET_DIRTY_BITMAP (1u << 0)
#define NPV_VU_DMA_UNMAP_FLAG_ALL              (1u << 1)

struct npv_vu_dma_unmap {
    uint32_t argsz;
    uint32_t flags; /* 0 or NPV_VU_DMA_UNMAP_FLAG_ALL */
    uint64_t address;
    uint64_t size;
};
static_assert(sizeof(struct npv_vu_dma_unmap) == 24, "vfio-user DMA_UNMAP layout");
static_assert(offsetof(struct npv_vu_dma_unmap, address) == 8, "vfio-user DMA_UNMAP layout");
static_assert(offsetof(struct npv_vu_dma_unmap, size) == 16, "vfio-user DMA_UNMAP layout");

/* DEVICE_GET_INFO request and reply. */
#define NPV_VU_DEVICE_FLAGS_RESET (1u << 0)
#define NPV_VU_DEVICE_FLAGS_PCI   (1u << 1)

struct npv_vu_device_info {
    uint32_t argsz;
    uint32_t flags;
    uint32_t num_regions;
    uint32_t num_irqs;
};
static_assert(sizeof(struct npv_vu_device_info) == 16, "vfio-user DEVICE_GET_INFO layout");
static_assert(offsetof(struct npv_vu_device_info, num_irqs) == 12, "DEVICE_GET_INFO layout");

/* PCI region indexes, as VFIO numbers them. */
enum {
    NPV_VU_PCI_BAR0_REGION = 0,
    NPV_VU_PCI_BAR5_REGION = 5,
    NPV_VU_PCI_ROM_REGION = 6,
    NPV_VU_PCI_CONFIG_REGION = 7,
    NPV_VU_PCI_VGA_REGION = 8,
    NPV_VU_PCI_NUM_REGIONS = 9,
};

/* DEVICE_GET_REGION_INFO request and reply (reply followed by the cap chain). */
#define NPV_VU_REGION_FLAG_READ  (1u << 0)
#define NPV_VU_REGION_FLAG_WRITE (1u << 1)
#define NPV_VU_REGION_FLAG_MMAP  (1u << 2)
#define NPV_VU_REGION_FLAG_CAPS  (1u << 3)

struct npv_vu_region_info {
    uint32_t argsz; /* request: room for the reply; reply: size needed incl. caps */
    uint32_t flags;
    uint32_t index;
    uint32_t cap_offset; /* from the start of this struct; 0 = no caps */
    uint64_t size;
    uint64_t offset; /* mmap offset in the fd passed with the reply */
};
static_assert(sizeof(struct npv_vu_region_info) == 32, "vfio-user REGION_INFO layout");
static_assert(offsetof(struct npv_vu_region_info, index) == 8, "REGION_INFO layout");
static_assert(offsetof(struct npv_vu_region_info, cap_offset) == 12, "REGION_INFO layout");
static_assert(offsetof(struct npv_vu_region_info, size) == 16, "REGION_INFO layout");
static_assert(offsetof(struct npv_vu_region_info, offset) == 24, "REGION_INFO layout");

/* The VFIO capability chain header; next is from the start of the region info. */
struct npv_vu_cap_hdr {
    uint16_t id;
    uint16_t version;
    uint32_t next; /* 0 = last */
};
static_assert(sizeof(struct npv_vu_cap_hdr) == 8, "VFIO cap header layout");

/* Capability ids (same values as linux/vfio.h VFIO_REGION_INFO_CAP_*). */
#define NPV_VU_REGION_CAP_SPARSE_MMAP   1u
#define NPV_VU_REGION_CAP_TYPE          2u
#define NPV_VU_REGION_CAP_MSIX_MAPPABLE 3u

struct npv_vu_sparse_area {
    uint64_t offset; /* added to the region info's offset for mmap */
    uint64_t size;
};
static_assert(sizeof(struct npv_vu_sparse_area) == 16, "sparse mmap area layout");

struct npv_vu_cap_sparse_mmap {
    struct npv_vu_cap_hdr header; /* id SPARSE_MMAP, version 1 */
    uint32_t nr_areas;
    uint32_t reserved;
    /* struct npv_vu_sparse_area areas[nr_areas]; */
};
static_assert(sizeof(struct npv_vu_cap_sparse_mmap) == 16, "sparse mmap cap layout");
static_assert(offsetof(struct npv_vu_cap_sparse_mmap, nr_areas) == 8, "sparse mmap cap layout");

/* DEVICE_GET_IRQ_INFO request and reply. */
#define NPV_VU_IRQ_INFO_EVENTFD    (1u << 0)
#define NPV_VU_IRQ_INFO_MASKABLE   (1u << 1)
#define NPV_VU_IRQ_INFO_AUTOMASKED (1u << 2)
#define NPV_VU_IRQ_INFO_NORESIZE   (1u << 3)

/* PCI IRQ indexes, as VFIO numbers them. */
enum {
    NPV_VU_PCI_INTX_IRQ = 0,
    NPV_VU_PCI_MSI_IRQ = 1,
    NPV_VU_PCI_MSIX_IRQ = 2,
    NPV_VU_PCI_ERR_IRQ = 3,
    NPV_VU_PCI_REQ_IRQ = 4,
    NPV_VU_PCI_NUM_IRQS = 5,
};

struct npv_vu_irq_info {
    uint32_t argsz;
    uint32_t flags;
    uint32_t index;
    uint32_t count;
};
static_assert(sizeof(struct npv_vu_irq_info) == 16, "vfio-user IRQ_INFO layout");
static_assert(offsetof(struct npv_vu_irq_info, count) == 12, "IRQ_INFO layout");

/*
 * DEVICE_SET_IRQS request (no reply payload). DATA_BOOL: count bytes follow;
 * DATA_EVENTFD: count fds ride as SCM_RIGHTS (none = de-assign). count 0 with
 * DATA_NONE|ACTION_TRIGGER disables every vector of the index.
 */
#define NPV_VU_IRQ_SET_DATA_NONE      (1u << 0)
#define NPV_VU_IRQ_SET_DATA_BOOL      (1u << 1)
#define NPV_VU_IRQ_SET_DATA_EVENTFD   (1u << 2)
#define NPV_VU_IRQ_SET_ACTION_MASK    (1u << 3)
#define NPV_VU_IRQ_SET_ACTION_UNMASK  (1u << 4)
#define NPV_VU_IRQ_SET_ACTION_TRIGGER (1u << 5)
#define NPV_VU_IRQ_SET_DATA_MASK                                                                   \
    (NPV_VU_IRQ_SET_DATA_NONE | NPV_VU_IRQ_SET_DATA_BOOL | NPV_VU_IRQ_SET_DATA_EVENTFD)
#define NPV_VU_IRQ_SET_ACTION_MASK_ALL                                                             \
    (NPV_VU_IRQ_SET_ACTION_MASK | NPV_VU_IRQ_SET_ACTION_UNMASK | NPV_VU_IRQ_SET_ACTION_TRIGGER)

struct npv_vu_irq_set {
    uint32_t argsz; /* size of this payload including data */
    uint32_t flags;
    uint32_t index;
    uint32_t start;
    uint32_t count;
    /* uint8_t data[] for DATA_BOOL */
};
static_assert(sizeof(struct npv_vu_irq_set) == 20, "vfio-user SET_IRQS layout");
static_assert(offsetof(struct npv_vu_irq_set, count) == 16, "SET_IRQS layout");

/*
 * REGION_READ / REGION_WRITE, request and reply. READ request: no data; READ
 * reply and WRITE request: count data bytes follow. count ≤ the receiver's
 * max_data_xfer_size.
 */
struct npv_vu_region_access {
    uint64_t offset;
    uint32_t region;
    uint32_t count;
    /* uint8_t data[] */
};
static_assert(sizeof(struct npv_vu_region_access) == 16, "vfio-user REGION_READ/WRITE layout");
static_assert(offsetof(struct npv_vu_region_access, region) == 8, "REGION_READ/WRITE layout");
static_assert(offsetof(struct npv_vu_region_access, count) == 12, "REGION_READ/WRITE layout");

/*
 * DMA_READ / DMA_WRITE (server to client), request and reply. READ reply and
 * WRITE request carry count data bytes. The spec's table shows a 4-byte count
 * in the DMA_WRITE reply; implementations (libvfio-user) send the same 16-byte
 * struct, so a receiver accepts a reply of at least 12 bytes.
 */
struct npv_vu_dma_access {
    uint64_t address;
    uint64_t count;
    /* uint8_t data[] */
};
static_assert(sizeof(struct npv_vu_dma_access) == 16, "vfio-user DMA_READ/WRITE layout");
static_assert(offsetof(struct npv_vu_dma_access, count) == 8, "DMA_READ/WRITE layout");

/*
 * REGION_WRITE_MULTI (spec "VFIO_USER_REGION_WRITE_MULTI"): request wr_cnt
 * then wr_cnt fixed 24-byte writes of at most 8 bytes each; reply wr_cnt, the
 * number of writes carried out. Offered only when VERSION negotiated
 * "write_multiple": true.
 */
struct npv_vu_write_multi {
    uint64_t wr_cnt;
    /* struct npv_vu_write_one wrs[wr_cnt] */
};
static_assert(sizeof(struct npv_vu_write_multi) == 8, "vfio-user REGION_WRITE_MULTI layout");

struct npv_vu_write_one {
    uint64_t offset;
    uint32_t region;
    uint32_t count; /* 1..8 */
    uint8_t data[8];
};
static_assert(sizeof(struct npv_vu_write_one) == 24, "vfio-user single device write layout");
static_assert(offsetof(struct npv_vu_write_one, region) == 8, "single device write layout");
static_assert(offsetof(struct npv_vu_write_one, count) == 12, "single device write layout");
static_assert(offsetof(struct npv_vu_write_one, data) == 16, "single device write layout");
/* Writes in one REGION_WRITE_MULTI we send or accept at most. */
#define NPV_VU_MAX_WRITE_MULTI 256u

/* DEVICE_RESET: no payload either way. */

/* An area of a region offered for mmap, and the largest number we describe. */
#define NPV_VU_MAX_SPARSE_AREAS 16u

#endif
