/* SPDX-License-Identifier: MIT */
/* npv_dma on 4 KiB pages: mapping into domains, limits, error paths (lib/dma.c). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <npuvfio/dma.h>
#include <npuvfio/domain.h>

#include "dma_test_util.h"
#include "domain_internal.h"
#include "fake_sink.h"
#include "memlock.h"

#define PG 4096ul

static struct npv_ctx *ctx;
static struct log_capture logs;
static const struct npv_dma_opts small = {.page = NPV_DMA_PAGE_4K, .numa_node = -1};

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

START_TEST(dma_free_null_is_noop)
{
    npv_dma_free(NULL);
}
END_TEST

START_TEST(dma_alloc_rejects_bad_arguments)
{
    struct npv_dma *d = NULL;
    struct npv_dma_opts bad_page = {.page = (enum npv_dma_page)9, .numa_node = -1};
    struct npv_dma_opts bad_node = {.page = NPV_DMA_PAGE_4K, .numa_node = -2};
    ck_assert_int_eq(npv_dma_alloc(ctx, 0, NULL, &d), -EINVAL);
    ck_assert_int_eq(npv_dma_alloc(ctx, PG, &bad_page, &d), -EINVAL);
    ck_assert_int_eq(npv_dma_alloc(ctx, PG, &bad_node, &d), -EINVAL);
    ck_assert_int_eq(npv_dma_alloc(NULL, PG, NULL, &d), -EINVAL);
    ck_assert_ptr_null(d);
}
END_TEST

START_TEST(dma_small_auto_buffer_uses_4k_pages_without_warning)
{
    struct npv_dma *d;
    ck_assert_int_eq(npv_dma_alloc(ctx, 5000, NULL, &d), 0);
    ck_assert_uint_eq(npv_dma_page_size(d), PG);
    ck_assert_uint_eq(npv_dma_size(d), 2 * PG);
    ck_assert_uint_eq(logs.warns, 0);
    npv_dma_free(d);
}
END_TEST

START_TEST(dma_memory_is_zeroed_and_shared_through_its_fd)
{
    struct npv_dma *d;
    ck_assert_int_eq(npv_dma_alloc(ctx, 3 * PG, &small, &d), 0);
    int fd = npv_dma_fd(d);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
    unsigned char *va = npv_dma_vaddr(d);
    for (size_t i = 0; i < npv_dma_size(d); i++)
        ck_assert_uint_eq(va[i], 0);
    /* What a vfio-user server does with the fd of DMA_MAP. */
    unsigned char *peer = mmap(NULL, 3 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(peer, MAP_FAILED);
    va[PG + 17] = 0xa5;
    ck_assert_uint_eq(peer[PG + 17], 0xa5);
    peer[2 * PG] = 0x5a;
    ck_assert_uint_eq(va[2 * PG], 0x5a);
    munmap(peer, 3 * PG);
    npv_dma_free(d);
}
END_TEST

