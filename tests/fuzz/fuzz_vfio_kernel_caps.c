/* SPDX-License-Identifier: MIT */
/*
 * The kernel VFIO info capability chains (lib/vfio_region.c, lib/vfio_legacy.c):
 * byte 0 chooses the parser (bit 0 clear: GET_REGION_INFO with its sparse-mmap
 * and MSI-X caps; set: VFIO_IOMMU_GET_INFO's IOVA ranges), the rest is the
 * buffer the kernel would have written, its length the argsz it reported.
 * Every area and range that comes out must lie inside what went in.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vfio_device_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    /* A private copy of exactly the reported length, so ASan sees any read past it. */
    size_t len = size - 1;
    uint8_t *buf = malloc(len ? len : 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data + 1, len);

    if (!(data[0] & 1)) {
        struct npv_region_info info;
        bool truncated;
        if (npv_vfio_parse_region_info(buf, len, &info, &truncated) == 0) {
            if (info.nr_mmap_areas > NPV_REGION_MAX_SPARSE)
                abort();
            for (uint32_t i = 0; i < info.nr_mmap_areas; i++) {
                const struct npv_region_area *a = &info.mmap_areas[i];
                if (a->size == 0 || a->offset > info.size || a->size > info.size - a->offset)
                    abort();
            }
        }
    } else {
        struct npv_iova_range *r = NULL;
        size_t n = 0;
        if (npv_vfio_parse_type1_ranges(buf, len, &r, &n) == 0) {
            if ((n == 0) != (r == NULL) || n * 16 > len)
                abort();
            for (size_t i = 0; i < n; i++)
                if (r[i].start > r[i].last)
                    abort();
        } else if (r != NULL) {
            abort();
        }
        free(r);
    }
    free(buf);
    return 0;
}
