/* SPDX-License-Identifier: MIT */
/*
 * Message DMA and requests at the same time, with twin sockets and without:
 * the testdev model fills and copies memory the client shares without an fd
 * (every byte a DMA_READ/DMA_WRITE message from the model's thread) while
 * another client thread reads and writes a register (REGION_READ/WRITE
 * requests). Neither stream may lose or misread a message of the other:
 * every register read returns what was written, every descriptor's data
 * lands, and the connection is alive at the end.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "vfio_user_client.h"

#define OPS       10000u
#define BATCH     32u
#define SLOT      256u
#define NOFD_IOVA 0x7000000000ull

static struct vu_server srv;
static struct td t;

static void teardown(void)
{
    td_close(&t);
    vu_server_kill(&srv);
}

struct requester {
    struct npv_bar *bar;
    unsigned mismatches;
    int err;
};

/* OPS register round trips, each write checked by the read that follows it. */
static void *request_loop(void *arg)
{
    struct requester *r = arg;
    for (uint64_t i = 0; i < OPS && r->err == 0; i++) {
        uint64_t want = 0x5a5a000000000000ull | i;
        npv_bar_write64(r->bar, TESTDEV_REG_SCRATCH64, want);
        uint64_t got = npv_bar_read64(r->bar, TESTDEV_REG_SCRATCH64);
        if (got != want)
            r->mismatches++;
        if (npv_bar_read32(r->bar, TESTDEV_REG_ID) != TESTDEV_ID_VALUE)
            r->mismatches++;
    }
    return NULL;
}

/*
 * OPS descriptors in batches: even slots filled with a pattern, odd slots
 * copied from the slot before (a DMA_READ and a DMA_WRITE each).
 */
static void dma_loop(uint8_t *mem)
{
    for (unsigned done = 0; done < OPS; done += BATCH) {
        for (unsigned j = 0; j < BATCH; j++) {
            uint64_t dst = NOFD_IOVA + (uint64_t)j * SLOT;
            struct npv_testdev_desc d =
                j % 2 == 0 ? npv_testdev_fill(dst, (uint8_t)((done + j) & 0xff), SLOT, 0)
                           : npv_testdev_copy(dst, dst - SLOT, SLOT, 0);
            td_submit(&t, &d);
        }
        struct npv_cpl last;
        ck_assert_int_eq(td_wait(&t, GENEROUS_NS, &last), 0);
        ck_assert_int_eq(last.status, 0);
        for (unsigned j = 0; j < BATCH; j++) {
            uint8_t want = (uint8_t)((done + (j & ~1u)) & 0xff);
            ck_assert_uint_eq(mem[j * SLOT], want);
            ck_assert_uint_eq(mem[j * SLOT + SLOT - 1], want);
        }
    }
}

START_TEST(message_dma_and_requests_interleave_without_desync)
{
    /* _i: 0 twin sockets, 1 the server refuses them (one socket). */
    vu_server_start(&srv, _i ? vu_serve_testdev_single_socket : vu_serve_testdev, NULL);
    td_open(&t, srv.path);
    struct vu_client *c = t.dev->priv;
    ck_assert_int_eq(c->twin_sock >= 0, _i == 0);

    size_t len = BATCH * SLOT;
    uint8_t *mem = aligned_alloc(4096, len);
    ck_assert_ptr_nonnull(mem);
    memset(mem, 0xee, len);
    struct npv_mapping m = {
        .iova = NOFD_IOVA, .len = len, .vaddr = mem, .fd = -1, .prot = NPV_DMA_RW};
    ck_assert_int_eq(c->sink.ops->map(&c->sink, &m), 0);
    td_enable(&t, 0);

    struct requester r = {.bar = t.bar};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, request_loop, &r), 0);
    dma_loop(mem);
    pthread_join(th, NULL);
    ck_assert_uint_eq(r.mismatches, 0);

    pthread_mutex_lock(&c->lock);
    int dead = c->dead;
    pthread_mutex_unlock(&c->lock);
    ck_assert_int_eq(dead, 0);
    ck_assert_int_eq(c->sink.ops->unmap(&c->sink, &m), 0);
    free(mem);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("vfio-user twin sockets");
    TCase *tc = tcase_create("interleave");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, message_dma_and_requests_interleave_without_desync, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