START_TEST(dma_maps_one_buffer_into_two_domains)
{
    struct npv_domain *a, *b;
    struct npv_domain_opts oa = {.aperture_start = 0x100000, .aperture_last = 0xffffffff};
    struct npv_domain_opts ob = {.aperture_start = 0x80000000, .aperture_last = 0x8fffffff};
    ck_assert_int_eq(npv_domain_new(ctx, &oa, &a), 0);
    ck_assert_int_eq(npv_domain_new(ctx, &ob, &b), 0);
    struct fake_sink fa, fb;
    fake_sink_init(&fa, 1);
    fake_sink_init(&fb, -1);
    ck_assert_int_eq(npv_domain_add_sink(a, &fa.sink), 0);
    ck_assert_int_eq(npv_domain_add_sink(b, &fb.sink), 0);

    struct npv_dma *d;
    ck_assert_int_eq(npv_dma_alloc(ctx, 4 * PG, &small, &d), 0);
    npv_iova_t ia, ib, got;
    ck_assert_int_eq(npv_dma_map(d, a, NPV_DMA_RW, &ia), 0);
    ck_assert_int_eq(npv_dma_map(d, b, NPV_DMA_READ, &ib), 0);
    ck_assert_uint_ne(ia, ib);
    ck_assert_uint_ge(ib, 0x80000000);
    ck_assert_int_eq(npv_dma_iova(d, a, &got), 0);
    ck_assert_uint_eq(got, ia);
    ck_assert_int_eq(npv_dma_iova(d, b, &got), 0);
    ck_assert_uint_eq(got, ib);

    const struct npv_mapping *ma = fake_sink_find(&fa, ia);
    const struct npv_mapping *mb = fake_sink_find(&fb, ib);
    ck_assert_ptr_nonnull(ma);
    ck_assert_ptr_nonnull(mb);
    ck_assert_int_eq(ma->fd, npv_dma_fd(d));
    ck_assert_uint_eq(ma->fd_offset, 0);
    ck_assert_uint_eq(ma->len, 4 * PG);
    ck_assert_uint_eq(ma->prot, NPV_DMA_RW);
    ck_assert_uint_eq(mb->prot, NPV_DMA_READ);

    char *va = npv_dma_vaddr(d);
    ck_assert_int_eq(npv_domain_vaddr_to_iova(b, va + 100, &got), 0);
    ck_assert_uint_eq(got, ib + 100);
    void *back;
    ck_assert_int_eq(npv_domain_iova_to_vaddr(a, ia + PG, &back), 0);
    ck_assert_ptr_eq(back, va + PG);

    ck_assert_int_eq(npv_dma_unmap(d, a), 0);
    ck_assert_uint_eq(fa.nr_live, 0);
    ck_assert_uint_eq(fb.nr_live, 1);
    ck_assert_int_eq(npv_dma_iova(d, a, &got), -ENOENT);
    ck_assert_int_eq(npv_dma_unmap(d, a), -ENOENT);
    npv_dma_free(d);
    ck_assert_uint_eq(fb.nr_live, 0);
    npv_domain_remove_sink(a, &fa.sink, true);
    npv_domain_remove_sink(b, &fb.sink, true);
    npv_domain_put(a);
    npv_domain_put(b);
}
END_TEST

START_TEST(dma_free_unmaps_from_every_domain_it_keeps_alive)
{
    struct npv_domain *dom[3];
    struct fake_sink f[3];
    struct npv_dma *d;
    ck_assert_int_eq(npv_dma_alloc(ctx, PG, &small, &d), 0);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom[i]), 0);
        fake_sink_init(&f[i], 1);
        ck_assert_int_eq(npv_domain_add_sink(dom[i], &f[i].sink), 0);
        ck_assert_int_eq(npv_dma_map(d, dom[i], NPV_DMA_RW, NULL), 0);
        /* The caller lets go of its domain: the mapping holds it. */
        npv_domain_remove_sink(dom[i], &f[i].sink, false);
        npv_domain_put(dom[i]);
    }
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(f[i].nr_live, 1);
        ck_assert_uint_eq(npv_domain_mapping_count(dom[i]), 1);
    }
    /* Each domain is freed by the unmap (ASan reports a leak or a use after free). */
    npv_dma_free(d);
    ck_assert_uint_eq(logs.errors, 0);
}
END_TEST

START_TEST(dma_free_pushes_unmaps_to_attached_sinks)
{
    struct npv_domain *dom;
    struct fake_sink f1, f2;
    fake_sink_init(&f1, 1);
    fake_sink_init(&f2, 1);
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
    ck_assert_int_eq(npv_domain_add_sink(dom, &f1.sink), 0);
    ck_assert_int_eq(npv_domain_add_sink(dom, &f2.sink), 0);
    struct npv_dma *d1, *d2;
    ck_assert_int_eq(npv_dma_alloc(ctx, PG, &small, &d1), 0);
    ck_assert_int_eq(npv_dma_alloc(ctx, 2 * PG, &small, &d2), 0);
    ck_assert_int_eq(npv_dma_map(d1, dom, NPV_DMA_RW, NULL), 0);
    ck_assert_int_eq(npv_dma_map(d2, dom, NPV_DMA_RW, NULL), 0);
    ck_assert_uint_eq(f1.nr_live, 2);
    npv_dma_free(d1);
    ck_assert_uint_eq(f1.nr_live, 1);
    ck_assert_uint_eq(f2.nr_live, 1);
    npv_dma_free(d2);
    ck_assert_uint_eq(f1.nr_live, 0);
    ck_assert_uint_eq(f2.nr_live, 0);
    ck_assert_uint_eq(npv_domain_mapping_count(dom), 0);
    npv_domain_remove_sink(dom, &f1.sink, true);
    npv_domain_remove_sink(dom, &f2.sink, true);
    npv_domain_put(dom);
}
END_TEST

