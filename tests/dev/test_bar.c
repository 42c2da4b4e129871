/* SPDX-License-Identifier: MIT */
/*
 * npv_bar against an in-process device whose transport is a table of
 * function pointers: which pages end up mapped, and that every other access
 * reaches the transport with exactly its width.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <npuvfio/bar.h>

#include "dev_internal.h"

#define BAR_SIZE 0x4000u

struct fake {
    uint32_t region_flags;
    uint32_t nr_areas;
    struct npv_region_area areas[NPV_REGION_MAX_SPARSE];
    bool msix_mappable;
    bool msix_cap;             /* config space lists MSI-X with its table at 0x2000 of BAR0 */
    int memfd;                 /* what the mapped pages show */
    uint8_t trapped[BAR_SIZE]; /* what the transport shows */
    uint8_t config[256];
    unsigned nr_reads, nr_writes;
    uint64_t last_off;
    size_t last_len;
};

static struct fake *fake_of(struct npv_dev *dev)
{
    return dev->priv;
}

static int f_get_info(struct npv_dev *dev, struct npv_dev_info *info)
{
    (void)dev;
    memset(info, 0, sizeof(*info));
    info->flags = NPV_DEV_FLAG_PCI;
    info->num_regions = 9;
    info->num_irqs = 5;
    return 0;
}

static int f_region_info(struct npv_dev *dev, uint32_t index, struct npv_region_info *info)
{
    struct fake *f = fake_of(dev);
    memset(info, 0, sizeof(*info));
    info->index = index;
    if (index == NPV_PCI_CONFIG_REGION) {
        info->flags = NPV_REGION_READ | NPV_REGION_WRITE;
        info->size = sizeof(f->config);
        return 0;
    }
    if (index != 0)
        return -EINVAL;
    info->flags = f->region_flags;
    info->size = BAR_SIZE;
    info->nr_mmap_areas = f->nr_areas;
    memcpy(info->mmap_areas, f->areas, sizeof(f->areas));
    info->msix_mappable = f->msix_mappable;
    return 0;
}

static int f_mmap_fd(struct npv_dev *dev, uint32_t index, uint64_t area_off, int *fd,
                     uint64_t *file_off)
{
    if (index != 0)
        return -EINVAL;
    *fd = fake_of(dev)->memfd;
    *file_off = area_off;
    return 0;
}

static int f_read(struct npv_dev *dev, uint32_t index, uint64_t off, void *buf, size_t len)
{
    struct fake *f = fake_of(dev);
    if (index == NPV_PCI_CONFIG_REGION) {
        if (off + len > sizeof(f->config))
            return -EINVAL;
        memcpy(buf, f->config + off, len);
        return 0;
    }
    if (off + len > BAR_SIZE)
        return -EINVAL;
    f->nr_reads++;
    f->last_off = off;
    f->last_len = len;
    memcpy(buf, f->trapped + off, len);
    return 0;
}

static int f_write(struct npv_dev *dev, uint32_t index, uint64_t off, const void *buf, size_t len)
{
    struct fake *f = fake_of(dev);
    if (index == NPV_PCI_CONFIG_REGION) {
        if (off + len > sizeof(f->config))
            return -EINVAL;
        memcpy(f->config + off, buf, len);
        return 0;
    }
    if (off + len > BAR_SIZE)
        return -EINVAL;
    f->nr_writes++;
    f->last_off = off;
    f->last_len = len;
    memcpy(f->trapped + off, buf, len);
    return 0;
}

static int f_attach(struct npv_dev *dev, struct npv_domain *dom)
{
    (void)dev;
    (void)dom;
    return 0;
}

static void f_close(struct npv_dev *dev)
{
    (void)dev;
}

static const struct npv_dev_ops fake_ops = {
    .get_info = f_get_info,
    .region_info = f_region_info,
    .region_mmap_fd = f_mmap_fd,
    .region_read = f_read,
    .region_write = f_write,
    .attach = f_attach,
    .close = f_close,
};

static struct npv_ctx *ctx;
static struct npv_dev *dev;
static struct fake *fk;

