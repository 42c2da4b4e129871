/* SPDX-License-Identifier: MIT */
/*
 * npv_dev: what every transport shares. The backends fill npv_dev_ops
 * (dev_internal.h); everything here is written against that seam only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stats_internal.h"
#include "ctx_internal.h"
#include "dev_internal.h"
#include "failpoint_internal.h"
#include "trace.h"

#define DEFAULT_REQUEST_TIMEOUT_NS (5ull * 1000 * 1000 * 1000)

/* PCI configuration space offsets and bits (PCI Local Bus 3.0, PCIe Base 6.0 §7.5.3). */
#define PCI_CFG_VENDOR_ID      0x00u
#define PCI_CFG_COMMAND        0x04u
#define PCI_CFG_STATUS         0x06u
#define PCI_CFG_REVISION       0x08u
#define PCI_CFG_CAP_PTR        0x34u
#define PCI_COMMAND_MASTER     (1u << 2)
#define PCI_STATUS_CAP_LIST    (1u << 4)
#define PCI_CAP_ID_EXP         0x10u
#define PCI_EXP_DEVCTL         0x08u
#define PCI_EXP_DEVCTL_NOSNOOP (1u << 11)
/* 48 capabilities of 4 bytes fill the 192 bytes after the header: more is a loop. */
#define PCI_CAP_MAX_WALK 48

struct npv_dev *npv_dev_alloc(struct npv_ctx *ctx, const struct npv_dev_ops *ops,
                              enum npv_transport transport, const char *name,
                              const struct npv_dev_opts *opts)
{
    if (ctx == NULL || ops == NULL || name == NULL) {
        errno = EINVAL;
        return NULL;
    }
    if (strlen(name) >= sizeof(((struct npv_dev *)0)->name)) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    struct npv_dev *dev = npv_fp_calloc(ctx, 1, sizeof(*dev));
    if (dev == NULL)
        return NULL;
    int ret = pthread_mutex_init(&dev->lock, NULL);
    if (ret != 0) {
        free(dev);
        errno = ret;
        return NULL;
    }
    dev->ctx = ctx;
    npv_live_add(ctx, NPV_LIVE_DEVICES, 1);
    dev->ops = ops;
    dev->transport = transport;
    strcpy(dev->name, name);
    /* Until an IOMMU says otherwise: x86 and vfio-user shared memory are coherent. */
    dev->coherent = true;
    dev->request_timeout_ns = opts != NULL && opts->request_timeout_ns != 0
                                  ? opts->request_timeout_ns
                                  : DEFAULT_REQUEST_TIMEOUT_NS;
    return dev;
}

void npv_dev_free_shell(struct npv_dev *dev)
{
    if (dev == NULL)
        return;
    pthread_mutex_destroy(&dev->lock);
    npv_live_add(dev->ctx, NPV_LIVE_DEVICES, -1);
    free(dev);
}

static int config_read16(struct npv_dev *dev, uint32_t off, uint16_t *val)
{
    return dev->ops->region_read(dev, NPV_PCI_CONFIG_REGION, off, val, sizeof(*val));
}

static int config_write16(struct npv_dev *dev, uint32_t off, uint16_t val)
{
    return dev->ops->region_write(dev, NPV_PCI_CONFIG_REGION, off, &val, sizeof(val));
}

bool npv_dev_is_pci(struct npv_dev *dev)
{
    struct npv_dev_info info;
    return dev->ops->get_info(dev, &info) == 0 && (info.flags & NPV_DEV_FLAG_PCI) &&
           info.num_regions > NPV_PCI_CONFIG_REGION;
}

/* The chain is written by the device (or a vfio-user server): the walk is bounded. */
int npv_dev_find_pci_cap(struct npv_dev *dev, uint8_t id, uint32_t *out)
{
    *out = 0;
    if (!npv_dev_is_pci(dev))
        return 0;
    uint16_t status;
    int ret = config_read16(dev, PCI_CFG_STATUS, &status);
    if (ret < 0)
        return ret;
    if (!(status & PCI_STATUS_CAP_LIST))
        return 0;
    uint8_t ptr;
    ret = dev->ops->region_read(dev, NPV_PCI_CONFIG_REGION, PCI_CFG_CAP_PTR, &ptr, 1);
    if (ret < 0)
        return ret;
    for (int i = 0; i < PCI_CAP_MAX_WALK && ptr >= 0x40; i++) {
        uint16_t hdr; /* id, next */
        ret = config_read16(dev, ptr & ~3u, &hdr);
        if (ret < 0)
            return ret;
        if ((hdr & 0xff) == id) {
            *out = ptr & ~3u;
            return 0;
        }
        ptr = (uint8_t)(hdr >> 8);
    }
    return 0;
}