START_TEST(dma_map_refuses_a_second_mapping_and_bad_prot)
{
    struct npv_domain *dom;
    struct npv_dma *d;
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
    ck_assert_int_eq(npv_dma_alloc(ctx, PG, &small, &d), 0);
    ck_assert_int_eq(npv_dma_map(d, dom, 0, NULL), -EINVAL);
    ck_assert_int_eq(npv_dma_map(d, dom, 4, NULL), -EINVAL);
    ck_assert_int_eq(npv_dma_map(d, dom, NPV_DMA_WRITE, NULL), 0);
    ck_assert_int_eq(npv_dma_map(d, dom, NPV_DMA_WRITE, NULL), -EEXIST);
    ck_assert_int_eq(npv_dma_map_at(d, dom, 0x100000, NPV_DMA_RW), -EEXIST);
    ck_assert_uint_eq(npv_domain_mapping_count(dom), 1);
    npv_dma_free(d);
    npv_domain_put(dom);
}
END_TEST

START_TEST(dma_map_at_places_buffer_and_reports_conflicts)
{
    struct npv_domain *dom;
    struct npv_domain_opts o = {.aperture_start = 0x100000, .aperture_last = 0x1fffff};
    ck_assert_int_eq(npv_domain_new(ctx, &o, &dom), 0);
    struct npv_dma *d1, *d2;
    ck_assert_int_eq(npv_dma_alloc(ctx, 2 * PG, &small, &d1), 0);
    ck_assert_int_eq(npv_dma_alloc(ctx, PG, &small, &d2), 0);
    ck_assert_int_eq(npv_dma_map_at(d1, dom, 0x140000, NPV_DMA_RW), 0);
    npv_iova_t iova;
    ck_assert_int_eq(npv_dma_iova(d1, dom, &iova), 0);
    ck_assert_uint_eq(iova, 0x140000);
    ck_assert_int_eq(npv_dma_map_at(d2, dom, 0x141000, NPV_DMA_RW), -EBUSY);
    ck_assert_int_eq(npv_dma_map_at(d2, dom, 0x200000, NPV_DMA_RW), -ERANGE);
    ck_assert_int_eq(npv_dma_map_at(d2, dom, 0x150800, NPV_DMA_RW), -EINVAL);
    ck_assert_int_eq(npv_dma_iova(d2, dom, &iova), -ENOENT);
    ck_assert_int_eq(npv_dma_map_at(d2, dom, 0x142000, NPV_DMA_RW), 0);
    npv_dma_free(d1);
    npv_dma_free(d2);
    npv_domain_put(dom);
}
END_TEST

START_TEST(dma_map_at_iova_zero_is_refused)
{
    struct npv_domain *dom;
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
    struct npv_dma *d;
    ck_assert_int_eq(npv_dma_alloc(ctx, PG, &small, &d), 0);
    ck_assert_int_eq(npv_dma_map_at(d, dom, 0, NPV_DMA_RW), -ERANGE);
    npv_iova_t iova;
    ck_assert_int_eq(npv_dma_map(d, dom, NPV_DMA_RW, &iova), 0);
    ck_assert_uint_ge(iova, NPV_DOMAIN_IOVA_ZERO_GUARD);
    npv_dma_free(d);
    npv_domain_put(dom);
}
END_TEST

START_TEST(dma_map_into_full_domain_is_enospc_and_leaves_nothing)
{
    struct npv_domain *dom;
    struct npv_domain_opts o = {.aperture_start = 0x10000, .aperture_last = 0x13fff};
    ck_assert_int_eq(npv_domain_new(ctx, &o, &dom), 0);
    struct npv_dma *d;
    ck_assert_int_eq(npv_dma_alloc(ctx, 8 * PG, &small, &d), 0);
    npv_iova_t iova;
    ck_assert_int_eq(npv_dma_map(d, dom, NPV_DMA_RW, &iova), -ENOSPC);
    ck_assert_int_eq(npv_dma_iova(d, dom, &iova), -ENOENT);
    ck_assert_uint_eq(npv_domain_mapping_count(dom), 0);
    npv_dma_free(d);
    npv_domain_put(dom);
}
END_TEST

