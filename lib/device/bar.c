/* SPDX-License-Identifier: MIT */
/*
 * npv_bar: a region's address range reserved in our address space, with the
 * mmappable areas mapped in place and every other page reached through the
 * transport.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <npuvfio/bar.h>

#include "ctx_internal.h"
#include "dev_internal.h"
#include "failpoint_internal.h"
#include "vfio_device_internal.h"

#define BAR_PAGE        (1ull << NPV_BAR_PAGE_SHIFT)
#define PCI_CAP_ID_MSIX 0x11u

struct bar_impl {
    struct npv_bar pub;  /* first: npv_bar_unmap gets this pointer back */
    size_t reserved_len; /* whole host pages covering the region */
    uint8_t direct[];    /* one entry per 4 KiB page of the region */
};

/* A half-open byte range [start, end) of the region. */
struct span {
    uint64_t start, end;
};

static uint64_t round_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) & ~(a - 1);
}

static uint64_t round_down(uint64_t v, uint64_t a)
{
    return v & ~(a - 1);
}

/*
 * Where this BAR holds the MSI-X table, as config space says. Writes to the
 * table through a mapping would bypass the interrupt set-up the host owns
 * (vfio-pci traps it), so the table is never mapped unless the region says it
 * may be. {0, 0} when there is none or it cannot be read.
 */
static struct span msix_table_span(struct npv_dev *dev, uint32_t index, uint64_t size)
{
    struct span none = {0, 0};
    if (index > NPV_PCI_BAR5_REGION)
        return none;
    uint32_t cap;
    if (npv_dev_find_pci_cap(dev, PCI_CAP_ID_MSIX, &cap) < 0 || cap == 0)
        return none;
    uint16_t msgctl;
    uint32_t table;
    if (dev->ops->region_read(dev, NPV_PCI_CONFIG_REGION, cap + 2, &msgctl, 2) < 0 ||
        dev->ops->region_read(dev, NPV_PCI_CONFIG_REGION, cap + 4, &table, 4) < 0)
        return none;
    if ((table & 7u) != index)
        return none;
    uint64_t start = table & ~7u;
    uint64_t len = ((uint64_t)(msgctl & 0x7ffu) + 1) * 16;
    /* A table the config space places outside the BAR is clamped, not trusted. */
    if (start >= size)
        return none;
    struct span s = {start, start + len < size ? start + len : size};
    return s;
}

/* Cut hole out of in: up to two pieces. Returns how many. */
static int span_subtract(struct span in, struct span hole, struct span out[2])
{
    if (hole.end <= hole.start || hole.end <= in.start || hole.start >= in.end) {
        out[0] = in;
        return 1;
    }
    int n = 0;
    if (hole.start > in.start)
        out[n++] = (struct span){in.start, hole.start};
    if (hole.end < in.end)
        out[n++] = (struct span){hole.end, in.end};
    return n;
}

static void mark_direct(struct bar_impl *b, struct span s, uint8_t kind)
{
    for (uint64_t off = s.start; off < s.end; off += BAR_PAGE)
        b->direct[off >> NPV_BAR_PAGE_SHIFT] = kind;
}

/*
 * Map one area. A failure leaves the area trapped: every access still works
 * through the transport, only slower.
 */
