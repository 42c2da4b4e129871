/* SPDX-License-Identifier: MIT */
/*
 * guest_memlock_limit: without CAP_IPC_LOCK the kernel charges every page the
 * IOMMU pins to RLIMIT_MEMLOCK (type1 to the process's locked_vm, iommufd to
 * the user's, shown per process as VmPin), and a DMA map beyond the limit
 * fails with ENOMEM. The library checks before the pin and refuses with
 * -ENOMEM and a log line that names the limit, leaving the buffer and both
 * domains usable. Allocation pins nothing and is not limited.
 *
 * Under a 12 KiB limit: a 16 KiB buffer allocates, its map into domain A
 * (edu, NPVTEST_EDU) is refused, and so is the map of a 16 KiB heap buffer
 * wrapped with npv_dma_wrap (caller memory is pinned alike). The pins of one
 * buffer count once per IOMMU that maps it, so an 8 KiB buffer maps into A
 * and its map into domain B (the second edu, NPVTEST_EDU2: its own type1
 * container or IOAS) is refused. Raising the limit, the same map succeeds.
 */
#include <errno.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <npuvfio/bar.h>
#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include "guest_edu.h"
#include "guest_tap.h"

#define SZ_4K 4096u

static const struct npv_domain_opts edu_aperture = {.aperture_start = 0,
                                                    .aperture_last = EDU_DMA_LAST};

struct log_capture {
    char text[8192];
    size_t len;
};

static void capture(void *user, enum npv_log_level level, const char *msg)
{
    struct log_capture *c = user;
    tap_diag("lib[%d]: %s", (int)level, msg);
    int n = snprintf(c->text + c->len, sizeof(c->text) - c->len, "%s\n", msg);
    if (n > 0)
        c->len += (size_t)n < sizeof(c->text) - c->len ? (size_t)n : sizeof(c->text) - c->len - 1;
}

static void capture_reset(struct log_capture *c)
{
    c->len = 0;
    c->text[0] = '\0';
}

/* The capability sets of this process, without libcap (the guest has none). */
static int drop_cap_ipc_lock(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
    if (syscall(SYS_capget, &h, d) != 0)
        return -errno;
    d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
    d[CAP_TO_INDEX(CAP_IPC_LOCK)].permitted &= ~CAP_TO_MASK(CAP_IPC_LOCK);
    if (syscall(SYS_capset, &h, d) != 0)
        return -errno;
    if (syscall(SYS_capget, &h, d) != 0)
        return -errno;
    return d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK) ? -EPERM : 0;
}

