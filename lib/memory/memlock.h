/* SPDX-License-Identifier: MIT */
/* Whether this process may lock (pin) memory past RLIMIT_MEMLOCK. */
#ifndef NPV_MEMLOCK_H
#define NPV_MEMLOCK_H

#include <stdbool.h>

/* CAP_IPC_LOCK in the effective set: the capability, not the uid, is what the kernel checks. */
bool npv_process_has_cap_ipc_lock(void);

#endif
