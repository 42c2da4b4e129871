/* SPDX-License-Identifier: MIT */
/* npv_dma over memory the caller owns (npv_dma_wrap), and sparse allocations. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <npuvfio/dma.h>
#include <npuvfio/domain.h>

#include "dma_test_util.h"
#include "domain_internal.h"
#include "fake_sink.h"

#define PG 4096ul

static struct npv_ctx *ctx;
static struct npv_domain *dom;
static struct fake_sink kernel;
static struct log_capture logs;

static void setup(void)
{
    memset(&logs, 0, sizeof(logs));
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    npv_ctx_set_log_sink(ctx, capture_log, &logs);
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
    fake_sink_init(&kernel, 1);
    ck_assert_int_eq(npv_domain_add_sink(dom, &kernel.sink), 0);
}

static void teardown(void)
{
    npv_domain_remove_sink(dom, &kernel.sink, true);
    npv_domain_put(dom);
    npv_ctx_free(ctx);
}

/* Pages of [p, p+len) resident now, by mincore. */
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

START_TEST(wrap_maps_a_heap_buffer_in_place)
{
    uint8_t *heap = aligned_alloc(PG, 4 * PG);
    ck_assert_ptr_nonnull(heap);
    memset(heap, 0x33, 4 * PG);
    struct npv_dma *d;
    ck_assert_int_eq(npv_dma_wrap(ctx, heap, 4 * PG, -1, 0, 0, &d), 0);
    ck_assert_ptr_eq(npv_dma_vaddr(d), heap);
    ck_assert_uint_eq(npv_dma_size(d), 4 * PG);
    ck_assert_uint_eq(npv_dma_page_size(d), PG);
    ck_assert_int_eq(npv_dma_fd(d), -1);
    npv_iova_t iova;
    ck_assert_int_eq(npv_dma_map(d, dom, NPV_DMA_RW, &iova), 0);
    /* The IOMMU gets the caller's pages themselves: no copy in between. */
    const struct npv_mapping *m = fake_sink_find(&kernel, iova);
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_eq(m->vaddr, heap);
    ck_assert_uint_eq(m->len, 4 * PG);
    ck_assert_int_eq(m->fd, -1);
    npv_iova_t back;
    ck_assert_int_eq(npv_domain_vaddr_to_iova(dom, heap + PG + 5, &back), 0);
    ck_assert_uint_eq(back, iova + PG + 5);
    npv_dma_free(d);
    ck_assert_uint_eq(kernel.nr_live, 0);
    /* The memory is the caller's: still there, still theirs. */
    ck_assert_uint_eq(heap[4 * PG - 1], 0x33);
    heap[0] = 1;
    free(heap);
}
END_TEST

START_TEST(wrap_passes_the_callers_file_and_offset)
{
    int fd = memfd_create("caller", MFD_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, 8 * PG), 0);
    uint8_t *map = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(map, MAP_FAILED);
    struct npv_dma *d;
    /* The second half of the file, mapped at map + 4 pages. */
    ck_assert_int_eq(npv_dma_wrap(ctx, map + 4 * PG, 4 * PG, fd, 4 * PG, 0, &d), 0);
    /* A duplicate: the caller may close theirs. */
    ck_assert_int_ge(npv_dma_fd(d), 0);
    ck_assert_int_ne(npv_dma_fd(d), fd);
    ck_assert_int_eq(close(fd), 0);
    npv_iova_t iova;
    ck_assert_int_eq(npv_dma_map(d, dom, NPV_DMA_READ, &iova), 0);
    const struct npv_mapping *m = fake_sink_find(&kernel, iova);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->fd, npv_dma_fd(d));
    ck_assert_uint_eq(m->fd_offset, 4 * PG);
    /* The fd reaches the very pages at vaddr: what a server would map. */
    map[4 * PG + 7] = 0x77;
    uint8_t *other = mmap(NULL, PG, PROT_READ, MAP_SHARED, m->fd, (off_t)m->fd_offset);
    ck_assert_ptr_ne(other, MAP_FAILED);
    ck_assert_uint_eq(other[7], 0x77);
    munmap(other, PG);
    int before = count_fds();
    npv_dma_free(d);
    ck_assert_int_eq(count_fds(), before - 1);
    munmap(map, 8 * PG);
}
END_TEST

