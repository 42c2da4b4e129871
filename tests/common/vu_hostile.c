/* SPDX-License-Identifier: MIT */
/*
 * The hostile raw client and the protocol probes every device model passes
 * (vu_hostile.h). Probes written for the testdev server first; they name no
 * device, only the target's ID register and region 0's size.
 */
#include "vu_hostile.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static const struct vu_hostile_target *target;
static struct vu_server server;
static uint16_t next_id;

void vu_hostile_set_target(const struct vu_hostile_target *t)
{
    target = t;
}

void vu_hostile_start(void)
{
    ck_assert_ptr_nonnull(target);
    target->start(&server);
}

void vu_hostile_stop(void)
{
    vu_server_kill(&server);
}

const char *vu_hostile_path(void)
{
    return server.path;
}

pid_t vu_hostile_pid(void)
{
    return server.pid;
}

int vu_raw_conn(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", server.path);
    /* The socket file exists from bind(); until listen() a connect is refused. */
    int64_t deadline = npv_vu_now_ns() + VU_RAW_TIMEOUT_NS;
    while (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        ck_assert_msg(errno == ECONNREFUSED && npv_vu_now_ns() < deadline, "connect: %s",
                      strerror(errno));
        usleep(1000);
    }
    return fd;
}

int vu_raw_xfer(int fd, uint16_t cmd, const void *body, size_t len, const int *fds, unsigned nfds,
                struct npv_vu_msg *rep)
{
    struct npv_vu_hdr h = {.msg_id = ++next_id, .cmd = cmd};
    int r = npv_vu_send(fd, &h, body, len, fds, nfds, VU_RAW_TIMEOUT_NS);
    if (r < 0)
        return r;
    r = npv_vu_recv(fd, rep, 1u << 24, 8, VU_RAW_TIMEOUT_NS);
    if (r < 0)
        return r;
    ck_assert_uint_eq(rep->hdr.msg_id, h.msg_id);
    ck_assert_uint_eq(rep->hdr.cmd, cmd);
    return 0;
}

void vu_raw_expect_error(int fd, uint16_t cmd, const void *body, size_t len, uint32_t err)
{
    struct npv_vu_msg rep;
    ck_assert_int_eq(vu_raw_xfer(fd, cmd, body, len, NULL, 0, &rep), 0);
    ck_assert_msg(rep.hdr.flags & NPV_VU_F_ERROR, "cmd %u: expected an error reply", cmd);
    ck_assert_uint_eq(rep.hdr.error, err);
    npv_vu_msg_release(&rep);
}

void vu_raw_expect_disconnect(int fd)
{
    struct npv_vu_msg rep;
    int r;
    while ((r = npv_vu_recv(fd, &rep, 1u << 24, 4, VU_RAW_TIMEOUT_NS)) == 0) {
        ck_assert_msg(rep.hdr.flags & NPV_VU_F_ERROR, "only error replies before the close");
        npv_vu_msg_release(&rep);
    }
    ck_assert_int_eq(r, -ECONNRESET);
    close(fd);
}

int vu_raw_handshake_with(const char *json, struct npv_vu_caps *caps, struct npv_vu_msg *rep)
{
    int fd = vu_raw_conn();
    char buf[4 + 256];
    struct npv_vu_version v = {.major = 0, .minor = 0};
    memcpy(buf, &v, 4);
    size_t len = 4;
    if (json != NULL) {
        ck_assert_uint_lt(strlen(json), sizeof(buf) - 4);
        strcpy(buf + 4, json);
        len += strlen(json) + 1;
    }
    ck_assert_int_eq(vu_raw_xfer(fd, NPV_VU_CMD_VERSION, buf, len, NULL, 0, rep), 0);
    ck_assert(!(rep->hdr.flags & NPV_VU_F_ERROR));
    ck_assert_uint_ge(rep->body_len, 4);
    ck_assert_int_eq(npv_vu_caps_parse((char *)rep->body + 4, rep->body_len - 4, caps), 0);
    return fd;
}

int vu_raw_handshake(void)
{
    struct npv_vu_caps caps;
    struct npv_vu_msg rep;
    int fd = vu_raw_handshake_with("{\"capabilities\":{\"max_msg_fds\":8}}", &caps, &rep);
    ck_assert_uint_ge(caps.max_msg_fds, 1);
    npv_vu_msg_release(&rep);
    return fd;
}