static void map_area(struct bar_impl *b, const struct npv_region_info *ri,
                     const struct npv_region_area *a, struct span msix, uint64_t host_page)
{
    struct npv_dev *dev = b->pub.dev;
    if (a->size == 0 || a->offset > ri->size || a->size > ri->size - a->offset) {
        npv_warn(dev->ctx, "%s: region %u: mmap area [%#llx,+%#llx) beyond the region; trapped",
                 dev->name, ri->index, (unsigned long long)a->offset, (unsigned long long)a->size);
        return;
    }
    struct span area = {round_up(a->offset, host_page), round_down(a->offset + a->size, host_page)};
    if (area.end <= area.start)
        return;
    struct span hole = {round_down(msix.start, host_page), round_up(msix.end, host_page)};
    if (ri->msix_mappable)
        hole.start = hole.end = 0;
    struct span pieces[2];
    int n = span_subtract(area, hole, pieces);
    if (n == 0)
        return;
    int fd;
    uint64_t file_off;
    int ret = dev->ops->region_mmap_fd(dev, ri->index, a->offset, &fd, &file_off);
    if (ret < 0) {
        npv_warn(dev->ctx, "%s: region %u: no mmap fd for area %#llx: %s; trapped", dev->name,
                 ri->index, (unsigned long long)a->offset, npv_strerror(ret));
        return;
    }
    int prot = PROT_READ | ((ri->flags & NPV_REGION_WRITE) ? PROT_WRITE : 0);
    for (int i = 0; i < n; i++) {
        uint64_t foff = file_off + (pieces[i].start - a->offset);
        if (foff % host_page != 0 || foff > INT64_MAX)
            continue;
        void *want = (void *)(b->pub.base + pieces[i].start);
        void *p = npv_fp_mmap(dev->ctx, want, pieces[i].end - pieces[i].start, prot,
                              MAP_SHARED | MAP_FIXED, fd, (off_t)foff);
        if (p == MAP_FAILED) {
            npv_warn(dev->ctx, "%s: region %u: mmap of [%#llx,%#llx): %s; trapped", dev->name,
                     ri->index, (unsigned long long)pieces[i].start,
                     (unsigned long long)pieces[i].end, npv_strerror(errno));
            continue;
        }
        /* vfio-user's areas are the server's memory, vfio-pci's the device's. */
        mark_direct(b, pieces[i],
                    dev->transport == NPV_TRANSPORT_VFIO_USER ? NPV_BAR_DIRECT_SHARED
                                                              : NPV_BAR_DIRECT_DEVICE);
    }
}

int npv_bar_map(struct npv_dev *dev, uint32_t index, struct npv_bar **out)
{
    if (dev == NULL || out == NULL)
        return -EINVAL;
    struct npv_region_info ri;
    int ret = npv_dev_region_info(dev, index, &ri);
    if (ret < 0)
        return ret;
    if (!(ri.flags & NPV_REGION_READ) || ri.size == 0 || ri.size > SIZE_MAX / 2)
        return -EINVAL;
    uint64_t host_page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t npages = (ri.size + BAR_PAGE - 1) >> NPV_BAR_PAGE_SHIFT;
    struct bar_impl *b = npv_fp_calloc(dev->ctx, 1, sizeof(*b) + npages);
    if (b == NULL)
        return -ENOMEM;
    b->reserved_len = round_up(ri.size, host_page);
    /* Reserved, never touched: the areas are mapped over it and the rest faults if misused. */
    void *base = npv_fp_mmap(dev->ctx, NULL, b->reserved_len, PROT_NONE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        ret = -errno;
        goto err_free;
    }
    b->pub.base = base;
    b->pub.size = ri.size;
    b->pub.direct = b->direct;
    b->pub.dev = dev;
    b->pub.index = index;
    b->pub.posted = &dev->posted_pending;
    b->pub.mapped_count = &dev->reg_count[0];
    if (ri.flags & NPV_REGION_MMAP) {
        struct span msix =
            ri.msix_mappable ? (struct span){0, 0} : msix_table_span(dev, index, ri.size);
        uint32_t n =
            ri.nr_mmap_areas < NPV_REGION_MAX_SPARSE ? ri.nr_mmap_areas : NPV_REGION_MAX_SPARSE;
        for (uint32_t i = 0; i < n; i++)
            map_area(b, &ri, &ri.mmap_areas[i], msix, host_page);
    }
    *out = &b->pub;
    return 0;

err_free:
    free(b);
    return ret;
}

int npv_bar_wrap(void *mem, uint64_t size, struct npv_bar **out)
{
    if (mem == NULL || out == NULL || size == 0 || size > SIZE_MAX / 2 || ((uintptr_t)mem & 7) != 0)
        return -EINVAL;
    uint64_t npages = (size + BAR_PAGE - 1) >> NPV_BAR_PAGE_SHIFT;
    struct bar_impl *b = calloc(1, sizeof(*b) + npages);
    if (b == NULL)
        return -ENOMEM;
    memset(b->direct, NPV_BAR_DIRECT_SHARED, npages);
    /* reserved_len 0: the memory is the caller's, npv_bar_unmap leaves it alone. */
    b->pub.base = mem;
    b->pub.size = size;
    b->pub.direct = b->direct;
    b->pub.dev = NULL;
    b->pub.index = UINT32_MAX;
    *out = &b->pub;
    return 0;
}

void npv_bar_unmap(struct npv_bar *bar)
{
    if (bar == NULL)
        return;
    struct bar_impl *b = (struct bar_impl *)bar;
    /* One munmap of the reservation also removes every area mapped over it. */
    if (b->reserved_len != 0)
        munmap((void *)bar->base, b->reserved_len);
    free(b);
}

