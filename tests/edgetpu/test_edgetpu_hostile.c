/* SPDX-License-Identifier: MIT */
/*
 * The Edge TPU model against a hostile client speaking raw vfio-user: bad
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

#define TIMEOUT_NS (20ll * 1000000000ll)

static struct vu_server server;
static uint16_t next_id;

static int conn(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", server.path);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

static int xfer(int fd, uint16_t cmd, const void *body, size_t len, struct npv_vu_msg *rep)
{
    struct npv_vu_hdr h = {.msg_id = ++next_id, .cmd = cmd};
    int r = npv_vu_send(fd, &h, body, len, NULL, 0, TIMEOUT_NS);
    if (r < 0)
        return r;
    return npv_vu_recv(fd, rep, 1u << 24, 8, TIMEOUT_NS);
}

static int handshake(void)
{
    int fd = conn();
    char buf[4 + 64];
    struct npv_vu_version v = {.major = 0, .minor = 0};
    memcpy(buf, &v, 4);
    const char *json = "{\"capabilities\":{\"max_msg_fds\":8}}";
    strcpy(buf + 4, json);
    struct npv_vu_msg rep;
    ck_assert_int_eq(xfer(fd, NPV_VU_CMD_VERSION, buf, 4 + strlen(json) + 1, &rep), 0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    npv_vu_msg_release(&rep);
    return fd;
}

/* A region access: 0 and *v, or the error the server replied with. */
static uint32_t access_reg(int fd, uint32_t region, uint64_t off, uint32_t width, bool write,
                           uint64_t *v)
{
    uint8_t buf[sizeof(struct npv_vu_region_access) + 8];
    struct npv_vu_region_access a = {.offset = off, .region = region, .count = width};
    memcpy(buf, &a, sizeof(a));
    size_t len = sizeof(a);
    if (write) {
        memcpy(buf + sizeof(a), v, width <= 8 ? width : 8);
        len += width;
    }
    struct npv_vu_msg rep;
    ck_assert_int_eq(
        xfer(fd, write ? NPV_VU_CMD_REGION_WRITE : NPV_VU_CMD_REGION_READ, buf, len, &rep), 0);
    uint32_t err = (rep.hdr.flags & NPV_VU_F_ERROR) ? rep.hdr.error : 0;
    if (err == 0 && !write) {
        *v = 0;
        memcpy(v, rep.body + sizeof(a), width);
    }
    npv_vu_msg_release(&rep);
    return err;
}

static uint64_t rd(int fd, uint32_t region, uint64_t off, uint32_t width)
{
    uint64_t v = 0;
    ck_assert_uint_eq(access_reg(fd, region, off, width, false, &v), 0);
    return v;
}

static void wr(int fd, uint32_t region, uint64_t off, uint32_t width, uint64_t v)
{
    ck_assert_uint_eq(access_reg(fd, region, off, width, true, &v), 0);
}

static void well_formed_client_runs_exact(void)
{
    struct etpu t;
    etpu_open_at(&t, server.path, NULL);
    for (uint32_t i = 0; i < 20; i++) {
        bool exact = false;
        ck_assert_int_eq(etpu_run_check(&t, i, &exact), 0);
        ck_assert(exact);
    }
    etpu_close(&t);
}

static void setup(void)
{
    etpu_server_start(&server);
}

static void teardown(void)
{
    vu_server_kill(&server);
}

