/* SPDX-License-Identifier: MIT */
/*
 * The Edge TPU model against a hostile client speaking raw vfio-user: the
 * protocol probes every model passes (tests/common/vu_hostile.c), then bad
 * register accesses (widths, offsets, regions, values), a page table written
 * with addresses the client never mapped, a queue programmed with a bad
 * configuration, bad DMA maps. Each is an error reply, a counted violation or
 * a chip error; afterwards the driver, as a well-formed client, still runs
 * the sample exact on the same model process. Model only.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "etpu_harness.h"
#include "vfio_user_msg.h"
#include "vu_hostile.h"

#define TIMEOUT_NS (20ll * 1000000000ll)

static const struct vu_hostile_target edgetpu_target = {
    .start = etpu_server_start,
    .id_region = 0,
    .id_offset = EDGETPU_MODEL_ID,
    .id_width = 8,
    .id_value = EDGETPU_MODEL_ID_VALUE,
    .region0_size = EDGETPU_BAR0_SIZE,
};

static void well_formed_client_runs_exact(void)
{
    struct etpu t;
    etpu_open_at(&t, vu_hostile_path(), NULL);
    for (uint32_t i = 0; i < 20; i++) {
        bool exact = false;
        ck_assert_int_eq(etpu_run_check(&t, i, &exact), 0);
        ck_assert(exact);
    }
    etpu_close(&t);
}

START_TEST(bad_register_accesses_are_refused_and_the_model_keeps_serving)
{
    int fd = vu_raw_handshake();
    uint64_t v = 0;
    /* Half or a misaligned piece of a 64-bit CSR. */
    ck_assert_uint_eq(vu_raw_access(fd, 2, EDGETPU_KHIB_EXTENDED_TABLE, 4, false, &v), EINVAL);
    ck_assert_uint_eq(vu_raw_access(fd, 2, EDGETPU_KHIB_EXTENDED_TABLE + 4, 8, false, &v), EINVAL);
    ck_assert_uint_eq(vu_raw_access(fd, 2, EDGETPU_PAGE_TABLE + 8, 2, true, &v), EINVAL);
    /* The SCU's registers are 32 bits wide. */
    ck_assert_uint_eq(vu_raw_access(fd, 2, EDGETPU_SCU_CTRL_3, 8, false, &v), EINVAL);
    ck_assert_uint_eq(vu_raw_read(fd, 2, EDGETPU_SCU_CTRL_3, 4), EDGETPU_SCU3_RESET_VALUE);
    /* Past the BAR, an absent BAR, and the test port with what it does not take. */
    ck_assert_uint_eq(vu_raw_access(fd, 2, EDGETPU_BAR2_SIZE - 4, 8, false, &v), EINVAL);
    ck_assert_uint_ne(vu_raw_access(fd, 1, 0, 4, false, &v), 0);
    v = 99;
    ck_assert_uint_eq(vu_raw_access(fd, 0, EDGETPU_MODEL_FAULT, 8, true, &v), EINVAL);
    ck_assert_uint_eq(vu_raw_access(fd, 0, EDGETPU_MODEL_ID, 4, false, &v), EINVAL);
    /* The GCB is in reset at power-on: the HIB reads the in-reset marker and drops writes. */
    ck_assert_uint_eq(vu_raw_read(fd, 2, EDGETPU_KHIB_PAGE_TABLE_SIZE, 8), EDGETPU_DEADFEED);
    vu_raw_write(fd, 2, EDGETPU_KHIB_EXTENDED_TABLE, 8, 5);
    ck_assert_uint_eq(vu_raw_read(fd, 0, EDGETPU_MODEL_SPLIT_ACCESSES, 8), 3);
    close(fd);
    well_formed_client_runs_exact();
}
END_TEST

/* Out of reset by the SCU alone, polling the mirror bits as a driver must. */
static void quit_reset(int fd)
{
    vu_raw_write(fd, 2, EDGETPU_SCU_CTRL_2, 4,
                 EDGETPU_RST_GCB_FORCE_NOT_RESET << EDGETPU_SCU2_RG_RST_GCB_SHIFT);
    for (int i = 0;
         i < 100 && (vu_raw_read(fd, 2, EDGETPU_SCU_CTRL_3, 4) & EDGETPU_SCU3_CUR_RST_GCB); i++)
        ;
    ck_assert_uint_eq(vu_raw_read(fd, 2, EDGETPU_SCU_CTRL_3, 4) & EDGETPU_SCU3_CUR_RST_GCB, 0);
}

START_TEST(clock_gated_gcb_reads_the_in_reset_marker)
{
    int fd = vu_raw_handshake();
    quit_reset(fd);
    ck_assert_uint_eq(vu_raw_read(fd, 2, EDGETPU_KHIB_PAGE_TABLE_SIZE, 8),
                      EDGETPU_PAGE_TABLE_ENTRIES);
    uint32_t s2 = (uint32_t)vu_raw_read(fd, 2, EDGETPU_SCU_CTRL_2, 4);
    vu_raw_write(fd, 2, EDGETPU_SCU_CTRL_2, 4, s2 | 1u << EDGETPU_SCU2_RG_GATED_GCB_SHIFT);
    ck_assert_uint_eq(vu_raw_read(fd, 2, EDGETPU_KHIB_PAGE_TABLE_SIZE, 8), EDGETPU_DEADFEED);
    vu_raw_write(fd, 2, EDGETPU_SCU_CTRL_2, 4, s2);
    ck_assert_uint_eq(vu_raw_read(fd, 2, EDGETPU_KHIB_PAGE_TABLE_SIZE, 8),
                      EDGETPU_PAGE_TABLE_ENTRIES);
    close(fd);
    well_formed_client_runs_exact();
}
END_TEST

