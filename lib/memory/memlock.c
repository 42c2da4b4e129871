/* SPDX-License-Identifier: MIT */
/* The CAP_IPC_LOCK check shared by DMA allocation and the host probe. */
#include <string.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sys/syscall.h>

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
