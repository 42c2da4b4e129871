/* SPDX-License-Identifier: MIT */
/* Whether this process may lock (pin) memory past RLIMIT_MEMLOCK, and the check before a pin. */
#ifndef NPV_MEMLOCK_H
#define NPV_MEMLOCK_H

#include <stdbool.h>
#include <stdint.h>

struct npv_ctx;

/* CAP_IPC_LOCK in the effective set: the capability, not the uid, is what the kernel checks. */
bool npv_process_has_cap_ipc_lock(void);

/* Where the kernel counts an IOMMU's pins, as /proc/self/status shows them. */
enum npv_pin_charge {
    NPV_PIN_LOCKED_VM, /* type1: the process's locked_vm (VmLck), with its mlocks */
    NPV_PIN_PINNED_VM, /* iommufd: the user's locked_vm, shown per process as VmPin */
};

/*
 * Before an IOMMU pins len bytes: -ENOMEM with a log line naming the
 * RLIMIT_MEMLOCK that would do (who names the IOMMU), when the pins already
 * counted plus len exceed it and the process lacks CAP_IPC_LOCK. 0 otherwise,
 * and when the limit is unlimited or unknown (the kernel has the last word).
 */
int npv_memlock_check_pin(struct npv_ctx *ctx, const char *who, uint64_t len,
                          enum npv_pin_charge charge);

#endif
