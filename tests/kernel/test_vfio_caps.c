/* SPDX-License-Identifier: MIT */
/*
 * The capability chains the kernel appends to GET_REGION_INFO and
 * VFIO_IOMMU_GET_INFO replies, parsed from crafted buffers: well-formed ones
 * as vfio-pci and type1 build them, and hostile ones (loops, backward links,
 * counts that overflow, areas outside the region).
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <linux/vfio.h>

#include "vfio_device_internal.h"

#define BUF_SIZE 4096

static _Alignas(8) uint8_t buf[BUF_SIZE];

static void put(size_t off, const void *p, size_t len)
{
    ck_assert_uint_le(off + len, BUF_SIZE);
    memcpy(buf + off, p, len);
}

/* A region info reply: fixed part at 0, its chain starting right after it when caps. */
static void region(uint32_t flags, uint64_t size, uint32_t cap_offset)
{
    memset(buf, 0, sizeof(buf));
    struct vfio_region_info ri = {
        .argsz = BUF_SIZE,
        .flags = flags | (cap_offset ? VFIO_REGION_INFO_FLAG_CAPS : 0),
        .index = 0,
        .cap_offset = cap_offset,
        .size = size,
        .offset = 0,
    };
    put(0, &ri, sizeof(ri));
}

static void cap_header(size_t off, uint16_t id, uint16_t version, uint32_t next)
{
    struct vfio_info_cap_header h = {.id = id, .version = version, .next = next};
    put(off, &h, sizeof(h));
}

/* A sparse-mmap capability at off with n areas; returns the offset just past it. */
static size_t sparse(size_t off, uint32_t next, uint32_t nr_areas, const uint64_t (*areas)[2],
                     size_t n)
{
    struct vfio_region_info_cap_sparse_mmap sp = {
        .header = {.id = VFIO_REGION_INFO_CAP_SPARSE_MMAP, .version = 1, .next = next},
        .nr_areas = nr_areas,
    };
    put(off, &sp, sizeof(sp));
    for (size_t i = 0; i < n; i++) {
        struct vfio_region_sparse_mmap_area a = {.offset = areas[i][0], .size = areas[i][1]};
        put(off + sizeof(sp) + i * sizeof(a), &a, sizeof(a));
    }
    return off + sizeof(sp) + n * sizeof(struct vfio_region_sparse_mmap_area);
}

static const uint32_t RW_MMAP =
    VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE | VFIO_REGION_INFO_FLAG_MMAP;
#define FIXED ((uint32_t)sizeof(struct vfio_region_info))

START_TEST(region_without_caps_maps_whole_region)
{
    struct npv_region_info info;
    bool trunc;
    region(RW_MMAP, 0x100000, 0);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, FIXED, &info, &trunc), 0);
    ck_assert_uint_eq(info.flags, NPV_REGION_READ | NPV_REGION_WRITE | NPV_REGION_MMAP);
    ck_assert_uint_eq(info.size, 0x100000);
    ck_assert_uint_eq(info.nr_mmap_areas, 1);
    ck_assert_uint_eq(info.mmap_areas[0].offset, 0);
    ck_assert_uint_eq(info.mmap_areas[0].size, 0x100000);
    ck_assert(!info.msix_mappable);
    ck_assert(!trunc);
}
END_TEST

START_TEST(region_without_mmap_flag_has_no_areas)
{
    struct npv_region_info info;
    bool trunc;
    region(VFIO_REGION_INFO_FLAG_READ, 256, 0);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, FIXED, &info, &trunc), 0);
    ck_assert_uint_eq(info.flags, NPV_REGION_READ);
    ck_assert_uint_eq(info.nr_mmap_areas, 0);
}
END_TEST

START_TEST(region_caps_flag_without_offset_is_short_buffer_reply)
{
    /* What the kernel answers when argsz was too small: CAPS set, cap_offset 0. */
    struct npv_region_info info;
    bool trunc;
    region(RW_MMAP | VFIO_REGION_INFO_FLAG_CAPS, 0x4000, 0);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, FIXED, &info, &trunc), 0);
    ck_assert_uint_eq(info.nr_mmap_areas, 1);
}
END_TEST

