/* SPDX-License-Identifier: MIT */
/*
 * The vfio-user server against a hostile client: a raw socket in the test
 * process, the testdev server in a forked child. Every malformed message is
 * answered with an error reply or a disconnect; afterwards a well-formed
 * client is still served and the server holds no more fds than before.
 * Also what other clients send (unmap-all, VERSION without capabilities),
 * message DMA on one socket and on twin sockets with a client that sends
 * requests meanwhile or falls out of step, and one server per socket path.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/ctx.h>

#include "model.h"
#include "regs.h"
#include "vfio_user_msg.h"

#define TIMEOUT_NS (20ll * 1000000000ll)

static char sock_path[108];
static pid_t server_pid;

static void server_start(void)
{
    snprintf(sock_path, sizeof(sock_path), "/tmp/npv-vus-test-%d.sock", (int)getpid());
    unlink(sock_path);
    server_pid = fork();
    ck_assert_int_ge(server_pid, 0);
    if (server_pid == 0)
        _exit(npv_testdev_serve(sock_path, false) == 0 ? 0 : 1);
    int64_t deadline = npv_vu_now_ns() + TIMEOUT_NS;
    struct stat st;
    while (stat(sock_path, &st) != 0) {
        ck_assert_msg(npv_vu_now_ns() < deadline, "server socket never appeared");
        usleep(10000);
    }
}

static void server_stop(void)
{
    kill(server_pid, SIGKILL);
    waitpid(server_pid, NULL, 0);
    unlink(sock_path);
}

static int conn(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, sock_path);
    /* The socket file exists from bind(); until listen() a connect is refused. */
    int64_t deadline = npv_vu_now_ns() + TIMEOUT_NS;
    while (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        ck_assert_msg(errno == ECONNREFUSED && npv_vu_now_ns() < deadline, "connect: %s",
                      strerror(errno));
        usleep(1000);
    }
    return fd;
}

static uint16_t next_id;

/* Send a command and receive its reply. Returns 0, or the recv error (disconnect). */
static int xfer(int fd, uint16_t cmd, const void *body, size_t len, const int *fds, unsigned nfds,
                struct npv_vu_msg *rep)
{
    struct npv_vu_hdr h = {.msg_id = ++next_id, .cmd = cmd};
    int r = npv_vu_send(fd, &h, body, len, fds, nfds, TIMEOUT_NS);
    if (r < 0)
        return r;
    r = npv_vu_recv(fd, rep, 1u << 24, 4, TIMEOUT_NS);
    if (r < 0)
        return r;
    ck_assert_uint_eq(rep->hdr.msg_id, h.msg_id);
    ck_assert_uint_eq(rep->hdr.cmd, cmd);
    return 0;
}

/* Expect an error reply with errno err. */
static void expect_error(int fd, uint16_t cmd, const void *body, size_t len, uint32_t err)
{
    struct npv_vu_msg rep;
    ck_assert_int_eq(xfer(fd, cmd, body, len, NULL, 0, &rep), 0);
    ck_assert_msg(rep.hdr.flags & NPV_VU_F_ERROR, "cmd %u: expected an error reply", cmd);
    ck_assert_uint_eq(rep.hdr.error, err);
    npv_vu_msg_release(&rep);
}

