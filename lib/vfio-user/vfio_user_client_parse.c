/* SPDX-License-Identifier: MIT */
/*
 * Parsers of the server's replies. The server is a peer we do not trust:
 * every length, index, offset and count is checked before use, and the
 * region capability chain is walked with strictly increasing offsets so a
 * loop cannot be expressed.
 */
#include <errno.h>
#include <string.h>

#include <npuvfio/common.h>

#include "vfio_user_client.h"

/* A chain longer than this is not a region description, it is an attack. */
#define MAX_CAPS 32

int npv_vu_parse_version_reply(const void *body, size_t len, struct npv_vu_caps *caps,
                               uint16_t *minor)
{
    struct npv_vu_version v;
    if (body == NULL || len < sizeof(v))
        return -NPV_EPEERPROTO;
    memcpy(&v, body, sizeof(v));
    if (v.major != NPV_VU_MAJOR)
        return -EPROTONOSUPPORT;
    /* The spec: the reply's minor is at most the one proposed. */
    if (v.minor > NPV_VU_MINOR)
        return -NPV_EPEERPROTO;
    size_t dlen = len - sizeof(v);
    if (dlen > NPV_VU_MAX_VERSION_DATA)
        return -NPV_EPEERPROTO;
    const char *data = (const char *)body + sizeof(v);
    /* A trailing NUL is the spec's terminator, not part of the JSON. */
    while (dlen > 0 && data[dlen - 1] == '\0')
        dlen--;
    if (npv_vu_caps_parse(data, dlen, caps) < 0)
        return -NPV_EPEERPROTO;
    /* A region access of 8 bytes must fit in one message, and DMA_MAP needs one fd. */
    if (caps->max_msg_fds == 0 || caps->max_data_xfer_size < 8)
        return -NPV_EPEERPROTO;
    /* The spec: twin mode claimed without the socket's index leaves us deaf to the server. */
    if (caps->twin_socket && !(caps->present & NPV_VU_CAP_TWIN_FD_INDEX))
        return -NPV_EPEERPROTO;
    if (caps->max_msg_fds > NPV_VU_MAX_MSG_FDS)
        caps->max_msg_fds = NPV_VU_MAX_MSG_FDS;
    if (caps->max_data_xfer_size > NPV_VU_MAX_DATA_XFER_SIZE)
        caps->max_data_xfer_size = NPV_VU_MAX_DATA_XFER_SIZE;
    if (minor != NULL)
        *minor = v.minor;
    return 0;
}

static int parse_sparse(const uint8_t *p, size_t len, uint32_t off, struct npv_region_info *info)
{
    struct npv_vu_cap_sparse_mmap cap;
    if (len - off < sizeof(cap))
        return -NPV_EPEERPROTO;
    memcpy(&cap, p + off, sizeof(cap));
    size_t room = (len - off - sizeof(cap)) / sizeof(struct npv_vu_sparse_area);
    if (cap.nr_areas > room)
        return -NPV_EPEERPROTO;
    /* Areas beyond what we describe stay trapped: slower, never wrong. */
    uint32_t n = cap.nr_areas < NPV_REGION_MAX_SPARSE ? cap.nr_areas : NPV_REGION_MAX_SPARSE;
    for (uint32_t i = 0; i < n; i++) {
        struct npv_vu_sparse_area a;
        memcpy(&a, p + off + sizeof(cap) + i * sizeof(a), sizeof(a));
        if (a.offset > info->size || a.size > info->size - a.offset)
            return -NPV_EPEERPROTO;
        info->mmap_areas[i].offset = a.offset;
        info->mmap_areas[i].size = a.size;
    }
    info->nr_mmap_areas = n;
    return 0;
}

static int parse_caps(const uint8_t *p, size_t len, uint32_t first, struct npv_region_info *info,
                      bool *have_sparse)
{
    uint32_t off = first;
    uint32_t prev = 0;
    for (int n = 0; off != 0; n++) {
        /* Caps follow the fixed struct, 4-byte aligned, each after the one before. */
        if (n == MAX_CAPS || off < sizeof(struct npv_vu_region_info) || off <= prev ||
            (off & 3u) != 0 || off > len || len - off < sizeof(struct npv_vu_cap_hdr))
            return -NPV_EPEERPROTO;
        struct npv_vu_cap_hdr h;
        memcpy(&h, p + off, sizeof(h));
        if (h.id == NPV_VU_REGION_CAP_SPARSE_MMAP) {
            if (*have_sparse)
                return -NPV_EPEERPROTO;
            int ret = parse_sparse(p, len, off, info);
            if (ret < 0)
                return ret;
            *have_sparse = true;
        } else if (h.id == NPV_VU_REGION_CAP_MSIX_MAPPABLE) {
            info->msix_mappable = true;
        }
        prev = off;
        off = h.next;
    }
    return 0;
}