/*
 * A device whose IOMMU does not enforce coherency must not issue No Snoop
 * transactions: they would bypass the CPU caches the library does not flush
 * on x86.
 */
static int clear_no_snoop(struct npv_dev *dev)
{
    uint32_t cap;
    int ret = npv_dev_find_pci_cap(dev, PCI_CAP_ID_EXP, &cap);
    if (ret < 0 || cap == 0)
        return ret;
    uint16_t ctl;
    ret = config_read16(dev, cap + PCI_EXP_DEVCTL, &ctl);
    if (ret < 0)
        return ret;
    if (ctl & PCI_EXP_DEVCTL_NOSNOOP) {
        ret = config_write16(dev, cap + PCI_EXP_DEVCTL, ctl & (uint16_t)~PCI_EXP_DEVCTL_NOSNOOP);
        if (ret < 0)
            return ret;
    }
    dev->no_snoop_cleared = true;
    return 0;
}

static int enable_bus_master(struct npv_dev *dev)
{
    uint16_t cmd;
    int ret = config_read16(dev, PCI_CFG_COMMAND, &cmd);
    if (ret < 0)
        return ret;
    if (cmd & PCI_COMMAND_MASTER)
        return 0;
    return config_write16(dev, PCI_CFG_COMMAND, cmd | PCI_COMMAND_MASTER);
}

static int attach_locked(struct npv_dev *dev, struct npv_domain *dom)
{
    if (dom == dev->domain)
        return 0;
    int ret = dev->ops->attach(dev, dom);
    if (ret < 0)
        return ret;
    struct npv_domain *old = dev->domain;
    NPV_TRACE3(domain_switch, dev, old, dom);
    dev->domain = npv_domain_get(dom);
    npv_domain_put(old);
    return 0;
}

int npv_dev_finish_open(struct npv_dev *dev, struct npv_domain *dom)
{
    struct npv_dev_info info;
    int ret = dev->ops->get_info(dev, &info);
    if (ret < 0) {
        npv_err(dev->ctx, "%s: device info: %s", dev->name, npv_strerror(ret));
        return ret;
    }
    if (dom != NULL) {
        pthread_mutex_lock(&dev->lock);
        ret = attach_locked(dev, dom);
        pthread_mutex_unlock(&dev->lock);
        if (ret < 0) {
            npv_err(dev->ctx, "%s: attach to domain: %s", dev->name, npv_strerror(ret));
            return ret;
        }
        if (npv_domain_coherent(dom) == 0)
            dev->coherent = false;
    }
    if (!(info.flags & NPV_DEV_FLAG_PCI) || info.num_regions <= NPV_PCI_CONFIG_REGION)
        return 0;
    if (!dev->coherent) {
        ret = clear_no_snoop(dev);
        if (ret < 0) {
            npv_err(dev->ctx, "%s: clear Enable No Snoop: %s", dev->name, npv_strerror(ret));
            return ret;
        }
    }
    ret = enable_bus_master(dev);
    if (ret < 0)
        npv_err(dev->ctx, "%s: enable bus mastering: %s", dev->name, npv_strerror(ret));
    return ret;
}

int npv_dev_finish_open_or_close(struct npv_dev *dev, struct npv_domain *dom, struct npv_dev **out)
{
    int ret = npv_dev_finish_open(dev, dom);
    if (ret < 0) {
        npv_dev_close(dev);
        return ret;
    }
    *out = dev;
    return 0;
}

int npv_dev_move_private_sink(struct npv_dev *dev, struct npv_iommu_sink *sink,
                              struct npv_domain *dom)
{
    struct npv_domain *old = dev->domain;
    /*
     * Leave the old domain all or nothing: a failed unmap keeps the device in
     * it, whole (a sink left holding some of its mappings would refuse every
     * later replay over the same IOVAs with -EEXIST).
     */
    if (old != NULL) {
        int ret = npv_domain_leave_sink(old, sink);
        if (ret < 0)
            return ret;
    }
    int ret = npv_domain_add_sink(dom, sink);
    if (ret < 0 && old != NULL) {
        int ret2 = npv_domain_add_sink(old, sink);
        if (ret2 < 0)
            npv_err(dev->ctx, "%s: restoring the old domain's mappings failed: %s", dev->name,
                    npv_strerror(ret2));
    }
    return ret;
}