START_TEST(dma_map_failing_in_a_sink_leaves_buffer_unmapped)
{
    struct npv_domain *dom;
    struct fake_sink ok, bad;
    fake_sink_init(&ok, 1);
    fake_sink_init(&bad, 1);
    bad.fail_map_at = 1;
    bad.fail_err = -ENOMEM;
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
    ck_assert_int_eq(npv_domain_add_sink(dom, &bad.sink), 0);
    ck_assert_int_eq(npv_domain_add_sink(dom, &ok.sink), 0);
    struct npv_dma *d;
    ck_assert_int_eq(npv_dma_alloc(ctx, PG, &small, &d), 0);
    ck_assert_int_eq(npv_dma_map(d, dom, NPV_DMA_RW, NULL), -ENOMEM);
    ck_assert_uint_eq(ok.nr_live, 0);
    ck_assert_uint_eq(npv_domain_mapping_count(dom), 0);
    ck_assert_uint_ge(logs.errors, 1);
    npv_iova_t iova;
    ck_assert_int_eq(npv_dma_iova(d, dom, &iova), -ENOENT);
    /* Dropping the domain now frees it: the failed map took no reference. */
    npv_domain_remove_sink(dom, &ok.sink, true);
    npv_domain_remove_sink(dom, &bad.sink, true);
    npv_domain_put(dom);
    npv_dma_free(d);
}
END_TEST

START_TEST(dma_sync_is_safe_whatever_the_coherency)
{
    struct npv_domain *dom;
    struct fake_sink nc;
    fake_sink_init(&nc, 0);
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
    struct npv_dma *d;
    ck_assert_int_eq(npv_dma_alloc(ctx, 3 * PG, &small, &d), 0);
    npv_dma_sync_for_device(d, 0, 3 * PG);
    ck_assert_int_eq(npv_dma_map(d, dom, NPV_DMA_RW, NULL), 0);
    npv_dma_sync_for_device(d, 0, 3 * PG);
    ck_assert_int_eq(npv_domain_add_sink(dom, &nc.sink), 0);
    ck_assert_int_eq(npv_domain_coherent(dom), 0);
    memset(npv_dma_vaddr(d), 0x11, 3 * PG);
    npv_dma_sync_for_device(d, 5, 3 * PG - 5);
    npv_dma_sync_for_cpu(d, 100, PG);
    /* Out of range and empty requests are clamped or ignored, never touched. */
    npv_dma_sync_for_device(d, 3 * PG, 10);
    npv_dma_sync_for_cpu(d, 2 * PG, SIZE_MAX);
    npv_dma_sync_for_cpu(d, 0, 0);
    npv_dma_sync_for_cpu(NULL, 0, 1);
    ck_assert_uint_eq(((unsigned char *)npv_dma_vaddr(d))[3 * PG - 1], 0x11);
    npv_domain_remove_sink(dom, &nc.sink, true);
    npv_dma_free(d);
    npv_domain_put(dom);
}
END_TEST

START_TEST(dma_numa_node_zero_is_bound_and_reported)
{
    struct npv_dma *d;
    struct npv_dma_opts o = {.page = NPV_DMA_PAGE_4K, .numa_node = 0};
    ck_assert_int_eq(npv_dma_alloc(ctx, 4 * PG, &o, &d), 0);
    ck_assert_int_eq(npv_dma_numa_node(d), 0);
    npv_dma_free(d);
    /* Without a preference a single-node machine still reports its node. */
    ck_assert_int_eq(npv_dma_alloc(ctx, PG, &small, &d), 0);
    ck_assert_int_ge(npv_dma_numa_node(d), -1);
    npv_dma_free(d);
}
END_TEST

START_TEST(dma_missing_numa_node_fails_without_leaking)
{
    struct npv_dma *d = NULL;
    struct npv_dma_opts o = {.page = NPV_DMA_PAGE_4K, .numa_node = 4000};
    int before = count_fds();
    ck_assert_int_eq(npv_dma_alloc(ctx, PG, &o, &d), -EINVAL);
    ck_assert_ptr_null(d);
    ck_assert_int_eq(count_fds(), before);
    ck_assert_ptr_nonnull(strstr(logs.last_error, "4000"));
}
END_TEST

