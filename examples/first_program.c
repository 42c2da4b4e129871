/* SPDX-License-Identifier: MIT */
/*
 * Your first program (docs/first-program.md walks through it): open a device,
 * give it DMA memory, submit a batch of jobs, poll for their completions,
 * handle the errors a device and a deadline can produce. One thread; the
 * doc says what changes with more.
 *
 *   npuvfio sim --device testdev --socket /tmp/testdev.sock &
 *   first_program /tmp/testdev.sock        # or a PCI address bound to vfio-pci
 *
 * Built on the public headers and libraries only:
 *   cc first_program.c $(pkg-config --cflags --libs npuvfio-testdev)
 */
#include <stdio.h>
#include <string.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include <npuvfio/ring.h>
#include <npuvfio/testdev.h>

#define JOBS        16u
#define JOB_BYTES   4096u
#define WAIT_NS     (2ull * 1000000000ull) /* how long we wait for the whole batch */
#define JOB_TIMEOUT (1ull * 1000000000ull) /* each job's own deadline, enforced by the ring */

static int fail(const char *what, int err)
{
    /* Every call returns 0 or a negative errno; npv_strerror knows our own codes too. */
    fprintf(stderr, "first_program: %s: %s\n", what, npv_strerror(err));
    return 1;
}

/* A socket path has a '/'; anything else is taken as a PCI address (0000:01:00.0). */
static int open_device(struct npv_ctx *ctx, const char *where, struct npv_domain *dom,
                       struct npv_dev **dev)
{
    if (strchr(where, '/') != NULL)
        return npv_dev_open_vfio_user(ctx, where, dom, NULL, dev);
    return npv_dev_open_pci(ctx, where, dom, NULL, dev);
}

/*
 * Claim a slot per job and write its descriptor in place, then ring the
 * doorbell once for the whole batch. The cookie comes back in the job's
 * completion: here it is the job's index.
 */
static int submit_batch(struct npv_ring *ring, npv_iova_t iova)
{
    for (unsigned i = 0; i < JOBS; i++) {
        void *slot;
        int r = npv_ring_next_timed(ring, i, JOB_TIMEOUT, &slot);
        if (r < 0) /* -EAGAIN: the ring is full (reap first); -EIO: the ring is dead */
            return r;
        *(struct npv_testdev_desc *)slot =
            npv_testdev_fill(iova + (npv_iova_t)i * JOB_BYTES, (uint8_t)(0x10 + i), JOB_BYTES, 0);
    }
    return npv_ring_submit(ring); /* one doorbell write for the JOBS descriptors */
}

/*
 * Poll until every job is back. In POLL mode this makes no system call. A
 * completion's status says how its job ended: 0 done, -EIO the device failed
 * it (dev_error says why), -ETIMEDOUT its deadline passed, -ECANCELED a reset
 * took it, -NPV_EDEVFAULT the device wrote something impossible.
 */
static int reap_batch(struct npv_testdev *td, struct npv_dma *buf)
{
    struct npv_cpl cpl[JOBS];
    int got = npv_testdev_wait(td, NPV_RING_WAIT_POLL, JOBS, WAIT_NS, cpl);
    if (got < 0)
        return fail("waiting", got);
    if ((unsigned)got < JOBS) {
        /* The wait's own timeout fails no job: they are still in flight. */
        fprintf(stderr, "first_program: %d of %u jobs back after %llu ms\n", got, JOBS,
                (unsigned long long)(WAIT_NS / 1000000));
        return 1;
    }
    /* The device wrote the buffer: make its writes visible to the CPU (a no-op where coherent). */
    npv_dma_sync_for_cpu(buf, 0, (size_t)JOBS * JOB_BYTES);
    const uint8_t *mem = npv_dma_vaddr(buf);
    int bad = 0;
    for (int i = 0; i < got; i++) {
        uint64_t job = cpl[i].cookie;
        if (cpl[i].status != 0) {
            fprintf(stderr, "first_program: job %llu: %s (device error %u)\n",
                    (unsigned long long)job, npv_strerror(cpl[i].status), cpl[i].dev_error);
            bad++;
            continue;
        }
        for (unsigned k = 0; k < JOB_BYTES; k++) {
            if (mem[job * JOB_BYTES + k] != (uint8_t)(0x10 + job)) {
                fprintf(stderr, "first_program: job %llu: byte %u wrong\n", (unsigned long long)job,
                        k);
                bad++;
                break;
            }
        }
    }
    if (bad == 0)
        printf("first_program: %u jobs done, every byte as asked\n", JOBS);
    return bad == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: first_program SOCKET|PCI-ADDRESS\n");
        return 2;
    }
    struct npv_ctx *ctx;
    struct npv_domain *dom;
    struct npv_dev *dev;
    struct npv_testdev *td;
    struct npv_dma *buf;
    npv_iova_t iova;
    int ret = 1;

    /* 1. A context (no global state; log level from NPUVFIO_LOG) and a domain: one IOVA space. */
    int r = npv_ctx_new(&ctx);
    if (r < 0)
        return fail("context", r);
    r = npv_domain_new(ctx, NULL, &dom);
    if (r < 0) {
        ret = fail("domain", r);
        goto out_ctx;
    }
    /* 2. The device, attached to the domain, then its driver (which owns the ring). */
    r = open_device(ctx, argv[1], dom, &dev);
    if (r < 0) {
        ret = fail(argv[1], r);
        goto out_dom;
    }
    r = npv_testdev_open(dev, NULL, &td);
    if (r < 0) {
        ret = fail("testdev driver", r);
        goto out_dev;
    }
    /* 3. DMA memory, mapped into the domain: the device sees it at iova. */
    r = npv_dma_alloc(ctx, (size_t)JOBS * JOB_BYTES, NULL, &buf);
    if (r < 0) {
        ret = fail("DMA buffer", r);
        goto out_td;
    }
    r = npv_dma_map(buf, dom, NPV_DMA_RW, &iova);
    if (r < 0) {
        ret = fail("mapping the buffer", r);
        goto out_buf;
    }
    /* 4. Submit, 5. poll. */
    r = submit_batch(npv_testdev_ring(td), iova);
    if (r < 0) {
        ret = fail("submitting", r);
        goto out_buf;
    }
    ret = reap_batch(td, buf);
    if (ret != 0) {
        /* A device that failed a job stops at it: a reset fails the rest and brings it back. */
        r = npv_testdev_reset(td);
        if (r < 0)
            fail("reset", r);
    }
    /* 6. Teardown in reverse order: memory, driver, device, domain, context. */
out_buf:
    npv_dma_free(buf);
out_td:
    npv_testdev_close(td);
out_dev:
    npv_dev_close(dev);
out_dom:
    npv_domain_put(dom);
out_ctx:
    npv_ctx_free(ctx);
    return ret;
}
