/* SPDX-License-Identifier: MIT */
/*
 * The small models the failure walk runs on (registry.h, model_create_small):
 * each still runs its device's sample exact, and the AICore's keeps the
 * shapes whose paths the walk must take (a fused AIV, a cluster fused off).
 */
#include <check.h>
#include <string.h>

#include <npuvfio/aicore.h>
#include <npuvfio/dev.h>
#include <npuvfio/domain.h>

#include "npv_test.h"
#include "rel_harness.h"

START_TEST(every_small_model_runs_its_sample_exact)
{
    for (size_t i = 0; i < rel_device_count(); i++) {
        const struct npv_device_entry *e = npv_device_at(i);
        if (!rel_device_runs(e) || e->model_create_small == NULL)
            continue;
        struct vu_server srv;
        rel_model_start_small(&srv, e);
        struct npv_ctx *ctx = rel_ctx_new();
        struct rel_pass p;
        rel_pass_run(ctx, e, srv.path, 2, NULL, NULL, &p);
        ck_assert_msg(p.err == 0 && p.exact, "%s small: %s at %s", e->name, strerror(-p.err),
                      p.step ? p.step : "-");
        npv_ctx_free(ctx);
        vu_server_kill(&srv);
    }
}
END_TEST

static void assert_usable(const struct npv_aicore_topology *t, uint32_t phys, bool want)
{
    ck_assert_msg(npv_aicore_core_usable(t, phys) == want, "sub-core %u: usable %d, want %d", phys,
                  !want, want);
}

START_TEST(aicore_small_model_keeps_a_fused_aiv_and_a_fused_cluster)
{
    const struct npv_device_entry *e = npv_device_find("aicore");
    ck_assert_ptr_nonnull(e);
    ck_assert_ptr_nonnull(e->model_create_small);
    struct vu_server srv;
    rel_model_start_small(&srv, e);
    struct npv_ctx *ctx = rel_ctx_new();
    struct npv_domain *dom;
    struct npv_dev *dev;
    void *drv;
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
    ck_assert_int_eq(npv_dev_open_vfio_user(ctx, srv.path, dom, NULL, &dev), 0);
    ck_assert_int_eq(e->driver_open(dev, &drv), 0);
    struct npv_aicore_topology t;
    npv_aicore_topology(drv, &t);
    ck_assert_uint_eq(t.clusters, 3);
    ck_assert_uint_eq(t.nr_usable, 5);
    /* Cluster 0 whole; cluster 1 without its second AIV; cluster 2 fused off. */
    for (uint32_t c = 0; c < 3; c++) {
        assert_usable(&t, npv_aicore_phys_aic(t.clusters, c), c != 2);
        assert_usable(&t, npv_aicore_phys_aiv(t.clusters, c, 0), c != 2);
        assert_usable(&t, npv_aicore_phys_aiv(t.clusters, c, 1), c == 0);
    }
    e->driver_close(drv);
    npv_dev_close(dev);
    npv_domain_put(dom);
    npv_ctx_free(ctx);
    vu_server_kill(&srv);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("walk_models");
    TCase *tc = tcase_create("small");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, every_small_model_runs_its_sample_exact);
    tcase_add_test(tc, aicore_small_model_keeps_a_fused_aiv_and_a_fused_cluster);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}
