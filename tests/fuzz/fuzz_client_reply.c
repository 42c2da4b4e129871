/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: the vfio-user client's parsers of server replies
 * (VERSION, DEVICE_GET_REGION_INFO with its capability chain,
 * DEVICE_GET_INFO, GET_IRQ_INFO). Byte 0 picks the parser (bits 0-1) and
 * whether the region info reply carried an fd (bit 2); the rest is the reply
 * body. Any input must parse or be refused without reading out of bounds,
 * and what parses must hold only values the rest of the client may trust.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vfio_user_client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_version(const uint8_t *body, size_t len)
{
    struct npv_vu_caps caps;
    uint16_t minor;
    if (npv_vu_parse_version_reply(body, len, &caps, &minor) != 0)
        return;
    if (caps.max_msg_fds == 0 || caps.max_msg_fds > NPV_VU_MAX_MSG_FDS ||
        caps.max_data_xfer_size < 8 || caps.max_data_xfer_size > NPV_VU_MAX_DATA_XFER_SIZE ||
        minor > NPV_VU_MINOR)
        abort();
}

static void check_region(const uint8_t *body, size_t len, bool has_fd)
{
    struct npv_region_info info;
    uint64_t mmap_offset;
    uint32_t needed;
    if (npv_vu_parse_region_info(body, len, 0, has_fd, &info, &mmap_offset, &needed) != 0)
        return;
    if (needed != 0) {
        if (needed <= len || needed > NPV_VU_CLIENT_MAX_REGION_INFO)
            abort();
        return;
    }
    if (info.nr_mmap_areas > NPV_REGION_MAX_SPARSE)
        abort();
    if ((info.flags & NPV_REGION_MMAP) && !has_fd)
        abort();
    if (!(info.flags & NPV_REGION_MMAP) && info.nr_mmap_areas != 0)
        abort();
    for (uint32_t i = 0; i < info.nr_mmap_areas; i++) {
        const struct npv_region_area *a = &info.mmap_areas[i];
        if (a->offset > info.size || a->size > info.size - a->offset ||
            a->offset > UINT64_MAX - mmap_offset)
            abort();
    }
}

static void check_device(const uint8_t *body, size_t len)
{
    struct npv_dev_info info;
    if (npv_vu_parse_device_info(body, len, &info) != 0)
        return;
    if (info.num_regions > NPV_VU_CLIENT_MAX_REGIONS ||
        info.num_irqs > NPV_VU_CLIENT_MAX_IRQ_INDEXES)
        abort();
}

static void check_irq(const uint8_t *body, size_t len)
{
    struct npv_irq_info info;
    if (npv_vu_parse_irq_info(body, len, 2, &info) != 0)
        return;
    if (info.index != 2 || info.count > NPV_VU_CLIENT_MAX_VECTORS)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t sel = data[0];
    size_t len = size - 1;
    /* An exact-size copy so ASan sees any read past the end. */
    uint8_t *body = malloc(len ? len : 1);
    if (body == NULL)
        return 0;
    memcpy(body, data + 1, len);
    switch (sel & 3) {
    case 0:
        check_version(body, len);
        break;
    case 1:
        check_region(body, len, (sel & 4) != 0);
        break;
    case 2:
        check_device(body, len);
        break;
    default:
        check_irq(body, len);
        break;
    }
    free(body);
    return 0;
}
