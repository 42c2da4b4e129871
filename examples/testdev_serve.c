/* SPDX-License-Identifier: MIT */
/*
 * A serving loop: one thread per device, each with its own ring, keeping
 * several jobs in flight, waiting in hybrid mode, giving every job its own
 * deadline, and stopping cleanly on SIGINT/SIGTERM or after N jobs.
 *
 *   npuvfio sim --device testdev --socket /tmp/a.sock &
 *   npuvfio sim --device testdev --socket /tmp/b.sock &
 *   testdev_serve --jobs 2000 /tmp/a.sock /tmp/b.sock
 *
 *   cc testdev_serve.c $(pkg-config --cflags --libs npuvfio-testdev) -pthread
 *
 * Why a ring per thread: a ring is used by one thread at a time (ring.h), so
 * giving each thread its own device, domain and context means the hot path
 * takes no lock at all. Several threads on one ring would need one.
 */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include <npuvfio/ring.h>
#include <npuvfio/testdev.h>

#define MAX_DEVICES 16
#define DEPTH       8u    /* jobs in flight per ring */
#define SLOT_BYTES  4096u /* one FILL target per job in flight */
/* A job's own deadline: a job the device has not finished by then is failed
 * with -ETIMEDOUT and the device reset, whatever the caller is doing. */
#define JOB_DEADLINE_NS (2ull * 1000000000ull)
/* A wait's timeout is not a deadline: it only bounds how long we go without
 * looking at the stop flag. */
#define WAIT_NS (100ull * 1000000ull)
/* Spin this long before sleeping on the interrupt: a job on the model takes a
 * few microseconds, so most completions are caught spinning, without a
 * system call; an idle thread sleeps instead of burning a core. */
#define SPIN_NS (20ull * 1000ull)

/* Set by the signal handler; read by every thread between waits. */
static atomic_bool stop_requested;
/* Jobs still to be started across all threads (the --jobs budget). */
static atomic_long jobs_left;

struct worker {
    const char *socket;
    pthread_t thread;
    unsigned long completed, failed, wrong;
    int error; /* a setup error, or 0 */
};

static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&stop_requested, true);
}

/* A job's cookie carries its slot and the byte it asked for, so a
 * completion can be checked without a side table. */
static uint64_t cookie_of(unsigned slot, uint8_t byte)
{
    return (uint64_t)slot << 8 | byte;
}

static bool take_job(void)
{
    if (atomic_load(&stop_requested))
        return false;
    return atomic_fetch_sub(&jobs_left, 1) > 0;
}

static void check_completion(struct worker *w, const struct npv_cpl *c, struct npv_dma *buf,
                             unsigned *free_slots, unsigned *nfree)
{
    unsigned slot = (unsigned)(c->cookie >> 8);
    uint8_t byte = (uint8_t)c->cookie;
    free_slots[(*nfree)++] = slot;
    if (c->status != 0) {
        /* -ETIMEDOUT: its deadline passed; -ECANCELED: failed with another. */
        fprintf(stderr, "%s: job failed: %s (device error %u)\n", w->socket,
                npv_strerror(c->status), c->dev_error);
        w->failed++;
        return;
    }
    npv_dma_sync_for_cpu(buf, (size_t)slot * SLOT_BYTES, SLOT_BYTES);
    const uint8_t *p = (const uint8_t *)npv_dma_vaddr(buf) + (size_t)slot * SLOT_BYTES;
    for (unsigned i = 0; i < SLOT_BYTES; i++) {
        if (p[i] != byte) {
            w->wrong++;
            return;
        }
    }
    w->completed++;
}

