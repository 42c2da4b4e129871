/* SPDX-License-Identifier: MIT */
/*
 * Reading an iommufd fault queue (lib/vfio/vfio_iommufd_fault.c) against a
 * stand-in for the kernel's fault fd: a SOCK_SEQPACKET pair, on which the
 * test writes struct iommu_hwpt_pgfault records as the kernel would hand
 * them out and reads back the responses. What the real queue does with the
 * answers is the kernel's part (and needs a PRI-capable device).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "npv_config.h"
#include "npv_test.h"

#if NPV_HAVE_IOMMUFD_FAULT

#include <linux/iommufd.h>

#include "iommufd_fault.h"

static int lib_end, kernel_end;

static void setup(void)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sv), 0);
    lib_end = sv[0];
    kernel_end = sv[1];
}

static void teardown(void)
{
    close(lib_end);
    close(kernel_end);
}

START_TEST(fault_records_become_faults_and_each_group_is_answered_invalid)
{
    struct iommu_hwpt_pgfault rec[3] = {
        {.flags = IOMMU_PGFAULT_FLAGS_PASID_VALID,
         .dev_id = 5,
         .pasid = 9,
         .perm = IOMMU_PGFAULT_PERM_READ,
         .addr = 0x10000,
         .cookie = 7},
        {.flags = IOMMU_PGFAULT_FLAGS_PASID_VALID | IOMMU_PGFAULT_FLAGS_LAST_PAGE,
         .dev_id = 5,
         .pasid = 9,
         .perm = IOMMU_PGFAULT_PERM_READ,
         .addr = 0x11000,
         .cookie = 7},
        {.flags = IOMMU_PGFAULT_FLAGS_LAST_PAGE,
         .dev_id = 6,
         .perm = IOMMU_PGFAULT_PERM_WRITE | IOMMU_PGFAULT_PERM_PRIV,
         .addr = 0x40000,
         .cookie = 8},
    };
    ck_assert_int_eq(write(kernel_end, rec, sizeof(rec)), (ssize_t)sizeof(rec));
    struct npv_dev_fault f[8];
    ck_assert_int_eq(npv_iommufd_fault_take(lib_end, 5, f, 8), 3);
    ck_assert_uint_eq(f[0].iova, 0x10000);
    ck_assert_uint_eq(f[0].access, NPV_FAULT_READ);
    ck_assert_uint_eq(f[0].pasid, 9);
    ck_assert(!f[0].other_device);
    ck_assert_uint_eq(f[1].iova, 0x11000);
    ck_assert_uint_eq(f[2].iova, 0x40000);
    ck_assert_uint_eq(f[2].access, NPV_FAULT_WRITE | NPV_FAULT_PRIV);
    ck_assert_uint_eq(f[2].pasid, NPV_FAULT_NO_PASID);
    ck_assert(f[2].other_device);

    /* One Invalid Request per group, with the group's cookie. */
    struct iommu_hwpt_page_response resp[4];
    ck_assert_int_eq(read(kernel_end, resp, sizeof(resp)), 2 * (ssize_t)sizeof(resp[0]));
    ck_assert_uint_eq(resp[0].cookie, 7);
    ck_assert_uint_eq(resp[0].code, IOMMUFD_PAGE_RESP_INVALID);
    ck_assert_uint_eq(resp[1].cookie, 8);
    ck_assert_uint_eq(resp[1].code, IOMMUFD_PAGE_RESP_INVALID);
}
END_TEST

START_TEST(empty_fault_queue_reads_as_none)
{
    struct npv_dev_fault f[2];
    ck_assert_int_eq(npv_iommufd_fault_take(lib_end, 5, f, 2), 0);
    char none;
    ck_assert_int_eq(read(kernel_end, &none, 1), -1);
    ck_assert_int_eq(errno, EAGAIN);
}
END_TEST

START_TEST(fault_record_of_the_wrong_size_is_eproto)
{
    char junk[sizeof(struct iommu_hwpt_pgfault) - 4];
    memset(junk, 0, sizeof(junk));
    ck_assert_int_eq(write(kernel_end, junk, sizeof(junk)), (ssize_t)sizeof(junk));
    struct npv_dev_fault f[2];
    ck_assert_int_eq(npv_iommufd_fault_take(lib_end, 5, f, 2), -EPROTO);
}
END_TEST

static void add_cases(TCase *tc)
{
    tcase_add_test(tc, fault_records_become_faults_and_each_group_is_answered_invalid);
    tcase_add_test(tc, empty_fault_queue_reads_as_none);
    tcase_add_test(tc, fault_record_of_the_wrong_size_is_eproto);
}

static const struct npv_test_group groups[] = {{NULL, NULL, add_cases}};

int main(int argc, char **argv)
{
    return npv_test_main_groups(argc, argv, "kernel_iommufd_fault", groups, 1, setup, teardown);
}

#else

int main(void)
{
    return npv_test_skip("kernel_iommufd_fault",
                         "built without iommufd fault queues (uapi headers before 6.11)");
}

#endif
