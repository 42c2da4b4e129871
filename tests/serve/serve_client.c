/* SPDX-License-Identifier: MIT */
/*
 * A client of `npuvfio serve` for the sharing tests: the unchanged RKNPU
 * driver on the owner's virtual device (npv_dev_open_vfio_user), doing what
 * one test step asks and saying on stdout what happened, one line per fact.
 *
 *   serve_client SOCKET MODE [ARG]
 *   runs N        N exact int8 matmuls, one after another; "ok N" at the end
 *   cores N       N rounds of three matmuls at once, one per core; "ok N"
 *   die K         K exact matmuls, then submit one more and SIGKILL itself
 *   victim BYTES  map BYTES of padding, then a 64 KiB pattern buffer, read by
 *                 a run of ours; print "iova 0x..", wait for a line on stdin, print "intact" or
 *                 "changed" and exit 0 / 1
 *   write IOVA    a matmul whose C is at IOVA (not mapped by this client):
 *                 print "status E" (the job's status, -EIO expected)
 *   read IOVA     the same with A at IOVA
 *   map BYTES     a buffer of BYTES: "map E" (its error, 0 on success), one
 *                 matmul ("run 0 status E" when it fails), the buffer freed,
 *                 one more exact matmul: "ok 1"
 *   burst         three matmuls started at once: "accepted N refused M",
 *                 each accepted one exact
 *   shortmap      map a memfd of one page as two pages (the second past the
 *                 file's end) and run a matmul whose A lies in the second:
 *                 print "status E" (its error; a read past a file's end
 *                 cannot succeed)
 *   hoard N       a raw vfio-user client (no driver): VERSION, then N DMA_MAPs
 *                 of one 4 KiB memfd page at N IOVAs; print "hoard A refused R err E"
 *                 (maps accepted, refused, the first refusal's errno), hold them until a line on
 * stdin orphan [1]    one exact matmul, "ready", wait for a line on stdin (the owner is killed
 * meanwhile), then one more: "after E" (its error) within the job deadline; with 1, wait for
 * another line (a new owner), open again and run: "again ok 1" Exit 0 when the step went as its
 * line says, 1 otherwise, 2 on a usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include <npuvfio/rknpu.h>

#include "regs.h"
#include "sample.h"
#include "vfio_user_msg.h"

#define WAIT_NS 10000000000ull /* 10 s: far beyond any run; a hang is a failure */

static const struct rknpu_sample_shape SHAPE = {
    .dtype = NPV_RKNPU_INT8, .m = 64, .k = 64, .n = 64, .bias = true, .relu = false};

struct client {
    struct npv_ctx *ctx;
    struct npv_domain *dom;
    struct npv_dev *dev;
    struct npv_rknpu *npu;
};

static int client_open(const char *socket, struct client *c)
{
    int r = npv_ctx_new(&c->ctx);
    if (r == 0)
        r = npv_domain_new(c->ctx, NULL, &c->dom);
    if (r == 0)
        r = npv_dev_open_vfio_user(c->ctx, socket, c->dom, NULL, &c->dev);
    if (r == 0)
        r = npv_rknpu_open(c->dev, NULL, &c->npu);
    if (r < 0)
        printf("open %d\n", r);
    return r;
}

static void client_close(struct client *c)
{
    npv_rknpu_close(c->npu);
    if (c->dev != NULL)
        npv_dev_close(c->dev);
    npv_domain_put(c->dom);
    npv_ctx_free(c->ctx);
}

/* Run the prepared matmul on core_mask and wait: its status. */
static int run_one(struct client *c, struct rknpu_sample_mm *s, const struct npv_rknpu_task *task,
                   uint32_t core_mask)
{
    struct npv_rknpu_job job = {
        .tasks = task, .nr_tasks = 1, .core_mask = core_mask, .domain_id = 0, .cookie = 1};
    int r = npv_rknpu_submit(c->npu, &job);
    if (r < 0)
        return r;
    struct npv_cpl cpl;
    r = npv_rknpu_wait(c->npu, 1, WAIT_NS, &cpl, 1);
    if (r < 0)
        return r;
    if (r == 0)
        return -ETIMEDOUT;
    (void)s;
    return cpl.status;
}