uint32_t vu_raw_access(int fd, uint32_t region, uint64_t off, uint32_t width, bool write,
                       uint64_t *v)
{
    uint8_t buf[sizeof(struct npv_vu_region_access) + 8];
    struct npv_vu_region_access a = {.offset = off, .region = region, .count = width};
    memcpy(buf, &a, sizeof(a));
    size_t len = sizeof(a);
    if (write) {
        memcpy(buf + sizeof(a), v, width <= 8 ? width : 8);
        len += width <= 8 ? width : 8;
    }
    struct npv_vu_msg rep;
    ck_assert_int_eq(vu_raw_xfer(fd, write ? NPV_VU_CMD_REGION_WRITE : NPV_VU_CMD_REGION_READ, buf,
                                 len, NULL, 0, &rep),
                     0);
    uint32_t err = (rep.hdr.flags & NPV_VU_F_ERROR) ? rep.hdr.error : 0;
    if (err == 0 && !write) {
        ck_assert_uint_eq(rep.body_len, sizeof(a) + width);
        *v = 0;
        memcpy(v, rep.body + sizeof(a), width <= 8 ? width : 8);
    }
    npv_vu_msg_release(&rep);
    return err;
}

uint64_t vu_raw_read(int fd, uint32_t region, uint64_t off, uint32_t width)
{
    uint64_t v = 0;
    ck_assert_uint_eq(vu_raw_access(fd, region, off, width, false, &v), 0);
    return v;
}

void vu_raw_write(int fd, uint32_t region, uint64_t off, uint32_t width, uint64_t v)
{
    ck_assert_uint_eq(vu_raw_access(fd, region, off, width, true, &v), 0);
}

void vu_raw_dma_map_nofd(int fd, uint64_t address, uint64_t size)
{
    struct npv_vu_dma_map m = {.argsz = sizeof(m),
                               .flags = NPV_VU_DMA_FLAG_READ | NPV_VU_DMA_FLAG_WRITE,
                               .address = address,
                               .size = size};
    struct npv_vu_msg rep;
    ck_assert_int_eq(vu_raw_xfer(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), NULL, 0, &rep), 0);
    ck_assert_msg(!(rep.hdr.flags & NPV_VU_F_ERROR), "DMA_MAP: error %u", rep.hdr.error);
    npv_vu_msg_release(&rep);
}

void *vu_raw_dma_map_memfd(int fd, uint64_t iova, size_t size)
{
    int mem = memfd_create("vu-raw-dma", MFD_CLOEXEC);
    ck_assert_int_ge(mem, 0);
    ck_assert_int_eq(ftruncate(mem, (off_t)size), 0);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    struct npv_vu_dma_map m = {.argsz = sizeof(m),
                               .flags = NPV_VU_DMA_FLAG_READ | NPV_VU_DMA_FLAG_WRITE,
                               .address = iova,
                               .size = size};
    struct npv_vu_msg rep;
    ck_assert_int_eq(vu_raw_xfer(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), &mem, 1, &rep), 0);
    ck_assert_msg(!(rep.hdr.flags & NPV_VU_F_ERROR), "DMA_MAP: error %u", rep.hdr.error);
    npv_vu_msg_release(&rep);
    close(mem); /* the server holds its own reference */
    return p;
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

void vu_raw_expect_fds_back_to(int baseline)
{
    int64_t deadline = npv_vu_now_ns() + VU_RAW_TIMEOUT_NS;
    int n;
    while ((n = count_fds(server.pid)) != baseline) {
        ck_assert_msg(npv_vu_now_ns() < deadline, "server holds %d fds, expected %d", n, baseline);
        usleep(10000);
    }
}

int vu_raw_baseline_fds(void)
{
    /* With no client the server holds a fixed set; wait until it is steady. */
    usleep(50000);
    return count_fds(server.pid);
}