START_TEST(bad_register_accesses_are_refused_and_the_model_keeps_serving)
{
    int fd = handshake();
    uint64_t v = 0;
    /* Half or a misaligned piece of a 64-bit CSR. */
    ck_assert_uint_eq(access_reg(fd, 2, EDGETPU_KHIB_EXTENDED_TABLE, 4, false, &v), EINVAL);
    ck_assert_uint_eq(access_reg(fd, 2, EDGETPU_KHIB_EXTENDED_TABLE + 4, 8, false, &v), EINVAL);
    ck_assert_uint_eq(access_reg(fd, 2, EDGETPU_PAGE_TABLE + 8, 2, true, &v), EINVAL);
    /* The SCU's registers are 32 bits wide. */
    ck_assert_uint_eq(access_reg(fd, 2, EDGETPU_SCU_CTRL_3, 8, false, &v), EINVAL);
    ck_assert_uint_eq(rd(fd, 2, EDGETPU_SCU_CTRL_3, 4), EDGETPU_SCU3_RESET_VALUE);
    /* Past the BAR, an absent BAR, and the test port with what it does not take. */
    ck_assert_uint_eq(access_reg(fd, 2, EDGETPU_BAR2_SIZE - 4, 8, false, &v), EINVAL);
    ck_assert_uint_ne(access_reg(fd, 1, 0, 4, false, &v), 0);
    v = 99;
    ck_assert_uint_eq(access_reg(fd, 0, EDGETPU_MODEL_FAULT, 8, true, &v), EINVAL);
    ck_assert_uint_eq(access_reg(fd, 0, EDGETPU_MODEL_ID, 4, false, &v), EINVAL);
    /* The GCB is in reset at power-on: the HIB reads the in-reset marker and drops writes. */
    ck_assert_uint_eq(rd(fd, 2, EDGETPU_KHIB_PAGE_TABLE_SIZE, 8), EDGETPU_DEADFEED);
    wr(fd, 2, EDGETPU_KHIB_EXTENDED_TABLE, 8, 5);
    ck_assert_uint_eq(rd(fd, 0, EDGETPU_MODEL_SPLIT_ACCESSES, 8), 3);
    close(fd);
    well_formed_client_runs_exact();
}
END_TEST

/* Out of reset by the SCU alone, polling the mirror bits as a driver must. */
static void quit_reset(int fd)
{
    wr(fd, 2, EDGETPU_SCU_CTRL_2, 4,
       EDGETPU_RST_GCB_FORCE_NOT_RESET << EDGETPU_SCU2_RG_RST_GCB_SHIFT);
    for (int i = 0; i < 100 && (rd(fd, 2, EDGETPU_SCU_CTRL_3, 4) & EDGETPU_SCU3_CUR_RST_GCB); i++)
        ;
    ck_assert_uint_eq(rd(fd, 2, EDGETPU_SCU_CTRL_3, 4) & EDGETPU_SCU3_CUR_RST_GCB, 0);
}

START_TEST(clock_gated_gcb_reads_the_in_reset_marker)
{
    int fd = handshake();
    quit_reset(fd);
    ck_assert_uint_eq(rd(fd, 2, EDGETPU_KHIB_PAGE_TABLE_SIZE, 8), EDGETPU_PAGE_TABLE_ENTRIES);
    uint32_t s2 = (uint32_t)rd(fd, 2, EDGETPU_SCU_CTRL_2, 4);
    wr(fd, 2, EDGETPU_SCU_CTRL_2, 4, s2 | 1u << EDGETPU_SCU2_RG_GATED_GCB_SHIFT);
    ck_assert_uint_eq(rd(fd, 2, EDGETPU_KHIB_PAGE_TABLE_SIZE, 8), EDGETPU_DEADFEED);
    wr(fd, 2, EDGETPU_SCU_CTRL_2, 4, s2);
    ck_assert_uint_eq(rd(fd, 2, EDGETPU_KHIB_PAGE_TABLE_SIZE, 8), EDGETPU_PAGE_TABLE_ENTRIES);
    close(fd);
    well_formed_client_runs_exact();
}
END_TEST

