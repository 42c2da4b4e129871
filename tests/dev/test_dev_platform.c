/* SPDX-License-Identifier: MIT */
/*
 * A platform device (VFIO_DEVICE_FLAGS_PLATFORM) through the shared device
 * layer, over a strict fake transport: its regions are MMIO resources, and
 * region 7 is one of them, not a config space. Nothing in open, info, BAR
 * mapping or IRQ set-up may touch a region the caller did not ask for, and
 * the config-space helpers refuse.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <npuvfio/bar.h>
#include <npuvfio/irq.h>

#include "dev_internal.h"

#define NREGIONS 9 /* as many as a PCI function, so index 7 exists */
#define REG_SIZE 0x1000u

struct fake {
    uint8_t mmio[NREGIONS][REG_SIZE];
    unsigned accesses[NREGIONS]; /* reads and writes that reached the transport, per region */
    uint32_t irq_index;
    uint32_t irq_count;
    unsigned set_irqs_calls;
    int memfd; /* what region 0's mapped page shows */
};

static struct fake *fake_of(struct npv_dev *dev)
{
    return dev->priv;
}

static int f_get_info(struct npv_dev *dev, struct npv_dev_info *info)
{
    (void)dev;
    memset(info, 0, sizeof(*info));
    info->flags = NPV_DEV_FLAG_PLATFORM;
    info->num_regions = NREGIONS;
    info->num_irqs = 4;
    return 0;
}

