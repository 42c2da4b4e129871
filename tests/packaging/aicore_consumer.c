/* SPDX-License-Identifier: MIT */
/*
 * Built against the installed <npuvfio/aicore.h> and libnpuvfio-aicore
 * (pkg-config npuvfio-aicore) by install_consumer.sh: the header compiles on
 * its own and the library links and answers without a device.
 */
#include <errno.h>
#include <stdio.h>

#include <npuvfio/aicore.h>

int main(void)
{
    const struct npv_aicore_mem_ops *ops = npv_aicore_default_mem_ops();
    if (ops == NULL || ops->alloc == NULL || ops->free == NULL || ops->copy_h2d == NULL) {
        fprintf(stderr, "FAIL: npv_aicore_default_mem_ops() is incomplete\n");
        return 1;
    }
    struct npv_aicore *ac = NULL;
    int r = npv_aicore_open(NULL, NULL, &ac);
    if (r != -EINVAL || ac != NULL) {
        fprintf(stderr, "FAIL: npv_aicore_open(NULL) = %d, want -EINVAL\n", r);
        return 1;
    }
    npv_aicore_close(NULL);
    puts("ok: aicore consumer");
    return 0;
}
