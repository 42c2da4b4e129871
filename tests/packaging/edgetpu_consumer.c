/* SPDX-License-Identifier: MIT */
/*
 * Built against the installed <npuvfio/edgetpu.h>, <npuvfio/edgetpu_model.h> and libnpuvfio-edgetpu
 * (pkg-config npuvfio-edgetpu) by install_consumer.sh: the header compiles on
 * its own and the installed shared library resolves and answers. No device is
 * needed: the calls are ones that touch none.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <npuvfio/edgetpu.h>
#include <npuvfio/edgetpu_model.h>

int main(void)
{
    const char *name = npv_edgetpu_hib_error_name(0);
    if (name == NULL || strcmp(name, "inbound_page_fault") != 0) {
        fprintf(stderr, "FAIL: npv_edgetpu_hib_error_name(0) = %s\n", name ? name : "NULL");
        return 1;
    }
    if (npv_edgetpu_hib_error_name(63) != NULL) {
        fprintf(stderr, "FAIL: bit 63 has a name\n");
        return 1;
    }
    struct npv_edgetpu *tpu = NULL;
    int r = npv_edgetpu_open(NULL, NULL, &tpu);
    if (r != -EINVAL || tpu != NULL) {
        fprintf(stderr, "FAIL: npv_edgetpu_open(NULL) = %d, want -EINVAL\n", r);
        return 1;
    }
    /* Compiled models: eight bytes that are no TFLite file are refused, with a reason. */
    struct npv_edgetpu_model *m = NULL;
    char why[128];
    r = npv_edgetpu_model_load_mem(NULL, "12345678", 8, &m, why, sizeof(why));
    if (r != -EBADMSG || m != NULL || why[0] == '\0') {
        fprintf(stderr, "FAIL: npv_edgetpu_model_load_mem(garbage) = %d (%s), want -EBADMSG\n", r,
                why);
        return 1;
    }
    puts("ok: edgetpu consumer");
    return 0;
}
