/* SPDX-License-Identifier: MIT */
/*
 * The smallest complete npuvfio program: open the test device, map a buffer,
 * run one job, check its result.
 *
 *   npuvfio sim --device testdev --socket /tmp/testdev.sock &
 *   testdev_minimal /tmp/testdev.sock
 *
 * Built on the public headers and libraries only:
 *   cc testdev_minimal.c $(pkg-config --cflags --libs npuvfio-testdev)
 *
 * Teardown runs in reverse order of acquisition: the driver before the
 * device, the device before its domain, the context last.
 */
#include <stdio.h>
#include <string.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/dma.h>
#include <npuvfio/domain.h>
#include <npuvfio/ring.h>
#include <npuvfio/testdev.h>

#define LEN        4096u
#define PATTERN    0xa5u
#define TIMEOUT_NS (5ull * 1000000000ull)

static int fail(const char *what, int err)
{
    fprintf(stderr, "testdev_minimal: %s: %s\n", what, npv_strerror(err));
    return 1;
}

/* One FILL job through the driver's ring; 0 when the device wrote what we asked. */
static int fill_and_check(struct npv_testdev *td, struct npv_dma *buf, npv_iova_t iova)
{
    uint8_t *mem = npv_dma_vaddr(buf);
    memset(mem, 0, LEN);
    struct npv_testdev_desc job = npv_testdev_fill(iova, PATTERN, LEN, 0);
    int r = npv_ring_push(npv_testdev_ring(td), &job, 1);
    if (r < 0)
        return fail("queueing the job", r);
    npv_ring_submit(npv_testdev_ring(td));
    struct npv_cpl done;
    r = npv_testdev_wait(td, NPV_RING_WAIT_POLL, 1, TIMEOUT_NS, &done);
    if (r < 0)
        return fail("waiting for the job", r);
    if (r == 0) {
        fprintf(stderr, "testdev_minimal: the job did not complete in time\n");
        return 1;
    }
    if (done.status != 0) {
        fprintf(stderr, "testdev_minimal: the job failed: %s (device error %u)\n",
                npv_strerror(done.status), done.dev_error);
        return 1;
    }
    npv_dma_sync_for_cpu(buf, 0, LEN);
    for (unsigned i = 0; i < LEN; i++) {
        if (mem[i] != PATTERN) {
            fprintf(stderr, "testdev_minimal: byte %u is 0x%02x, not 0x%02x\n", i, mem[i], PATTERN);
            return 1;
        }
    }
    printf("testdev_minimal: the device filled %u bytes with 0x%02x\n", LEN, PATTERN);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: testdev_minimal SOCKET (a testdev model: npuvfio sim)\n");
        return 2;
    }
    struct npv_ctx *ctx;
    struct npv_domain *dom;
    struct npv_dev *dev;
    struct npv_testdev *td;
    struct npv_dma *buf;
    npv_iova_t iova;
    int ret = 1;

    int r = npv_ctx_new(&ctx);
    if (r < 0)
        return fail("context", r);
    r = npv_domain_new(ctx, NULL, &dom);
    if (r < 0) {
        ret = fail("domain", r);
        goto out_ctx;
    }
    r = npv_dev_open_vfio_user(ctx, argv[1], dom, NULL, &dev);
    if (r < 0) {
        ret = fail(argv[1], r);
        goto out_dom;
    }
    r = npv_testdev_open(dev, NULL, &td);
    if (r < 0) {
        ret = fail("testdev driver", r);
        goto out_dev;
    }
    r = npv_dma_alloc(ctx, LEN, NULL, &buf);
    if (r < 0) {
        ret = fail("DMA buffer", r);
        goto out_td;
    }
    r = npv_dma_map(buf, dom, NPV_DMA_RW, &iova);
    if (r < 0)
        ret = fail("mapping the buffer", r);
    else
        ret = fill_and_check(td, buf, iova);
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
