/* SPDX-License-Identifier: MIT */
/* Words for errno values and our own codes. */
#include <string.h>

#include <npuvfio/common.h>

const char *npv_strerror(int err)
{
    if (err < 0)
        err = -err;
    switch (err) {
    case NPV_EDEVFAULT:
        return "device fault: the device reported a value that cannot be valid";
    case NPV_ENOTVIABLE:
        return "IOMMU group not viable: another function in the group is bound to a host driver";
    case NPV_EPEERPROTO:
        return "protocol violation by the vfio-user peer";
    case NPV_ENOTSHARED:
        return "memory has no file behind it to share with a device server in another process";
    case NPV_ENOBACKEND:
        return "the kernel or this build lacks the IOMMU backend (legacy VFIO or iommufd) asked "
               "for";
    default:
        break;
    }
    if (err > NPV_ERROR_BASE && err < NPV_ERROR_END)
        return "unknown npuvfio error";
    /* strerrordesc_np is thread-safe and never localised, unlike strerror. */
    const char *s = strerrordesc_np(err);
    return s != NULL ? s : "unknown error";
}