void vu_hostile_well_formed_client_is_served(void)
{
    int fd = vu_raw_handshake();
    struct npv_vu_device_info di = {.argsz = sizeof(di)};
    struct npv_vu_msg rep;
    ck_assert_int_eq(vu_raw_xfer(fd, NPV_VU_CMD_DEVICE_GET_INFO, &di, sizeof(di), NULL, 0, &rep),
                     0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    memcpy(&di, rep.body, sizeof(di));
    ck_assert_uint_eq(di.num_regions, NPV_VU_PCI_NUM_REGIONS);
    npv_vu_msg_release(&rep);
    ck_assert_uint_eq(vu_raw_read(fd, target->id_region, target->id_offset, target->id_width),
                      target->id_value);
    close(fd);
}

/* ---- the probes ---- */

START_TEST(version_with_other_major_is_refused_and_closed)
{
    int base = vu_raw_baseline_fds();
    int fd = vu_raw_conn();
    struct npv_vu_version v = {.major = 1, .minor = 0};
    vu_raw_expect_error(fd, NPV_VU_CMD_VERSION, &v, sizeof(v), ENOTSUP);
    vu_raw_expect_disconnect(fd);
    vu_raw_expect_fds_back_to(base);
    vu_hostile_well_formed_client_is_served();
}
END_TEST

START_TEST(command_before_version_is_refused_and_closed)
{
    int fd = vu_raw_conn();
    struct npv_vu_device_info di = {.argsz = sizeof(di)};
    vu_raw_expect_error(fd, NPV_VU_CMD_DEVICE_GET_INFO, &di, sizeof(di), EINVAL);
    vu_raw_expect_disconnect(fd);
    vu_hostile_well_formed_client_is_served();
}
END_TEST

START_TEST(malformed_version_json_is_refused)
{
    int fd = vu_raw_conn();
    char buf[64] = {0};
    strcpy(buf + 4, "{\"capabilities\":{\"max_msg_fds\":-1}}");
    vu_raw_expect_error(fd, NPV_VU_CMD_VERSION, buf, 4 + strlen(buf + 4) + 1, EINVAL);
    vu_raw_expect_disconnect(fd);
    vu_hostile_well_formed_client_is_served();
}
END_TEST

START_TEST(truncated_header_is_a_disconnect)
{
    int base = vu_raw_baseline_fds();
    int fd = vu_raw_handshake();
    uint8_t half[8] = {1, 0, 4, 0, 16, 0, 0, 0};
    ck_assert_int_eq(send(fd, half, sizeof(half), MSG_NOSIGNAL), (ssize_t)sizeof(half));
    shutdown(fd, SHUT_WR);
    vu_raw_expect_disconnect(fd);
    vu_raw_expect_fds_back_to(base);
    vu_hostile_well_formed_client_is_served();
}
END_TEST

START_TEST(oversized_length_is_a_disconnect)
{
    int fd = vu_raw_handshake();
    struct npv_vu_hdr h = {.msg_id = 1, .cmd = NPV_VU_CMD_REGION_WRITE, .size = 0xfffffff0u};
    ck_assert_int_eq(send(fd, &h, sizeof(h), MSG_NOSIGNAL), (ssize_t)sizeof(h));
    vu_raw_expect_disconnect(fd);
    vu_hostile_well_formed_client_is_served();
}
END_TEST

START_TEST(length_below_header_is_a_disconnect)
{
    int fd = vu_raw_handshake();
    struct npv_vu_hdr h = {.msg_id = 1, .cmd = NPV_VU_CMD_DEVICE_RESET, .size = 8};
    ck_assert_int_eq(send(fd, &h, sizeof(h), MSG_NOSIGNAL), (ssize_t)sizeof(h));
    vu_raw_expect_disconnect(fd);
    vu_hostile_well_formed_client_is_served();
}
END_TEST

START_TEST(too_many_fds_are_refused_and_closed)
{
    int base = vu_raw_baseline_fds();
    int fd = vu_raw_handshake();
    int fds[12];
    for (int i = 0; i < 12; i++)
        fds[i] = eventfd(0, EFD_CLOEXEC);
    struct npv_vu_irq_set s = {.argsz = sizeof(s),
                               .flags = NPV_VU_IRQ_SET_DATA_EVENTFD | NPV_VU_IRQ_SET_ACTION_TRIGGER,
                               .index = NPV_VU_PCI_MSIX_IRQ,
                               .start = 0,
                               .count = 12};
    struct npv_vu_hdr h = {.msg_id = 7, .cmd = NPV_VU_CMD_DEVICE_SET_IRQS};
    ck_assert_int_eq(npv_vu_send(fd, &h, &s, sizeof(s), fds, 12, VU_RAW_TIMEOUT_NS), 0);
    vu_raw_expect_disconnect(fd);
    for (int i = 0; i < 12; i++)
        close(fds[i]);
    vu_raw_expect_fds_back_to(base);
    vu_hostile_well_formed_client_is_served();
}
END_TEST

START_TEST(fds_on_a_command_that_takes_none_are_refused)
{
    int base = vu_raw_baseline_fds();
    int fd = vu_raw_handshake();
    int efd = eventfd(0, EFD_CLOEXEC);
    struct npv_vu_device_info di = {.argsz = sizeof(di)};
    struct npv_vu_msg rep;
    ck_assert_int_eq(vu_raw_xfer(fd, NPV_VU_CMD_DEVICE_GET_INFO, &di, sizeof(di), &efd, 1, &rep),
                     0);
    ck_assert(rep.hdr.flags & NPV_VU_F_ERROR);
    npv_vu_msg_release(&rep);
    close(efd);
    close(fd);
    vu_raw_expect_fds_back_to(base);
}
END_TEST

START_TEST(bad_region_index_is_an_error)
{
    int fd = vu_raw_handshake();
    struct npv_vu_region_info ri = {.argsz = sizeof(ri), .index = 99};
    vu_raw_expect_error(fd, NPV_VU_CMD_DEVICE_GET_REGION_INFO, &ri, sizeof(ri), EINVAL);
    struct npv_vu_region_access a = {.offset = 0, .region = 0x80000000u, .count = 4};
    vu_raw_expect_error(fd, NPV_VU_CMD_REGION_READ, &a, sizeof(a), EINVAL);
    close(fd);
    vu_hostile_well_formed_client_is_served();
}
END_TEST

START_TEST(region_offset_plus_size_overflow_is_an_error)
{
    int fd = vu_raw_handshake();
    struct npv_vu_region_access a = {.offset = UINT64_MAX - 1, .region = 0, .count = 4};
    vu_raw_expect_error(fd, NPV_VU_CMD_REGION_READ, &a, sizeof(a), EINVAL);
    a = (struct npv_vu_region_access){.offset = target->region0_size - 2, .region = 0, .count = 4};
    vu_raw_expect_error(fd, NPV_VU_CMD_REGION_READ, &a, sizeof(a), EINVAL);
    a = (struct npv_vu_region_access){
        .offset = 4094, .region = NPV_VU_PCI_CONFIG_REGION, .count = 4};
    vu_raw_expect_error(fd, NPV_VU_CMD_REGION_READ, &a, sizeof(a), EINVAL);
    /* A write whose count disagrees with the data it carries. */
    uint8_t buf[sizeof(a) + 4] = {0};
    a = (struct npv_vu_region_access){.offset = 0x40, .region = 0, .count = 8};
    memcpy(buf, &a, sizeof(a));
    vu_raw_expect_error(fd, NPV_VU_CMD_REGION_WRITE, buf, sizeof(buf), EINVAL);
    a.count = 0x7fffffff;
    memcpy(buf, &a, sizeof(a));
    vu_raw_expect_error(fd, NPV_VU_CMD_REGION_READ, &a, sizeof(a), EINVAL);
    close(fd);
    vu_hostile_well_formed_client_is_served();
}
END_TEST

START_TEST(bad_irq_index_and_range_are_errors)
{
    int fd = vu_raw_handshake();
    struct npv_vu_irq_info ii = {.argsz = sizeof(ii), .index = 5};
    vu_raw_expect_error(fd, NPV_VU_CMD_DEVICE_GET_IRQ_INFO, &ii, sizeof(ii), EINVAL);
    struct npv_vu_irq_set s = {.argsz = sizeof(s),
                               .flags = NPV_VU_IRQ_SET_DATA_NONE | NPV_VU_IRQ_SET_ACTION_TRIGGER,
                               .index = 77,
                               .start = 0,
                               .count = 1};
    vu_raw_expect_error(fd, NPV_VU_CMD_DEVICE_SET_IRQS, &s, sizeof(s), EINVAL);
    s.index = NPV_VU_PCI_MSIX_IRQ;
    s.start = 0xffffffffu;
    s.count = 2;
    vu_raw_expect_error(fd, NPV_VU_CMD_DEVICE_SET_IRQS, &s, sizeof(s), EINVAL);
    s.start = 0;
    s.count = 1;
    s.flags = NPV_VU_IRQ_SET_DATA_NONE | NPV_VU_IRQ_SET_DATA_BOOL | NPV_VU_IRQ_SET_ACTION_MASK;
    vu_raw_expect_error(fd, NPV_VU_CMD_DEVICE_SET_IRQS, &s, sizeof(s), EINVAL);
    s.flags = NPV_VU_IRQ_SET_DATA_BOOL | NPV_VU_IRQ_SET_ACTION_MASK;
    s.count = 2; /* two bools promised, none sent */
    vu_raw_expect_error(fd, NPV_VU_CMD_DEVICE_SET_IRQS, &s, sizeof(s), EINVAL);
    close(fd);
    vu_hostile_well_formed_client_is_served();
}
END_TEST

START_TEST(overlapping_dma_map_is_eexist)
{
    int fd = vu_raw_handshake();
    struct npv_vu_dma_map m = {.argsz = sizeof(m),
                               .flags = NPV_VU_DMA_FLAG_READ | NPV_VU_DMA_FLAG_WRITE,
                               .address = 0x100000,
                               .size = 0x10000};
    struct npv_vu_msg rep;
    ck_assert_int_eq(vu_raw_xfer(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), NULL, 0, &rep), 0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    npv_vu_msg_release(&rep);
    m.address = 0x10f000;
    vu_raw_expect_error(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), EEXIST);
    m.address = 0xf8000;
    vu_raw_expect_error(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), EEXIST);
    m.address = UINT64_MAX - 0xfff; /* wraps */
    vu_raw_expect_error(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), EINVAL);
    close(fd);
    vu_hostile_well_formed_client_is_served();
}
END_TEST