static int check_access(const struct npv_bar *bar, uint64_t off, unsigned width)
{
    if (bar == NULL)
        return -EINVAL;
    if (width != 1 && width != 2 && width != 4 && width != 8)
        return -EINVAL;
    if (off > bar->size || width > bar->size - off)
        return -ERANGE;
    return 0;
}

int npv_bar_read(const struct npv_bar *bar, uint64_t off, unsigned width, uint64_t *val)
{
    int ret = check_access(bar, off, width);
    if (ret < 0)
        return ret;
    if (npv_bar__direct(bar, off, width)) {
        npv_bar__ordered(bar);
        npv_bar__count(bar, 0);
        const volatile uint8_t *p = bar->base + off;
        switch (width) {
        case 1:
            *val = *(const volatile uint8_t *)p;
            break;
        case 2:
            *val = *(const volatile uint16_t *)p;
            break;
        case 4:
            *val = *(const volatile uint32_t *)p;
            break;
        default:
            *val = *(const volatile uint64_t *)p;
            break;
        }
        return 0;
    }
    /* Exactly width bytes in one transport access: a register may act on its access size. */
    union {
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
    } v = {0};
    if (bar->dev == NULL)
        return -EINVAL; /* a wrapped memory region: a misaligned access has no transport */
    __atomic_fetch_add(&bar->dev->reg_count[2], 1, __ATOMIC_RELAXED);
    ret = npv_dev_region_read(bar->dev, bar->index, off, &v, width);
    if (ret < 0)
        return ret;
    *val = width == 1 ? v.u8 : width == 2 ? v.u16 : width == 4 ? v.u32 : v.u64;
    return 0;
}

int npv_bar_write(const struct npv_bar *bar, uint64_t off, unsigned width, uint64_t val)
{
    int ret = check_access(bar, off, width);
    if (ret < 0)
        return ret;
    if (npv_bar__direct(bar, off, width)) {
        npv_bar__ordered(bar);
        npv_bar__count(bar, 1);
        volatile uint8_t *p = bar->base + off;
        switch (width) {
        case 1:
            *(volatile uint8_t *)p = (uint8_t)val;
            break;
        case 2:
            *(volatile uint16_t *)p = (uint16_t)val;
            break;
        case 4:
            *(volatile uint32_t *)p = (uint32_t)val;
            break;
        default:
            *(volatile uint64_t *)p = val;
            break;
        }
        npv_bar__after_store(bar, off);
        return 0;
    }
    union {
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
    } v;
    if (width == 1)
        v.u8 = (uint8_t)val;
    else if (width == 2)
        v.u16 = (uint16_t)val;
    else if (width == 4)
        v.u32 = (uint32_t)val;
    else
        v.u64 = val;
    if (bar->dev == NULL)
        return -EINVAL; /* a wrapped memory region: a misaligned access has no transport */
    __atomic_fetch_add(&bar->dev->reg_count[3], 1, __ATOMIC_RELAXED);
    return npv_dev_region_write_posted(bar->dev, bar->index, off, &v, width);
}

void npv_bar__order(const struct npv_bar *bar)
{
    /* A failure stays for the next synchronous call: a mapped access has no way to report it. */
    if (bar->dev != NULL && bar->dev->ops->flush != NULL)
        (void)bar->dev->ops->flush(bar->dev, false);
}

int npv_bar_is_direct(const struct npv_bar *bar, uint64_t off, uint64_t len)
{
    if (bar == NULL)
        return -EINVAL;
    if (off > bar->size || len > bar->size - off)
        return -ERANGE;
    if (len == 0)
        return 0;
    for (uint64_t p = off >> NPV_BAR_PAGE_SHIFT; p <= (off + len - 1) >> NPV_BAR_PAGE_SHIFT; p++)
        if (!bar->direct[p])
            return 0;
    return 1;
}

int npv_bar_whole64(const struct npv_bar *bar, uint64_t off)
{
    if (bar == NULL || (off & 7))
        return -EINVAL;
    if (off > bar->size || 8 > bar->size - off)
        return -ERANGE;
    if (npv_bar__direct(bar, off, 8) || bar->dev->transport == NPV_TRANSPORT_VFIO_USER)
        return 1;
    return npv_vfio_rw64_whole() ? 1 : 0;
}