START_TEST(region_sparse_mmap_around_msix_table)
{
    struct npv_region_info info;
    bool trunc;
    const uint64_t areas[2][2] = {{0, 0x2000}, {0x3000, 0x1000}};
    region(RW_MMAP, 0x4000, FIXED);
    sparse(FIXED, 0, 2, areas, 2);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, BUF_SIZE, &info, &trunc), 0);
    ck_assert_uint_eq(info.nr_mmap_areas, 2);
    ck_assert_uint_eq(info.mmap_areas[0].offset, 0);
    ck_assert_uint_eq(info.mmap_areas[0].size, 0x2000);
    ck_assert_uint_eq(info.mmap_areas[1].offset, 0x3000);
    ck_assert_uint_eq(info.mmap_areas[1].size, 0x1000);
    ck_assert(!info.msix_mappable);
}
END_TEST

START_TEST(region_sparse_then_msix_mappable_chain)
{
    struct npv_region_info info;
    bool trunc;
    const uint64_t areas[1][2] = {{0, 0x4000}};
    region(RW_MMAP, 0x4000, FIXED);
    size_t next = sparse(FIXED, 0, 1, areas, 1);
    /* Link the sparse cap to an unknown type cap, then to MSIX_MAPPABLE. */
    struct vfio_region_info_cap_sparse_mmap sp;
    memcpy(&sp, buf + FIXED, sizeof(sp));
    sp.header.next = (uint32_t)next;
    put(FIXED, &sp, sizeof(sp));
    struct vfio_region_info_cap_type type = {
        .header = {.id = VFIO_REGION_INFO_CAP_TYPE, .version = 1, .next = (uint32_t)next + 16},
        .type = 1,
        .subtype = 1,
    };
    put(next, &type, sizeof(type));
    cap_header(next + 16, VFIO_REGION_INFO_CAP_MSIX_MAPPABLE, 1, 0);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, next + 24, &info, &trunc), 0);
    ck_assert_uint_eq(info.nr_mmap_areas, 1);
    ck_assert(info.msix_mappable);
}
END_TEST

START_TEST(region_sparse_with_zero_areas_maps_nothing)
{
    struct npv_region_info info;
    bool trunc;
    region(RW_MMAP, 0x1000, FIXED);
    sparse(FIXED, 0, 0, NULL, 0);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, BUF_SIZE, &info, &trunc), 0);
    ck_assert_uint_eq(info.nr_mmap_areas, 0);
    ck_assert_uint_eq(info.flags & NPV_REGION_MMAP, NPV_REGION_MMAP);
}
END_TEST

START_TEST(region_sparse_unknown_version_maps_nothing)
{
    struct npv_region_info info;
    bool trunc;
    const uint64_t areas[1][2] = {{0, 0x1000}};
    region(RW_MMAP, 0x1000, FIXED);
    sparse(FIXED, 0, 1, areas, 1);
    cap_header(FIXED, VFIO_REGION_INFO_CAP_SPARSE_MMAP, 2, 0);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, BUF_SIZE, &info, &trunc), 0);
    ck_assert_uint_eq(info.nr_mmap_areas, 0);
    ck_assert_uint_eq(info.flags & NPV_REGION_MMAP, 0);
}
END_TEST

START_TEST(region_more_sparse_areas_than_kept_are_truncated)
{
    struct npv_region_info info;
    bool trunc;
    uint64_t areas[NPV_REGION_MAX_SPARSE + 3][2];
    for (size_t i = 0; i < NPV_REGION_MAX_SPARSE + 3; i++) {
        areas[i][0] = i * 0x2000;
        areas[i][1] = 0x1000;
    }
    region(RW_MMAP, 0x100000, FIXED);
    sparse(FIXED, 0, NPV_REGION_MAX_SPARSE + 3, (const uint64_t(*)[2])areas,
           NPV_REGION_MAX_SPARSE + 3);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, BUF_SIZE, &info, &trunc), 0);
    ck_assert(trunc);
    ck_assert_uint_eq(info.nr_mmap_areas, NPV_REGION_MAX_SPARSE);
    ck_assert_uint_eq(info.mmap_areas[NPV_REGION_MAX_SPARSE - 1].offset,
                      (NPV_REGION_MAX_SPARSE - 1) * 0x2000);
}
END_TEST

