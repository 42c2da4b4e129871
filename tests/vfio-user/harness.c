/* SPDX-License-Identifier: MIT */
#include "harness.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <npuvfio/ctx.h>

#include "model.h"
#include "vfio_user_server_internal.h"

static void nap_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool probe_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    bool ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

void vu_serve_testdev(const char *path, void *arg)
{
    (void)arg;
    int r = npv_testdev_serve(path, false);
    if (r < 0)
        fprintf(stderr, "testdev server: %s\n", npv_strerror(r));
}

void vu_serve_testdev_single_socket(const char *path, void *arg)
{
    (void)arg;
    struct npv_ctx *ctx;
    struct npv_testdev_model *td;
    if (npv_ctx_new(&ctx) < 0 || npv_testdev_model_new(ctx, &td) < 0)
        _exit(2);
    struct npv_vus *srv = npv_testdev_model_server(td);
    srv->cfg.single_socket = true;
    int r = npv_vus_listen(srv, path);
    if (r == 0)
        r = npv_vus_run(srv, false);
    if (r < 0)
        fprintf(stderr, "testdev server: %s\n", npv_strerror(r));
    npv_testdev_model_free(td);
    npv_ctx_free(ctx);
}

int fake_twin_sock = -1;

/* The fake's VERSION reply, with the twin-socket claim f asks for. */
static void fake_version(int sock, const struct vu_fake *f, const struct npv_vu_msg *m)
{
    char body[256];
    struct npv_vu_version v = {.major = f->major, .minor = 0};
    char xfer[48] = "";
    if (f->max_data_xfer_size != 0)
        snprintf(xfer, sizeof(xfer), ",\"max_data_xfer_size\":%u", f->max_data_xfer_size);
    const char *twin =
        f->twin == FAKE_TWIN_OFFER       ? ",\"twin_socket\":{\"supported\":true,\"fd_index\":0}"
        : f->twin == FAKE_TWIN_NO_INDEX  ? ",\"twin_socket\":{\"supported\":true}"
        : f->twin == FAKE_TWIN_BAD_INDEX ? ",\"twin_socket\":{\"supported\":true,\"fd_index\":3}"
                                         : "";
    memcpy(body, &v, sizeof(v));
    int n = snprintf(body + sizeof(v), sizeof(body) - sizeof(v),
                     "{\"capabilities\":{\"max_msg_fds\":8%s%s%s}}", xfer, twin,
                     f->write_multiple ? ",\"write_multiple\":true" : "");
    int pair[2] = {-1, -1};
    if (f->twin != FAKE_TWIN_NONE && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
        _exit(4);
    fake_reply_fds(sock, m, body, sizeof(v) + (size_t)n + 1, pair[1] >= 0 ? &pair[1] : NULL,
                   pair[1] >= 0 ? 1 : 0);
    if (pair[1] >= 0)
        close(pair[1]);
    if (fake_twin_sock >= 0)
        close(fake_twin_sock);
    fake_twin_sock = pair[0];
}

/* Bind under a temporary name and rename into place: the path exists only once it listens. */
void vu_serve_fake(const char *path, void *arg)
{
    const struct vu_fake *f = arg;
    char tmp[108];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", tmp);
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 4) < 0 ||
        rename(tmp, path) < 0)
        _exit(2);
    for (unsigned nth = 0;; nth++) {
        int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            _exit(3);
        f->script(c, nth, f);
        close(c);
    }
}

void fake_send(int sock, struct npv_vu_hdr *h, const void *body, size_t len)
{
    if (npv_vu_send(sock, h, body, len, NULL, 0, (int64_t)GENEROUS_NS) < 0)
        _exit(5);
}

void fake_reply_fds(int sock, const struct npv_vu_msg *m, const void *body, size_t len,
                    const int *fds, unsigned nr_fds)
{
    struct npv_vu_hdr h = {
        .msg_id = m->hdr.msg_id, .cmd = m->hdr.cmd, .flags = NPV_VU_F_TYPE_REPLY};
    if (npv_vu_send(sock, &h, body, len, fds, nr_fds, (int64_t)GENEROUS_NS) < 0)
        _exit(5);
}

void fake_reply(int sock, const struct npv_vu_msg *m, const void *body, size_t len)
{
    fake_reply_fds(sock, m, body, len, NULL, 0);
}

void fake_hang(void)
{
    for (;;)
        pause();
}