/* n exact matmuls; 0 or the first failure (printed). */
static int exact_runs(struct client *c, unsigned n, uint32_t seed)
{
    struct rknpu_sample_mm *s;
    int r = rknpu_sample_mm_new(c->npu, &SHAPE, 0, 0, seed, &s);
    if (r < 0) {
        printf("sample %d\n", r);
        return r;
    }
    for (unsigned i = 0; i < n && r == 0; i++) {
        rknpu_sample_mm_poison(s);
        r = run_one(c, s, &s->task, 0);
        uint64_t bad = r == 0 ? rknpu_sample_mm_check(s) : 0;
        if (r < 0)
            printf("run %u status %d\n", i, r);
        else if (bad != 0) {
            printf("run %u wrong %" PRIu64 "\n", i, bad);
            r = -EBADMSG;
        }
    }
    rknpu_sample_mm_free(s);
    return r;
}

/* Three matmuls at once on the three cores, rounds times; 0 or the first failure. */
static int core_rounds(struct client *c, unsigned rounds)
{
    struct rknpu_sample_mm *s[3] = {NULL, NULL, NULL};
    int r = 0;
    for (unsigned k = 0; k < 3 && r == 0; k++)
        r = rknpu_sample_mm_new(c->npu, &SHAPE, 0, 0, 100 + k, &s[k]);
    for (unsigned i = 0; i < rounds && r == 0; i++) {
        for (unsigned k = 0; k < 3 && r == 0; k++) {
            rknpu_sample_mm_poison(s[k]);
            struct npv_rknpu_job job = {.tasks = &s[k]->task,
                                        .nr_tasks = 1,
                                        .core_mask = 1u << k,
                                        .domain_id = 0,
                                        .cookie = k};
            r = npv_rknpu_submit(c->npu, &job);
        }
        unsigned got = 0;
        while (r == 0 && got < 3) {
            struct npv_cpl cpl[3];
            int n = npv_rknpu_wait(c->npu, 1, WAIT_NS, cpl, 3);
            if (n <= 0) {
                r = n < 0 ? n : -ETIMEDOUT;
                break;
            }
            for (int j = 0; j < n && r == 0; j++)
                if (cpl[j].status != 0)
                    r = cpl[j].status;
            got += (unsigned)n;
        }
        for (unsigned k = 0; k < 3 && r == 0; k++)
            if (rknpu_sample_mm_check(s[k]) != 0)
                r = -EBADMSG;
        if (r < 0)
            printf("round %u status %d\n", i, r);
    }
    for (unsigned k = 0; k < 3; k++)
        if (s[k] != NULL)
            rknpu_sample_mm_free(s[k]);
    return r;
}

/* A matmul of ours with C (or A) moved to iova: the job's status. */
static int run_redirected(struct client *c, npv_iova_t iova, bool output)
{
    struct rknpu_sample_mm *s;
    int r = rknpu_sample_mm_new(c->npu, &SHAPE, 0, 0, 7, &s);
    if (r < 0)
        return r;
    struct npv_rknpu_matmul mm = s->mm;
    if (output)
        mm.c = iova;
    else
        mm.a = iova;
    uint64_t regcmd[NPV_RKNPU_MATMUL_MAX_WORDS];
    struct npv_rknpu_task task;
    r = npv_rknpu_matmul_task(&mm, regcmd, NPV_RKNPU_MATMUL_MAX_WORDS, &task);
    if (r >= 0)
        r = run_one(c, s, &task, 0);
    rknpu_sample_mm_free(s);
    return r;
}

static int wait_line(void);

#define RAW_TIMEOUT_NS (10ll * 1000000000ll)

/* One command on a raw vfio-user connection: 0 (its reply's error in *err), or a transport error.
 */
static int raw_call(int sock, uint16_t id, uint16_t cmd, const void *body, size_t len, int fd,
                    uint32_t *err)
{
    struct npv_vu_hdr h = {.msg_id = id, .cmd = cmd};
    int r = npv_vu_send(sock, &h, body, len, fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0, RAW_TIMEOUT_NS);
    struct npv_vu_msg rep;
    if (r == 0)
        r = npv_vu_recv(sock, &rep, 1u << 20, 4, RAW_TIMEOUT_NS);
    if (r == 0) {
        *err = (rep.hdr.flags & NPV_VU_F_ERROR) ? rep.hdr.error : 0;
        npv_vu_msg_release(&rep);
    }
    return r;
}