START_TEST(region_rejects_buffer_shorter_than_fixed_part)
{
    struct npv_region_info info;
    bool trunc;
    region(RW_MMAP, 0x1000, 0);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, FIXED - 1, &info, &trunc), -EPROTO);
    ck_assert_int_eq(npv_vfio_parse_region_info(NULL, FIXED, &info, &trunc), -EPROTO);
}
END_TEST

START_TEST(region_rejects_cap_that_links_to_itself)
{
    struct npv_region_info info;
    bool trunc;
    region(RW_MMAP, 0x1000, FIXED);
    cap_header(FIXED, 42, 1, (uint32_t)FIXED);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, BUF_SIZE, &info, &trunc), -EPROTO);
    ck_assert_uint_eq(info.nr_mmap_areas, 0);
}
END_TEST

START_TEST(region_rejects_cap_that_links_backward)
{
    struct npv_region_info info;
    bool trunc;
    region(RW_MMAP, 0x1000, FIXED);
    cap_header(FIXED, 42, 1, (uint32_t)FIXED + 16);
    cap_header(FIXED + 16, 43, 1, (uint32_t)FIXED); /* a two-cap loop */
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, BUF_SIZE, &info, &trunc), -EPROTO);
}
END_TEST

START_TEST(region_rejects_next_inside_current_header)
{
    struct npv_region_info info;
    bool trunc;
    region(RW_MMAP, 0x1000, FIXED);
    cap_header(FIXED, 42, 1, (uint32_t)FIXED + 4);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, BUF_SIZE, &info, &trunc), -EPROTO);
}
END_TEST

START_TEST(region_rejects_cap_offset_beyond_argsz)
{
    struct npv_region_info info;
    bool trunc;
    region(RW_MMAP, 0x1000, 200);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, 100, &info, &trunc), -EPROTO);
    /* The header itself straddles the end. */
    region(RW_MMAP, 0x1000, 96);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, 100, &info, &trunc), -EPROTO);
    /* next beyond the end. */
    region(RW_MMAP, 0x1000, FIXED);
    cap_header(FIXED, 42, 1, 0xffffffffu);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, BUF_SIZE, &info, &trunc), -EPROTO);
}
END_TEST

START_TEST(region_rejects_cap_inside_fixed_part)
{
    struct npv_region_info info;
    bool trunc;
    region(RW_MMAP, 0x1000, 8);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, BUF_SIZE, &info, &trunc), -EPROTO);
}
END_TEST

START_TEST(region_rejects_area_count_beyond_buffer)
{
    struct npv_region_info info;
    bool trunc;
    const uint64_t areas[1][2] = {{0, 0x1000}};
    region(RW_MMAP, 0x1000, FIXED);
    size_t end = sparse(FIXED, 0, 2, areas, 1);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, end, &info, &trunc), -EPROTO);
    /* A count whose byte size overflows 32 bits. */
    region(RW_MMAP, 0x1000, FIXED);
    sparse(FIXED, 0, 0x10000001u, areas, 1);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, BUF_SIZE, &info, &trunc), -EPROTO);
    region(RW_MMAP, 0x1000, FIXED);
    sparse(FIXED, 0, 0xffffffffu, areas, 1);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, BUF_SIZE, &info, &trunc), -EPROTO);
}
END_TEST

START_TEST(region_rejects_sparse_cap_shorter_than_its_header)
{
    struct npv_region_info info;
    bool trunc;
    region(RW_MMAP, 0x1000, FIXED);
    cap_header(FIXED, VFIO_REGION_INFO_CAP_SPARSE_MMAP, 1, 0);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, FIXED + 12, &info, &trunc), -EPROTO);
}
END_TEST