static void setup(void)
{
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    fk = calloc(1, sizeof(*fk));
    ck_assert_ptr_nonnull(fk);
    fk->memfd = memfd_create("fake-bar", MFD_CLOEXEC);
    ck_assert_int_ge(fk->memfd, 0);
    ck_assert_int_eq(ftruncate(fk->memfd, BAR_SIZE), 0);
    fk->region_flags = NPV_REGION_READ | NPV_REGION_WRITE | NPV_REGION_MMAP;
    dev = npv_dev_alloc(ctx, &fake_ops, NPV_TRANSPORT_VFIO_USER, "fake", NULL);
    ck_assert_ptr_nonnull(dev);
    dev->priv = fk;
}

static void teardown(void)
{
    npv_dev_close(dev);
    close(fk->memfd);
    free(fk);
    npv_ctx_free(ctx);
}

static void set_msix_cap(struct fake *f, uint32_t table_off, uint16_t vectors)
{
    f->config[0x06] = 0x10; /* status: capability list */
    f->config[0x34] = 0x40;
    f->config[0x40] = 0x11; /* MSI-X */
    f->config[0x41] = 0x00;
    uint16_t ctl = (uint16_t)(vectors - 1);
    memcpy(&f->config[0x42], &ctl, 2);
    uint32_t tbl = table_off | 0u; /* BIR 0 */
    memcpy(&f->config[0x44], &tbl, 4);
}

static int count_maps(void)
{
    FILE *fp = fopen("/proc/self/maps", "re");
    ck_assert_ptr_nonnull(fp);
    int n = 0, c;
    while ((c = fgetc(fp)) != EOF)
        n += c == '\n';
    fclose(fp);
    return n;
}

START_TEST(bar_maps_only_sparse_areas)
{
    fk->nr_areas = 2;
    fk->areas[0] = (struct npv_region_area){0x1000, 0x1000};
    fk->areas[1] = (struct npv_region_area){0x3000, 0x1000};
    struct npv_bar *bar;
    ck_assert_int_eq(npv_bar_map(dev, 0, &bar), 0);
    ck_assert_uint_eq(bar->size, BAR_SIZE);
    ck_assert_int_eq(bar->direct[0], 0);
    ck_assert_int_ne(bar->direct[1], 0);
    ck_assert_int_eq(bar->direct[2], 0);
    ck_assert_int_ne(bar->direct[3], 0);
    ck_assert_int_eq(npv_bar_is_direct(bar, 0x1000, 0x1000), 1);
    ck_assert_int_eq(npv_bar_is_direct(bar, 0x1000, 0x1001), 0);
    ck_assert_int_eq(npv_bar_is_direct(bar, 0x0ff8, 8), 0);
    ck_assert_int_eq(npv_bar_is_direct(bar, 0, BAR_SIZE + 1), -ERANGE);
    npv_bar_unmap(bar);
}
END_TEST

START_TEST(bar_direct_store_lands_in_the_shared_page)
{
    fk->nr_areas = 1;
    fk->areas[0] = (struct npv_region_area){0x1000, 0x1000};
    struct npv_bar *bar;
    ck_assert_int_eq(npv_bar_map(dev, 0, &bar), 0);
    npv_bar_write32(bar, 0x1010, 0xdeadbeef);
    uint32_t v;
    ck_assert_int_eq(pread(fk->memfd, &v, 4, 0x1010), 4);
    ck_assert_uint_eq(v, 0xdeadbeef);
    ck_assert_uint_eq(fk->nr_writes, 0);
    ck_assert_uint_eq(npv_bar_read32(bar, 0x1010), 0xdeadbeef);
    ck_assert_uint_eq(fk->nr_reads, 0);
    npv_bar_unmap(bar);
}
END_TEST

START_TEST(bar_trapped_access_keeps_its_width)
{
    fk->region_flags = NPV_REGION_READ | NPV_REGION_WRITE;
    struct npv_bar *bar;
    ck_assert_int_eq(npv_bar_map(dev, 0, &bar), 0);
    npv_bar_write64(bar, 0x40, 0x1122334455667788ull);
    ck_assert_uint_eq(fk->nr_writes, 1);
    ck_assert_uint_eq(fk->last_off, 0x40);
    ck_assert_uint_eq(fk->last_len, 8);
    ck_assert_uint_eq(npv_bar_read64(bar, 0x40), 0x1122334455667788ull);
    ck_assert_uint_eq(fk->nr_reads, 1);
    ck_assert_uint_eq(fk->last_len, 8);
    ck_assert_uint_eq(npv_bar_read16(bar, 0x42), 0x5566);
    ck_assert_uint_eq(fk->last_len, 2);
    npv_bar_write8(bar, 0x7, 0xab);
    ck_assert_uint_eq(fk->last_len, 1);
    ck_assert_uint_eq(fk->trapped[7], 0xab);
    npv_bar_unmap(bar);
}
END_TEST

