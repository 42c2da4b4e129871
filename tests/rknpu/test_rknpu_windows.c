/* SPDX-License-Identifier: MIT */
/*
 * Isolation on the SoC (issue 22 section 3): a platform core window of the
 * vendor device tree holds the core's own IOMMU at +0x9000/+0xa000, so the
 * driver maps no platform window and refuses every access to those pages;
 * the PCI-shaped model's BAR0 (no IOMMU inside) is mapped. The accessor is
 * the driver's own (rknpu_reg_read / rknpu_reg_write) on a core set up as
 * find_cores sets up a platform core: it must refuse before any system call.
 * No device: a real platform region cannot be faked below the VFIO ioctls.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>

#include "driver_internal.h"
#include "npv_test.h"
#include "windows.h"

START_TEST(platform_windows_are_trapped_and_the_model_bar_mapped)
{
    ck_assert_int_eq(rknpu_window_access(true), RKNPU_WINDOW_TRAPPED);
    ck_assert_int_eq(rknpu_window_access(false), RKNPU_WINDOW_MAPPED);
}
END_TEST

START_TEST(the_iommu_pages_are_refused_in_every_core_window)
{
    for (uint32_t core = 0; core < 3; core++)
        for (uint32_t off = 0; off < 0x10000u; off += 4) {
            bool iommu = off >= 0x9000u && off < 0xb000u;
            ck_assert_msg(rknpu_window_reg_allowed(core * 0x10000u + off) == !iommu,
                          "core %u offset 0x%x", core, off);
        }
    /* Unaligned accesses are refused too. */
    ck_assert(!rknpu_window_reg_allowed(RKNPU_PC_TASK_CON + 1));
}
END_TEST

START_TEST(every_register_the_driver_touches_is_outside_the_iommu_pages)
{
    const uint32_t used[] = {
        RKNPU_PC_VERSION,          RKNPU_PC_VERSION_NUM,
        RKNPU_PC_OPERATION_ENABLE, RKNPU_PC_BASE_ADDRESS,
        RKNPU_PC_REGISTER_AMOUNTS, RKNPU_PC_INTERRUPT_MASK,
        RKNPU_PC_INTERRUPT_CLEAR,  RKNPU_PC_INTERRUPT_RAW_STATUS,
        RKNPU_PC_TASK_CON,         RKNPU_PC_TASK_DMA_BASE_ADDR,
        RKNPU_PC_TASK_STATUS,      RKNPU_CNA_S_POINTER,
        RKNPU_CORE_S_POINTER,      RKNPU_GLOBAL_SOFT_RESET,
    };
    for (size_t i = 0; i < sizeof(used) / sizeof(used[0]); i++)
        ck_assert_msg(rknpu_window_reg_allowed(used[i]), "0x%x", used[i]);
}
END_TEST

START_TEST(the_trapped_accessor_refuses_the_iommu_pages_before_any_call)
{
    /* A platform core as find_cores leaves it: no mapping; the device is never reached. */
    static struct npv_rknpu npu;
    npu.dev = NULL;
    npu.nr_cores = 1;
    npu.cores[0].bar = NULL;
    npu.cores[0].region = 0;
    npu.cores[0].base = 0;
    for (uint32_t off = 0x9000u; off < 0xb000u; off += 0x100u) {
        ck_assert_int_eq(rknpu_reg_write(&npu, 0, off, 0xdeadbeef), -EPERM);
        ck_assert_uint_eq(rknpu_reg_read(&npu, 0, off), UINT32_MAX);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("rknpu_windows");
    TCase *tc = tcase_create("windows");
    tcase_add_test(tc, platform_windows_are_trapped_and_the_model_bar_mapped);
    tcase_add_test(tc, the_iommu_pages_are_refused_in_every_core_window);
    tcase_add_test(tc, every_register_the_driver_touches_is_outside_the_iommu_pages);
    tcase_add_test(tc, the_trapped_accessor_refuses_the_iommu_pages_before_any_call);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return npv_test_run(suite());
}
