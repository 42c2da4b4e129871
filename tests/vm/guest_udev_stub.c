/* SPDX-License-Identifier: MIT */
/*
 * The guest programs are linked statically (the guest has no shared
 * libraries), but Debian ships libhwloc.a built against libudev and no
 * libudev.a. hwloc asks udev only for names of block devices and treats a
 * failing udev_new() as "no udev"; the guest has no udev daemon anyway.
 * These stand-ins satisfy the static link and say "no udev".
 */
#include <stddef.h>

struct udev;
struct udev_device;

struct udev *udev_new(void);
struct udev *udev_unref(struct udev *udev);
struct udev_device *udev_device_new_from_subsystem_sysname(struct udev *udev, const char *subsystem,
                                                           const char *sysname);
struct udev_device *udev_device_unref(struct udev_device *dev);
const char *udev_device_get_property_value(struct udev_device *dev, const char *key);

struct udev *udev_new(void)
{
    return NULL;
}

struct udev *udev_unref(struct udev *udev)
{
    (void)udev;
    return NULL;
}

struct udev_device *udev_device_new_from_subsystem_sysname(struct udev *udev, const char *subsystem,
                                                           const char *sysname)
{
    (void)udev;
    (void)subsystem;
    (void)sysname;
    return NULL;
}

struct udev_device *udev_device_unref(struct udev_device *dev)
{
    (void)dev;
    return NULL;
}

const char *udev_device_get_property_value(struct udev_device *dev, const char *key)
{
    (void)dev;
    (void)key;
    return NULL;
}
