/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <time.h>
#include <unistd.h>
#include "guest_edu.h"

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int edu_dma(const struct npv_bar *bar, npv_iova_t iova, uint32_t buf_off, uint32_t len, bool to_ram)
{
    if (buf_off > EDU_BUF_SIZE || len > EDU_BUF_SIZE - buf_off || iova > EDU_DMA_LAST)
        return -EINVAL;
    uint64_t dev_addr = EDU_BUF + buf_off;
    npv_bar_write64(bar, EDU_DMA_SRC, to_ram ? dev_addr : iova);
    npv_bar_write64(bar, EDU_DMA_DST, to_ram ? iova : dev_addr);
    npv_bar_write64(bar, EDU_DMA_COUNT, len);
    npv_bar_write64(bar, EDU_DMA_CMD, EDU_DMA_CMD_START | (to_ram ? EDU_DMA_CMD_TO_RAM : 0));
    /* edu completes a transfer 100 ms (virtual time) after the command. */
    uint64_t deadline = now_ns() + 10ull * 1000000000u;
    while (now_ns() < deadline) {
        if (!(npv_bar_read32(bar, EDU_DMA_CMD) & EDU_DMA_CMD_START))
            return 0;
        usleep(2000);
    }
    return -ETIMEDOUT;
}

int edu_round_trip(const struct npv_bar *bar, struct npv_domain *dom, struct npv_dma *src,
                   size_t soff, struct npv_dma *dst, size_t doff, uint32_t len, uint8_t seed)
{
    npv_iova_t si = 0, di = 0;
    if (npv_dma_iova(src, dom, &si) < 0 || npv_dma_iova(dst, dom, &di) < 0)
        return -ENOENT;
    uint8_t *s = (uint8_t *)npv_dma_vaddr(src) + soff;
    uint8_t *d = (uint8_t *)npv_dma_vaddr(dst) + doff;
    for (uint32_t i = 0; i < len; i++)
        s[i] = (uint8_t)(seed + i * 7 + (i >> 8));
    memset(d, 0, len);
    npv_dma_sync_for_device(src, soff, len);
    npv_dma_sync_for_device(dst, doff, len);
    int rc = edu_dma(bar, si + soff, 0, len, false);
    if (rc == 0)
        rc = edu_dma(bar, di + doff, 0, len, true);
    npv_dma_sync_for_cpu(dst, doff, len);
    if (rc == 0 && memcmp(s, d, len) != 0)
        rc = -EIO;
    return rc;
}

int klog_fault_count(npv_iova_t iova)
{
    int size = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
    if (size <= 0)
        return -1;
    char *buf = malloc((size_t)size + 1);
    if (!buf)
        return -1;
    int n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, size);
    if (n < 0) {
        free(buf);
        return -1;
    }
    buf[n] = '\0';
    /* intel-iommu: "DMAR: [DMA Write NO_PASID] Request device [00:03.0] fault addr 0x1000 [..." */
    char needle[48];
    snprintf(needle, sizeof(needle), "fault addr 0x%" PRIx64 " ", iova);
    int count = 0;
    for (const char *p = buf; (p = strstr(p, needle)) != NULL; p++)
        count++;
    free(buf);
    return count;
}

int klog_wait_fault(npv_iova_t iova, int before)
{
    /* The IOMMU reports the fault from its interrupt handler, soon but not at once. */
    uint64_t deadline = now_ns() + 5ull * 1000000000u;
    int count = klog_fault_count(iova);
    while (count <= before && now_ns() < deadline) {
        usleep(20000);
        count = klog_fault_count(iova);
    }
    return count;
}

int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own fd */
}

int count_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -1;
    int n = 0, c;
    while ((c = fgetc(f)) != EOF)
        if (c == '\n')
            n++;
    fclose(f);
    return n;
}
