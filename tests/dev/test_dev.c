/* SPDX-License-Identifier: MIT */
/*
 * npv_dev over a fake transport: attach bookkeeping (skip when unchanged,
 * the old domain kept on failure, replay when a private IOMMU moves), the
 * PCI set-up finish_open does, and which reset runs.
 */
#include <check.h>
#include <errno.h>
#include <string.h>

#include <npuvfio/dma.h>

#include "dev_internal.h"
#include "fake_sink.h"

struct fake {
    uint8_t config[256];
    uint32_t dev_flags;
    int attach_err; /* nonzero: attach fails with it before touching anything */
    unsigned attach_calls, reset_calls;
    struct fake_sink fs;
};

static struct fake *fake_of(struct npv_dev *dev)
{
    return dev->priv;
}

static int f_get_info(struct npv_dev *dev, struct npv_dev_info *info)
{
    memset(info, 0, sizeof(*info));
    info->flags = fake_of(dev)->dev_flags;
    info->num_regions = 9;
    info->num_irqs = 5;
    return 0;
}

static int f_read(struct npv_dev *dev, uint32_t index, uint64_t off, void *buf, size_t len)
{
    struct fake *f = fake_of(dev);
    if (index != NPV_PCI_CONFIG_REGION || off + len > sizeof(f->config))
        return -EINVAL;
    memcpy(buf, f->config + off, len);
    return 0;
}

static int f_write(struct npv_dev *dev, uint32_t index, uint64_t off, const void *buf, size_t len)
{
    struct fake *f = fake_of(dev);
    if (index != NPV_PCI_CONFIG_REGION || off + len > sizeof(f->config))
        return -EINVAL;
    memcpy(f->config + off, buf, len);
    return 0;
}

static int f_attach(struct npv_dev *dev, struct npv_domain *dom)
{
    struct fake *f = fake_of(dev);
    f->attach_calls++;
    if (f->attach_err)
        return f->attach_err;
    return npv_dev_move_private_sink(dev, &f->fs.sink, dom);
}

static int f_reset(struct npv_dev *dev)
{
    fake_of(dev)->reset_calls++;
    return 0;
}

static void f_close(struct npv_dev *dev)
{
    struct fake *f = fake_of(dev);
    if (dev->domain != NULL)
        npv_domain_remove_sink(dev->domain, &f->fs.sink, true);
}

static const struct npv_dev_ops fake_ops = {
    .get_info = f_get_info,
    .region_read = f_read,
    .region_write = f_write,
    .attach = f_attach,
    .reset = f_reset,
    .close = f_close,
};

static struct npv_ctx *ctx;
static struct fake fk;
static struct npv_domain *a, *b;

static void setup(void)
{
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    npv_ctx_set_log_level(ctx, NPV_LOG_ERROR);
    memset(&fk, 0, sizeof(fk));
    fake_sink_init(&fk.fs, -1);
    fk.dev_flags = NPV_DEV_FLAG_PCI;
    /* Config space: a capability list holding PCI Express, Enable No Snoop set. */
    fk.config[0x06] = 0x10;
    fk.config[0x34] = 0x40;
    fk.config[0x40] = 0x10;
    fk.config[0x41] = 0x00;
    fk.config[0x49] = 0x08; /* Device Control bit 11 */
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &a), 0);
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &b), 0);
}

static void teardown(void)
{
    npv_domain_put(a);
    npv_domain_put(b);
    npv_ctx_free(ctx);
}

static struct npv_dev *open_fake(struct npv_domain *dom)
{
    struct npv_dev *dev = npv_dev_alloc(ctx, &fake_ops, NPV_TRANSPORT_VFIO_USER, "fake", NULL);
    ck_assert_ptr_nonnull(dev);
    dev->priv = &fk;
    ck_assert_int_eq(npv_dev_finish_open(dev, dom), 0);
    return dev;
}

static struct npv_dma *map_at(struct npv_domain *dom, npv_iova_t iova)
{
    struct npv_dma *d;
    ck_assert_int_eq(npv_dma_alloc(ctx, 4096, NULL, &d), 0);
    ck_assert_int_eq(npv_dma_map_at(d, dom, iova, NPV_DMA_RW), 0);
    return d;
}