/* Connect to the owner's socket: the socket, or -1 ("connect E" on stdout). */
static int raw_connect(const char *path)
{
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (sock < 0 || connect(sock, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        printf("connect %d\n", -errno);
        if (sock >= 0)
            close(sock);
        return -1;
    }
    return sock;
}

/* Connect and negotiate by hand: the socket, or -1 (said on stdout). */
static int raw_open(const char *path)
{
    int sock = raw_connect(path);
    if (sock < 0)
        return -1;
    char ver[64] = {0};
    const char *json = "{\"capabilities\":{\"max_msg_fds\":1}}";
    memcpy(ver + 4, json, strlen(json) + 1);
    uint32_t err = 0;
    int r = raw_call(sock, 1, NPV_VU_CMD_VERSION, ver, 4 + strlen(json) + 1, -1, &err);
    if (r < 0 || err != 0) {
        printf("version %d\n", r < 0 ? r : -(int)err);
        close(sock);
        return -1;
    }
    return sock;
}

/*
 * A client speaking the protocol by hand, as any process on the socket may:
 * n maps of the same page, each one a mapping of its own in the owner.
 */
static int hoard(const char *path, unsigned n)
{
    int sock = raw_open(path);
    if (sock < 0)
        return -1;
    uint32_t err = 0;
    int r = 0;
    int mem = memfd_create("serve-hoard", MFD_CLOEXEC);
    if (mem < 0 || ftruncate(mem, 4096) != 0) {
        printf("memfd %d\n", -errno);
        return -1;
    }
    unsigned accepted = 0, refused = 0;
    uint32_t first_err = 0;
    for (unsigned i = 0; i < n && r == 0; i++) {
        struct npv_vu_dma_map m = {.argsz = sizeof(m),
                                   .flags = NPV_VU_DMA_FLAG_READ | NPV_VU_DMA_FLAG_WRITE,
                                   .address = 0x100000 + (uint64_t)i * 4096,
                                   .size = 4096};
        r = raw_call(sock, (uint16_t)(2 + i), NPV_VU_CMD_DMA_MAP, &m, sizeof(m), mem, &err);
        if (r == 0 && err == 0)
            accepted++;
        else if (r == 0 && refused++ == 0)
            first_err = err;
    }
    printf("hoard %u refused %u err %u\n", accepted, refused, first_err);
    close(mem);
    if (r == 0)
        r = wait_line();
    close(sock);
    return r;
}

/* A 32-bit register write to BAR0 (region 0) on a raw connection: 0 or the error. */
static int raw_reg_write(int sock, uint16_t id, uint32_t off, uint32_t v)
{
    uint8_t buf[sizeof(struct npv_vu_region_access) + 4];
    struct npv_vu_region_access a = {.offset = off, .region = 0, .count = 4};
    memcpy(buf, &a, sizeof(a));
    memcpy(buf + sizeof(a), &v, 4);
    uint32_t err = 0;
    int r = raw_call(sock, id, NPV_VU_CMD_REGION_WRITE, buf, sizeof(buf), -1, &err);
    return r < 0 ? r : -(int)err;
}

/*
 * A run no core can take: core 0's PC programmed by hand with TASK_CON's
 * task number 0, then OPERATION_ENABLE's edge. The virtual core accepts it
 * (the register rules hold), the real driver refuses it.
 */
static int bad_run(const char *path)
{
    int sock = raw_open(path);
    if (sock < 0)
        return -1;
    uint32_t pc = RKNPU_CORE_BASE(0);
    int r = raw_reg_write(sock, 2, pc + RKNPU_PC_BASE_ADDRESS, 0x100000);
    if (r == 0)
        r = raw_reg_write(sock, 3, pc + RKNPU_PC_REGISTER_AMOUNTS, 1);
    if (r == 0)
        r = raw_reg_write(sock, 4, pc + RKNPU_PC_INTERRUPT_MASK, RKNPU_INT_DPU_DONE);
    if (r == 0)
        r = raw_reg_write(sock, 5, pc + RKNPU_PC_TASK_CON, 0);
    if (r == 0)
        r = raw_reg_write(sock, 6, pc + RKNPU_PC_OPERATION_ENABLE, RKNPU_PC_OP_EN);
    printf("started %d\n", r);
    if (r == 0)
        r = wait_line();
    close(sock);
    return r;
}

/*
 * Connect and say nothing, as any process on the socket may: "closed" once
 * the owner ends the connection, "open" if it still holds it after 30 s.
 */
static int silent(const char *path)
{
    int sock = raw_connect(path);
    if (sock < 0)
        return -1;
    struct pollfd p = {.fd = sock, .events = POLLIN};
    char b;
    bool closed = poll(&p, 1, 30000) == 1 && read(sock, &b, 1) <= 0;
    printf("%s\n", closed ? "closed" : "open");
    close(sock);
    return closed ? 0 : -1;
}

/*
 * n connections that send nothing, held until a line on stdin: "held N"
 * (those the socket's backlog took at once; the others are given up).
 */
static int silent_many(const char *path, unsigned n)
{
    int socks[64];
    unsigned held = 0;
    for (unsigned i = 0; i < n && i < 64; i++) {
        int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        if (sock >= 0 && connect(sock, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            socks[held++] = sock;
        else if (sock >= 0)
            close(sock);
    }
    printf("held %u\n", held);
    int r = wait_line();
    for (unsigned i = 0; i < held; i++)
        close(socks[i]);
    return r;
}

static int wait_line(void)
{
    char line[64];
    return fgets(line, sizeof(line), stdin) != NULL ? 0 : -EPIPE;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argv[2];
    unsigned long long arg = argc > 3 ? strtoull(argv[3], NULL, 0) : 0;
    if (strcmp(mode, "hoard") == 0)
        return hoard(argv[1], (unsigned)arg) == 0 ? 0 : 1;
    if (strcmp(mode, "silentmany") == 0)
        return silent_many(argv[1], (unsigned)arg) == 0 ? 0 : 1;
    if (strcmp(mode, "silent") == 0)
        return silent(argv[1]) == 0 ? 0 : 1;
    if (strcmp(mode, "badrun") == 0)
        return bad_run(argv[1]) == 0 ? 0 : 1;
    struct client c = {0};
    if (client_open(argv[1], &c) < 0) {
        client_close(&c);
        return 1;
    }
    int ok = 0;
    if (strcmp(mode, "runs") == 0) {
        ok = exact_runs(&c, (unsigned)arg, (uint32_t)getpid()) == 0;
        if (ok)
            printf("ok %llu\n", arg);
    } else if (strcmp(mode, "cores") == 0) {
        ok = core_rounds(&c, (unsigned)arg) == 0;
        if (ok)
            printf("ok %llu\n", arg);
    } else if (strcmp(mode, "die") == 0) {
        struct rknpu_sample_mm *s;
        if (exact_runs(&c, (unsigned)arg, 3) == 0 &&
            rknpu_sample_mm_new(c.npu, &SHAPE, 0, 0, 5, &s) == 0) {
            struct npv_rknpu_job job = {.tasks = &s->task, .nr_tasks = 1, .cookie = 9};
            int r = npv_rknpu_submit(c.npu, &job);
            /* The start's register writes are posted: out to the owner before we die. */
            int f = npv_dev_flush(c.dev);
            printf("submitted %d\n", r < 0 ? r : f);
            kill(getpid(), SIGKILL); /* with the run on its way: no clean-up of any kind */
        }
    } else if (strcmp(mode, "victim") == 0) {
        struct npv_rknpu_mem *pad = NULL, *pat = NULL;
        int r = npv_rknpu_mem_create(c.npu, arg, 0, 0, &pad);
        if (r == 0)
            r = npv_rknpu_mem_create(c.npu, 65536, 0, 0, &pat);
        if (r == 0) {
            uint8_t *p = npv_rknpu_mem_vaddr(pat);
            for (size_t i = 0; i < 65536; i++)
                p[i] = (uint8_t)(i * 7 + 1);
            npv_rknpu_mem_sync_for_device(pat, 0, 65536);
            /*
             * A run of ours that reads the pattern: our maps reach the owner
             * when our driver first switches to our domain, and this shows
             * the pattern is mapped on the device, in our domain.
             */
            r = run_redirected(&c, npv_rknpu_mem_iova(pat), false);
            if (r == 0)
                printf("iova 0x%llx\n", (unsigned long long)npv_rknpu_mem_iova(pat));
            else
                printf("own read %d\n", r);
        }
        if (r == 0) {
            r = wait_line();
        }
        if (r == 0) {
            uint8_t *p = npv_rknpu_mem_vaddr(pat);
            npv_rknpu_mem_sync_for_cpu(pat, 0, 65536);
            ok = 1;
            for (size_t i = 0; i < 65536; i++)
                if (p[i] != (uint8_t)(i * 7 + 1))
                    ok = 0;
            printf("%s\n", ok ? "intact" : "changed");
        }
        npv_rknpu_mem_destroy(pat);
        npv_rknpu_mem_destroy(pad);
    } else if (strcmp(mode, "write") == 0 || strcmp(mode, "read") == 0) {
        int st = run_redirected(&c, arg, mode[0] == 'w');
        printf("status %d\n", st);
        ok = 1;
    } else if (strcmp(mode, "map") == 0) {
        struct npv_rknpu_mem *m = NULL;
        int r = npv_rknpu_mem_create(c.npu, arg, 0, 0, &m);
        printf("map %d\n", r);
        /* Our maps reach the owner with our first run: it tells the refusal. */
        exact_runs(&c, 1, 11);
        npv_rknpu_mem_destroy(m);
        ok = exact_runs(&c, 1, 11) == 0;
        if (ok)
            printf("ok 1\n");
    } else if (strcmp(mode, "burst") == 0) {
        struct rknpu_sample_mm *s[3] = {NULL, NULL, NULL};
        int r = 0;
        for (unsigned k = 0; k < 3 && r == 0; k++)
            r = rknpu_sample_mm_new(c.npu, &SHAPE, 0, 0, 200 + k, &s[k]);
        unsigned accepted = 0, refused = 0, exact = 0;
        unsigned submitted = 0;
        for (unsigned k = 0; k < 3 && r == 0; k++) {
            struct npv_rknpu_job job = {
                .tasks = &s[k]->task, .nr_tasks = 1, .core_mask = 1u << k, .cookie = k};
            if (npv_rknpu_submit(c.npu, &job) == 0)
                submitted++;
            else
                refused++; /* the owner refused its start: the submit says so */
        }
        for (unsigned got = 0; r == 0 && got < submitted;) {
            struct npv_cpl cpl[3];
            int n = npv_rknpu_wait(c.npu, 1, WAIT_NS, cpl, 3);
            if (n <= 0) {
                r = -ETIMEDOUT;
                break;
            }
            for (int j = 0; j < n; j++) {
                if (cpl[j].status == 0) {
                    accepted++;
                    exact += rknpu_sample_mm_check(s[cpl[j].cookie]) == 0;
                } else {
                    refused++;
                }
            }
            got += (unsigned)n;
        }
        printf("accepted %u refused %u exact %u\n", accepted, refused, exact);
        ok = r == 0 && exact == accepted;
        for (unsigned k = 0; k < 3; k++)
            if (s[k] != NULL)
                rknpu_sample_mm_free(s[k]);
    } else if (strcmp(mode, "shortmap") == 0) {
        /*
         * mmap lets a mapping run past its file's end; touching that part
         * is SIGBUS. Our driver maps it as any shared memory (the pages are
         * never touched here), and the owner must not let it reach a
         * process that would touch it.
         */
        int mfd = memfd_create("serve-shortmap", MFD_CLOEXEC);
        void *p = MAP_FAILED;
        if (mfd >= 0 && ftruncate(mfd, 4096) == 0)
            p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
        struct npv_dma *dma = NULL;
        struct npv_rknpu_mem *m = NULL;
        int r = p != MAP_FAILED ? npv_dma_wrap(c.ctx, p, 8192, mfd, 0, 0, &dma) : -errno;
        if (r == 0)
            r = npv_rknpu_mem_wrap(c.npu, dma, 0, &m);
        if (r == 0)
            r = run_redirected(&c, npv_rknpu_mem_iova(m) + 4096, false);
        printf("status %d\n", r);
        ok = 1;
        if (m != NULL)
            npv_rknpu_mem_unwrap(m);
        npv_dma_free(dma);
        if (p != MAP_FAILED)
            munmap(p, 8192);
        if (mfd >= 0)
            close(mfd);
    } else if (strcmp(mode, "orphan") == 0) {
        struct rknpu_sample_mm *s;
        if (exact_runs(&c, 1, 13) == 0 && rknpu_sample_mm_new(c.npu, &SHAPE, 0, 0, 5, &s) == 0) {
            printf("ready\n");
            if (wait_line() == 0) {
                int st = run_one(&c, s, &s->task, 0);
                printf("after %d\n", st);
                ok = st != 0;
            }
            rknpu_sample_mm_free(s);
        }
        /*
         * With arg 1: wait for another line (a new owner started meanwhile),
         * then open the device again and run exact: "again ok 1".
         */
        if (ok && arg == 1 && wait_line() == 0) {
            client_close(&c);
            c = (struct client){0};
            ok = client_open(argv[1], &c) == 0 && exact_runs(&c, 1, 17) == 0;
            if (ok)
                printf("again ok 1\n");
        }
    } else {
        client_close(&c);
        return 2;
    }
    client_close(&c);
    return ok ? 0 : 1;
}
