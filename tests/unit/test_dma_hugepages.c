/* SPDX-License-Identifier: MIT */
/*
 * npv_dma on 2 MiB hugepages. As root it reserves a few pages through
 * /proc/sys/vm/nr_hugepages and gives them back afterwards: in the parent
 * process (Check forks each test), at exit and on SIGTERM/SIGINT/SIGHUP, so
 * a failing or crashing test does not leave the host's pool changed.
 * Skips (77) when not root or when the kernel cannot find the pages.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <sys/vfs.h>

#include <npuvfio/dma.h>
#include <npuvfio/domain.h>

#include "dma_test_util.h"
#include "domain_internal.h"
#include "fake_sink.h"

#define MB              (1ul << 20)
#define NR_PAGES_WANTED 4
#define HUGETLBFS_MAGIC 0x958458f6
#define NR_HUGEPAGES    "/proc/sys/vm/nr_hugepages"

static long saved_nr = -1;
/* Check forks each test (and its children call exit): only the runner gives the pages back. */
static pid_t owner;

static long read_nr(void)
{
    FILE *f = fopen(NR_HUGEPAGES, "re");
    long n = -1;
    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld", &n) != 1)
        n = -1;
    fclose(f);
    return n;
}

static int write_nr(long n)
{
    FILE *f = fopen(NR_HUGEPAGES, "we");
    if (f == NULL)
        return -1;
    int ok = fprintf(f, "%ld\n", n) > 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static void restore_pool(void)
{
    if (saved_nr >= 0 && getpid() == owner) {
        write_nr(saved_nr);
        saved_nr = -1;
    }
}

static void restore_on_signal(int sig)
{
    restore_pool();
    signal(sig, SIG_DFL);
    raise(sig);
}

static struct npv_ctx *ctx;
static struct log_capture logs;

static void setup(void)
{
    memset(&logs, 0, sizeof(logs));
    ck_assert_int_eq(npv_ctx_new(&ctx), 0);
    npv_ctx_set_log_sink(ctx, capture_log, &logs);
}

static void teardown(void)
{
    npv_ctx_free(ctx);
}

START_TEST(dma_uses_2m_hugepages_when_reserved)
{
    struct npv_dma_opts o = {.page = NPV_DMA_PAGE_2M, .numa_node = -1, .require_page = 1};
    struct npv_dma *d;
    ck_assert_int_eq(npv_dma_alloc(ctx, 3 * MB, &o, &d), 0);
    ck_assert_uint_eq(npv_dma_page_size(d), 2 * MB);
    ck_assert_uint_eq(npv_dma_size(d), 4 * MB);
    struct statfs st;
    ck_assert_int_eq(fstatfs(npv_dma_fd(d), &st), 0);
    ck_assert_uint_eq((unsigned long)st.f_type, HUGETLBFS_MAGIC);
    memset(npv_dma_vaddr(d), 0x3c, npv_dma_size(d));
    ck_assert_uint_eq(logs.warns, 0);
    npv_dma_free(d);
}
END_TEST

START_TEST(dma_auto_uses_2m_hugepages_from_1m_up)
{
    struct npv_dma *d;
    ck_assert_int_eq(npv_dma_alloc(ctx, MB + MB / 2, NULL, &d), 0);
    ck_assert_uint_eq(npv_dma_page_size(d), 2 * MB);
    ck_assert_uint_eq(npv_dma_size(d), 2 * MB);
    ck_assert_uint_eq(logs.warns, 0);
    npv_dma_free(d);
}
END_TEST

START_TEST(dma_hugepage_buffer_maps_at_2m_aligned_iova)
{
    struct npv_domain *dom;
    struct npv_domain_opts o = {.aperture_start = 0x1000, .aperture_last = 0xffffffff};
    ck_assert_int_eq(npv_domain_new(ctx, &o, &dom), 0);
    struct fake_sink f;
    fake_sink_init(&f, 1);
    ck_assert_int_eq(npv_domain_add_sink(dom, &f.sink), 0);
    struct npv_dma_opts small = {.page = NPV_DMA_PAGE_4K, .numa_node = -1};
    struct npv_dma_opts huge = {.page = NPV_DMA_PAGE_2M, .numa_node = -1, .require_page = 1};
    struct npv_dma *s, *h;
    ck_assert_int_eq(npv_dma_alloc(ctx, 4096, &small, &s), 0);
    ck_assert_int_eq(npv_dma_alloc(ctx, 2 * MB, &huge, &h), 0);
    npv_iova_t is, ih;
    ck_assert_int_eq(npv_dma_map(s, dom, NPV_DMA_RW, &is), 0);
    ck_assert_int_eq(npv_dma_map(h, dom, NPV_DMA_RW, &ih), 0);
    ck_assert_uint_eq(ih % (2 * MB), 0);
    ck_assert_int_eq(fake_sink_find(&f, ih)->fd, npv_dma_fd(h));
    npv_dma_free(h);
    npv_dma_free(s);
    ck_assert_uint_eq(f.nr_live, 0);
    npv_domain_remove_sink(dom, &f.sink, true);
    npv_domain_put(dom);
}
END_TEST

/* Another allocator's hugepages, anonymous (no fd) or in a hugetlb memfd: 2 MiB-aligned IOVAs. */
START_TEST(wrapped_hugepages_map_at_2m_aligned_iova)
{
    struct npv_domain *dom;
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
    struct fake_sink f;
    fake_sink_init(&f, 1);
    ck_assert_int_eq(npv_domain_add_sink(dom, &f.sink), 0);
    /* A 4 KiB buffer first, so the next free IOVA is not 2 MiB-aligned by chance. */
    struct npv_dma_opts small = {.page = NPV_DMA_PAGE_4K, .numa_node = -1};
    struct npv_dma *s;
    ck_assert_int_eq(npv_dma_alloc(ctx, 4096, &small, &s), 0);
    ck_assert_int_eq(npv_dma_map(s, dom, NPV_DMA_RW, NULL), 0);

    void *anon = mmap(NULL, 2 * MB, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    ck_assert_ptr_ne(anon, MAP_FAILED);
    int fd = memfd_create("other-allocator", MFD_CLOEXEC | MFD_HUGETLB | MFD_HUGE_2MB);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, 2 * MB), 0);
    void *file = mmap(NULL, 2 * MB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(file, MAP_FAILED);
    struct npv_dma *a, *b;
    ck_assert_int_eq(npv_dma_wrap(ctx, anon, 2 * MB, -1, 0, 0, &a), 0);
    ck_assert_int_eq(npv_dma_wrap(ctx, file, 2 * MB, fd, 0, 0, &b), 0);
    ck_assert_uint_eq(npv_dma_page_size(a), 2 * MB);
    ck_assert_uint_eq(npv_dma_page_size(b), 2 * MB);
    npv_iova_t ia, ib;
    ck_assert_int_eq(npv_dma_map(a, dom, NPV_DMA_RW, &ia), 0);
    ck_assert_int_eq(npv_dma_map(b, dom, NPV_DMA_RW, &ib), 0);
    ck_assert_uint_eq(ia % (2 * MB), 0);
    ck_assert_uint_eq(ib % (2 * MB), 0);
    /* Half of a huge page cannot map as one: 4 KiB alignment then. */
    struct npv_dma *half;
    ck_assert_int_eq(npv_dma_wrap(ctx, anon, MB, -1, 0, 0, &half), 0);
    ck_assert_uint_eq(npv_dma_page_size(half), 4096);
    npv_dma_free(half);
    npv_dma_free(a);
    npv_dma_free(b);
    npv_dma_free(s);
    ck_assert_uint_eq(f.nr_live, 0);
    munmap(file, 2 * MB);
    munmap(anon, 2 * MB);
    close(fd);
    npv_domain_remove_sink(dom, &f.sink, true);
    npv_domain_put(dom);
}
END_TEST

static Suite *hugepage_suite(void)
{
    Suite *s = suite_create("dma_hugepages");
    TCase *tc = tcase_create("hugepages");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, dma_uses_2m_hugepages_when_reserved);
    tcase_add_test(tc, dma_auto_uses_2m_hugepages_from_1m_up);
    tcase_add_test(tc, dma_hugepage_buffer_maps_at_2m_aligned_iova);
    tcase_add_test(tc, wrapped_hugepages_map_at_2m_aligned_iova);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "SKIP unit_dma_hugepages: reserving hugepages through %s needs root\n",
                NR_HUGEPAGES);
        return 77;
    }
    owner = getpid();
    long old = read_nr();
    if (old < 0) {
        fprintf(stderr, "SKIP unit_dma_hugepages: cannot read %s\n", NR_HUGEPAGES);
        return 77;
    }
    saved_nr = old;
    atexit(restore_pool);
    signal(SIGTERM, restore_on_signal);
    signal(SIGINT, restore_on_signal);
    signal(SIGHUP, restore_on_signal);
    if (write_nr(old + NR_PAGES_WANTED) != 0 || free_2m_hugepages() < NR_PAGES_WANTED) {
        fprintf(stderr,
                "SKIP unit_dma_hugepages: the kernel could not reserve %d free 2 MiB hugepages "
                "(pool %ld -> %ld, %ld free); memory may be too fragmented\n",
                NR_PAGES_WANTED, old, read_nr(), free_2m_hugepages());
        restore_pool();
        return 77;
    }
    printf("unit_dma_hugepages: pool %ld -> %ld pages, restored at exit\n", old, read_nr());
    SRunner *sr = srunner_create(hugepage_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    restore_pool();
    if (read_nr() != old)
        fprintf(stderr, "unit_dma_hugepages: WARNING: the pool is %ld, not %ld as before\n",
                read_nr(), old);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