/* Expect that the server closes the connection (after an optional error reply). */
static void expect_disconnect(int fd)
{
    struct npv_vu_msg rep;
    int r;
    while ((r = npv_vu_recv(fd, &rep, 1u << 24, 4, TIMEOUT_NS)) == 0) {
        ck_assert_msg(rep.hdr.flags & NPV_VU_F_ERROR, "only error replies before the close");
        npv_vu_msg_release(&rep);
    }
    ck_assert_int_eq(r, -ECONNRESET);
    close(fd);
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
    ck_assert_int_eq(xfer(fd, NPV_VU_CMD_VERSION, buf, 4 + strlen(json) + 1, NULL, 0, &rep), 0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    ck_assert_uint_ge(rep.body_len, 4);
    struct npv_vu_caps caps;
    ck_assert_int_eq(npv_vu_caps_parse((char *)rep.body + 4, rep.body_len - 4, &caps), 0);
    ck_assert_uint_ge(caps.max_msg_fds, 1);
    npv_vu_msg_release(&rep);
    return fd;
}

static uint32_t reg_read32(int fd, uint64_t off)
{
    struct npv_vu_region_access a = {.offset = off, .region = 0, .count = 4};
    struct npv_vu_msg rep;
    ck_assert_int_eq(xfer(fd, NPV_VU_CMD_REGION_READ, &a, sizeof(a), NULL, 0, &rep), 0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    ck_assert_uint_eq(rep.body_len, sizeof(a) + 4);
    uint32_t v;
    memcpy(&v, rep.body + sizeof(a), 4);
    npv_vu_msg_release(&rep);
    return v;
}

static void reg_write(int fd, uint64_t off, uint64_t val, unsigned width)
{
    uint8_t buf[sizeof(struct npv_vu_region_access) + 8];
    struct npv_vu_region_access a = {.offset = off, .region = 0, .count = width};
    memcpy(buf, &a, sizeof(a));
    memcpy(buf + sizeof(a), &val, width);
    struct npv_vu_msg rep;
    ck_assert_int_eq(xfer(fd, NPV_VU_CMD_REGION_WRITE, buf, sizeof(a) + width, NULL, 0, &rep), 0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    npv_vu_msg_release(&rep);
}

/* A well-formed client: handshake, device info, the ID register. */
static void well_formed_client_is_served(void)
{
    int fd = handshake();
    struct npv_vu_device_info di = {.argsz = sizeof(di)};
    struct npv_vu_msg rep;
    ck_assert_int_eq(xfer(fd, NPV_VU_CMD_DEVICE_GET_INFO, &di, sizeof(di), NULL, 0, &rep), 0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    memcpy(&di, rep.body, sizeof(di));
    ck_assert_uint_eq(di.num_regions, NPV_VU_PCI_NUM_REGIONS);
    npv_vu_msg_release(&rep);
    ck_assert_uint_eq(reg_read32(fd, TESTDEV_REG_ID), TESTDEV_ID_VALUE);
    close(fd);
}

static int count_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* The server's fd count returns to baseline once it has dropped a client (asynchronous). */
static void expect_fds_back_to(int baseline)
{
    int64_t deadline = npv_vu_now_ns() + TIMEOUT_NS;
    int n;
    while ((n = count_fds(server_pid)) != baseline) {
        ck_assert_msg(npv_vu_now_ns() < deadline, "server holds %d fds, expected %d", n, baseline);
        usleep(10000);
    }
}

static int baseline_fds(void)
{
    /* With no client the server holds a fixed set; wait until it is steady. */
    usleep(50000);
    return count_fds(server_pid);
}

START_TEST(version_with_other_major_is_refused_and_closed)
{
    int base = baseline_fds();
    int fd = conn();
    struct npv_vu_version v = {.major = 1, .minor = 0};
    expect_error(fd, NPV_VU_CMD_VERSION, &v, sizeof(v), ENOTSUP);
    expect_disconnect(fd);
    expect_fds_back_to(base);
    well_formed_client_is_served();
}
END_TEST

START_TEST(command_before_version_is_refused_and_closed)
{
    int fd = conn();
    struct npv_vu_device_info di = {.argsz = sizeof(di)};
    expect_error(fd, NPV_VU_CMD_DEVICE_GET_INFO, &di, sizeof(di), EINVAL);
    expect_disconnect(fd);
    well_formed_client_is_served();
}
END_TEST

START_TEST(malformed_version_json_is_refused)
{
    int fd = conn();
    char buf[64] = {0};
    strcpy(buf + 4, "{\"capabilities\":{\"max_msg_fds\":-1}}");
    expect_error(fd, NPV_VU_CMD_VERSION, buf, 4 + strlen(buf + 4) + 1, EINVAL);
    expect_disconnect(fd);
    well_formed_client_is_served();
}
END_TEST

START_TEST(truncated_header_is_a_disconnect)
{
    int base = baseline_fds();
    int fd = handshake();
    uint8_t half[8] = {1, 0, 4, 0, 16, 0, 0, 0};
    ck_assert_int_eq(send(fd, half, sizeof(half), MSG_NOSIGNAL), (ssize_t)sizeof(half));
    shutdown(fd, SHUT_WR);
    expect_disconnect(fd);
    expect_fds_back_to(base);
    well_formed_client_is_served();
}
END_TEST

START_TEST(oversized_length_is_a_disconnect)
{
    int fd = handshake();
    struct npv_vu_hdr h = {.msg_id = 1, .cmd = NPV_VU_CMD_REGION_WRITE, .size = 0xfffffff0u};
    ck_assert_int_eq(send(fd, &h, sizeof(h), MSG_NOSIGNAL), (ssize_t)sizeof(h));
    expect_disconnect(fd);
    well_formed_client_is_served();
}
END_TEST

START_TEST(length_below_header_is_a_disconnect)
{
    int fd = handshake();
    struct npv_vu_hdr h = {.msg_id = 1, .cmd = NPV_VU_CMD_DEVICE_RESET, .size = 8};
    ck_assert_int_eq(send(fd, &h, sizeof(h), MSG_NOSIGNAL), (ssize_t)sizeof(h));
    expect_disconnect(fd);
    well_formed_client_is_served();
}
END_TEST

START_TEST(too_many_fds_are_refused_and_closed)
{
    int base = baseline_fds();
    int fd = handshake();
    int fds[12];
    for (int i = 0; i < 12; i++)
        fds[i] = eventfd(0, EFD_CLOEXEC);
    struct npv_vu_irq_set s = {.argsz = sizeof(s),
                               .flags = NPV_VU_IRQ_SET_DATA_EVENTFD | NPV_VU_IRQ_SET_ACTION_TRIGGER,
                               .index = NPV_VU_PCI_MSIX_IRQ,
                               .start = 0,
                               .count = 12};
    struct npv_vu_hdr h = {.msg_id = 7, .cmd = NPV_VU_CMD_DEVICE_SET_IRQS};
    ck_assert_int_eq(npv_vu_send(fd, &h, &s, sizeof(s), fds, 12, TIMEOUT_NS), 0);
    expect_disconnect(fd);
    for (int i = 0; i < 12; i++)
        close(fds[i]);
    expect_fds_back_to(base);
    well_formed_client_is_served();
}
END_TEST

START_TEST(fds_on_a_command_that_takes_none_are_refused)
{
    int base = baseline_fds();
    int fd = handshake();
    int efd = eventfd(0, EFD_CLOEXEC);
    struct npv_vu_device_info di = {.argsz = sizeof(di)};
    struct npv_vu_msg rep;
    ck_assert_int_eq(xfer(fd, NPV_VU_CMD_DEVICE_GET_INFO, &di, sizeof(di), &efd, 1, &rep), 0);
    ck_assert(rep.hdr.flags & NPV_VU_F_ERROR);
    npv_vu_msg_release(&rep);
    close(efd);
    close(fd);
    expect_fds_back_to(base);
}
END_TEST

START_TEST(bad_region_index_is_an_error)
{
    int fd = handshake();
    struct npv_vu_region_info ri = {.argsz = sizeof(ri), .index = 99};
    expect_error(fd, NPV_VU_CMD_DEVICE_GET_REGION_INFO, &ri, sizeof(ri), EINVAL);
    struct npv_vu_region_access a = {.offset = 0, .region = 0x80000000u, .count = 4};
    expect_error(fd, NPV_VU_CMD_REGION_READ, &a, sizeof(a), EINVAL);
    close(fd);
    well_formed_client_is_served();
}
END_TEST

START_TEST(region_offset_plus_size_overflow_is_an_error)
{
    int fd = handshake();
    struct npv_vu_region_access a = {.offset = UINT64_MAX - 1, .region = 0, .count = 4};
    expect_error(fd, NPV_VU_CMD_REGION_READ, &a, sizeof(a), EINVAL);
    a = (struct npv_vu_region_access){.offset = TESTDEV_BAR0_SIZE - 2, .region = 0, .count = 4};
    expect_error(fd, NPV_VU_CMD_REGION_READ, &a, sizeof(a), EINVAL);
    a = (struct npv_vu_region_access){
        .offset = 4094, .region = NPV_VU_PCI_CONFIG_REGION, .count = 4};
    expect_error(fd, NPV_VU_CMD_REGION_READ, &a, sizeof(a), EINVAL);
    /* A write whose count disagrees with the data it carries. */
    uint8_t buf[sizeof(a) + 4] = {0};
    a = (struct npv_vu_region_access){.offset = 0x40, .region = 0, .count = 8};
    memcpy(buf, &a, sizeof(a));
    expect_error(fd, NPV_VU_CMD_REGION_WRITE, buf, sizeof(buf), EINVAL);
    a.count = 0x7fffffff;
    memcpy(buf, &a, sizeof(a));
    expect_error(fd, NPV_VU_CMD_REGION_READ, &a, sizeof(a), EINVAL);
    close(fd);
    well_formed_client_is_served();
}
END_TEST

START_TEST(bad_irq_index_and_range_are_errors)
{
    int fd = handshake();
    struct npv_vu_irq_info ii = {.argsz = sizeof(ii), .index = 5};
    expect_error(fd, NPV_VU_CMD_DEVICE_GET_IRQ_INFO, &ii, sizeof(ii), EINVAL);
    struct npv_vu_irq_set s = {.argsz = sizeof(s),
                               .flags = NPV_VU_IRQ_SET_DATA_NONE | NPV_VU_IRQ_SET_ACTION_TRIGGER,
                               .index = 77,
                               .start = 0,
                               .count = 1};
    expect_error(fd, NPV_VU_CMD_DEVICE_SET_IRQS, &s, sizeof(s), EINVAL);
    s.index = NPV_VU_PCI_MSIX_IRQ;
    s.start = 0xffffffffu;
    s.count = 2;
    expect_error(fd, NPV_VU_CMD_DEVICE_SET_IRQS, &s, sizeof(s), EINVAL);
    s.start = 0;
    s.count = 1;
    s.flags = NPV_VU_IRQ_SET_DATA_NONE | NPV_VU_IRQ_SET_DATA_BOOL | NPV_VU_IRQ_SET_ACTION_MASK;
    expect_error(fd, NPV_VU_CMD_DEVICE_SET_IRQS, &s, sizeof(s), EINVAL);
    s.flags = NPV_VU_IRQ_SET_DATA_BOOL | NPV_VU_IRQ_SET_ACTION_MASK;
    s.count = 2; /* two bools promised, none sent */
    expect_error(fd, NPV_VU_CMD_DEVICE_SET_IRQS, &s, sizeof(s), EINVAL);
    close(fd);
    well_formed_client_is_served();
}
END_TEST

START_TEST(overlapping_dma_map_is_eexist)
{
    int fd = handshake();
    struct npv_vu_dma_map m = {.argsz = sizeof(m),
                               .flags = NPV_VU_DMA_FLAG_READ | NPV_VU_DMA_FLAG_WRITE,
                               .address = 0x100000,
                               .size = 0x10000};
    struct npv_vu_msg rep;
    ck_assert_int_eq(xfer(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), NULL, 0, &rep), 0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    npv_vu_msg_release(&rep);
    m.address = 0x10f000;
    expect_error(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), EEXIST);
    m.address = 0xf8000;
    expect_error(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), EEXIST);
    m.address = UINT64_MAX - 0xfff; /* wraps */
    expect_error(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), EINVAL);
    close(fd);
    well_formed_client_is_served();
}
END_TEST

START_TEST(unmap_not_matching_a_map_is_an_error)
{
    int fd = handshake();
    struct npv_vu_dma_map m = {
        .argsz = sizeof(m), .flags = NPV_VU_DMA_FLAG_READ, .address = 0x200000, .size = 0x20000};
    struct npv_vu_msg rep;
    ck_assert_int_eq(xfer(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), NULL, 0, &rep), 0);
    npv_vu_msg_release(&rep);
    struct npv_vu_dma_unmap u = {.argsz = sizeof(u), .address = 0x200000, .size = 0x10000};
    expect_error(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), ENOENT);
    u = (struct npv_vu_dma_unmap){.argsz = sizeof(u), .address = 0x201000, .size = 0x20000};
    expect_error(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), ENOENT);
    u = (struct npv_vu_dma_unmap){.argsz = sizeof(u), .address = 0x200000, .size = 0x20000};
    ck_assert_int_eq(xfer(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), NULL, 0, &rep), 0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    npv_vu_msg_release(&rep);
    expect_error(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), ENOENT);
    close(fd);
    well_formed_client_is_served();
}
END_TEST