int npv_dev_open_vfio_user(struct npv_ctx *ctx, const char *socket_path, struct npv_domain *dom,
                           const struct npv_dev_opts *opts, struct npv_dev **out)
{
    if (out != NULL)
        *out = NULL;
    if (ctx == NULL || socket_path == NULL || out == NULL)
        return -EINVAL;
    struct npv_dev *dev;
    int ret = npv_vfio_user_open(ctx, socket_path, opts, &dev);
    if (ret < 0)
        return ret;
    return npv_dev_finish_open_or_close(dev, dom, out);
}

void npv_dev_close(struct npv_dev *dev)
{
    if (dev == NULL)
        return;
    dev->ops->close(dev);
    npv_domain_put(dev->domain);
    dev->domain = NULL;
    npv_dev_free_shell(dev);
}

int npv_dev_attach(struct npv_dev *dev, struct npv_domain *dom)
{
    if (dev == NULL || dom == NULL)
        return -EINVAL;
    pthread_mutex_lock(&dev->lock);
    int ret = attach_locked(dev, dom);
    pthread_mutex_unlock(&dev->lock);
    if (ret == 0)
        npv_stats_ctx_domain_switch(dev->ctx);
    return ret;
}

struct npv_domain *npv_dev_domain(const struct npv_dev *dev)
{
    return dev->domain;
}

enum npv_transport npv_dev_transport(const struct npv_dev *dev)
{
    return dev->transport;
}

const char *npv_transport_name(enum npv_transport t)
{
    switch (t) {
    case NPV_TRANSPORT_LEGACY:
        return "legacy";
    case NPV_TRANSPORT_IOMMUFD:
        return "iommufd";
    case NPV_TRANSPORT_VFIO_USER:
        return "vfio-user";
    }
    return "unknown";
}

struct npv_ctx *npv_dev_ctx(const struct npv_dev *dev)
{
    return dev->ctx;
}

const char *npv_dev_name(const struct npv_dev *dev)
{
    return dev->name;
}

int npv_dev_info(struct npv_dev *dev, struct npv_dev_info *info)
{
    if (dev == NULL || info == NULL)
        return -EINVAL;
    memset(info, 0, sizeof(*info));
    int ret = dev->ops->get_info(dev, info);
    if (ret < 0)
        return ret;
    info->vendor_id = info->device_id = 0;
    info->class_code = 0;
    if (!(info->flags & NPV_DEV_FLAG_PCI) || info->num_regions <= NPV_PCI_CONFIG_REGION)
        return 0;
    /* Identity is best effort: a device whose config space cannot be read still has regions. */
    uint32_t id, rev_class;
    if (dev->ops->region_read(dev, NPV_PCI_CONFIG_REGION, PCI_CFG_VENDOR_ID, &id, 4) == 0) {
        info->vendor_id = (uint16_t)id;
        info->device_id = (uint16_t)(id >> 16);
    }
    if (dev->ops->region_read(dev, NPV_PCI_CONFIG_REGION, PCI_CFG_REVISION, &rev_class, 4) == 0)
        info->class_code = rev_class >> 8;
    return 0;
}

int npv_dev_region_info(struct npv_dev *dev, uint32_t index, struct npv_region_info *info)
{
    if (dev == NULL || info == NULL)
        return -EINVAL;
    memset(info, 0, sizeof(*info));
    return dev->ops->region_info(dev, index, info);
}

int npv_dev_irq_info(struct npv_dev *dev, uint32_t index, struct npv_irq_info *info)
{
    if (dev == NULL || info == NULL)
        return -EINVAL;
    memset(info, 0, sizeof(*info));
    return dev->ops->irq_info(dev, index, info);
}

int npv_dev_region_read(struct npv_dev *dev, uint32_t index, uint64_t off, void *buf, size_t len)
{
    if (dev == NULL || (buf == NULL && len != 0))
        return -EINVAL;
    if (len == 0)
        return 0;
    return dev->ops->region_read(dev, index, off, buf, len);
}

int npv_dev_region_write(struct npv_dev *dev, uint32_t index, uint64_t off, const void *buf,
                         size_t len)
{
    if (dev == NULL || (buf == NULL && len != 0))
        return -EINVAL;
    if (len == 0)
        return 0;
    return dev->ops->region_write(dev, index, off, buf, len);
}

