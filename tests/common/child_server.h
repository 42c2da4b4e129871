/* SPDX-License-Identifier: MIT */
/*
 * A device server (a model, or a scripted fake) in a child process that dies
 * with the test, for every suite that drives a device over vfio-user.
 */
#ifndef NPV_TEST_CHILD_SERVER_H
#define NPV_TEST_CHILD_SERVER_H

#include <sys/types.h>

struct vu_server {
    pid_t pid;
    char dir[64];
    char path[108];
};

/* Run in the child: serve on path until killed. */
typedef void (*vu_server_fn)(const char *path, void *arg);

/*
 * Fork a child running fn on a socket in a new temporary directory; return
 * once the socket exists (the server listens then). A child that dies first,
 * or a socket that never appears within a generous deadline, fails the test.
 */
void vu_server_start(struct vu_server *s, vu_server_fn fn, void *arg);
/* SIGKILL the child and reap it, leaving its socket file as a crash would. */
void vu_server_crash(struct vu_server *s);
/* Serve again on the same socket path after vu_server_crash. */
void vu_server_restart(struct vu_server *s, vu_server_fn fn, void *arg);
/* SIGKILL the child, reap it, remove the socket and its directory. Idempotent. */
void vu_server_kill(struct vu_server *s);

#endif