START_TEST(bar_checked_access_refuses_bad_width_and_range)
{
    fk->region_flags = NPV_REGION_READ | NPV_REGION_WRITE;
    struct npv_bar *bar;
    ck_assert_int_eq(npv_bar_map(dev, 0, &bar), 0);
    uint64_t v;
    ck_assert_int_eq(npv_bar_read(bar, 0, 3, &v), -EINVAL);
    ck_assert_int_eq(npv_bar_read(bar, BAR_SIZE - 4, 8, &v), -ERANGE);
    ck_assert_int_eq(npv_bar_write(bar, BAR_SIZE, 1, 0), -ERANGE);
    ck_assert_int_eq(npv_bar_write(bar, UINT64_MAX - 3, 8, 0), -ERANGE);
    ck_assert_uint_eq(fk->nr_reads + fk->nr_writes, 0);
    npv_bar_unmap(bar);
}
END_TEST

START_TEST(bar_never_maps_the_msix_table)
{
    set_msix_cap(fk, 0x2000, 2);
    fk->nr_areas = 1;
    fk->areas[0] = (struct npv_region_area){0, BAR_SIZE};
    struct npv_bar *bar;
    ck_assert_int_eq(npv_bar_map(dev, 0, &bar), 0);
    ck_assert_int_ne(bar->direct[0], 0);
    ck_assert_int_ne(bar->direct[1], 0);
    ck_assert_int_eq(bar->direct[2], 0);
    ck_assert_int_ne(bar->direct[3], 0);
    npv_bar_write32(bar, 0x2000, 1);
    ck_assert_uint_eq(fk->nr_writes, 1);
    npv_bar_unmap(bar);
}
END_TEST

START_TEST(bar_maps_msix_table_when_region_says_mappable)
{
    set_msix_cap(fk, 0x2000, 2);
    fk->msix_mappable = true;
    fk->nr_areas = 1;
    fk->areas[0] = (struct npv_region_area){0, BAR_SIZE};
    struct npv_bar *bar;
    ck_assert_int_eq(npv_bar_map(dev, 0, &bar), 0);
    ck_assert_int_eq(npv_bar_is_direct(bar, 0, BAR_SIZE), 1);
    npv_bar_unmap(bar);
}
END_TEST

