/* SPDX-License-Identifier: MIT */
/*
 * The vfio-user server against a hostile client: a raw socket in the test
 * process, the testdev server in a forked child. The probes every device
 * server passes are in tests/common/vu_hostile.c; here, on top of them, what
 * testdev's own registers and DMA show. Also what other clients send (unmap-all, VERSION without capabilities),
 * message DMA on one socket and on twin sockets with a client that sends
 * requests meanwhile or falls out of step, and one server per socket path.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/ctx.h>

#include "model.h"
#include "regs.h"
#include "vfio_user_msg.h"
#include "vu_hostile.h"

static uint32_t reg_read32(int fd, uint64_t off)
{
    return (uint32_t)vu_raw_read(fd, 0, off, 4);
}

static void reg_write(int fd, uint64_t off, uint64_t val, unsigned width)
{
    vu_raw_write(fd, 0, off, width, val);
}

static void serve_testdev(const char *path, void *arg)
{
    (void)arg;
    _exit(npv_testdev_serve(path, false) == 0 ? 0 : 1);
}

static const struct vu_hostile_target testdev_target = {
    .serve = serve_testdev,
    .id_region = 0,
    .id_offset = TESTDEV_REG_ID,
    .id_width = 4,
    .id_value = TESTDEV_ID_VALUE,
    .region_size = TESTDEV_BAR0_SIZE,
};

/* A 64-bit REGION_WRITE of 8 bytes reaches the model as one access of width 8. */
START_TEST(region_write_of_8_bytes_is_one_access)
{
    int fd = vu_raw_handshake();
    reg_write(fd, TESTDEV_REG_SCRATCH64, 0x1122334455667788ull, 8);
    ck_assert_uint_eq(reg_read32(fd, TESTDEV_REG_LAST_WIDTH), 8);
    reg_write(fd, TESTDEV_REG_SCRATCH64, 0xaabbccddu, 4);
    ck_assert_uint_eq(reg_read32(fd, TESTDEV_REG_LAST_WIDTH), 4);
    close(fd);
}
END_TEST