START_TEST(unknown_command_is_enosys)
{
    int fd = handshake();
    expect_error(fd, 200, NULL, 0, ENOSYS);
    close(fd);
}
END_TEST

/* A 64-bit REGION_WRITE of 8 bytes reaches the model as one access of width 8. */
START_TEST(region_write_of_8_bytes_is_one_access)
{
    int fd = handshake();
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
    int base = baseline_fds();
    int fd = handshake();
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
    ck_assert_int_eq(xfer(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), &mem, 1, &rep), 0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    npv_vu_msg_release(&rep);

    /* The BAR's doorbell page comes as a sparse mmap area with the fd. */
    struct npv_vu_region_info ri = {.argsz = 256, .index = 0};
    ck_assert_int_eq(xfer(fd, NPV_VU_CMD_DEVICE_GET_REGION_INFO, &ri, sizeof(ri), NULL, 0, &rep),
                     0);
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
    ck_assert_int_eq(xfer(fd, NPV_VU_CMD_DEVICE_SET_IRQS, &s, sizeof(s), &efd, 1, &rep), 0);
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
    int64_t deadline = npv_vu_now_ns() + TIMEOUT_NS;
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
    expect_fds_back_to(base);
    well_formed_client_is_served();
}
END_TEST

/* ---- interoperability: unmap-all, VERSION subset, optional features, twin sockets ---- */