START_TEST(finish_open_enables_bus_mastering)
{
    struct npv_dev *dev = open_fake(a);
    ck_assert_uint_eq(fk.config[0x04] & 0x04, 0x04);
    ck_assert_ptr_eq(npv_dev_domain(dev), a);
    /* A vfio-user sink is host memory: coherent, No Snoop left alone. */
    ck_assert(npv_dev_coherent(dev));
    ck_assert(!npv_dev_no_snoop_cleared(dev));
    ck_assert_uint_eq(fk.config[0x49] & 0x08, 0x08);
    npv_dev_close(dev);
}
END_TEST

START_TEST(finish_open_clears_no_snoop_behind_a_non_coherent_iommu)
{
    fake_sink_init(&fk.fs, 0);
    struct npv_dev *dev = open_fake(a);
    ck_assert(!npv_dev_coherent(dev));
    ck_assert(npv_dev_no_snoop_cleared(dev));
    ck_assert_uint_eq(fk.config[0x49] & 0x08, 0);
    npv_dev_close(dev);
}
END_TEST

START_TEST(attach_to_the_attached_domain_is_skipped)
{
    struct npv_dev *dev = open_fake(a);
    ck_assert_uint_eq(fk.attach_calls, 1);
    ck_assert_int_eq(npv_dev_attach(dev, a), 0);
    ck_assert_uint_eq(fk.attach_calls, 1);
    npv_dev_close(dev);
}
END_TEST

START_TEST(failed_attach_keeps_the_old_domain)
{
    struct npv_dev *dev = open_fake(a);
    fk.attach_err = -EIO;
    ck_assert_int_eq(npv_dev_attach(dev, b), -EIO);
    ck_assert_ptr_eq(npv_dev_domain(dev), a);
    npv_dev_close(dev);
}
END_TEST

START_TEST(moving_the_private_iommu_replays_only_the_new_domain)
{
    struct npv_dma *in_a = map_at(a, 0x100000);
    struct npv_dma *in_b = map_at(b, 0x200000);
    struct npv_dev *dev = open_fake(a);
    ck_assert_ptr_nonnull(fake_sink_find(&fk.fs, 0x100000));
    ck_assert_int_eq(npv_dev_attach(dev, b), 0);
    ck_assert_ptr_null(fake_sink_find(&fk.fs, 0x100000));
    ck_assert_ptr_nonnull(fake_sink_find(&fk.fs, 0x200000));
    ck_assert_ptr_eq(npv_dev_domain(dev), b);
    /* A mapping made while attached reaches the device's IOMMU. */
    struct npv_dma *later = map_at(b, 0x300000);
    ck_assert_ptr_nonnull(fake_sink_find(&fk.fs, 0x300000));
    npv_dma_free(later);
    ck_assert_ptr_null(fake_sink_find(&fk.fs, 0x300000));
    npv_dev_close(dev);
    ck_assert_uint_eq(fk.fs.nr_live, 0);
    npv_dma_free(in_a);
    npv_dma_free(in_b);
}
END_TEST

START_TEST(failed_replay_restores_the_old_domains_mappings)
{
    struct npv_dma *in_a = map_at(a, 0x100000);
    struct npv_dma *b1 = map_at(b, 0x200000);
    struct npv_dma *b2 = map_at(b, 0x300000);
    struct npv_dev *dev = open_fake(a);
    /* Map calls so far: 1 (A's replay). The second of B's replay fails. */
    fk.fs.fail_map_at = fk.fs.map_calls + 2;
    fk.fs.fail_err = -ENOSPC;
    ck_assert_int_eq(npv_dev_attach(dev, b), -ENOSPC);
    ck_assert_ptr_eq(npv_dev_domain(dev), a);
    ck_assert_uint_eq(fk.fs.nr_live, 1);
    ck_assert_ptr_nonnull(fake_sink_find(&fk.fs, 0x100000));
    npv_dev_close(dev);
    npv_dma_free(in_a);
    npv_dma_free(b1);
    npv_dma_free(b2);
}
END_TEST

/*
 * dev.h: the device holds its domain, so the caller may put the domain first.
 * A domain-owned sink (as an iommufd IOAS) shows when the domain is freed:
 * its release runs at the device's close, not at the caller's put.
 */