static int f_region_info(struct npv_dev *dev, uint32_t index, struct npv_region_info *info)
{
    (void)dev;
    if (index >= NREGIONS)
        return -EINVAL;
    memset(info, 0, sizeof(*info));
    info->index = index;
    info->flags = NPV_REGION_READ | NPV_REGION_WRITE;
    info->size = REG_SIZE;
    /* Region 0 is page-aligned and mmappable; the others are reached by reads and writes. */
    if (index == 0) {
        info->flags |= NPV_REGION_MMAP;
        info->nr_mmap_areas = 1;
        info->mmap_areas[0].size = REG_SIZE;
    }
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

static int f_access(struct npv_dev *dev, uint32_t index, uint64_t off, size_t len, uint8_t **p)
{
    struct fake *f = fake_of(dev);
    if (index >= NREGIONS || off > REG_SIZE || len > REG_SIZE - off)
        return -EINVAL;
    f->accesses[index]++;
    *p = &f->mmio[index][off];
    return 0;
}

static int f_read(struct npv_dev *dev, uint32_t index, uint64_t off, void *buf, size_t len)
{
    uint8_t *p;
    int ret = f_access(dev, index, off, len, &p);
    if (ret == 0)
        memcpy(buf, p, len);
    return ret;
}

static int f_write(struct npv_dev *dev, uint32_t index, uint64_t off, const void *buf, size_t len)
{
    uint8_t *p;
    int ret = f_access(dev, index, off, len, &p);
    if (ret == 0)
        memcpy(p, buf, len);
    return ret;
}

static int f_irq_info(struct npv_dev *dev, uint32_t index, struct npv_irq_info *info)
{
    (void)dev;
    if (index >= 4)
        return -EINVAL;
    /* One line per index; a level-triggered line is maskable and automasked. */
    info->index = index;
    info->count = 1;
    info->flags = NPV_IRQ_INFO_EVENTFD | NPV_IRQ_INFO_MASKABLE | NPV_IRQ_INFO_AUTOMASKED;
    return 0;
}

static int f_set_irqs(struct npv_dev *dev, uint32_t index, uint32_t flags, uint32_t start,
                      uint32_t count, const int32_t *fds)
{
    (void)flags;
    (void)start;
    (void)fds;
    struct fake *f = fake_of(dev);
    f->set_irqs_calls++;
    f->irq_index = index;
    f->irq_count = count;
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
    .irq_info = f_irq_info,
    .set_irqs = f_set_irqs,
    .attach = f_attach,
    .close = f_close,
};

static struct npv_ctx *ctx;
static struct npv_domain *dom;
static struct fake *fk;
static struct npv_dev *dev;

static unsigned total_accesses(void)
{
    unsigned n = 0;
    for (int i = 0; i < NREGIONS; i++)
        n += fk->accesses[i];
    return n;
}

static void setup(void)
{
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    npv_ctx_set_log_level(ctx, NPV_LOG_ERROR);
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
    fk = calloc(1, sizeof(*fk));
    ck_assert_ptr_nonnull(fk);
    fk->memfd = memfd_create("fake-npu", MFD_CLOEXEC);
    ck_assert_int_ge(fk->memfd, 0);
    ck_assert_int_eq(ftruncate(fk->memfd, REG_SIZE), 0);
    /* What a PCI walk would take for a capability list with PCIe and MSI-X in region 7. */
    fk->mmio[7][0x06] = 0x10;
    fk->mmio[7][0x34] = 0x40;
    fk->mmio[7][0x40] = 0x11;
    dev = npv_dev_alloc(ctx, &fake_ops, NPV_TRANSPORT_LEGACY, "fdab0000.npu", NULL);
    ck_assert_ptr_nonnull(dev);
    dev->priv = fk;
    ck_assert_int_eq(npv_dev_finish_open(dev, dom), 0);
}

static void teardown(void)
{
    npv_dev_close(dev);
    npv_domain_put(dom);
    close(fk->memfd);
    free(fk);
    npv_ctx_free(ctx);
}

START_TEST(platform_open_touches_no_region)
{
    ck_assert_uint_eq(total_accesses(), 0);
    ck_assert(!npv_dev_no_snoop_cleared(dev));
    ck_assert_str_eq(npv_dev_name(dev), "fdab0000.npu");
}
END_TEST

START_TEST(platform_info_reads_no_config_space)
{
    struct npv_dev_info info;
    ck_assert_int_eq(npv_dev_info(dev, &info), 0);
    ck_assert_uint_eq(info.flags & NPV_DEV_FLAG_PLATFORM, NPV_DEV_FLAG_PLATFORM);
    ck_assert_uint_eq(info.flags & NPV_DEV_FLAG_PCI, 0);
    ck_assert_uint_eq(info.vendor_id, 0);
    ck_assert_uint_eq(info.class_code, 0);
    ck_assert_uint_eq(total_accesses(), 0);
}
END_TEST

START_TEST(platform_config_helpers_refuse)
{
    uint16_t v = 0x1234;
    ck_assert_int_eq(npv_dev_config_read(dev, 0x04, &v, 2), -ENOTSUP);
    ck_assert_int_eq(npv_dev_config_write(dev, 0x04, &v, 2), -ENOTSUP);
    ck_assert_uint_eq(total_accesses(), 0);
    uint32_t cap = 1;
    ck_assert_int_eq(npv_dev_find_pci_cap(dev, 0x11, &cap), 0);
    ck_assert_uint_eq(cap, 0);
    ck_assert_uint_eq(total_accesses(), 0);
}
END_TEST

START_TEST(platform_region_maps_as_a_bar_without_msix_lookup)
{
    struct npv_bar *bar;
    ck_assert_int_eq(npv_bar_map(dev, NPV_PLATFORM_REGION(0), &bar), 0);
    /* No MSI-X table to keep out of the mapping: the whole page is mapped, nothing read. */
    ck_assert_uint_eq(total_accesses(), 0);
    ck_assert_int_eq(npv_bar_is_direct(bar, 0, REG_SIZE), 1);
    npv_bar_write32(bar, 0x08, 1); /* PC OPERATION_ENABLE of the RKNPU */
    uint32_t seen = 0;
    ck_assert_int_eq(pread(fk->memfd, &seen, 4, 0x08), 4);
    ck_assert_uint_eq(seen, 1);
    npv_bar_unmap(bar);
    /* Region 7 is an MMIO resource like the others. */
    ck_assert_int_eq(npv_bar_map(dev, NPV_PLATFORM_REGION(7), &bar), 0);
    uint64_t val;
    ck_assert_int_eq(npv_bar_read(bar, 0x40, 1, &val), 0);
    ck_assert_uint_eq(val, 0x11);
    ck_assert_uint_eq(fk->accesses[7], 1);
    npv_bar_unmap(bar);
}
END_TEST

START_TEST(platform_irq_line_by_index)
{
    struct npv_irq *irq;
    ck_assert_int_eq(npv_irq_enable(dev, NPV_IRQ_PLATFORM(3), 1, &irq), 0);
    ck_assert_uint_eq(fk->irq_index, 3);
    ck_assert_uint_eq(fk->irq_count, 1);
    /* Each line is one vector. */
    struct npv_irq *two;
    ck_assert_int_eq(npv_irq_enable(dev, NPV_IRQ_PLATFORM(2), 2, &two), -EINVAL);
    ck_assert_int_eq(npv_irq_unmask(irq, 0), 0);
    npv_irq_disable(irq);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("dev_platform");
    TCase *tc = tcase_create("platform");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, platform_open_touches_no_region);
    tcase_add_test(tc, platform_info_reads_no_config_space);
    tcase_add_test(tc, platform_config_helpers_refuse);
    tcase_add_test(tc, platform_region_maps_as_a_bar_without_msix_lookup);
    tcase_add_test(tc, platform_irq_line_by_index);
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