static void dma_map_nofd(int fd, uint64_t address, uint64_t size)
{
    struct npv_vu_dma_map m = {.argsz = sizeof(m),
                               .flags = NPV_VU_DMA_FLAG_READ | NPV_VU_DMA_FLAG_WRITE,
                               .address = address,
                               .size = size};
    struct npv_vu_msg rep;
    ck_assert_int_eq(xfer(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), NULL, 0, &rep), 0);
    ck_assert_msg(!(rep.hdr.flags & NPV_VU_F_ERROR), "DMA_MAP: error %u", rep.hdr.error);
    npv_vu_msg_release(&rep);
}

START_TEST(dma_unmap_all_drops_every_mapping)
{
    int fd = handshake();
    for (uint64_t i = 0; i < 3; i++)
        dma_map_nofd(fd, 0x100000 + i * 0x10000, 0x10000);
    struct npv_vu_dma_unmap u = {.argsz = sizeof(u), .flags = NPV_VU_DMA_UNMAP_FLAG_ALL};
    struct npv_vu_msg rep;
    ck_assert_int_eq(xfer(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), NULL, 0, &rep), 0);
    ck_assert_msg(!(rep.hdr.flags & NPV_VU_F_ERROR), "unmap all: error %u", rep.hdr.error);
    npv_vu_msg_release(&rep);
    /* Gone: unmapping one is ENOENT, and the range can be mapped again. */
    u = (struct npv_vu_dma_unmap){.argsz = sizeof(u), .address = 0x110000, .size = 0x10000};
    expect_error(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), ENOENT);
    for (uint64_t i = 0; i < 3; i++)
        dma_map_nofd(fd, 0x100000 + i * 0x10000, 0x10000);
    close(fd);
}
END_TEST

