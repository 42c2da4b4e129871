/* SPDX-License-Identifier: MIT */
/*
 * One device of the device table driven end to end: its model started on a
 * private socket in a child process, the device opened on a transport, its
 * driver on it, its sample workload run and checked on the CPU. Shared by
 * `npuvfio run` (one device, full report) and `npuvfio demo` (every device,
 * one table).
 */
#ifndef NPV_TOOLS_DEVICE_RUN_H
#define NPV_TOOLS_DEVICE_RUN_H

#include <stdbool.h>
#include <sys/types.h>

#include "cli.h"
#include "registry.h"

struct model_child {
    pid_t pid;
    char dir[64];
    char path[108]; /* the socket the model serves one client on */
};

/*
 * Start e's model in a child that dies with us, serving one client on a
 * socket in a new private directory; returns CLI_OK once it listens (within
 * 10 s), else prints why and returns CLI_FAILED. model_stop() in both cases.
 */
int model_start(struct npv_cli *cli, const struct npv_device_entry *e, struct model_child *m);
/* Stop the child and remove its socket and directory; harmless when nothing was started. */
void model_stop(struct model_child *m);

/* Where a device is opened: a model's socket, or hardware named by its address. */
struct device_where {
    const char *socket; /* vfio-user */
    const char *hw;     /* a PCI address (vfio-pci) or a platform device name (vfio-platform) */
    bool platform;      /* hw is a platform device */
};

/*
 * Resolve a hardware address argument (cli_resolve_device: a platform device
 * when sysfs has one by that name, else a PCI address) into w, its canonical
 * form kept in canon (NPV_PLATFORM_NAME_LEN bytes). A platform device must be
 * on vfio-platform already. Prints the error and returns CLI_USAGE (malformed)
 * or CLI_FAILED (absent, or not bound), else CLI_OK. A PCI function must be
 * e by its vendor:device (or e's model's), else it is named for what it is;
 * one not on vfio-pci gets the advice that can work: bind it, or why not (no
 * IOMMU, in use by the host).
 */
int device_where_hw(struct npv_cli *cli, const struct npv_device_entry *e, const char *text,
                    char *canon, struct device_where *w);

/*
 * Open the device at w in a new domain of its own, checked to be e (its
 * vendor:device); CLI_OK, else prints one line, releases both and returns
 * CLI_FAILED.
 */
int device_open(struct npv_cli *cli, const struct npv_device_entry *e, const struct device_where *w,
                struct npv_domain **dom, struct npv_dev **dev);

/*
 * Open the device at w, e's driver on it, and run e's sample workload into
 * res. CLI_OK when it ran (res->mismatches may still be nonzero), else prints
 * one line and returns CLI_FAILED.
 */
int device_run_sample(struct npv_cli *cli, const struct npv_device_entry *e,
                      const struct device_where *w, const struct npv_sample_opts *opts,
                      struct npv_sample_result *res);

#endif