START_TEST(page_table_values_that_are_not_client_iovas_are_counted)
{
    int fd = handshake();
    quit_reset(fd);
    ck_assert_uint_eq(rd(fd, 2, EDGETPU_KHIB_PAGE_TABLE_SIZE, 8), EDGETPU_PAGE_TABLE_ENTRIES);
    /* A host "physical" address, and a value with bits that are not an address. */
    wr(fd, 2, EDGETPU_PAGE_TABLE + 8, 8, 0x12345000 | EDGETPU_PTE_VALID);
    wr(fd, 2, EDGETPU_PAGE_TABLE + 16, 8, 0x7 | EDGETPU_PTE_VALID);
    ck_assert_uint_eq(rd(fd, 0, EDGETPU_MODEL_BAD_PTE_COUNT, 8), 2);
    ck_assert_uint_eq(rd(fd, 0, EDGETPU_MODEL_BAD_PTE_VALUE, 8), 0x7);
    /* A mapped IOVA (message DMA, no fd) is a client IOVA; invalid entries are never counted. */
    struct npv_vu_dma_map m = {.argsz = sizeof(m),
                               .flags = NPV_VU_DMA_FLAG_READ | NPV_VU_DMA_FLAG_WRITE,
                               .address = 0x100000,
                               .size = 0x2000};
    struct npv_vu_msg rep;
    ck_assert_int_eq(xfer(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), &rep), 0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    npv_vu_msg_release(&rep);
    wr(fd, 2, EDGETPU_PAGE_TABLE + 24, 8, 0x100000 | EDGETPU_PTE_VALID);
    wr(fd, 2, EDGETPU_PAGE_TABLE + 32, 8, 0xdead0000);
    ck_assert_uint_eq(rd(fd, 0, EDGETPU_MODEL_BAD_PTE_COUNT, 8), 2);
    /* A DMA map over it again is refused; the table is unchanged. */
    ck_assert_int_eq(xfer(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), &rep), 0);
    ck_assert(rep.hdr.flags & NPV_VU_F_ERROR);
    ck_assert_uint_eq(rep.hdr.error, EEXIST);
    npv_vu_msg_release(&rep);
    /* Unmapping memory a valid entry still points at leaves a wrong entry: counted too. */
    struct npv_vu_dma_unmap u = {.argsz = sizeof(u), .address = 0x100000, .size = 0x2000};
    ck_assert_int_eq(xfer(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), &rep), 0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    npv_vu_msg_release(&rep);
    uint64_t bad = 0;
    for (int i = 0; i < 200000 && bad != 3; i++)
        bad = rd(fd, 0, EDGETPU_MODEL_BAD_PTE_COUNT, 8);
    ck_assert_uint_eq(bad, 3);
    ck_assert_uint_eq(rd(fd, 0, EDGETPU_MODEL_BAD_PTE_VALUE, 8), 0x100000 | EDGETPU_PTE_VALID);
    close(fd);
    well_formed_client_runs_exact();
}
END_TEST

START_TEST(queue_with_a_bad_configuration_is_a_chip_error_not_a_crash)
{
    int fd = handshake();
    quit_reset(fd);
    /* The queue registers, through the trapped path a client without mmap uses. */
    wr(fd, 2, EDGETPU_SC_SCALAR_CORE_RUN_CONTROL, 8, EDGETPU_RUN_CONTROL_RUN);
    wr(fd, 2, EDGETPU_IQ_BASE, 8, 0x1008); /* not 16-byte aligned */
    wr(fd, 2, EDGETPU_IQ_SIZE, 8, 3);      /* not a power of two */
    wr(fd, 2, EDGETPU_IQ_CONTROL, 8, EDGETPU_IQ_CONTROL_ENABLE | EDGETPU_IQ_CONTROL_SB_WR_ENABLE);
    uint64_t err = 0;
    for (int i = 0; i < 100000 && err == 0; i++)
        err = rd(fd, 2, EDGETPU_HIB_ERROR_STATUS, 8);
    ck_assert_uint_eq(err, EDGETPU_HIB_ERR_IQ_BAD_CONFIGURATION);
    ck_assert_uint_eq(rd(fd, 2, EDGETPU_IQ_STATUS, 8), 0);
    /* A tail beyond any ring, then a wild doorbell: still only errors. */
    wr(fd, 2, EDGETPU_IQ_TAIL, 8, ~0ull);
    close(fd);
    well_formed_client_runs_exact();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("edgetpu_hostile");
    TCase *tc = tcase_create("hostile");
    tcase_add_checked_fixture(tc, setup, teardown);
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