START_TEST(wrap_refuses_unaligned_or_bad_arguments)
{
    uint8_t *heap = aligned_alloc(PG, 2 * PG);
    ck_assert_ptr_nonnull(heap);
    struct npv_dma *d = NULL;
    /* A partial page would show the device its neighbours. */
    ck_assert_int_eq(npv_dma_wrap(ctx, heap + 16, PG, -1, 0, 0, &d), -EINVAL);
    ck_assert_ptr_nonnull(strstr(logs.last_error, "aligned"));
    ck_assert_int_eq(npv_dma_wrap(ctx, heap, PG + 1, -1, 0, 0, &d), -EINVAL);
    ck_assert_int_eq(npv_dma_wrap(ctx, heap, PG, 0, 100, 0, &d), -EINVAL);
    ck_assert_int_eq(npv_dma_wrap(ctx, heap, 0, -1, 0, 0, &d), -EINVAL);
    ck_assert_int_eq(npv_dma_wrap(ctx, NULL, PG, -1, 0, 0, &d), -EINVAL);
    ck_assert_int_eq(npv_dma_wrap(ctx, heap, PG, -1, 0, 1u << 31, &d), -EINVAL);
    ck_assert_int_eq(npv_dma_wrap(ctx, heap, PG, -7, 0, 0, &d), -EINVAL);
    ck_assert_int_eq(npv_dma_wrap(ctx, heap, PG, 1 << 30, 0, 0, &d), -EBADF);
    ck_assert_ptr_null(d);
    free(heap);
}
END_TEST

START_TEST(wrap_without_fd_is_refused_where_only_an_fd_reaches)
{
    struct fake_sink server;
    fake_sink_init(&server, -1);
    server.sink.ops = &fake_sink_ops_other;
    server.sink.shares_by_fd = true;
    ck_assert_int_eq(npv_domain_add_sink(dom, &server.sink), 0);
    uint8_t *heap = aligned_alloc(PG, PG);
    ck_assert_ptr_nonnull(heap);
    struct npv_dma *d;
    ck_assert_int_eq(npv_dma_wrap(ctx, heap, PG, -1, 0, 0, &d), 0);
    ck_assert_int_eq(npv_dma_map(d, dom, NPV_DMA_RW, NULL), -NPV_ENOTSHARED);
    ck_assert_ptr_nonnull(strstr(npv_strerror(-NPV_ENOTSHARED), "no file behind it"));
    ck_assert_ptr_nonnull(strstr(logs.last_error, "anonymous private memory"));
    ck_assert_uint_eq(server.map_calls + kernel.map_calls, 0);
    npv_iova_t iova;
    ck_assert_int_eq(npv_dma_iova(d, dom, &iova), -ENOENT);
    npv_dma_free(d);
    free(heap);
    npv_domain_remove_sink(dom, &server.sink, true);
}
END_TEST

/* A named file of pages pages in /tmp, unlinked at the end by the caller. */
static int tmp_file(char *path, size_t pages)
{
    strcpy(path, "/tmp/npv-wrap-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)(pages * PG)), 0);
    return fd;
}

static uint64_t inode_of(int fd)
{
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    return (uint64_t)st.st_ino;
}

START_TEST(wrap_refuses_an_fd_that_is_not_the_memory_at_vaddr)
{
    int a = memfd_create("a", MFD_CLOEXEC), b = memfd_create("b", MFD_CLOEXEC);
    ck_assert_int_ge(a, 0);
    ck_assert_int_ge(b, 0);
    ck_assert_int_eq(ftruncate(a, 4 * PG), 0);
    ck_assert_int_eq(ftruncate(b, 4 * PG), 0);
    uint8_t *map = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, a, 0);
    ck_assert_ptr_ne(map, MAP_FAILED);
    struct npv_dma *d = NULL;
    /* Another file, the right file at the wrong offset: a server would see other bytes. */
    ck_assert_int_eq(npv_dma_wrap(ctx, map, 2 * PG, b, 0, 0, &d), -EINVAL);
    ck_assert_ptr_nonnull(strstr(logs.last_error, "is not the memory at"));
    ck_assert_int_eq(npv_dma_wrap(ctx, map + PG, PG, a, 0, 0, &d), -EINVAL);
    /* Anonymous memory has no file at all. */
    uint8_t *heap = aligned_alloc(PG, PG);
    ck_assert_ptr_nonnull(heap);
    ck_assert_int_eq(npv_dma_wrap(ctx, heap, PG, a, 0, 0, &d), -EINVAL);
    free(heap);
    /* Memory no longer mapped. */
    ck_assert_int_eq(munmap(map + 2 * PG, 2 * PG), 0);
    ck_assert_int_eq(npv_dma_wrap(ctx, map, 4 * PG, a, 0, 0, &d), -EFAULT);
    ck_assert_ptr_null(d);
    ck_assert_int_eq(npv_dma_wrap(ctx, map + PG, PG, a, PG, 0, &d), 0);
    npv_dma_free(d);
    munmap(map, 2 * PG);
    close(a);
    close(b);
}
END_TEST

