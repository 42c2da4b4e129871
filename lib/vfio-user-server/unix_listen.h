/* SPDX-License-Identifier: MIT */
/*
 * A listening UNIX socket at a path, as a server of ours takes it: never
 * from a live server, replacing a stale one, and removed only while it is
 * still ours. Used by the vfio-user server (npv_vus_listen) and the owner
 * (serve/owner.c).
 */
#ifndef NPV_UNIX_LISTEN_H
#define NPV_UNIX_LISTEN_H

#include <sys/types.h>

struct npv_unix_listener {
    int fd; /* -1: none */
    char path[108];
    dev_t dev; /* the socket file we bound */
    ino_t ino;
};

/*
 * Listen on path with mode (0600: the user; 0660: and the group) and group
 * gid (-1: the process's). A socket at path that a server still answers on
 * is -EADDRINUSE; a stale one (nothing listening) is replaced; any other
 * file is -EEXIST; -ENAMETOOLONG when path does not fit. The socket is bound
 * and listening under a temporary name, then renamed into place: a client
 * that sees the path can connect.
 */
int npv_unix_listen(const char *path, mode_t mode, long gid, int backlog,
                    struct npv_unix_listener *out);
/* Close the socket; remove its file only if it is still the one we bound. */
void npv_unix_listener_close(struct npv_unix_listener *l);

#endif