START_TEST(region_rejects_area_outside_region)
{
    struct npv_region_info info;
    bool trunc;
    const uint64_t past_end[1][2] = {{0x800, 0x1000}};
    region(RW_MMAP, 0x1000, FIXED);
    sparse(FIXED, 0, 1, past_end, 1);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, BUF_SIZE, &info, &trunc), -EPROTO);

    const uint64_t wraps[1][2] = {{0x800, UINT64_MAX - 0x10}};
    region(RW_MMAP, 0x1000, FIXED);
    sparse(FIXED, 0, 1, wraps, 1);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, BUF_SIZE, &info, &trunc), -EPROTO);

    const uint64_t start_past[1][2] = {{0x2000, 0}};
    region(RW_MMAP, 0x1000, FIXED);
    sparse(FIXED, 0, 1, start_past, 1);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, BUF_SIZE, &info, &trunc), -EPROTO);
}
END_TEST

START_TEST(region_rejects_two_sparse_caps)
{
    struct npv_region_info info;
    bool trunc;
    const uint64_t areas[1][2] = {{0, 0x1000}};
    region(RW_MMAP, 0x1000, FIXED);
    size_t second = sparse(FIXED, 0, 1, areas, 1);
    sparse(FIXED, (uint32_t)second, 1, areas, 1);
    sparse(second, 0, 1, areas, 1);
    ck_assert_int_eq(npv_vfio_parse_region_info(buf, BUF_SIZE, &info, &trunc), -EPROTO);
}
END_TEST

/* ---- the generic walk ---- */

struct seen {
    int count;
    uint16_t ids[8];
    size_t avail[8];
};

static int record(void *arg, uint16_t id, uint16_t version, const uint8_t *cap, size_t avail)
{
    struct seen *s = arg;
    (void)version;
    (void)cap;
    if (s->count < 8) {
        s->ids[s->count] = id;
        s->avail[s->count] = avail;
    }
    s->count++;
    return id == 99 ? 7 : 0;
}

START_TEST(cap_walk_gives_each_cap_the_bytes_up_to_the_next)
{
    struct seen s = {0};
    memset(buf, 0, sizeof(buf));
    cap_header(32, 1, 1, 48);
    cap_header(48, 2, 1, 0);
    ck_assert_int_eq(npv_vfio_cap_walk(buf, 80, 32, 32, record, &s), 0);
    ck_assert_int_eq(s.count, 2);
    ck_assert_uint_eq(s.ids[0], 1);
    ck_assert_uint_eq(s.avail[0], 16);
    ck_assert_uint_eq(s.ids[1], 2);
    ck_assert_uint_eq(s.avail[1], 32);
}
END_TEST

START_TEST(cap_walk_stops_when_callback_says_so)
{
    struct seen s = {0};
    memset(buf, 0, sizeof(buf));
    cap_header(32, 99, 1, 48);
    cap_header(48, 2, 1, 0);
    ck_assert_int_eq(npv_vfio_cap_walk(buf, 80, 32, 32, record, &s), 7);
    ck_assert_int_eq(s.count, 1);
}
END_TEST

START_TEST(cap_walk_without_chain_visits_nothing)
{
    struct seen s = {0};
    ck_assert_int_eq(npv_vfio_cap_walk(buf, 80, 0, 32, record, &s), 0);
    ck_assert_int_eq(s.count, 0);
}
END_TEST

START_TEST(cap_walk_ends_on_longest_forward_chain)
{
    /* Every header links to the one right after it: the longest legal chain. */
    struct seen s = {0};
    memset(buf, 0, sizeof(buf));
    for (uint32_t off = 8; off + 8 < BUF_SIZE; off += 8)
        cap_header(off, 3, 1, off + 8);
    cap_header(BUF_SIZE - 8, 3, 1, 0);
    ck_assert_int_eq(npv_vfio_cap_walk(buf, BUF_SIZE, 8, 8, record, &s), 0);
    ck_assert_int_eq(s.count, BUF_SIZE / 8 - 1);
}
END_TEST

/* ---- type1 IOVA ranges ---- */

#define T1 ((uint32_t)sizeof(struct vfio_iommu_type1_info))