/* The whole device path: DMA_MAP with fd, mmapped doorbell, a FILL, its IRQ. */
START_TEST(testdev_fills_through_mapped_memory_and_raises_msix)
{
    int base = vu_hostile_baseline_fds();
    int fd = vu_raw_handshake();
    int mem = memfd_create("t", MFD_CLOEXEC);
    ck_assert_int_ge(mem, 0);
    ck_assert_int_eq(ftruncate(mem, 0x10000), 0);
    uint8_t *p = mmap(NULL, 0x10000, PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    struct npv_vu_dma_map m = {.argsz = sizeof(m),
                               .flags = NPV_VU_DMA_FLAG_READ | NPV_VU_DMA_FLAG_WRITE,
                               .address = 0x40000000,
                               .size = 0x10000};
    struct npv_vu_msg rep;
    ck_assert_int_eq(vu_raw_xfer(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), &mem, 1, &rep), 0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    npv_vu_msg_release(&rep);

    /* The BAR's doorbell page comes as a sparse mmap area with the fd. */
    struct npv_vu_region_info ri = {.argsz = 256, .index = 0};
    ck_assert_int_eq(
        vu_raw_xfer(fd, NPV_VU_CMD_DEVICE_GET_REGION_INFO, &ri, sizeof(ri), NULL, 0, &rep), 0);
    ck_assert_uint_eq(rep.nr_fds, 1);
    memcpy(&ri, rep.body, sizeof(ri));
    ck_assert(ri.flags & NPV_VU_REGION_FLAG_MMAP);
    struct npv_vu_cap_sparse_mmap cap;
    struct npv_vu_sparse_area area;
    ck_assert_uint_ge(rep.body_len, ri.cap_offset + sizeof(cap) + sizeof(area));
    memcpy(&cap, rep.body + ri.cap_offset, sizeof(cap));
    memcpy(&area, rep.body + ri.cap_offset + sizeof(cap), sizeof(area));
    ck_assert_uint_eq(cap.header.id, NPV_VU_REGION_CAP_SPARSE_MMAP);
    ck_assert_uint_eq(area.offset, TESTDEV_DOORBELL_PAGE);
    int barfd = npv_vu_msg_take_fd(&rep, 0);
    npv_vu_msg_release(&rep);
    volatile uint32_t *db = mmap(NULL, area.size, PROT_READ | PROT_WRITE, MAP_SHARED, barfd,
                                 (off_t)(ri.offset + area.offset));
    ck_assert_ptr_ne((void *)db, MAP_FAILED);

    int efd = eventfd(0, EFD_CLOEXEC);
    struct npv_vu_irq_set s = {.argsz = sizeof(s),
                               .flags = NPV_VU_IRQ_SET_DATA_EVENTFD | NPV_VU_IRQ_SET_ACTION_TRIGGER,
                               .index = NPV_VU_PCI_MSIX_IRQ,
                               .count = 1};
    ck_assert_int_eq(vu_raw_xfer(fd, NPV_VU_CMD_DEVICE_SET_IRQS, &s, sizeof(s), &efd, 1, &rep), 0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    npv_vu_msg_release(&rep);

    /* Ring of 4 at 0x40000000, status block at +0x1000, data at +0x2000. */
    struct npv_testdev_desc *ring = (struct npv_testdev_desc *)p;
    ring[0] = (struct npv_testdev_desc){.opcode = NPV_TESTDEV_OP_FILL,
                                        .flags = NPV_TESTDEV_DESC_IRQ,
                                        .dst = 0x40002000,
                                        .len = 256,
                                        .pattern = 0x5a};
    reg_write(fd, TESTDEV_REG_RING_BASE, 0x40000000, 8);
    reg_write(fd, TESTDEV_REG_RING_ENTRIES, 4, 4);
    reg_write(fd, TESTDEV_REG_STATUS_BASE, 0x40001000, 8);
    reg_write(fd, TESTDEV_REG_CTRL, TESTDEV_CTRL_ENABLE | TESTDEV_CTRL_IRQ_ENABLE, 4);
    __atomic_store_n(db, 1, __ATOMIC_RELEASE);

    struct pollfd pf = {.fd = efd, .events = POLLIN};
    ck_assert_int_eq(poll(&pf, 1, 20000), 1);
    const struct testdev_status *st = (const struct testdev_status *)(p + 0x1000);
    ck_assert_uint_eq(__atomic_load_n(&st->completed_head, __ATOMIC_ACQUIRE), 1);
    ck_assert_uint_eq(st->error, NPV_TESTDEV_ERR_NONE);
    for (int i = 0; i < 256; i++)
        ck_assert_uint_eq(p[0x2000 + i], 0x5a);
    ck_assert_uint_eq(p[0x2000 + 256], 0);

    /* A descriptor pointing outside the map is a device fault, not a crash. */
    ring[1] = (struct npv_testdev_desc){
        .opcode = NPV_TESTDEV_OP_COPY, .src = 0x40002000, .dst = 0x7000000000ull, .len = 64};
    __atomic_store_n(db, 2, __ATOMIC_RELEASE);
    int64_t deadline = npv_vu_now_ns() + VU_RAW_TIMEOUT_NS;
    while (!(reg_read32(fd, TESTDEV_REG_STATUS) & TESTDEV_STATUS_FAULT)) {
        ck_assert(npv_vu_now_ns() < deadline);
        usleep(1000);
    }
    ck_assert_uint_eq(__atomic_load_n(&st->completed_head, __ATOMIC_ACQUIRE), 2);
    ck_assert_uint_eq(st->error, NPV_TESTDEV_ERR_DMA);
    ck_assert_uint_eq(st->fault_iova, 0x7000000000ull);

    munmap((void *)db, area.size);
    close(barfd);
    munmap(p, 0x10000);
    close(mem);
    close(efd);
    close(fd);
    vu_hostile_expect_fds_back_to(base);
    vu_hostile_well_formed_client_is_served();
}
END_TEST

/* ---- interoperability: unmap-all, VERSION subset, optional features, twin sockets ---- */

#define TWIN_JSON "{\"capabilities\":{\"max_msg_fds\":8,\"twin_socket\":{\"supported\":true}}}"

/* Connect; with twin, offer twin sockets and return the second socket in *tsock (else -1). */
static int handshake_twin(bool twin, int *tsock)
{
    struct npv_vu_caps caps;
    struct npv_vu_msg rep;
    int fd = vu_raw_handshake_with(twin ? TWIN_JSON : "{\"capabilities\":{\"max_msg_fds\":8}}",
                                   &caps, &rep);
    *tsock = -1;
    ck_assert_int_eq(caps.twin_socket, twin);
    if (twin) {
        ck_assert(caps.present & NPV_VU_CAP_TWIN_FD_INDEX);
        ck_assert_uint_lt(caps.twin_fd_index, rep.nr_fds);
        *tsock = npv_vu_msg_take_fd(&rep, caps.twin_fd_index);
        int type = 0;
        socklen_t tl = sizeof(type);
        ck_assert_int_eq(getsockopt(*tsock, SOL_SOCKET, SO_TYPE, &type, &tl), 0);
        ck_assert_int_eq(type, SOCK_STREAM);
    } else {
        ck_assert_uint_eq(rep.nr_fds, 0);
    }
    npv_vu_msg_release(&rep);
    return fd;
}

/* Client memory served by messages only: ring at +0, status at +0x1000, data at +0x2000. */
#define RAM_IOVA 0x40000000ull
#define RAM_SIZE 0x3000u

/* Start a FILL of 64 bytes through a ring in memory the server reaches only by messages. */
static void start_message_dma_fill(int fd, uint8_t *ram)
{
    vu_raw_dma_map_nofd(fd, RAM_IOVA, RAM_SIZE);
    memset(ram, 0, RAM_SIZE);
    struct npv_testdev_desc d = npv_testdev_fill(RAM_IOVA + 0x2000, 0x3c, 64, 0);
    memcpy(ram, &d, sizeof(d));
    reg_write(fd, TESTDEV_REG_CTRL, 0, 4);
    reg_write(fd, TESTDEV_REG_RING_BASE, RAM_IOVA, 8);
    reg_write(fd, TESTDEV_REG_RING_ENTRIES, 4, 4);
    reg_write(fd, TESTDEV_REG_STATUS_BASE, RAM_IOVA + 0x1000, 8);
    reg_write(fd, TESTDEV_REG_CTRL, TESTDEV_CTRL_ENABLE, 4);
    reg_write(fd, TESTDEV_REG_DOORBELL, 1, 4);
}

/* Answer one DMA command m from ram, on dsock. */
static void answer_dma(int dsock, const struct npv_vu_msg *m, uint8_t *ram)
{
    struct npv_vu_dma_access a;
    ck_assert_uint_ge(m->body_len, sizeof(a));
    memcpy(&a, m->body, sizeof(a));
    ck_assert(a.address >= RAM_IOVA && a.count <= RAM_SIZE &&
              a.address - RAM_IOVA <= RAM_SIZE - a.count);
    uint8_t *p = ram + (a.address - RAM_IOVA);
    struct npv_vu_hdr h = {
        .msg_id = m->hdr.msg_id, .cmd = m->hdr.cmd, .flags = NPV_VU_F_TYPE_REPLY};
    struct iovec iov[2] = {{.iov_base = &a, .iov_len = sizeof(a)},
                           {.iov_base = p, .iov_len = (size_t)a.count}};
    if (m->hdr.cmd == NPV_VU_CMD_DMA_WRITE) {
        ck_assert_uint_eq(m->body_len, sizeof(a) + a.count);
        memcpy(p, m->body + sizeof(a), (size_t)a.count);
        ck_assert_int_eq(npv_vu_sendv(dsock, &h, iov, 1, NULL, 0, VU_RAW_TIMEOUT_NS), 0);
    } else {
        ck_assert_uint_eq(m->hdr.cmd, NPV_VU_CMD_DMA_READ);
        ck_assert_int_eq(npv_vu_sendv(dsock, &h, iov, 2, NULL, 0, VU_RAW_TIMEOUT_NS), 0);
    }
}

START_TEST(message_dma_outstanding_does_not_hold_up_requests)
{
    /* _i: 0 one socket, 1 twin sockets. */
    int base = vu_hostile_baseline_fds();
    int tsock;
    int fd = handshake_twin(_i == 1, &tsock);
    int dsock = _i ? tsock : fd;
    static uint8_t ram[RAM_SIZE];
    start_message_dma_fill(fd, ram);

    const struct testdev_status *st = (const struct testdev_status *)(ram + 0x1000);
    for (unsigned n = 0; __atomic_load_n(&st->completed_head, __ATOMIC_ACQUIRE) != 1; n++) {
        ck_assert_uint_lt(n, 16);
        struct npv_vu_msg m;
        ck_assert_int_eq(npv_vu_recv(dsock, &m, 1u << 20, 0, VU_RAW_TIMEOUT_NS), 0);
        ck_assert_uint_eq(m.hdr.flags & NPV_VU_F_TYPE_MASK, NPV_VU_F_TYPE_COMMAND);
        /* The model waits for this reply; the loop still answers requests meanwhile. */
        ck_assert_uint_eq(reg_read32(fd, TESTDEV_REG_ID), TESTDEV_ID_VALUE);
        reg_write(fd, TESTDEV_REG_SCRATCH64, 0x1234u + n, 8);
        answer_dma(dsock, &m, ram);
        npv_vu_msg_release(&m);
    }
    ck_assert_uint_eq(st->error, NPV_TESTDEV_ERR_NONE);
    for (int i = 0; i < 64; i++)
        ck_assert_uint_eq(ram[0x2000 + i], 0x3c);
    ck_assert_uint_eq(ram[0x2000 + 64], 0);
    close(fd);
    if (tsock >= 0)
        close(tsock);
    vu_hostile_expect_fds_back_to(base);
    vu_hostile_well_formed_client_is_served();
}
END_TEST

START_TEST(twin_socket_out_of_step_drops_the_client)
{
    /* _i: 0 a reply with another id, 1 a command instead of the reply, 2 twin socket closed. */
    int base = vu_hostile_baseline_fds();
    int tsock;
    int fd = handshake_twin(true, &tsock);
    static uint8_t ram[RAM_SIZE];
    start_message_dma_fill(fd, ram);
    struct npv_vu_msg m;
    ck_assert_int_eq(npv_vu_recv(tsock, &m, 1u << 20, 0, VU_RAW_TIMEOUT_NS), 0);
    if (_i == 2) {
        close(tsock);
        tsock = -1;
    } else {
        struct npv_vu_hdr h = {.msg_id = (uint16_t)(m.hdr.msg_id + (_i == 0)),
                               .cmd = m.hdr.cmd,
                               .flags = _i == 0 ? NPV_VU_F_TYPE_REPLY : NPV_VU_F_TYPE_COMMAND};
        struct npv_vu_dma_access a;
        memcpy(&a, m.body, sizeof(a));
        uint8_t body[sizeof(a) + 32] = {0};
        memcpy(body, &a, sizeof(a));
        ck_assert_int_eq(npv_vu_send(tsock, &h, body, sizeof(body), NULL, 0, VU_RAW_TIMEOUT_NS), 0);
    }
    npv_vu_msg_release(&m);
    vu_raw_expect_disconnect(fd);
    if (tsock >= 0)
        close(tsock);
    vu_hostile_expect_fds_back_to(base);
    vu_hostile_well_formed_client_is_served();
}
END_TEST

/* ---- one server per socket path ---- */

static struct npv_testdev_model *listen_model(struct npv_ctx **ctx, const char *path, int *ret)
{
    struct npv_testdev_model *td;
    ck_assert_int_eq(npv_ctx_new(ctx), 0);
    npv_ctx_set_log_level(*ctx, NPV_LOG_ERROR);
    ck_assert_int_eq(npv_testdev_model_new(*ctx, &td), 0);
    *ret = npv_vus_listen(npv_testdev_model_server(td), path);
    return td;
}

static void free_model(struct npv_ctx *ctx, struct npv_testdev_model *td)
{
    npv_testdev_model_free(td);
    npv_ctx_free(ctx);
}

START_TEST(listen_refuses_a_path_a_live_server_answers_on)
{
    struct npv_ctx *ctx;
    int r;
    struct npv_testdev_model *td = listen_model(&ctx, vu_hostile_srv.path, &r);
    ck_assert_int_eq(r, -EADDRINUSE);
    free_model(ctx, td);
    /* The refusal took nothing from the server already there. */
    vu_hostile_well_formed_client_is_served();
}
END_TEST

static void make_stale_socket(const char *path)
{
    unlink(path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, path);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(s); /* the file stays, nobody listens: a server that died */
}

static bool answers(const char *path)
{
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, path);
    bool ok = connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(s);
    return ok;
}

START_TEST(listen_replaces_a_stale_socket)
{
    char path[108];
    snprintf(path, sizeof(path), "/tmp/npv-vus-stale-%d.sock", (int)getpid());
    make_stale_socket(path);
    ck_assert(!answers(path));
    struct npv_ctx *ctx;
    int r;
    struct npv_testdev_model *td = listen_model(&ctx, path, &r);
    ck_assert_int_eq(r, 0);
    ck_assert(answers(path));
    free_model(ctx, td);
    struct stat st;
    ck_assert_int_ne(lstat(path, &st), 0); /* ours: removed on the way out */
}
END_TEST

START_TEST(exit_leaves_the_socket_of_a_server_that_replaced_ours)
{
    char path[108];
    snprintf(path, sizeof(path), "/tmp/npv-vus-swap-%d.sock", (int)getpid());
    unlink(path);
    struct npv_ctx *ca, *cb;
    int r;
    struct npv_testdev_model *a = listen_model(&ca, path, &r);
    ck_assert_int_eq(r, 0);
    /* Someone removed our socket and another server took the path. */
    ck_assert_int_eq(unlink(path), 0);
    struct npv_testdev_model *b = listen_model(&cb, path, &r);
    ck_assert_int_eq(r, 0);
    free_model(ca, a);
    ck_assert(answers(path));
    free_model(cb, b);
    struct stat st;
    ck_assert_int_ne(lstat(path, &st), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("vfio_user_server_hostile");
    TCase *tc = tcase_create("hostile");
    TCase *interop = tcase_create("interop");
    vu_hostile_add_tests(tc, interop, &testdev_target);
    tcase_add_test(tc, region_write_of_8_bytes_is_one_access);
    tcase_add_test(tc, testdev_fills_through_mapped_memory_and_raises_msix);
    suite_add_tcase(s, tc);
    tc = interop;
    tcase_add_loop_test(tc, message_dma_outstanding_does_not_hold_up_requests, 0, 2);
    tcase_add_loop_test(tc, twin_socket_out_of_step_drops_the_client, 0, 3);
    tcase_add_test(tc, listen_refuses_a_path_a_live_server_answers_on);
    suite_add_tcase(s, tc);
    tc = tcase_create("socket path");
    tcase_add_test(tc, listen_replaces_a_stale_socket);
    tcase_add_test(tc, exit_leaves_the_socket_of_a_server_that_replaced_ours);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
