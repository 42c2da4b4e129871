/* SPDX-License-Identifier: MIT */
/* A listening UNIX socket at a path (unix_listen.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "unix_listen.h"

/*
 * A socket file at path: -EADDRINUSE when a server accepts connections on it
 * (a connect succeeds or finds the backlog full), 0 when it is stale. The
 * probe connection is closed at once; a server sees a client that left
 * before VERSION. Two servers starting in the same instant can still both
 * find a stale socket; the later rename wins the path.
 */
static int probe_live(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    int err = r == 0 ? 0 : errno;
    close(fd);
    if (r == 0 || err == EAGAIN || err == EINPROGRESS)
        return -EADDRINUSE;
    if (err == ECONNREFUSED || err == ENOENT)
        return 0;
    return -err;
}

int npv_unix_listen(const char *path, mode_t mode, long gid, int backlog,
                    struct npv_unix_listener *out)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct stat st;
    int fd, r;

    out->fd = -1;
    int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s.%d.tmp", path, (int)getpid());
    if (n < 0 || (size_t)n >= sizeof(sa.sun_path) || strlen(path) >= sizeof(out->path))
        return -ENAMETOOLONG;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return -EEXIST;
        r = probe_live(path);
        if (r < 0)
            return r;
    }
    unlink(sa.sun_path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    /*
     * Whoever connects gets a device's DMA into their memory and ours: no
     * wider than mode. Linux takes the bound file's mode from the socket
     * inode, so fchmod before bind leaves no window at a wider mode.
     */
    if (fchmod(fd, mode) < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        r = -errno;
        goto err_close;
    }
    /* The group first, then the mode that opens it to the group; rename() replaces a stale socket.
     */
    if ((gid >= 0 && chown(sa.sun_path, (uid_t)-1, (gid_t)gid) < 0) ||
        chmod(sa.sun_path, mode) < 0 || listen(fd, backlog) < 0 || rename(sa.sun_path, path) < 0) {
        r = -errno;
        goto err_unlink;
    }
    if (lstat(path, &st) < 0) {
        r = -errno;
        goto err_close;
    }
    out->fd = fd;
    strcpy(out->path, path);
    out->dev = st.st_dev;
    out->ino = st.st_ino;
    return 0;

err_unlink:
    unlink(sa.sun_path);
err_close:
    close(fd);
    return r;
}

void npv_unix_listener_close(struct npv_unix_listener *l)
{
    struct stat st;
    if (l->fd < 0)
        return;
    close(l->fd);
    l->fd = -1;
    /* Remove the file only while it is the one we bound: another server may have replaced it. */
    if (l->path[0] != '\0' && lstat(l->path, &st) == 0 && st.st_dev == l->dev &&
        st.st_ino == l->ino)
        unlink(l->path);
    l->path[0] = '\0';
}