/* memfd_create fails when no descriptor is left: nothing may stay behind. */
START_TEST(dma_alloc_without_free_descriptors_fails_cleanly)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int before = count_fds();
        struct rlimit rl = {.rlim_cur = 256, .rlim_max = 256};
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(10);
        int held[256], nheld = 0;
        for (int fd; nheld < 256 && (fd = fcntl(0, F_DUPFD_CLOEXEC, 0)) >= 0;)
            held[nheld++] = fd;
        struct npv_dma *d = NULL;
        int ret = npv_dma_alloc(ctx, PG, &small, &d);
        while (nheld > 0)
            close(held[--nheld]);
        if (ret != -EMFILE || d != NULL)
            _exit(11);
        _exit(count_fds() == before ? 0 : 12);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

/*
 * RLIMIT_MEMLOCK is enforced by the kernel only without CAP_IPC_LOCK. As
 * root the child drops the capability from all its sets (capset); as a
 * normal user it has none to drop. Either way it runs in its own process.
 */
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

/* Run step() in a child without CAP_IPC_LOCK under a 256 KiB RLIMIT_MEMLOCK; its exit code is the
 * verdict. */
static void under_low_memlock(int (*step)(void))
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (drop_cap_ipc_lock() != 0)
            _exit(10);
        struct rlimit rl = {.rlim_cur = 256 * 1024, .rlim_max = 256 * 1024};
        if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0)
            _exit(11);
        _exit(step());
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_msg(WEXITSTATUS(status) == 0, "child failed at step %d", WEXITSTATUS(status));
}

/* Nothing is pinned until a kernel IOMMU maps the buffer: allocation is not limited. */
static int alloc_and_map_without_pinning(void)
{
    struct npv_dma *d = NULL;
    if (npv_dma_alloc(ctx, 1 << 20, &small, &d) != 0 || d == NULL)
        return 12;
    if (logs.errors != 0)
        return 13;
    memset(npv_dma_vaddr(d), 0x5a, 1 << 20);
    struct npv_domain *dom;
    struct fake_sink f;
    fake_sink_init(&f, -1); /* a connection's table: no pin */
    if (npv_domain_new(ctx, NULL, &dom) != 0 || npv_domain_add_sink(dom, &f.sink) != 0)
        return 14;
    if (npv_dma_map(d, dom, NPV_DMA_RW, NULL) != 0 || f.nr_live != 1)
        return 15;
    npv_dma_free(d);
    npv_domain_remove_sink(dom, &f.sink, true);
    npv_domain_put(dom);
    return 0;
}

START_TEST(dma_alloc_above_the_memlock_limit_succeeds_where_nothing_pins)
{
    under_low_memlock(alloc_and_map_without_pinning);
}
END_TEST

/* The check the kernel transports make before a pin (lib/vfio/vfio_dma_ioctl.c). */
static int pin_check_names_the_limit(void)
{
    if (npv_memlock_check_pin(ctx, "IOAS 1", 1 << 20, NPV_PIN_PINNED_VM) != -ENOMEM)
        return 12;
    /* The message names the limit that would do: 1024 KiB plus what is already counted. */
    if (strstr(logs.last_error, "IOAS 1") == NULL ||
        strstr(logs.last_error, "RLIMIT_MEMLOCK") == NULL ||
        strstr(logs.last_error, "ulimit -l") == NULL ||
        strstr(logs.last_error, "CAP_IPC_LOCK") == NULL)
        return 13;
    if (npv_memlock_check_pin(ctx, "container", 1 << 20, NPV_PIN_LOCKED_VM) != -ENOMEM)
        return 14;
    if (npv_memlock_check_pin(ctx, "container", 64 * 1024, NPV_PIN_LOCKED_VM) != 0)
        return 15;
    return 0;
}

START_TEST(memlock_check_before_a_pin_names_the_limit_that_would_do)
{
    under_low_memlock(pin_check_names_the_limit);
}
END_TEST

