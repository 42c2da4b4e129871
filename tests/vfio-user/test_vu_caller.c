/* SPDX-License-Identifier: MIT */
/*
 * Memory the caller owns (npv_dma_wrap) reaches the testdev model in another
 * process through the file passed with DMA_MAP: the model reads and writes
 * the caller's pages themselves. Anonymous private memory has no file and is
 * refused. And nothing here pins: RLIMIT_MEMLOCK does not limit vfio-user.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "harness.h"

#define PG 4096u

static struct vu_server srv;
static struct td t;
static char last_error[1024];

static void keep_errors(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    if (level == NPV_LOG_ERROR)
        snprintf(last_error, sizeof(last_error), "%s", msg);
}

static void setup(void)
{
    last_error[0] = '\0';
    vu_server_start(&srv, vu_serve_testdev, NULL);
    td_open(&t, srv.path);
    npv_ctx_set_log_sink(t.ctx, keep_errors, NULL);
}

static void teardown(void)
{
    td_close(&t);
    vu_server_kill(&srv);
}

/* One job; it ends with the device's error word want_error (NONE: success). */
static void run(struct npv_testdev_desc d, uint32_t want_error)
{
    struct npv_cpl cpl;
    td_submit(&t, &d);
    ck_assert_int_eq(td_wait(&t, GENEROUS_NS, &cpl), 0);
    ck_assert_int_eq(cpl.status, want_error == NPV_TESTDEV_ERR_NONE ? 0 : -EIO);
    ck_assert_uint_eq(cpl.dev_error, want_error);
}

START_TEST(model_reads_and_writes_caller_memfd_memory_at_its_offset)
{
    int fd = memfd_create("tensor", MFD_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, 8 * PG), 0);
    uint8_t *map = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(map, MAP_FAILED);
    /* Two buffers in one file: pages 2-3 (source) and 5-6 (destination). */
    struct npv_dma *src, *dst;
    ck_assert_int_eq(npv_dma_wrap(t.ctx, map + 2 * PG, 2 * PG, fd, 2 * PG, 0, &src), 0);
    ck_assert_int_eq(npv_dma_wrap(t.ctx, map + 5 * PG, 2 * PG, fd, 5 * PG, 0, &dst), 0);
    close(fd);
    npv_iova_t s_iova, d_iova;
    ck_assert_int_eq(npv_dma_map(src, t.dom, NPV_DMA_READ, &s_iova), 0);
    ck_assert_int_eq(npv_dma_map(dst, t.dom, NPV_DMA_WRITE, &d_iova), 0);
    for (unsigned i = 0; i < 2 * PG; i++)
        map[2 * PG + i] = (uint8_t)(i * 13 + 1);
    memset(map + 4 * PG, 0xee, PG); /* the page between: must stay untouched */
    td_enable(&t, 0);
    run(npv_testdev_copy(d_iova, s_iova, 2 * PG, 0), NPV_TESTDEV_ERR_NONE);
    ck_assert_int_eq(memcmp(map + 5 * PG, map + 2 * PG, 2 * PG), 0);
    ck_assert_uint_eq(map[4 * PG], 0xee);
    ck_assert_uint_eq(map[5 * PG - 1], 0xee);
    /* The mapping's bounds hold: a DMA one byte past the destination faults. */
    run(npv_testdev_fill(d_iova + PG, 0x99, PG + 1, 0), NPV_TESTDEV_ERR_DMA);
    ck_assert_uint_ne(map[7 * PG], 0x99);
    npv_dma_free(src);
    npv_dma_free(dst);
    munmap(map, 8 * PG);
}
END_TEST

START_TEST(model_writes_through_a_caller_file_mapping_found_by_the_library)
{
    char path[] = "/tmp/npv-caller-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, 4 * PG), 0);
    uint8_t *map = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(map, MAP_FAILED);
    /* No fd named: the library finds the file behind the shared mapping. */
    struct npv_dma *buf;
    ck_assert_int_eq(npv_dma_wrap(t.ctx, map, 4 * PG, -1, 0, NPV_DMA_WRAP_FIND_FILE, &buf), 0);
    ck_assert_int_ge(npv_dma_fd(buf), 0);
    npv_iova_t iova;
    ck_assert_int_eq(npv_dma_map(buf, t.dom, NPV_DMA_RW, &iova), 0);
    td_enable(&t, 0);
    run(npv_testdev_fill(iova + PG, 0x5c, 2 * PG, 0), NPV_TESTDEV_ERR_NONE);
    /* Seen through our mapping and in the file itself. */
    ck_assert_uint_eq(map[PG], 0x5c);
    ck_assert_uint_eq(map[3 * PG - 1], 0x5c);
    ck_assert_uint_eq(map[0], 0);
    uint8_t b = 0;
    ck_assert_int_eq(pread(fd, &b, 1, 2 * PG), 1);
    ck_assert_uint_eq(b, 0x5c);
    npv_dma_free(buf);
    munmap(map, 4 * PG);
    close(fd);
    unlink(path);
}
END_TEST

START_TEST(anonymous_heap_memory_is_refused_with_its_own_error)
{
    uint8_t *heap = aligned_alloc(PG, 2 * PG);
    ck_assert_ptr_nonnull(heap);
    struct npv_dma *buf;
    ck_assert_int_eq(npv_dma_wrap(t.ctx, heap, 2 * PG, -1, 0, 0, &buf), 0);
    size_t before = npv_domain_mapping_count(t.dom);
    ck_assert_int_eq(npv_dma_map(buf, t.dom, NPV_DMA_RW, NULL), -NPV_ENOTSHARED);
    ck_assert_ptr_nonnull(strstr(last_error, "no file behind it"));
    ck_assert_ptr_nonnull(strstr(last_error, "another process"));
    ck_assert_uint_eq(npv_domain_mapping_count(t.dom), before);
    /* The device keeps working on the domain's other mappings. */
    td_enable(&t, 0);
    run(npv_testdev_nop(0), NPV_TESTDEV_ERR_NONE);
    npv_dma_free(buf);
    free(heap);
}
END_TEST