int fake_next(int sock, const struct vu_fake *f, struct npv_vu_msg *m)
{
    for (;;) {
        if (npv_vu_recv(sock, m, 1u << 22, NPV_VU_MAX_MSG_FDS, (int64_t)GENEROUS_NS) < 0)
            return -1;
        if (m->hdr.cmd == NPV_VU_CMD_VERSION) {
            fake_version(sock, f, m);
        } else if (m->hdr.cmd == NPV_VU_CMD_DEVICE_GET_INFO) {
            struct npv_vu_device_info di = {.argsz = sizeof(di), .num_regions = 9, .num_irqs = 5};
            fake_reply(sock, m, &di, sizeof(di));
        } else {
            return 0;
        }
        npv_vu_msg_release(m);
    }
}

int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own fd */
}

int count_maps(void)
{
    FILE *fp = fopen("/proc/self/maps", "re");
    ck_assert_ptr_nonnull(fp);
    int n = 0, c;
    while ((c = fgetc(fp)) != EOF)
        n += c == '\n';
    fclose(fp);
    return n;
}

/* ---- the test device ---- */

void td_open(struct td *t, const char *path)
{
    memset(t, 0, sizeof(*t));
    ck_assert_int_eq(npv_ctx_new(&t->ctx), 0);
    ck_assert_int_eq(npv_domain_new(t->ctx, NULL, &t->dom), 0);
    /* npv_vus_listen binds before it listens: wait until a connection is taken. */
    uint64_t deadline = mono_ns() + GENEROUS_NS;
    while (!probe_connect(path)) {
        ck_assert_msg(mono_ns() < deadline, "server never accepted");
        nap_ms(5);
    }
    struct npv_dev_opts opts = {.request_timeout_ns = GENEROUS_NS};
    int r = npv_dev_open_vfio_user(t->ctx, path, t->dom, &opts, &t->dev);
    ck_assert_msg(r == 0, "open: %s", npv_strerror(r));
    ck_assert_int_eq(npv_bar_map(t->dev, 0, &t->bar), 0);
}

void td_close(struct td *t)
{
    npv_testdev_close(t->drv);
    npv_bar_unmap(t->bar);
    npv_dev_close(t->dev);
    npv_domain_put(t->dom);
    npv_ctx_free(t->ctx);
    memset(t, 0, sizeof(*t));
}

void td_enable(struct td *t, bool irq)
{
    int r;
    if (t->drv == NULL) {
        struct npv_testdev_config cfg = {.entries = TD_ENTRIES, .irq = irq};
        r = npv_testdev_open(t->dev, &cfg, &t->drv);
        ck_assert_msg(r == 0, "testdev open: %s", npv_strerror(r));
        t->ring = npv_testdev_ring(t->drv);
    } else {
        ck_assert_msg((npv_testdev_irq(t->drv) != NULL) == irq, "irq differs from the open");
        r = npv_testdev_reset(t->drv);
        ck_assert_msg(r == 0, "testdev reset: %s", npv_strerror(r));
        /* Jobs the reset cancelled are not this test's news. */
        struct npv_cpl c[TD_ENTRIES];
        while (npv_ring_poll(t->ring, c, TD_ENTRIES) > 0)
            ;
    }
    ck_assert(td_state(t).running);
}

void td_submit(struct td *t, const struct npv_testdev_desc *d)
{
    ck_assert_int_eq(npv_ring_push(t->ring, d, 0), 0);
    ck_assert_int_eq(npv_ring_submit(t->ring), 1);
}

int td_wait(struct td *t, uint64_t timeout_ns, struct npv_cpl *last)
{
    struct npv_cpl c[TD_ENTRIES];
    unsigned n = npv_ring_in_flight(t->ring);
    ck_assert_uint_gt(n, 0);
    int got = npv_testdev_wait(t->drv, NPV_RING_WAIT_POLL, n, timeout_ns, c);
    if (got == -ETIMEDOUT || (got >= 0 && (unsigned)got < n))
        return -ETIMEDOUT;
    ck_assert_msg(got == (int)n, "wait: %s", npv_strerror(got));
    *last = c[n - 1];
    return 0;
}

struct npv_testdev_state td_state(struct td *t)
{
    struct npv_testdev_state st;
    ck_assert_int_eq(npv_testdev_state(t->drv, &st), 0);
    return st;
}