START_TEST(wrap_finds_the_named_file_behind_a_shared_mapping)
{
    char path[32];
    int fd = tmp_file(path, 4);
    uint8_t *map = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 2 * PG);
    ck_assert_ptr_ne(map, MAP_FAILED);
    struct npv_dma *d;
    ck_assert_int_eq(npv_dma_wrap(ctx, map + PG, PG, -1, 0, NPV_DMA_WRAP_FIND_FILE, &d), 0);
    ck_assert_int_ge(npv_dma_fd(d), 0);
    ck_assert_uint_eq(inode_of(npv_dma_fd(d)), inode_of(fd));
    npv_iova_t iova;
    ck_assert_int_eq(npv_dma_map(d, dom, NPV_DMA_RW, &iova), 0);
    ck_assert_uint_eq(fake_sink_find(&kernel, iova)->fd_offset, 3 * PG);
    /* Opened for writing: the mapping is writable, and so is what a server maps. */
    ck_assert_int_eq(fcntl(npv_dma_fd(d), F_GETFL) & O_ACCMODE, O_RDWR);
    npv_dma_free(d);
    munmap(map, 2 * PG);
    unlink(path);
    close(fd);
}
END_TEST

/* CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE: what opening /proc/self/map_files takes. */
static bool may_open_map_files(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    ck_assert_ptr_nonnull(f);
    char line[256];
    unsigned long long eff = 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "CapEff: %llx", &eff) == 1)
            break;
    fclose(f);
    return ((eff >> 21) & 1) || ((eff >> 40) & 1);
}

START_TEST(wrap_finds_a_memfd_only_with_the_privilege_to_reopen_it)
{
    int fd = memfd_create("unnamed", MFD_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, 2 * PG), 0);
    uint8_t *map = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(map, MAP_FAILED);
    struct npv_dma *d;
    ck_assert_int_eq(npv_dma_wrap(ctx, map, 2 * PG, -1, 0, NPV_DMA_WRAP_FIND_FILE, &d), 0);
    if (may_open_map_files()) {
        /* Through /proc/self/map_files: the very file, though it has no name. */
        ck_assert_int_ge(npv_dma_fd(d), 0);
        ck_assert_uint_eq(inode_of(npv_dma_fd(d)), inode_of(fd));
    } else {
        ck_assert_int_eq(npv_dma_fd(d), -1);
        ck_assert_ptr_nonnull(strstr(logs.last_warn, "no name to reopen"));
    }
    npv_dma_free(d);
    munmap(map, 2 * PG);
    close(fd);
}
END_TEST