/*
 * mmap(2) maps past a file's end and a touch there is SIGBUS: a DMA_MAP
 * larger than its file is refused (EINVAL), so no DMA can kill the server.
 */
START_TEST(dma_map_past_the_end_of_its_file_is_refused)
{
    int fd = vu_raw_handshake();
    int mem = memfd_create("vu-raw-short", MFD_CLOEXEC);
    ck_assert_int_ge(mem, 0);
    ck_assert_int_eq(ftruncate(mem, 4096), 0);
    struct npv_vu_dma_map m = {.argsz = sizeof(m),
                               .flags = NPV_VU_DMA_FLAG_READ | NPV_VU_DMA_FLAG_WRITE,
                               .address = 0x100000,
                               .size = 8192};
    struct npv_vu_msg rep;
    ck_assert_int_eq(vu_raw_xfer(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), &mem, 1, &rep), 0);
    ck_assert_msg(rep.hdr.flags & NPV_VU_F_ERROR, "a map past the file's end was accepted");
    ck_assert_uint_eq(rep.hdr.error, EINVAL);
    npv_vu_msg_release(&rep);
    /* The page inside the file is still a map like any other, and so at an offset in it. */
    m.size = 4096;
    ck_assert_int_eq(vu_raw_xfer(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), &mem, 1, &rep), 0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    npv_vu_msg_release(&rep);
    m.address = 0x200000;
    m.offset = 4096; /* the whole range past the end */
    ck_assert_int_eq(vu_raw_xfer(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), &mem, 1, &rep), 0);
    ck_assert(rep.hdr.flags & NPV_VU_F_ERROR);
    ck_assert_uint_eq(rep.hdr.error, EINVAL);
    npv_vu_msg_release(&rep);
    close(mem);
    close(fd);
    vu_hostile_well_formed_client_is_served();
}
END_TEST