int npv_dev_region_write_posted(struct npv_dev *dev, uint32_t index, uint64_t off, const void *buf,
                                size_t len)
{
    if (dev == NULL || dev->ops->region_write_posted == NULL)
        return npv_dev_region_write(dev, index, off, buf, len);
    return dev->ops->region_write_posted(dev, index, off, buf, len);
}

int npv_dev_flush(struct npv_dev *dev)
{
    if (dev == NULL)
        return -EINVAL;
    return dev->ops->flush != NULL ? dev->ops->flush(dev, true) : 0;
}

int npv_dev_stats(struct npv_dev *dev, struct npv_dev_stats *st)
{
    if (dev == NULL || st == NULL)
        return -EINVAL;
    memset(st, 0, sizeof(*st));
    st->reads_mapped = __atomic_load_n(&dev->reg_count[0], __ATOMIC_RELAXED);
    st->writes_mapped = __atomic_load_n(&dev->reg_count[1], __ATOMIC_RELAXED);
    st->reads_trapped = __atomic_load_n(&dev->reg_count[2], __ATOMIC_RELAXED);
    st->writes_trapped = __atomic_load_n(&dev->reg_count[3], __ATOMIC_RELAXED);
    st->writes_posted = __atomic_load_n(&dev->reg_count[4], __ATOMIC_RELAXED);
    st->flushes = __atomic_load_n(&dev->reg_count[5], __ATOMIC_RELAXED);
    st->messages = __atomic_load_n(&dev->reg_count[6], __ATOMIC_RELAXED);
    return 0;
}

/* Region 7 of a platform device is its eighth MMIO resource, not config space. */
int npv_dev_config_read(struct npv_dev *dev, uint32_t off, void *buf, size_t len)
{
    if (dev != NULL && !npv_dev_is_pci(dev))
        return -ENOTSUP;
    return npv_dev_region_read(dev, NPV_PCI_CONFIG_REGION, off, buf, len);
}

int npv_dev_config_write(struct npv_dev *dev, uint32_t off, const void *buf, size_t len)
{
    if (dev != NULL && !npv_dev_is_pci(dev))
        return -ENOTSUP;
    return npv_dev_region_write(dev, NPV_PCI_CONFIG_REGION, off, buf, len);
}

void npv_dev_set_reset_hook(struct npv_dev *dev, npv_reset_hook hook, void *arg)
{
    pthread_mutex_lock(&dev->lock);
    dev->reset_hook = hook;
    dev->reset_arg = arg;
    pthread_mutex_unlock(&dev->lock);
}

int npv_dev_reset(struct npv_dev *dev)
{
    if (dev == NULL)
        return -EINVAL;
    struct npv_dev_info info;
    int ret = dev->ops->get_info(dev, &info);
    if (ret < 0)
        return ret;
    if ((info.flags & NPV_DEV_FLAG_RESET) && dev->ops->reset != NULL) {
        pthread_mutex_lock(&dev->lock);
        ret = dev->ops->reset(dev);
        pthread_mutex_unlock(&dev->lock);
        NPV_TRACE2(reset, dev, ret);
        return ret;
    }
    pthread_mutex_lock(&dev->lock);
    npv_reset_hook hook = dev->reset_hook;
    void *arg = dev->reset_arg;
    pthread_mutex_unlock(&dev->lock);
    /* Called unlocked: a hook resets through register writes and may take control calls. */
    if (hook == NULL)
        return -ENOTSUP;
    ret = hook(dev, arg);
    NPV_TRACE2(reset, dev, ret);
    return ret;
}

bool npv_dev_coherent(const struct npv_dev *dev)
{
    return dev->coherent;
}

bool npv_dev_no_snoop_cleared(const struct npv_dev *dev)
{
    return dev->no_snoop_cleared;
}

int npv_dev_fault_fd(struct npv_dev *dev)
{
    if (dev == NULL)
        return -EINVAL;
    return dev->ops->fault_fd != NULL ? dev->ops->fault_fd(dev) : -EOPNOTSUPP;
}

int npv_dev_read_faults(struct npv_dev *dev, struct npv_dev_fault *out, size_t max)
{
    if (dev == NULL || (out == NULL && max != 0))
        return -EINVAL;
    return dev->ops->read_faults != NULL ? dev->ops->read_faults(dev, out, max) : -EOPNOTSUPP;
}