START_TEST(unmap_all_with_a_range_or_dirty_bitmap_is_refused)
{
    int fd = handshake();
    dma_map_nofd(fd, 0x100000, 0x10000);
    struct npv_vu_dma_unmap u = {.argsz = sizeof(u),
                                 .flags = NPV_VU_DMA_UNMAP_FLAG_ALL,
                                 .address = 0x100000,
                                 .size = 0x10000};
    expect_error(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), EINVAL);
    u.flags = NPV_VU_DMA_UNMAP_FLAG_GET_DIRTY_BITMAP;
    expect_error(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), ENOTSUP);
    /* Still mapped after both refusals. */
    u.flags = 0;
    struct npv_vu_msg rep;
    ck_assert_int_eq(xfer(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), NULL, 0, &rep), 0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    npv_vu_msg_release(&rep);
    close(fd);
}
END_TEST

START_TEST(device_feature_and_migration_are_enosys)
{
    int fd = handshake();
    uint8_t feature[16] = {0};
    expect_error(fd, NPV_VU_CMD_DEVICE_FEATURE, feature, sizeof(feature), ENOSYS);
    expect_error(fd, NPV_VU_CMD_MIG_DATA_READ, feature, sizeof(feature), ENOSYS);
    expect_error(fd, NPV_VU_CMD_MIG_DATA_WRITE, feature, sizeof(feature), ENOSYS);
    expect_error(fd, NPV_VU_CMD_REGION_WRITE_MULTI, feature, sizeof(feature), ENOSYS);
    close(fd);
    well_formed_client_is_served();
}
END_TEST

