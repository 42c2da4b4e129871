/* SPDX-License-Identifier: MIT */
/* The CAP_IPC_LOCK check and the RLIMIT_MEMLOCK pre-check of a kernel IOMMU pin. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "ctx_internal.h"
#include "memlock.h"

bool npv_process_has_cap_ipc_lock(void)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    memset(data, 0, sizeof(data));
    /* glibc has no capget wrapper and libcap is one more dependency for one bit. */
    if (syscall(SYS_capget, &hdr, data) != 0)
        return false;
    return (data[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK)) != 0;
}

/* A "Name: N kB" line of /proc/self/status in bytes (0 when absent). */
static uint64_t status_bytes(const char *name)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (f == NULL)
        return 0;
    char line[256];
    size_t n = strlen(name);
    unsigned long long kib = 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, name, n) == 0 && line[n] == ':' &&
            sscanf(line + n + 1, " %llu kB", &kib) == 1)
            break;
    fclose(f);
    return (uint64_t)kib * 1024;
}

/*
 * Refusing here, with the limit that would do, beats an -ENOMEM from a VFIO
 * ioctl that names no cause. Pins count once per IOMMU that maps the pages,
 * so a buffer in two kernel domains is charged twice.
 */
int npv_memlock_check_pin(struct npv_ctx *ctx, const char *who, uint64_t len,
                          enum npv_pin_charge charge)
{
    if (npv_process_has_cap_ipc_lock())
        return 0;
    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return 0;
    uint64_t counted = status_bytes(charge == NPV_PIN_LOCKED_VM ? "VmLck" : "VmPin");
    uint64_t need = counted + len;
    if (need >= counted && need <= rl.rlim_cur)
        return 0;
    unsigned long long need_kib = (unsigned long long)((need + 1023) / 1024);
    if (need < counted)
        need_kib = ~0ull;
    npv_err(ctx,
            "%s: pinning %llu KiB of DMA memory would exceed RLIMIT_MEMLOCK (%llu KiB, %llu KiB "
            "already counted as %s): the kernel charges IOMMU pins against it; raise it to at "
            "least %llu KiB (ulimit -l %llu, or LimitMEMLOCK= in a systemd unit) or grant "
            "CAP_IPC_LOCK",
            who, (unsigned long long)(len / 1024), (unsigned long long)(rl.rlim_cur / 1024),
            (unsigned long long)(counted / 1024),
            charge == NPV_PIN_LOCKED_VM ? "locked (VmLck)" : "pinned (VmPin)", need_kib, need_kib);
    return -ENOMEM;
}