START_TEST(bar_area_beyond_region_stays_trapped)
{
    fk->nr_areas = 2;
    fk->areas[0] = (struct npv_region_area){0x3000, 0x2000};
    fk->areas[1] = (struct npv_region_area){UINT64_MAX - 0xfff, 0x1000};
    struct npv_bar *bar;
    ck_assert_int_eq(npv_bar_map(dev, 0, &bar), 0);
    ck_assert_int_eq(npv_bar_is_direct(bar, 0, BAR_SIZE), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(bar->direct[i], 0);
    npv_bar_unmap(bar);
}
END_TEST

START_TEST(bar_unaligned_area_maps_only_whole_pages)
{
    fk->nr_areas = 1;
    fk->areas[0] = (struct npv_region_area){0x0800, 0x2000}; /* covers page 1 only wholly */
    struct npv_bar *bar;
    ck_assert_int_eq(npv_bar_map(dev, 0, &bar), 0);
    ck_assert_int_eq(bar->direct[0], 0);
    ck_assert_int_ne(bar->direct[1], 0);
    ck_assert_int_eq(bar->direct[2], 0);
    npv_bar_unmap(bar);
}
END_TEST

START_TEST(bar_refuses_unreadable_region)
{
    fk->region_flags = NPV_REGION_WRITE;
    struct npv_bar *bar = NULL;
    ck_assert_int_eq(npv_bar_map(dev, 0, &bar), -EINVAL);
    ck_assert_ptr_null(bar);
}
END_TEST

START_TEST(bar_unmap_releases_every_mapping)
{
    fk->nr_areas = 2;
    fk->areas[0] = (struct npv_region_area){0x1000, 0x1000};
    fk->areas[1] = (struct npv_region_area){0x3000, 0x1000};
    int before = count_maps();
    for (int i = 0; i < 16; i++) {
        struct npv_bar *bar;
        ck_assert_int_eq(npv_bar_map(dev, 0, &bar), 0);
        npv_bar_unmap(bar);
    }
    ck_assert_int_eq(count_maps(), before);
    npv_bar_unmap(NULL);
}
END_TEST

START_TEST(bar_wrap_presents_caller_memory_and_leaves_it_alone)
{
    uint64_t *mem = aligned_alloc(4096, 8192);
    ck_assert_ptr_nonnull(mem);
    memset(mem, 0, 8192);
    struct npv_bar *bar;
    ck_assert_int_eq(npv_bar_wrap(NULL, 4096, &bar), -EINVAL);
    ck_assert_int_eq(npv_bar_wrap(mem, 0, &bar), -EINVAL);
    ck_assert_int_eq(npv_bar_wrap((uint8_t *)mem + 4, 64, &bar), -EINVAL);
    ck_assert_int_eq(npv_bar_wrap(mem, 8192, NULL), -EINVAL);
    int before = count_maps();
    ck_assert_int_eq(npv_bar_wrap(mem, 8192, &bar), 0);
    ck_assert_ptr_null(bar->dev);
    ck_assert_uint_eq(bar->size, 8192);
    ck_assert_int_eq(npv_bar_is_direct(bar, 0, 8192), 1);
    /* Memory a thread serves: stores are fenced so a later load cannot pass them. */
    ck_assert_uint_eq(bar->direct[0], NPV_BAR_DIRECT_SHARED);
    ck_assert_uint_eq(bar->direct[1], NPV_BAR_DIRECT_SHARED);
    /* Both pages are plain memory: the accessors' stores land there, loads read it. */
    npv_bar_write32_release(bar, 0x40, 0x12345678u);
    npv_bar_write64(bar, 0x1008, 0x1122334455667788ull);
    ck_assert_uint_eq(((uint32_t *)mem)[0x10], 0x12345678u);
    ck_assert_uint_eq(mem[0x201], 0x1122334455667788ull);
    mem[3] = 42;
    ck_assert_uint_eq(npv_bar_read64(bar, 0x18), 42);
    uint64_t v;
    ck_assert_int_eq(npv_bar_read(bar, 0x18, 8, &v), 0);
    ck_assert_uint_eq(v, 42);
    /* A misaligned checked access has no transport to fall back to. */
    ck_assert_int_eq(npv_bar_read(bar, 0x19, 4, &v), -EINVAL);
    ck_assert_int_eq(npv_bar_write(bar, 0x1a, 8, 1), -EINVAL);
    ck_assert_int_eq(npv_bar_read(bar, 8192, 4, &v), -ERANGE);
    npv_bar_unmap(bar);
    /* The memory is still the caller's: mapped, and nothing was mapped or unmapped. */
    ck_assert_int_eq(count_maps(), before);
    ck_assert_uint_eq(mem[3], 42);
    free(mem);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bar");
    TCase *tc = tcase_create("map");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, bar_maps_only_sparse_areas);
    tcase_add_test(tc, bar_direct_store_lands_in_the_shared_page);
    tcase_add_test(tc, bar_trapped_access_keeps_its_width);
    tcase_add_test(tc, bar_checked_access_refuses_bad_width_and_range);
    tcase_add_test(tc, bar_never_maps_the_msix_table);
    tcase_add_test(tc, bar_maps_msix_table_when_region_says_mappable);
    tcase_add_test(tc, bar_area_beyond_region_stays_trapped);
    tcase_add_test(tc, bar_unaligned_area_maps_only_whole_pages);
    tcase_add_test(tc, bar_refuses_unreadable_region);
    tcase_add_test(tc, bar_unmap_releases_every_mapping);
    tcase_add_test(tc, bar_wrap_presents_caller_memory_and_leaves_it_alone);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