START_TEST(wrap_finds_no_file_behind_anonymous_or_private_memory_and_says_why)
{
    uint8_t *heap = aligned_alloc(PG, PG);
    ck_assert_ptr_nonnull(heap);
    struct npv_dma *d;
    ck_assert_int_eq(npv_dma_wrap(ctx, heap, PG, -1, 0, NPV_DMA_WRAP_FIND_FILE, &d), 0);
    ck_assert_int_eq(npv_dma_fd(d), -1);
    ck_assert_ptr_nonnull(strstr(logs.last_warn, "anonymous memory"));
    npv_dma_free(d);
    free(heap);

    char path[32];
    int fd = tmp_file(path, 1);
    uint8_t *priv = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    ck_assert_ptr_ne(priv, MAP_FAILED);
    ck_assert_int_eq(npv_dma_wrap(ctx, priv, PG, -1, 0, NPV_DMA_WRAP_FIND_FILE, &d), 0);
    ck_assert_int_eq(npv_dma_fd(d), -1);
    ck_assert_ptr_nonnull(strstr(logs.last_warn, "private"));
    npv_dma_free(d);
    munmap(priv, PG);

    /* Two files side by side: no one fd and offset describes the range. */
    char path2[32];
    int other = tmp_file(path2, 1);
    uint8_t *two = mmap(NULL, 2 * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(two, MAP_FAILED);
    ck_assert_ptr_eq(mmap(two, PG, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0), two);
    ck_assert_ptr_eq(mmap(two + PG, PG, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, other, 0),
                     two + PG);
    ck_assert_int_eq(npv_dma_wrap(ctx, two, 2 * PG, -1, 0, NPV_DMA_WRAP_FIND_FILE, &d), 0);
    ck_assert_int_eq(npv_dma_fd(d), -1);
    ck_assert_ptr_nonnull(strstr(logs.last_warn, "different files"));
    npv_dma_free(d);
    ck_assert_int_eq(npv_dma_wrap(ctx, two, 2 * PG, fd, 0, 0, &d), -EINVAL);
    munmap(two, 2 * PG);
    close(other);
    close(fd);
    unlink(path2);
    unlink(path);
}
END_TEST

START_TEST(sparse_allocation_faults_in_only_touched_pages)
{
    const size_t len = 64ul << 20;
    struct npv_dma_opts o = {.page = NPV_DMA_PAGE_AUTO, .numa_node = -1, .flags = NPV_DMA_SPARSE};
    struct npv_dma *d;
    ck_assert_int_eq(npv_dma_alloc(ctx, len, &o, &d), 0);
    /* AUTO would take 2 MiB pages at this size; sparse memory cannot be hugetlb. */
    ck_assert_uint_eq(npv_dma_page_size(d), PG);
    uint8_t *p = npv_dma_vaddr(d);
    ck_assert_uint_eq(resident_pages(p, len), 0);
    p[0] = 1;
    p[len / 2] = 2;
    ck_assert_uint_eq(resident_pages(p, len), 2);
    ck_assert_int_eq(npv_dma_map(d, dom, NPV_DMA_RW, NULL), 0);
    npv_dma_free(d);
    /* The default still pre-faults everything. */
    struct npv_dma_opts dense = {.page = NPV_DMA_PAGE_4K, .numa_node = -1};
    ck_assert_int_eq(npv_dma_alloc(ctx, 64 * PG, &dense, &d), 0);
    ck_assert_uint_eq(resident_pages(npv_dma_vaddr(d), 64 * PG), 64);
    npv_dma_free(d);
}
END_TEST

START_TEST(sparse_refuses_hugepages_and_unknown_flags)
{
    struct npv_dma *d = NULL;
    struct npv_dma_opts o = {.page = NPV_DMA_PAGE_2M, .numa_node = -1, .flags = NPV_DMA_SPARSE};
    ck_assert_int_eq(npv_dma_alloc(ctx, 2ul << 20, &o, &d), -EINVAL);
    o.page = NPV_DMA_PAGE_1G;
    ck_assert_int_eq(npv_dma_alloc(ctx, 2ul << 20, &o, &d), -EINVAL);
    o = (struct npv_dma_opts){.page = NPV_DMA_PAGE_4K, .numa_node = -1, .flags = 1u << 7};
    ck_assert_int_eq(npv_dma_alloc(ctx, PG, &o, &d), -EINVAL);
    ck_assert_ptr_null(d);
}
END_TEST

static Suite *caller_suite(void)
{
    Suite *s = suite_create("dma_caller");
    TCase *tc = tcase_create("dma_caller");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, wrap_maps_a_heap_buffer_in_place);
    tcase_add_test(tc, wrap_passes_the_callers_file_and_offset);
    tcase_add_test(tc, wrap_refuses_unaligned_or_bad_arguments);
    tcase_add_test(tc, wrap_without_fd_is_refused_where_only_an_fd_reaches);
    tcase_add_test(tc, wrap_refuses_an_fd_that_is_not_the_memory_at_vaddr);
    tcase_add_test(tc, wrap_finds_the_named_file_behind_a_shared_mapping);
    tcase_add_test(tc, wrap_finds_a_memfd_only_with_the_privilege_to_reopen_it);
    tcase_add_test(tc, wrap_finds_no_file_behind_anonymous_or_private_memory_and_says_why);
    tcase_add_test(tc, sparse_allocation_faults_in_only_touched_pages);
    tcase_add_test(tc, sparse_refuses_hugepages_and_unknown_flags);
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