int npv_vu_parse_region_info(const void *body, size_t len, uint32_t index, bool has_fd,
                             struct npv_region_info *info, uint64_t *mmap_offset, uint32_t *needed)
{
    struct npv_vu_region_info ri;
    *needed = 0;
    if (body == NULL || len < sizeof(ri) || len > NPV_VU_CLIENT_MAX_REGION_INFO)
        return -NPV_EPEERPROTO;
    memcpy(&ri, body, sizeof(ri));
    if (ri.index != index || ri.argsz < sizeof(ri))
        return -NPV_EPEERPROTO;
    memset(info, 0, sizeof(*info));
    info->index = index;
    info->size = ri.size;
    if (ri.flags & NPV_VU_REGION_FLAG_READ)
        info->flags |= NPV_REGION_READ;
    if (ri.flags & NPV_VU_REGION_FLAG_WRITE)
        info->flags |= NPV_REGION_WRITE;
    *mmap_offset = ri.offset;
    /* The server needed more room than the reply holds: the caller asks again. */
    if ((ri.flags & NPV_VU_REGION_FLAG_CAPS) && ri.argsz > len) {
        if (ri.argsz > NPV_VU_CLIENT_MAX_REGION_INFO)
            return -NPV_EPEERPROTO;
        *needed = ri.argsz;
        return 0;
    }
    bool have_sparse = false;
    if ((ri.flags & NPV_VU_REGION_FLAG_CAPS) && ri.cap_offset != 0) {
        int ret = parse_caps(body, len, ri.cap_offset, info, &have_sparse);
        if (ret < 0)
            return ret;
    }
    if (!(ri.flags & NPV_VU_REGION_FLAG_MMAP) || !has_fd || ri.size == 0) {
        info->nr_mmap_areas = 0;
        memset(info->mmap_areas, 0, sizeof(info->mmap_areas));
        return 0;
    }
    info->flags |= NPV_REGION_MMAP;
    if (!have_sparse) {
        info->nr_mmap_areas = 1;
        info->mmap_areas[0].offset = 0;
        info->mmap_areas[0].size = ri.size;
    }
    /* Every area's file offset must be representable. */
    for (uint32_t i = 0; i < info->nr_mmap_areas; i++)
        if (info->mmap_areas[i].offset > UINT64_MAX - ri.offset)
            return -NPV_EPEERPROTO;
    return 0;
}

int npv_vu_parse_device_info(const void *body, size_t len, struct npv_dev_info *info)
{
    struct npv_vu_device_info di;
    if (body == NULL || len < sizeof(di))
        return -NPV_EPEERPROTO;
    memcpy(&di, body, sizeof(di));
    if (di.num_regions > NPV_VU_CLIENT_MAX_REGIONS || di.num_irqs > NPV_VU_CLIENT_MAX_IRQ_INDEXES)
        return -NPV_EPEERPROTO;
    memset(info, 0, sizeof(*info));
    if (di.flags & NPV_VU_DEVICE_FLAGS_RESET)
        info->flags |= NPV_DEV_FLAG_RESET;
    if (di.flags & NPV_VU_DEVICE_FLAGS_PCI)
        info->flags |= NPV_DEV_FLAG_PCI;
    info->num_regions = di.num_regions;
    info->num_irqs = di.num_irqs;
    return 0;
}

int npv_vu_parse_irq_info(const void *body, size_t len, uint32_t index, struct npv_irq_info *info)
{
    struct npv_vu_irq_info ii;
    if (body == NULL || len < sizeof(ii))
        return -NPV_EPEERPROTO;
    memcpy(&ii, body, sizeof(ii));
    if (ii.index != index || ii.count > NPV_VU_CLIENT_MAX_VECTORS)
        return -NPV_EPEERPROTO;
    memset(info, 0, sizeof(*info));
    info->index = index;
    info->count = ii.count;
    if (ii.flags & NPV_VU_IRQ_INFO_EVENTFD)
        info->flags |= NPV_IRQ_INFO_EVENTFD;
    if (ii.flags & NPV_VU_IRQ_INFO_MASKABLE)
        info->flags |= NPV_IRQ_INFO_MASKABLE;
    if (ii.flags & NPV_VU_IRQ_INFO_AUTOMASKED)
        info->flags |= NPV_IRQ_INFO_AUTOMASKED;
    if (ii.flags & NPV_VU_IRQ_INFO_NORESIZE)
        info->flags |= NPV_IRQ_INFO_NORESIZE;
    return 0;
}
