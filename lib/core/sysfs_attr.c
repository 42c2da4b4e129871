/* SPDX-License-Identifier: MIT */
/* Reading and writing sysfs attributes: one value per file, one store per write(). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sysfs_internal.h"

int npv_sysfs_read_str(const char *path, char *buf, size_t len)
{
    if (len == 0)
        return -EINVAL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t n = 0;
    while (n < len - 1) {
        ssize_t r = read(fd, buf + n, len - 1 - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int err = -errno;
            close(fd);
            return err;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    return (int)n;
}

int npv_sysfs_read_u64(const char *path, uint64_t *out)
{
    char buf[64];
    int ret = npv_sysfs_read_str(path, buf, sizeof(buf));
    if (ret < 0)
        return ret;
    if (ret == 0 || buf[0] == '-')
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 0);
    if (errno != 0 || *end != '\0')
        return -EINVAL;
    *out = v;
    return 0;
}

int npv_sysfs_read_long(const char *path, long *out)
{
    char buf[64];
    int ret = npv_sysfs_read_str(path, buf, sizeof(buf));
    if (ret < 0)
        return ret;
    if (ret == 0)
        return -EINVAL;
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (errno != 0 || *end != '\0')
        return -EINVAL;
    *out = v;
    return 0;
}

int npv_sysfs_write_str(const char *path, const char *text)
{
    /* No O_CREAT: a missing attribute is an error, never a new file in a fake tree. */
    int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t len = strlen(text);
    ssize_t w;
    do {
        w = write(fd, text, len);
    } while (w < 0 && errno == EINTR);
    int err = w < 0 ? -errno : ((size_t)w != len ? -EIO : 0);
    if (close(fd) < 0 && err == 0 && errno != EINTR)
        err = -errno;
    return err;
}

int npv_sysfs_link_name(const char *path, char *buf, size_t len)
{
    char target[PATH_MAX];
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    if (n < 0)
        return -errno;
    target[n] = '\0';
    const char *slash = strrchr(target, '/');
    const char *name = slash ? slash + 1 : target;
    size_t l = strlen(name);
    if (l >= len)
        return -ENAMETOOLONG;
    memcpy(buf, name, l + 1);
    return (int)l;
}