START_TEST(dma_unmap_failure_keeps_the_iova_until_a_retry_succeeds)
{
    struct npv_domain *dom;
    struct fake_sink f;
    fake_sink_init(&f, 1);
    ck_assert_int_eq(npv_domain_new(ctx, NULL, &dom), 0);
    ck_assert_int_eq(npv_domain_add_sink(dom, &f.sink), 0);
    struct npv_dma *d;
    npv_iova_t iova, again;
    ck_assert_int_eq(npv_dma_alloc(ctx, PG, &small, &d), 0);
    ck_assert_int_eq(npv_dma_map(d, dom, NPV_DMA_RW, &iova), 0);
    f.fail_unmaps = true;
    ck_assert_int_eq(npv_dma_unmap(d, dom), -EIO);
    ck_assert_uint_ge(logs.errors, 1);
    /* The buffer still names its IOVA; the domain holds it in quarantine. */
    ck_assert_int_eq(npv_dma_iova(d, dom, &again), 0);
    ck_assert_uint_eq(again, iova);
    ck_assert_uint_eq(npv_domain_quarantined(dom, NULL), 1);
    ck_assert_int_eq(npv_dma_map(d, dom, NPV_DMA_RW, NULL), -EEXIST);
    f.fail_unmaps = false;
    ck_assert_int_eq(npv_dma_unmap(d, dom), 0);
    ck_assert_int_eq(npv_dma_iova(d, dom, &again), -ENOENT);
    ck_assert_uint_eq(npv_domain_quarantined(dom, NULL), 0);
    ck_assert_uint_eq(f.nr_live, 0);
    /* Freed while the unmap fails: the buffer goes, the range stays quarantined. */
    ck_assert_int_eq(npv_dma_map(d, dom, NPV_DMA_RW, &iova), 0);
    f.fail_unmaps = true;
    npv_dma_free(d);
    ck_assert_uint_eq(npv_domain_quarantined(dom, NULL), 1);
    npv_domain_remove_sink(dom, &f.sink, false);
    ck_assert_uint_eq(npv_domain_quarantined(dom, NULL), 0);
    npv_domain_put(dom);
}
END_TEST

static Suite *dma_suite(void)
{
    Suite *s = suite_create("dma");
    TCase *tc = tcase_create("dma");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, dma_free_null_is_noop);
    tcase_add_test(tc, dma_alloc_rejects_bad_arguments);
    tcase_add_test(tc, dma_small_auto_buffer_uses_4k_pages_without_warning);
    tcase_add_test(tc, dma_memory_is_zeroed_and_shared_through_its_fd);
    tcase_add_test(tc, dma_maps_one_buffer_into_two_domains);
    tcase_add_test(tc, dma_free_unmaps_from_every_domain_it_keeps_alive);
    tcase_add_test(tc, dma_free_pushes_unmaps_to_attached_sinks);
    tcase_add_test(tc, dma_map_refuses_a_second_mapping_and_bad_prot);
    tcase_add_test(tc, dma_map_at_places_buffer_and_reports_conflicts);
    tcase_add_test(tc, dma_map_at_iova_zero_is_refused);
    tcase_add_test(tc, dma_map_into_full_domain_is_enospc_and_leaves_nothing);
    tcase_add_test(tc, dma_map_failing_in_a_sink_leaves_buffer_unmapped);
    tcase_add_test(tc, dma_sync_is_safe_whatever_the_coherency);
    tcase_add_test(tc, dma_missing_numa_node_fails_without_leaking);
    tcase_add_test(tc, dma_alloc_without_free_descriptors_fails_cleanly);
    tcase_add_test(tc, dma_alloc_above_the_memlock_limit_succeeds_where_nothing_pins);
    tcase_add_test(tc, memlock_check_before_a_pin_names_the_limit_that_would_do);
    tcase_add_test(tc, dma_unmap_failure_keeps_the_iova_until_a_retry_succeeds);
    suite_add_tcase(s, tc);
    /* Tagged: qemu-user does not emulate mbind(2), so the arm64 run leaves it out by tag. */
    TCase *tn = tcase_create("numa");
    tcase_set_tags(tn, "mbind");
    tcase_add_checked_fixture(tn, setup, teardown);
    tcase_add_test(tn, dma_numa_node_zero_is_bound_and_reported);
    suite_add_tcase(s, tn);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(dma_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