START_TEST(page_table_values_that_are_not_client_iovas_are_counted)
{
    int fd = vu_raw_handshake();
    quit_reset(fd);
    ck_assert_uint_eq(vu_raw_read(fd, 2, EDGETPU_KHIB_PAGE_TABLE_SIZE, 8),
                      EDGETPU_PAGE_TABLE_ENTRIES);
    /* A host "physical" address, and a value with bits that are not an address. */
    vu_raw_write(fd, 2, EDGETPU_PAGE_TABLE + 8, 8, 0x12345000 | EDGETPU_PTE_VALID);
    vu_raw_write(fd, 2, EDGETPU_PAGE_TABLE + 16, 8, 0x7 | EDGETPU_PTE_VALID);
    ck_assert_uint_eq(vu_raw_read(fd, 0, EDGETPU_MODEL_BAD_PTE_COUNT, 8), 2);
    ck_assert_uint_eq(vu_raw_read(fd, 0, EDGETPU_MODEL_BAD_PTE_VALUE, 8), 0x7);
    /* A mapped IOVA (message DMA, no fd) is a client IOVA; invalid entries are never counted. */
    struct npv_vu_dma_map m = {.argsz = sizeof(m),
                               .flags = NPV_VU_DMA_FLAG_READ | NPV_VU_DMA_FLAG_WRITE,
                               .address = 0x100000,
                               .size = 0x2000};
    struct npv_vu_msg rep;
    ck_assert_int_eq(vu_raw_xfer(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), NULL, 0, &rep), 0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    npv_vu_msg_release(&rep);
    vu_raw_write(fd, 2, EDGETPU_PAGE_TABLE + 24, 8, 0x100000 | EDGETPU_PTE_VALID);
    vu_raw_write(fd, 2, EDGETPU_PAGE_TABLE + 32, 8, 0xdead0000);
    ck_assert_uint_eq(vu_raw_read(fd, 0, EDGETPU_MODEL_BAD_PTE_COUNT, 8), 2);
    /* A DMA map over it again is refused; the table is unchanged. */
    ck_assert_int_eq(vu_raw_xfer(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), NULL, 0, &rep), 0);
    ck_assert(rep.hdr.flags & NPV_VU_F_ERROR);
    ck_assert_uint_eq(rep.hdr.error, EEXIST);
    npv_vu_msg_release(&rep);
    /* Unmapping memory a valid entry still points at leaves a wrong entry: counted too. */
    struct npv_vu_dma_unmap u = {.argsz = sizeof(u), .address = 0x100000, .size = 0x2000};
    ck_assert_int_eq(vu_raw_xfer(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), NULL, 0, &rep), 0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    npv_vu_msg_release(&rep);
    uint64_t bad = 0;
    for (int i = 0; i < 200000 && bad != 3; i++)
        bad = vu_raw_read(fd, 0, EDGETPU_MODEL_BAD_PTE_COUNT, 8);
    ck_assert_uint_eq(bad, 3);
    ck_assert_uint_eq(vu_raw_read(fd, 0, EDGETPU_MODEL_BAD_PTE_VALUE, 8),
                      0x100000 | EDGETPU_PTE_VALID);
    close(fd);
    well_formed_client_runs_exact();
}
END_TEST

START_TEST(queue_with_a_bad_configuration_is_a_chip_error_not_a_crash)
{
    int fd = vu_raw_handshake();
    quit_reset(fd);
    /* The queue registers, through the trapped path a client without mmap uses. */
    vu_raw_write(fd, 2, EDGETPU_SC_SCALAR_CORE_RUN_CONTROL, 8, EDGETPU_RUN_CONTROL_RUN);
    vu_raw_write(fd, 2, EDGETPU_IQ_BASE, 8, 0x1008); /* not 16-byte aligned */
    vu_raw_write(fd, 2, EDGETPU_IQ_SIZE, 8, 3);      /* not a power of two */
    vu_raw_write(fd, 2, EDGETPU_IQ_CONTROL, 8,
                 EDGETPU_IQ_CONTROL_ENABLE | EDGETPU_IQ_CONTROL_SB_WR_ENABLE);
    uint64_t err = 0;
    for (int i = 0; i < 100000 && err == 0; i++)
        err = vu_raw_read(fd, 2, EDGETPU_HIB_ERROR_STATUS, 8);
    ck_assert_uint_eq(err, EDGETPU_HIB_ERR_IQ_BAD_CONFIGURATION);
    ck_assert_uint_eq(vu_raw_read(fd, 2, EDGETPU_IQ_STATUS, 8), 0);
    /* A tail beyond any ring, then a wild doorbell: still only errors. */
    vu_raw_write(fd, 2, EDGETPU_IQ_TAIL, 8, ~0ull);
    close(fd);
    well_formed_client_runs_exact();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("edgetpu_hostile");
    vu_hostile_set_target(&edgetpu_target);
    TCase *tc = tcase_create("protocol");
    vu_hostile_add_cases(tc);
    suite_add_tcase(s, tc);
    tc = tcase_create("hostile");
    tcase_add_checked_fixture(tc, vu_hostile_start, vu_hostile_stop);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, bad_register_accesses_are_refused_and_the_model_keeps_serving);
    tcase_add_test(tc, clock_gated_gcb_reads_the_in_reset_marker);
    tcase_add_test(tc, page_table_values_that_are_not_client_iovas_are_counted);
    tcase_add_test(tc, queue_with_a_bad_configuration_is_a_chip_error_not_a_crash);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    etpu_require_model("hostile probing targets the model");
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
