/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: the JSON capabilities parser of vfio-user VERSION.
 * Any input must parse or be refused without reading out of bounds; what
 * parses must survive a format/parse round trip unchanged, keys present
 * (what a VERSION reply may name) included.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vfio_user_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct npv_vu_caps c, d;
    /* An exact-size copy so ASan sees any read past the end. */
    char *buf = malloc(size ? size : 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    if (npv_vu_caps_parse(buf, size, &c) == 0) {
        char out[512];
        int n = npv_vu_caps_format(&c, out, sizeof(out));
        if (n < 0 || npv_vu_caps_parse(out, (size_t)n, &d) != 0 || c.max_msg_fds != d.max_msg_fds ||
            c.max_data_xfer_size != d.max_data_xfer_size || c.max_dma_maps != d.max_dma_maps ||
            c.pgsizes != d.pgsizes || c.write_multiple != d.write_multiple ||
            c.twin_socket != d.twin_socket || c.present != d.present ||
            ((c.present & NPV_VU_CAP_TWIN_FD_INDEX) && c.twin_fd_index != d.twin_fd_index))
            abort();
    }
    free(buf);
    return 0;
}