static long vmlck_kib(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmLck: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

static int set_memlock(long kib)
{
    struct rlimit rl = {.rlim_cur = (rlim_t)kib * 1024, .rlim_max = (rlim_t)kib * 1024};
    return setrlimit(RLIMIT_MEMLOCK, &rl) == 0 ? 0 : -errno;
}

int main(void)
{
    const char *backend = getenv("NPVTEST_BACKEND");
    const char *edu = getenv("NPVTEST_EDU"), *edu2 = getenv("NPVTEST_EDU2");
    struct tap t = {.prefix = backend ? backend : "?"};
    static struct log_capture log;
    struct npv_ctx *ctx = NULL;
    struct npv_domain *a = NULL, *b = NULL;
    struct npv_dev *d1 = NULL, *d2 = NULL;
    struct npv_bar *bar1 = NULL, *bar2 = NULL;
    struct npv_dma *buf = NULL, *big = NULL;

    if (!tap_check(&t, backend && edu && *edu && edu2 && *edu2,
                   "NPVTEST_BACKEND, NPVTEST_EDU and NPVTEST_EDU2 set (two edus: %s, %s)",
                   edu ? edu : "-", edu2 ? edu2 : "-"))
        return tap_done(&t);
    int fds0 = count_fds();
    int rc = npv_ctx_new(&ctx);
    if (!tap_check(&t, rc == 0, "npv_ctx_new (%s)", npv_strerror(rc)))
        return tap_done(&t);
    npv_ctx_set_log_sink(ctx, capture, &log);
    npv_ctx_set_iommu_backend(ctx, strcmp(backend, "iommufd") == 0 ? NPV_IOMMU_IOMMUFD
                                                                   : NPV_IOMMU_LEGACY);

    /* Both devices first: an iommufd domain has an IOAS only while a device is attached. */
    rc = npv_domain_new(ctx, &edu_aperture, &a);
    if (rc == 0)
        rc = npv_domain_new(ctx, &edu_aperture, &b);
    if (rc == 0)
        rc = npv_dev_open_pci(ctx, edu, a, NULL, &d1);
    if (rc == 0)
        rc = npv_dev_open_pci(ctx, edu2, b, NULL, &d2);
    if (rc == 0)
        rc = npv_bar_map(d1, NPV_PCI_BAR0_REGION, &bar1);
    if (rc == 0)
        rc = npv_bar_map(d2, NPV_PCI_BAR0_REGION, &bar2);
    if (!tap_check(&t, rc == 0, "edu in domain A, the second edu in domain B (%s)",
                   npv_strerror(rc)))
        goto out;

    rc = drop_cap_ipc_lock();
    if (!tap_check(&t, rc == 0, "CAP_IPC_LOCK dropped (%s)", npv_strerror(rc)))
        goto out;
    long locked = vmlck_kib();
    rc = locked >= 0 ? set_memlock(locked + 12) : -EIO;
    if (!tap_check(&t, rc == 0, "RLIMIT_MEMLOCK = VmLck %ld KiB + 12 KiB (%s)", locked,
                   npv_strerror(rc)))
        goto out;

    struct npv_dma_opts o = {.page = NPV_DMA_PAGE_4K, .numa_node = -1};
    rc = npv_dma_alloc(ctx, 4 * SZ_4K, &o, &big);
    tap_check(&t, rc == 0, "a 16 KiB buffer allocates: nothing is pinned yet (%s)",
              npv_strerror(rc));
    capture_reset(&log);
    rc = big ? npv_dma_map(big, a, NPV_DMA_RW, NULL) : -ENOENT;
    tap_check(&t,
              rc == -ENOMEM && strstr(log.text, "RLIMIT_MEMLOCK") != NULL &&
                  npv_domain_mapping_count(a) == 0,
              "its map into A is refused with a line naming RLIMIT_MEMLOCK: %d %s", rc,
              npv_strerror(rc));
    npv_dma_free(big);
    big = NULL;
    void *heap = aligned_alloc(SZ_4K, 4 * SZ_4K);
    struct npv_dma *wrapped = NULL;
    rc = heap ? npv_dma_wrap(ctx, heap, 4 * SZ_4K, -1, 0, 0, &wrapped) : -ENOMEM;
    capture_reset(&log);
    rc = rc ? rc : npv_dma_map(wrapped, a, NPV_DMA_RW, NULL);
    tap_check(&t,
              rc == -ENOMEM && strstr(log.text, "RLIMIT_MEMLOCK") != NULL &&
                  npv_domain_mapping_count(a) == 0,
              "a wrapped 16 KiB heap buffer is refused alike: %d %s", rc, npv_strerror(rc));
    npv_dma_free(wrapped);
    free(heap);
    rc = npv_dma_alloc(ctx, 2 * SZ_4K, &o, &buf);
    if (!tap_check(&t, rc == 0, "an 8 KiB buffer fits the limit (%s)", npv_strerror(rc)))
        goto out;
    npv_iova_t ia = 0, ib = 0;
    rc = npv_dma_map(buf, a, NPV_DMA_RW, &ia);
    if (!tap_check(&t, rc == 0, "mapped into A, 8 KiB pinned (%s; VmLck now %ld KiB)",
                   npv_strerror(rc), vmlck_kib()))
        goto out;

    capture_reset(&log);
    rc = npv_dma_map(buf, b, NPV_DMA_RW, &ib);
    tap_check(&t, rc == -ENOMEM, "the map into B pins the pages a second time: -ENOMEM (%d %s)", rc,
              npv_strerror(rc));
    tap_check(&t, strstr(log.text, "RLIMIT_MEMLOCK") != NULL,
              "the error logged names RLIMIT_MEMLOCK");
    tap_check(&t, npv_dma_iova(buf, b, &ib) < 0 && npv_domain_mapping_count(b) == 0,
              "the failed map left nothing in B (%zu mappings)", npv_domain_mapping_count(b));
    rc = edu_round_trip(bar1, a, buf, 0, buf, SZ_4K, SZ_4K, 1);
    tap_check(&t, rc == 0,
              "the buffer still works in A: edu DMA from its first to second page (%s)",
              npv_strerror(rc));

    rc = set_memlock(vmlck_kib() + 16);
    rc = rc ? rc : npv_dma_map(buf, b, NPV_DMA_RW, &ib);
    tap_check(&t, rc == 0, "with the limit raised the same map into B succeeds (%s)",
              npv_strerror(rc));
    if (rc == 0) {
        rc = edu_round_trip(bar2, b, buf, SZ_4K, buf, 0, SZ_4K, 2);
        tap_check(&t, rc == 0, "the second edu does DMA through B (%s)", npv_strerror(rc));
    }
out:
    npv_dma_free(buf);
    npv_bar_unmap(bar2);
    npv_bar_unmap(bar1);
    npv_dev_close(d2);
    npv_dev_close(d1);
    npv_domain_put(b);
    npv_domain_put(a);
    npv_ctx_free(ctx);
    int fds1 = count_fds();
    tap_check(&t, fds0 >= 0 && fds1 == fds0, "no fd left at the end: %d -> %d", fds0, fds1);
    return tap_done(&t);
}