START_TEST(attach_to_a_domain_holding_anonymous_memory_is_refused)
{
    struct npv_domain *other;
    ck_assert_int_eq(npv_domain_new(t.ctx, NULL, &other), 0);
    uint8_t *heap = aligned_alloc(PG, PG);
    ck_assert_ptr_nonnull(heap);
    struct npv_dma *buf;
    ck_assert_int_eq(npv_dma_wrap(t.ctx, heap, PG, -1, 0, 0, &buf), 0);
    ck_assert_int_eq(npv_dma_map(buf, other, NPV_DMA_RW, NULL), 0);
    ck_assert_int_eq(npv_dev_attach(t.dev, other), -NPV_ENOTSHARED);
    ck_assert_ptr_nonnull(strstr(last_error, "anonymous private memory"));
    /* Still in its domain, still working. */
    ck_assert_ptr_eq(npv_dev_domain(t.dev), t.dom);
    td_enable(&t, 0);
    run(npv_testdev_nop(0), NPV_TESTDEV_ERR_NONE);
    npv_dma_free(buf);
    npv_domain_put(other);
    free(heap);
}
END_TEST

/* Pages of [p, p+len) resident now (for shared memory: in the page cache). */
static size_t resident_pages(void *p, size_t len)
{
    size_t n = len / PG, count = 0;
    unsigned char *vec = calloc(n, 1);
    ck_assert_ptr_nonnull(vec);
    ck_assert_int_eq(mincore(p, len, vec), 0);
    for (size_t i = 0; i < n; i++)
        count += vec[i] & 1;
    free(vec);
    return count;
}

START_TEST(sparse_buffer_above_4_gib_costs_only_the_pages_the_model_touches)
{
    const size_t len = 5ull << 30;
    struct npv_dma_opts o = {.page = NPV_DMA_PAGE_AUTO, .numa_node = -1, .flags = NPV_DMA_SPARSE};
    struct npv_dma *buf;
    ck_assert_int_eq(npv_dma_alloc(t.ctx, len, &o, &buf), 0);
    npv_iova_t iova;
    ck_assert_int_eq(npv_dma_map(buf, t.dom, NPV_DMA_RW, &iova), 0);
    uint8_t *p = npv_dma_vaddr(buf);
    ck_assert_uint_eq(resident_pages(p, len), 0);
    /* One page beyond 4 GiB, written by the model in its own process. */
    const size_t off = (4ull << 30) + 123 * PG;
    td_enable(&t, 0);
    run(npv_testdev_fill(iova + off, 0x6b, PG, 0), NPV_TESTDEV_ERR_NONE);
    ck_assert_uint_eq(resident_pages(p, len), 1);
    ck_assert_uint_eq(p[off], 0x6b);
    ck_assert_uint_eq(p[off + PG - 1], 0x6b);
    npv_dma_free(buf);
}
END_TEST

/* The kernel enforces RLIMIT_MEMLOCK only without CAP_IPC_LOCK (root has it). */
static int drop_cap_ipc_lock(void)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    if (syscall(SYS_capget, &hdr, data) != 0)
        return -1;
    unsigned i = CAP_TO_INDEX(CAP_IPC_LOCK), bit = CAP_TO_MASK(CAP_IPC_LOCK);
    data[i].effective &= ~bit;
    data[i].permitted &= ~bit;
    data[i].inheritable &= ~bit;
    return (int)syscall(SYS_capset, &hdr, data);
}

START_TEST(dma_above_the_memlock_limit_maps_over_vfio_user)
{
    /* Irreversible for this process: only where Check runs each test in its own. */
    const char *fork_mode = getenv("CK_FORK");
    if (fork_mode != NULL && strcmp(fork_mode, "no") == 0)
        return;
    ck_assert_int_eq(drop_cap_ipc_lock(), 0);
    struct rlimit rl = {.rlim_cur = 256 * 1024, .rlim_max = 256 * 1024};
    ck_assert_int_eq(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
    const size_t len = 4u << 20;
    struct npv_dma_opts o = {.page = NPV_DMA_PAGE_4K, .numa_node = -1};
    struct npv_dma *buf;
    ck_assert_int_eq(npv_dma_alloc(t.ctx, len, &o, &buf), 0);
    npv_iova_t iova;
    ck_assert_int_eq(npv_dma_map(buf, t.dom, NPV_DMA_RW, &iova), 0);
    td_enable(&t, 0);
    run(npv_testdev_fill(iova + len - PG, 0x3d, PG, 0), NPV_TESTDEV_ERR_NONE);
    ck_assert_uint_eq(((uint8_t *)npv_dma_vaddr(buf))[len - 1], 0x3d);
    npv_dma_free(buf);
}
END_TEST

static Suite *caller_suite(void)
{
    Suite *s = suite_create("vfio_user_caller");
    TCase *tc = tcase_create("caller");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, model_reads_and_writes_caller_memfd_memory_at_its_offset);
    tcase_add_test(tc, model_writes_through_a_caller_file_mapping_found_by_the_library);
    tcase_add_test(tc, anonymous_heap_memory_is_refused_with_its_own_error);
    tcase_add_test(tc, attach_to_a_domain_holding_anonymous_memory_is_refused);
    tcase_add_test(tc, dma_above_the_memlock_limit_maps_over_vfio_user);
    tcase_add_test(tc, sparse_buffer_above_4_gib_costs_only_the_pages_the_model_touches);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(caller_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