static void type1(uint32_t cap_offset)
{
    memset(buf, 0, sizeof(buf));
    struct vfio_iommu_type1_info ii = {
        .argsz = BUF_SIZE,
        .flags = VFIO_IOMMU_INFO_PGSIZES | (cap_offset ? VFIO_IOMMU_INFO_CAPS : 0),
        .iova_pgsizes = 0x40201000,
        .cap_offset = cap_offset,
    };
    put(0, &ii, sizeof(ii));
}

static size_t iova_cap(size_t off, uint32_t next, uint32_t nr, const uint64_t (*r)[2], size_t n)
{
    struct vfio_iommu_type1_info_cap_iova_range c = {
        .header = {.id = VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE, .version = 1, .next = next},
        .nr_iovas = nr,
    };
    put(off, &c, sizeof(c));
    for (size_t i = 0; i < n; i++) {
        struct vfio_iova_range v = {.start = r[i][0], .end = r[i][1]};
        put(off + sizeof(c) + i * sizeof(v), &v, sizeof(v));
    }
    return off + sizeof(c) + n * sizeof(struct vfio_iova_range);
}

START_TEST(type1_without_caps_reports_no_ranges)
{
    struct npv_iova_range *r = (void *)1;
    size_t n = 5;
    type1(0);
    ck_assert_int_eq(npv_vfio_parse_type1_ranges(buf, T1, &r, &n), 0);
    ck_assert_ptr_null(r);
    ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(type1_iova_ranges_are_inclusive_and_skip_msi_window)
{
    /* What type1 reports on x86: everything but the interrupt window 0xfee00000-0xfeefffff. */
    const uint64_t x86[2][2] = {{0, 0xfedfffff}, {0xfef00000, 0x7fffffffff}};
    struct npv_iova_range *r;
    size_t n;
    type1((uint32_t)T1);
    iova_cap(T1, 0, 2, x86, 2);
    ck_assert_int_eq(npv_vfio_parse_type1_ranges(buf, BUF_SIZE, &r, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(r[0].start, 0);
    ck_assert_uint_eq(r[0].last, 0xfedfffff);
    ck_assert_uint_eq(r[1].start, 0xfef00000);
    ck_assert_uint_eq(r[1].last, 0x7fffffffff);
    free(r);
}
END_TEST

START_TEST(type1_iova_cap_found_after_other_caps)
{
    const uint64_t one[1][2] = {{0x10000, 0xffffffff}};
    struct npv_iova_range *r;
    size_t n;
    type1((uint32_t)T1);
    /* A DMA_AVAIL cap first (header + u32, padded to 16), then the ranges. */
    cap_header(T1, VFIO_IOMMU_TYPE1_INFO_DMA_AVAIL, 1, (uint32_t)T1 + 16);
    uint32_t avail = 65535;
    put(T1 + 8, &avail, sizeof(avail));
    iova_cap(T1 + 16, 0, 1, one, 1);
    ck_assert_int_eq(npv_vfio_parse_type1_ranges(buf, BUF_SIZE, &r, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(r[0].start, 0x10000);
    free(r);
}
END_TEST

START_TEST(type1_rejects_empty_range_list)
{
    struct npv_iova_range *r;
    size_t n;
    type1((uint32_t)T1);
    iova_cap(T1, 0, 0, NULL, 0);
    ck_assert_int_eq(npv_vfio_parse_type1_ranges(buf, BUF_SIZE, &r, &n), -EPROTO);
    ck_assert_ptr_null(r);
}
END_TEST

START_TEST(type1_rejects_inverted_range)
{
    const uint64_t bad[2][2] = {{0, 0xfff}, {0x2000, 0x1000}};
    struct npv_iova_range *r;
    size_t n;
    type1((uint32_t)T1);
    iova_cap(T1, 0, 2, bad, 2);
    ck_assert_int_eq(npv_vfio_parse_type1_ranges(buf, BUF_SIZE, &r, &n), -EPROTO);
    ck_assert_ptr_null(r);
}
END_TEST

START_TEST(type1_rejects_range_count_beyond_argsz)
{
    const uint64_t one[1][2] = {{0, 0xfff}};
    struct npv_iova_range *r;
    size_t n;
    type1((uint32_t)T1);
    size_t end = iova_cap(T1, 0, 3, one, 1);
    ck_assert_int_eq(npv_vfio_parse_type1_ranges(buf, end, &r, &n), -EPROTO);
    type1((uint32_t)T1);
    iova_cap(T1, 0, 0xffffffffu, one, 1);
    ck_assert_int_eq(npv_vfio_parse_type1_ranges(buf, BUF_SIZE, &r, &n), -EPROTO);
}
END_TEST

START_TEST(type1_rejects_looping_chain_and_short_buffer)
{
    struct npv_iova_range *r;
    size_t n;
    type1((uint32_t)T1);
    cap_header(T1, VFIO_IOMMU_TYPE1_INFO_CAP_MIGRATION, 1, (uint32_t)T1);
    ck_assert_int_eq(npv_vfio_parse_type1_ranges(buf, BUF_SIZE, &r, &n), -EPROTO);
    ck_assert_int_eq(npv_vfio_parse_type1_ranges(buf, T1 - 1, &r, &n), -EPROTO);
}
END_TEST

START_TEST(type1_rejects_two_range_caps)
{
    const uint64_t one[1][2] = {{0, 0xfff}};
    struct npv_iova_range *r;
    size_t n;
    type1((uint32_t)T1);
    size_t second = iova_cap(T1, 0, 1, one, 1);
    iova_cap(T1, (uint32_t)second, 1, one, 1);
    iova_cap(second, 0, 1, one, 1);
    ck_assert_int_eq(npv_vfio_parse_type1_ranges(buf, BUF_SIZE, &r, &n), -EPROTO);
    ck_assert_ptr_null(r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("kernel_vfio_caps");
    TCase *tc = tcase_create("region");
    tcase_add_test(tc, region_without_caps_maps_whole_region);
    tcase_add_test(tc, region_without_mmap_flag_has_no_areas);
    tcase_add_test(tc, region_caps_flag_without_offset_is_short_buffer_reply);
    tcase_add_test(tc, region_sparse_mmap_around_msix_table);
    tcase_add_test(tc, region_sparse_then_msix_mappable_chain);
    tcase_add_test(tc, region_sparse_with_zero_areas_maps_nothing);
    tcase_add_test(tc, region_sparse_unknown_version_maps_nothing);
    tcase_add_test(tc, region_more_sparse_areas_than_kept_are_truncated);
    tcase_add_test(tc, region_rejects_buffer_shorter_than_fixed_part);
    tcase_add_test(tc, region_rejects_cap_that_links_to_itself);
    tcase_add_test(tc, region_rejects_cap_that_links_backward);
    tcase_add_test(tc, region_rejects_next_inside_current_header);
    tcase_add_test(tc, region_rejects_cap_offset_beyond_argsz);
    tcase_add_test(tc, region_rejects_cap_inside_fixed_part);
    tcase_add_test(tc, region_rejects_area_count_beyond_buffer);
    tcase_add_test(tc, region_rejects_sparse_cap_shorter_than_its_header);
    tcase_add_test(tc, region_rejects_area_outside_region);
    tcase_add_test(tc, region_rejects_two_sparse_caps);
    suite_add_tcase(s, tc);

    tc = tcase_create("walk");
    tcase_add_test(tc, cap_walk_gives_each_cap_the_bytes_up_to_the_next);
    tcase_add_test(tc, cap_walk_stops_when_callback_says_so);
    tcase_add_test(tc, cap_walk_without_chain_visits_nothing);
    tcase_add_test(tc, cap_walk_ends_on_longest_forward_chain);
    suite_add_tcase(s, tc);

    tc = tcase_create("type1");
    tcase_add_test(tc, type1_without_caps_reports_no_ranges);
    tcase_add_test(tc, type1_iova_ranges_are_inclusive_and_skip_msi_window);
    tcase_add_test(tc, type1_iova_cap_found_after_other_caps);
    tcase_add_test(tc, type1_rejects_empty_range_list);
    tcase_add_test(tc, type1_rejects_inverted_range);
    tcase_add_test(tc, type1_rejects_range_count_beyond_argsz);
    tcase_add_test(tc, type1_rejects_looping_chain_and_short_buffer);
    tcase_add_test(tc, type1_rejects_two_range_caps);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