START_TEST(domain_put_before_device_close_lives_until_the_close)
{
    struct npv_domain *d;
    struct fake_sink owned;
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &d), 0);
    fake_sink_init(&owned, -1);
    owned.sink.ops = &fake_sink_ops_owned;
    ck_assert_int_eq(npv_domain_add_sink(d, &owned.sink), 0);
    struct npv_dev *dev = open_fake(d);
    npv_domain_put(d);
    ck_assert_uint_eq(owned.release_calls, 0);
    /* Still the device's, whole: a mapping made now reaches both IOMMUs (ASan: no use after free).
     */
    ck_assert_ptr_eq(npv_dev_domain(dev), d);
    struct npv_dma *buf = map_at(npv_dev_domain(dev), 0x400000);
    ck_assert_ptr_nonnull(fake_sink_find(&fk.fs, 0x400000));
    ck_assert_ptr_nonnull(fake_sink_find(&owned, 0x400000));
    npv_dma_free(buf);
    ck_assert_uint_eq(npv_domain_mapping_count(d), 0);
    npv_dev_close(dev);
    ck_assert_uint_eq(owned.release_calls, 1);
    ck_assert_uint_eq(fk.fs.nr_live, 0);
}
END_TEST

/* dev.h: a transport that cannot report IOMMU faults says so, never "no faults". */
START_TEST(faults_are_eopnotsupp_where_the_transport_cannot_report_them)
{
    struct npv_dev *dev = open_fake(a);
    struct npv_dev_fault f[4];
    ck_assert_int_eq(npv_dev_fault_fd(dev), -EOPNOTSUPP);
    ck_assert_int_eq(npv_dev_read_faults(dev, f, 4), -EOPNOTSUPP);
    ck_assert_int_eq(npv_dev_read_faults(dev, NULL, 4), -EINVAL);
    ck_assert_int_eq(npv_dev_fault_fd(NULL), -EINVAL);
    npv_dev_close(dev);
}
END_TEST

static int hook_calls;
static int count_hook(struct npv_dev *dev, void *arg)
{
    (void)dev;
    (void)arg;
    hook_calls++;
    return 0;
}

START_TEST(reset_prefers_the_transport_then_the_hook)
{
    struct npv_dev *dev = open_fake(NULL);
    ck_assert_int_eq(npv_dev_reset(dev), -ENOTSUP);
    hook_calls = 0;
    npv_dev_set_reset_hook(dev, count_hook, NULL);
    ck_assert_int_eq(npv_dev_reset(dev), 0);
    ck_assert_int_eq(hook_calls, 1);
    fk.dev_flags |= NPV_DEV_FLAG_RESET;
    ck_assert_int_eq(npv_dev_reset(dev), 0);
    ck_assert_uint_eq(fk.reset_calls, 1);
    ck_assert_int_eq(hook_calls, 1);
    npv_dev_close(dev);
}
END_TEST

START_TEST(device_info_reads_identity_from_config_space)
{
    fk.config[0] = 0x34;
    fk.config[1] = 0x12;
    fk.config[2] = 0x50;
    fk.config[3] = 0x4e;
    fk.config[9] = 0x00;
    fk.config[10] = 0x00;
    fk.config[11] = 0x12;
    struct npv_dev *dev = open_fake(NULL);
    struct npv_dev_info info;
    ck_assert_int_eq(npv_dev_info(dev, &info), 0);
    ck_assert_uint_eq(info.vendor_id, 0x1234);
    ck_assert_uint_eq(info.device_id, 0x4e50);
    ck_assert_uint_eq(info.class_code, 0x120000);
    ck_assert_str_eq(npv_transport_name(npv_dev_transport(dev)), "vfio-user");
    npv_dev_close(dev);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("dev");
    TCase *tc = tcase_create("dev");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, finish_open_enables_bus_mastering);
    tcase_add_test(tc, finish_open_clears_no_snoop_behind_a_non_coherent_iommu);
    tcase_add_test(tc, attach_to_the_attached_domain_is_skipped);
    tcase_add_test(tc, failed_attach_keeps_the_old_domain);
    tcase_add_test(tc, moving_the_private_iommu_replays_only_the_new_domain);
    tcase_add_test(tc, failed_replay_restores_the_old_domains_mappings);
    tcase_add_test(tc, domain_put_before_device_close_lives_until_the_close);
    tcase_add_test(tc, faults_are_eopnotsupp_where_the_transport_cannot_report_them);
    tcase_add_test(tc, reset_prefers_the_transport_then_the_hook);
    tcase_add_test(tc, device_info_reads_identity_from_config_space);
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