/*
 * VERSION with json (NULL: no version data). Returns the connection; the
 * reply's capabilities go to caps and its fds stay in *rep (released by the
 * caller).
 */
static int handshake_with(const char *json, struct npv_vu_caps *caps, struct npv_vu_msg *rep)
{
    int fd = conn();
    char buf[4 + 256];
    struct npv_vu_version v = {.major = 0, .minor = 0};
    memcpy(buf, &v, 4);
    size_t len = 4;
    if (json != NULL) {
        strcpy(buf + 4, json);
        len += strlen(json) + 1;
    }
    ck_assert_int_eq(xfer(fd, NPV_VU_CMD_VERSION, buf, len, NULL, 0, rep), 0);
    ck_assert(!(rep->hdr.flags & NPV_VU_F_ERROR));
    ck_assert_uint_ge(rep->body_len, 4);
    ck_assert_int_eq(npv_vu_caps_parse((char *)rep->body + 4, rep->body_len - 4, caps), 0);
    return fd;
}

START_TEST(version_reply_names_only_capabilities_the_client_proposed)
{
    static const struct {
        const char *json;
        uint32_t proposed;
    } cases[] = {
        {NULL, 0},
        {"{}", 0},
        {"{\"capabilities\":{}}", 0},
        {"{\"capabilities\":{\"max_msg_fds\":4}}", NPV_VU_CAP_MAX_MSG_FDS},
        {"{\"capabilities\":{\"pgsizes\":4096,\"max_data_xfer_size\":65536}}",
         NPV_VU_CAP_PGSIZES | NPV_VU_CAP_MAX_DATA_XFER_SIZE},
        {"{\"capabilities\":{\"max_dma_maps\":10,\"write_multiple\":true}}",
         NPV_VU_CAP_MAX_DMA_MAPS | NPV_VU_CAP_WRITE_MULTIPLE},
        {"{\"capabilities\":{\"twin_socket\":{\"supported\":false}}}", NPV_VU_CAP_TWIN_SOCKET},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct npv_vu_caps caps;
        struct npv_vu_msg rep;
        int fd = handshake_with(cases[i].json, &caps, &rep);
        ck_assert_msg((caps.present & ~cases[i].proposed) == 0,
                      "case %zu: reply names keys 0x%x, proposal 0x%x", i, caps.present,
                      cases[i].proposed);
        ck_assert_uint_eq(rep.nr_fds, 0);
        if (cases[i].proposed & NPV_VU_CAP_WRITE_MULTIPLE)
            ck_assert(!caps.write_multiple); /* REGION_WRITE_MULTI is not served */
        if (cases[i].proposed & NPV_VU_CAP_MAX_DMA_MAPS)
            ck_assert_uint_le(caps.max_dma_maps, 10);
        npv_vu_msg_release(&rep);
        close(fd);
    }
    well_formed_client_is_served();
}
END_TEST

#define TWIN_JSON "{\"capabilities\":{\"max_msg_fds\":8,\"twin_socket\":{\"supported\":true}}}"

/* Connect; with twin, offer twin sockets and return the second socket in *tsock (else -1). */
static int handshake_twin(bool twin, int *tsock)
{
    struct npv_vu_caps caps;
    struct npv_vu_msg rep;
    int fd =
        handshake_with(twin ? TWIN_JSON : "{\"capabilities\":{\"max_msg_fds\":8}}", &caps, &rep);
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
    dma_map_nofd(fd, RAM_IOVA, RAM_SIZE);
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
        ck_assert_int_eq(npv_vu_sendv(dsock, &h, iov, 1, NULL, 0, TIMEOUT_NS), 0);
    } else {
        ck_assert_uint_eq(m->hdr.cmd, NPV_VU_CMD_DMA_READ);
        ck_assert_int_eq(npv_vu_sendv(dsock, &h, iov, 2, NULL, 0, TIMEOUT_NS), 0);
    }
}