START_TEST(unmap_not_matching_a_map_is_an_error)
{
    int fd = vu_raw_handshake();
    struct npv_vu_dma_map m = {
        .argsz = sizeof(m), .flags = NPV_VU_DMA_FLAG_READ, .address = 0x200000, .size = 0x20000};
    struct npv_vu_msg rep;
    ck_assert_int_eq(vu_raw_xfer(fd, NPV_VU_CMD_DMA_MAP, &m, sizeof(m), NULL, 0, &rep), 0);
    npv_vu_msg_release(&rep);
    struct npv_vu_dma_unmap u = {.argsz = sizeof(u), .address = 0x200000, .size = 0x10000};
    vu_raw_expect_error(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), ENOENT);
    u = (struct npv_vu_dma_unmap){.argsz = sizeof(u), .address = 0x201000, .size = 0x20000};
    vu_raw_expect_error(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), ENOENT);
    u = (struct npv_vu_dma_unmap){.argsz = sizeof(u), .address = 0x200000, .size = 0x20000};
    ck_assert_int_eq(vu_raw_xfer(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), NULL, 0, &rep), 0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    npv_vu_msg_release(&rep);
    vu_raw_expect_error(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), ENOENT);
    close(fd);
    vu_hostile_well_formed_client_is_served();
}
END_TEST

START_TEST(unknown_command_is_enosys)
{
    int fd = vu_raw_handshake();
    vu_raw_expect_error(fd, 200, NULL, 0, ENOSYS);
    close(fd);
}
END_TEST