/* Keep DEPTH jobs in flight until told to stop, then drain what is in flight. */
static int serve(struct worker *w, struct npv_testdev *td, struct npv_dma *buf, npv_iova_t iova)
{
    struct npv_ring *ring = npv_testdev_ring(td);
    unsigned free_slots[DEPTH], nfree = DEPTH;
    for (unsigned i = 0; i < DEPTH; i++)
        free_slots[i] = i;
    uint8_t next_byte = 1;
    bool more = true;
    struct npv_cpl cpl[DEPTH];

    for (;;) {
        while (more && nfree > 0) {
            if (!take_job()) {
                more = false;
                break;
            }
            unsigned slot = free_slots[--nfree];
            void *desc;
            int r = npv_ring_next_timed(ring, cookie_of(slot, next_byte), JOB_DEADLINE_NS, &desc);
            if (r < 0) {
                free_slots[nfree++] = slot;
                return r; /* -EIO: the ring is dead (a reset failed) */
            }
            /* The IRQ flag is what lets a hybrid wait sleep: without it the
             * device completes silently and only spinning would notice. */
            *(struct npv_testdev_desc *)desc = npv_testdev_fill(
                iova + (npv_iova_t)slot * SLOT_BYTES, next_byte, SLOT_BYTES, NPV_TESTDEV_DESC_IRQ);
            next_byte = next_byte == 0xff ? 1 : (uint8_t)(next_byte + 1);
        }
        /* One doorbell for the whole batch: MMIO writes are the slow part. */
        npv_ring_submit(ring);
        if (nfree == DEPTH)
            return 0; /* stopped and every job reaped */
        /* Jobs may be finished and not yet reaped: collect those without a wait. */
        int n = npv_ring_in_flight(ring) == 0
                    ? npv_ring_poll(ring, cpl, DEPTH)
                    : npv_ring_wait(ring, NPV_RING_WAIT_HYBRID, 1, WAIT_NS, cpl, DEPTH);
        if (n < 0 && n != -NPV_EDEVFAULT)
            return n;
        for (int i = 0; i < n; i++)
            check_completion(w, &cpl[i], buf, free_slots, &nfree);
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct npv_ctx *ctx = NULL;
    struct npv_domain *dom = NULL;
    struct npv_dev *dev = NULL;
    struct npv_testdev *td = NULL;
    struct npv_dma *buf = NULL;
    npv_iova_t iova;
    struct npv_testdev_config cfg = {.entries = 64, .irq = true, .spin_ns = SPIN_NS};

    int r = npv_ctx_new(&ctx);
    if (r == 0)
        r = npv_domain_new(ctx, NULL, &dom);
    if (r == 0)
        r = npv_dev_open_vfio_user(ctx, w->socket, dom, NULL, &dev);
    if (r == 0)
        r = npv_testdev_open(dev, &cfg, &td);
    if (r == 0)
        r = npv_dma_alloc(ctx, (size_t)DEPTH * SLOT_BYTES, NULL, &buf);
    if (r == 0)
        r = npv_dma_map(buf, dom, NPV_DMA_RW, &iova);
    if (r == 0)
        r = serve(w, td, buf, iova);
    w->error = r;
    /* Reverse order of acquisition; each call takes NULL. */
    npv_dma_free(buf);
    npv_testdev_close(td);
    npv_dev_close(dev);
    npv_domain_put(dom);
    npv_ctx_free(ctx);
    return NULL;
}

int main(int argc, char **argv)
{
    long jobs = -1; /* unbounded: until a signal */
    int first = 1;
    if (argc > 2 && strcmp(argv[1], "--jobs") == 0) {
        jobs = strtol(argv[2], NULL, 10);
        first = 3;
    }
    int ndev = argc - first;
    if (ndev < 1 || ndev > MAX_DEVICES || jobs == 0) {
        fprintf(stderr,
                "usage: testdev_serve [--jobs N] SOCKET... (testdev models: npuvfio sim)\n");
        return 2;
    }
    atomic_store(&jobs_left, jobs > 0 ? jobs : LONG_MAX);

    /* Signals go to this thread only: the workers run with them blocked, so
     * a signal never interrupts a wait mid-way; they see the flag instead. */
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);

    struct worker w[MAX_DEVICES] = {0};
    int started = 0;
    for (int i = 0; i < ndev; i++) {
        w[i].socket = argv[first + i];
        if (pthread_create(&w[i].thread, NULL, worker_main, &w[i]) != 0)
            break;
        started++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    printf("testdev_serve: serving on %d device(s)%s\n", started,
           jobs > 0 ? "" : " until SIGINT/SIGTERM");
    fflush(stdout);

    unsigned long completed = 0, failed = 0, wrong = 0;
    int errors = started == ndev ? 0 : 1;
    for (int i = 0; i < started; i++) {
        pthread_join(w[i].thread, NULL);
        printf("  %s: %lu completed, %lu failed, %lu wrong%s%s\n", w[i].socket, w[i].completed,
               w[i].failed, w[i].wrong, w[i].error ? ", stopped by: " : "",
               w[i].error ? npv_strerror(w[i].error) : "");
        completed += w[i].completed;
        failed += w[i].failed;
        wrong += w[i].wrong;
        errors += w[i].error != 0;
    }
    printf("testdev_serve: summary: %lu completed, %lu failed, %lu wrong, %d device error(s)%s\n",
           completed, failed, wrong, errors,
           atomic_load(&stop_requested) ? " (stopped by signal)" : "");
    return failed == 0 && wrong == 0 && errors == 0 ? 0 : 1;
}