START_TEST(message_dma_outstanding_does_not_hold_up_requests)
{
    /* _i: 0 one socket, 1 twin sockets. */
    int base = baseline_fds();
    int tsock;
    int fd = handshake_twin(_i == 1, &tsock);
    int dsock = _i ? tsock : fd;
    static uint8_t ram[RAM_SIZE];
    start_message_dma_fill(fd, ram);

    const struct testdev_status *st = (const struct testdev_status *)(ram + 0x1000);
    for (unsigned n = 0; __atomic_load_n(&st->completed_head, __ATOMIC_ACQUIRE) != 1; n++) {
        ck_assert_uint_lt(n, 16);
        struct npv_vu_msg m;
        ck_assert_int_eq(npv_vu_recv(dsock, &m, 1u << 20, 0, TIMEOUT_NS), 0);
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
    expect_fds_back_to(base);
    well_formed_client_is_served();
}
END_TEST

START_TEST(twin_socket_out_of_step_drops_the_client)
{
    /* _i: 0 a reply with another id, 1 a command instead of the reply, 2 twin socket closed. */
    int base = baseline_fds();
    int tsock;
    int fd = handshake_twin(true, &tsock);
    static uint8_t ram[RAM_SIZE];
    start_message_dma_fill(fd, ram);
    struct npv_vu_msg m;
    ck_assert_int_eq(npv_vu_recv(tsock, &m, 1u << 20, 0, TIMEOUT_NS), 0);
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
        ck_assert_int_eq(npv_vu_send(tsock, &h, body, sizeof(body), NULL, 0, TIMEOUT_NS), 0);
    }
    npv_vu_msg_release(&m);
    expect_disconnect(fd);
    if (tsock >= 0)
        close(tsock);
    expect_fds_back_to(base);
    well_formed_client_is_served();
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
    struct npv_testdev_model *td = listen_model(&ctx, sock_path, &r);
    ck_assert_int_eq(r, -EADDRINUSE);
    free_model(ctx, td);
    /* The refusal took nothing from the server already there. */
    well_formed_client_is_served();
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
    tcase_add_checked_fixture(tc, server_start, server_stop);
    tcase_add_test(tc, version_with_other_major_is_refused_and_closed);
    tcase_add_test(tc, command_before_version_is_refused_and_closed);
    tcase_add_test(tc, malformed_version_json_is_refused);
    tcase_add_test(tc, truncated_header_is_a_disconnect);
    tcase_add_test(tc, oversized_length_is_a_disconnect);
    tcase_add_test(tc, length_below_header_is_a_disconnect);
    tcase_add_test(tc, too_many_fds_are_refused_and_closed);
    tcase_add_test(tc, fds_on_a_command_that_takes_none_are_refused);
    tcase_add_test(tc, bad_region_index_is_an_error);
    tcase_add_test(tc, region_offset_plus_size_overflow_is_an_error);
    tcase_add_test(tc, bad_irq_index_and_range_are_errors);
    tcase_add_test(tc, overlapping_dma_map_is_eexist);
    tcase_add_test(tc, unmap_not_matching_a_map_is_an_error);
    tcase_add_test(tc, unknown_command_is_enosys);
    tcase_add_test(tc, region_write_of_8_bytes_is_one_access);
    tcase_add_test(tc, testdev_fills_through_mapped_memory_and_raises_msix);
    suite_add_tcase(s, tc);
    tc = tcase_create("interop");
    tcase_add_checked_fixture(tc, server_start, server_stop);
    tcase_add_test(tc, dma_unmap_all_drops_every_mapping);
    tcase_add_test(tc, unmap_all_with_a_range_or_dirty_bitmap_is_refused);
    tcase_add_test(tc, device_feature_and_migration_are_enosys);
    tcase_add_test(tc, version_reply_names_only_capabilities_the_client_proposed);
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