START_TEST(dma_unmap_all_drops_every_mapping)
{
    int fd = vu_raw_handshake();
    for (uint64_t i = 0; i < 3; i++)
        vu_raw_dma_map_nofd(fd, 0x100000 + i * 0x10000, 0x10000);
    struct npv_vu_dma_unmap u = {.argsz = sizeof(u), .flags = NPV_VU_DMA_UNMAP_FLAG_ALL};
    struct npv_vu_msg rep;
    ck_assert_int_eq(vu_raw_xfer(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), NULL, 0, &rep), 0);
    ck_assert_msg(!(rep.hdr.flags & NPV_VU_F_ERROR), "unmap all: error %u", rep.hdr.error);
    npv_vu_msg_release(&rep);
    /* Gone: unmapping one is ENOENT, and the range can be mapped again. */
    u = (struct npv_vu_dma_unmap){.argsz = sizeof(u), .address = 0x110000, .size = 0x10000};
    vu_raw_expect_error(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), ENOENT);
    for (uint64_t i = 0; i < 3; i++)
        vu_raw_dma_map_nofd(fd, 0x100000 + i * 0x10000, 0x10000);
    close(fd);
}
END_TEST

START_TEST(unmap_all_with_a_range_or_dirty_bitmap_is_refused)
{
    int fd = vu_raw_handshake();
    vu_raw_dma_map_nofd(fd, 0x100000, 0x10000);
    struct npv_vu_dma_unmap u = {.argsz = sizeof(u),
                                 .flags = NPV_VU_DMA_UNMAP_FLAG_ALL,
                                 .address = 0x100000,
                                 .size = 0x10000};
    vu_raw_expect_error(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), EINVAL);
    u.flags = NPV_VU_DMA_UNMAP_FLAG_GET_DIRTY_BITMAP;
    vu_raw_expect_error(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), ENOTSUP);
    /* Still mapped after both refusals. */
    u.flags = 0;
    struct npv_vu_msg rep;
    ck_assert_int_eq(vu_raw_xfer(fd, NPV_VU_CMD_DMA_UNMAP, &u, sizeof(u), NULL, 0, &rep), 0);
    ck_assert(!(rep.hdr.flags & NPV_VU_F_ERROR));
    npv_vu_msg_release(&rep);
    close(fd);
}
END_TEST

START_TEST(device_feature_and_migration_are_enosys)
{
    int fd = vu_raw_handshake();
    uint8_t feature[16] = {0};
    vu_raw_expect_error(fd, NPV_VU_CMD_DEVICE_FEATURE, feature, sizeof(feature), ENOSYS);
    vu_raw_expect_error(fd, NPV_VU_CMD_MIG_DATA_READ, feature, sizeof(feature), ENOSYS);
    vu_raw_expect_error(fd, NPV_VU_CMD_MIG_DATA_WRITE, feature, sizeof(feature), ENOSYS);
    /* Not negotiated by this client ("write_multiple" left out): refused as before. */
    vu_raw_expect_error(fd, NPV_VU_CMD_REGION_WRITE_MULTI, feature, sizeof(feature), ENOSYS);
    close(fd);
    vu_hostile_well_formed_client_is_served();
}
END_TEST

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
        int fd = vu_raw_handshake_with(cases[i].json, &caps, &rep);
        ck_assert_msg((caps.present & ~cases[i].proposed) == 0,
                      "case %zu: reply names keys 0x%x, proposal 0x%x", i, caps.present,
                      cases[i].proposed);
        ck_assert_uint_eq(rep.nr_fds, 0);
        if (cases[i].proposed & NPV_VU_CAP_WRITE_MULTIPLE)
            ck_assert(caps.write_multiple); /* REGION_WRITE_MULTI is served when asked for */
        if (cases[i].proposed & NPV_VU_CAP_MAX_DMA_MAPS)
            ck_assert_uint_le(caps.max_dma_maps, 10);
        npv_vu_msg_release(&rep);
        close(fd);
    }
    vu_hostile_well_formed_client_is_served();
}
END_TEST

void vu_hostile_add_cases(TCase *tc)
{
    tcase_add_checked_fixture(tc, vu_hostile_start, vu_hostile_stop);
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
    tcase_add_test(tc, dma_map_past_the_end_of_its_file_is_refused);
    tcase_add_test(tc, unknown_command_is_enosys);
    tcase_add_test(tc, dma_unmap_all_drops_every_mapping);
    tcase_add_test(tc, unmap_all_with_a_range_or_dirty_bitmap_is_refused);
    tcase_add_test(tc, device_feature_and_migration_are_enosys);
    tcase_add_test(tc, version_reply_names_only_capabilities_the_client_proposed);
}
