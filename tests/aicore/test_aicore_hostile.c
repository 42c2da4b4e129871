/* SPDX-License-Identifier: MIT */
/*
 * The AICore model against a hostile client speaking raw vfio-user: first
 * the probes every device server passes (tests/common/vu_hostile.c, the ones
 * testdev passes), then the model's own surface: bad widths and offsets in
 * every BAR, wild LAUNCH parameters, dispatch values and copies, and a client
 * that maps memory without an fd, starts a run and leaves without answering
 * the model's DMA. Each is an error reply, a GLOBAL_ERR bit or a counted
 * violation, never a crash; afterwards a well-formed client runs a task
 * exact on the same model process. Model only.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "aic_harness.h"
#include "npv_test.h"
#include "vu_hostile.h"

#define CTRL_TABLE (AICORE_DEVMEM_BASE + 0x0000)

/* Trapped windows: the model sees every width and offset a hostile client sends. */
static void serve_aicore(const char *path, void *arg)
{
    (void)arg;
    const struct npv_aicore_model_config trapped = {.trapped_windows = true};
    _exit(npv_aicore_serve_config(path, false, &trapped) == 0 ? 0 : 1);
}

static void start_aicore(struct vu_server *s)
{
    vu_server_start(s, serve_aicore, NULL);
}

static const struct vu_hostile_target aicore_target = {
    .start = start_aicore,
    .id_region = AICORE_BAR_GLOBAL,
    .id_offset = AICORE_REG_ID,
    .id_width = 8,
    .id_value = AICORE_ID_VALUE,
    .region0_size = AICORE_GLOBAL_SIZE,
};

/* A well-formed client on the same model: RESET, the handshake, one vector add exact. */
static void well_formed_client_runs_exact(void)
{
    struct aic t;
    aic_open_at(&t, vu_hostile_path());
    aic_wr(&t, AICORE_REG_RESET, AICORE_RESET_VALUE);
    ck_assert_uint_eq(aic_rd(&t, AICORE_REG_STATUS), 0);
    aic_upload_tables(&t, CTRL_TABLE, 0);
    struct aic_run r;
    aic_run_new(&t, &r);
    ck_assert_uint_eq(aic_run_launch(&t, &r, CTRL_TABLE, 0, 77), AICORE_LAUNCH_ACCEPTED);
    aic_run_wait_ready(&t, &r, r.nr);
    uint32_t aiv = t.clusters - 1; /* the first AIV's rank: one AIC is absent */
    ck_assert_uint_eq(aicore_core_type(t.clusters, r.phys[aiv]), AICORE_CORE_TYPE_AIV);
    aic_run_open(&t, &r, aiv);
    struct aic_task add;
    aic_task_new(&t, &add, AICORE_KERNEL_VADD, 0, 128, 0, 5);
    aic_task_fill(&r, aiv, 1, &add, 1);
    aic_dispatch(&t, r.phys[aiv], 1);
    ck_assert_int_eq(aic_wait_cond(&t, r.phys[aiv], AICORE_COND_FIN(1), AIC_GENEROUS_NS, NULL), 0);
    ck_assert(aic_task_exact(&add));
    aic_exit_all(&t, &r);
    ck_assert_int_eq(aic_wait_result(&t, &r, AIC_GENEROUS_NS), 0);
    ck_assert_uint_eq(((struct aicore_result *)r.result.va)->verdict, AICORE_VERDICT_OK);
    aic_task_free(&add);
    aic_run_free(&r);
    aic_close(&t);
}

static uint32_t probe(int fd, uint32_t region, uint64_t off, uint32_t width, bool write, uint64_t v)
{
    return vu_raw_access(fd, region, off, width, write, &v);
}

START_TEST(bad_register_accesses_are_refused_counted_and_the_model_keeps_serving)
{
    int fd = vu_raw_handshake();
    const uint32_t g = AICORE_BAR_GLOBAL, p = AICORE_BAR_TESTPORT, c = AICORE_BAR_CTRL,
                   m = AICORE_BAR_PMU;
    uint64_t w = AICORE_WINDOW_STRIDE * 30; /* a live AIV window */
    /* The 64-bit global and test-port registers take one 8-byte access only. */
    ck_assert_uint_eq(probe(fd, g, AICORE_REG_ID, 4, false, 0), EINVAL);
    ck_assert_uint_eq(probe(fd, g, AICORE_REG_LAUNCH + 4, 8, true, 1), EINVAL);
    ck_assert_uint_eq(probe(fd, g, AICORE_REG_RESET, 2, true, 1), EINVAL);
    ck_assert_uint_eq(probe(fd, p, AICORE_TP_ID, 4, false, 0), EINVAL);
    ck_assert_uint_eq(probe(fd, p, AICORE_TP_FAULT, 8, true, 99), EINVAL);
    ck_assert_uint_eq(probe(fd, p, AICORE_TP_COPIES_H2D, 8, true, 5), EINVAL);
    ck_assert_uint_eq(probe(fd, p, AICORE_TP_PMU_ALIAS, 8, true, 2), EINVAL);
    ck_assert_uint_eq(probe(fd, p, AICORE_TP_PRESENT_HI, 8, true, ~0ull), EINVAL);
    /* The 32-bit window registers: one, or an aligned pair. */
    ck_assert_uint_eq(probe(fd, c, w + AICORE_CTRL_DMB, 2, true, 1), EINVAL);
    ck_assert_uint_eq(probe(fd, c, w + AICORE_CTRL_DMB + 2, 4, true, 1), EINVAL);
    ck_assert_uint_eq(probe(fd, c, w + AICORE_CTRL_DMB + 4, 8, true, 1), EINVAL);
    ck_assert_uint_eq(probe(fd, m, w + AICORE_PMU_CTRL_0 + 1, 4, false, 0), EINVAL);
    ck_assert_uint_eq(probe(fd, c, w + 1, 1, false, 0), EINVAL);
    ck_assert_uint_eq(vu_raw_read(fd, p, AICORE_TP_BAD_ACCESSES, 8), 13);
    /* Writes the device ignores with an error bit: read-only registers, bad values. */
    vu_raw_write(fd, g, AICORE_REG_ID, 8, 1);
    vu_raw_write(fd, g, AICORE_REG_RESET, 8, 2);
    vu_raw_write(fd, c, w + AICORE_CTRL_COND, 4, AICORE_COND_FIN(1));
    vu_raw_write(fd, c, w + AICORE_CTRL_FAST_PATH, 4, 0x1234);
    ck_assert_uint_eq(vu_raw_read(fd, c, w + AICORE_CTRL_COND, 4), 0);
    ck_assert_uint_eq(vu_raw_read(fd, c, w + AICORE_CTRL_FAST_PATH, 4), AICORE_FAST_PATH_CLOSE);
    ck_assert_uint_eq(vu_raw_read(fd, g, AICORE_REG_GLOBAL_ERR, 8), AICORE_ERR_BAD_ACCESS);
    /* A DMB write into a closed window is dropped and said so. */
    vu_raw_write(fd, c, w + AICORE_CTRL_DMB, 4, 5);
    ck_assert_uint_eq(vu_raw_read(fd, c, w + AICORE_CTRL_DMB, 4), 0);
    ck_assert(vu_raw_read(fd, g, AICORE_REG_GLOBAL_ERR, 8) & AICORE_ERR_WINDOW_CLOSED);
    close(fd);
    well_formed_client_runs_exact();
}
END_TEST

START_TEST(wild_launch_dispatch_and_copy_values_are_device_errors_not_crashes)
{
    int fd = vu_raw_handshake();
    const uint32_t g = AICORE_BAR_GLOBAL, c = AICORE_BAR_CTRL;
    /* Copies from and to nowhere, lengths and addresses that wrap. */
    const uint64_t copies[][4] = {
        {0x1000, ~0ull - 4, 64, AICORE_COPY_H2D},
        {~0ull - 4, AICORE_DEVMEM_BASE, 64, AICORE_COPY_H2D},
        {0x1000, AICORE_DEVMEM_BASE, ~0ull, AICORE_COPY_D2H},
        {0x1000, AICORE_DEVMEM_BASE, 64, ~0ull},
    };
    for (size_t i = 0; i < sizeof(copies) / sizeof(copies[0]); i++) {
        vu_raw_write(fd, g, AICORE_REG_COPY_HOST_IOVA, 8, copies[i][0]);
        vu_raw_write(fd, g, AICORE_REG_COPY_DEV_ADDR, 8, copies[i][1]);
        vu_raw_write(fd, g, AICORE_REG_COPY_LEN, 8, copies[i][2]);
        vu_raw_write(fd, g, AICORE_REG_COPY_DIR, 8, copies[i][3]);
        vu_raw_write(fd, g, AICORE_REG_COPY_GO, 8, AICORE_COPY_GO_VALUE);
        uint64_t st, deadline = aic_now_ns() + AIC_GENEROUS_NS;
        while ((st = vu_raw_read(fd, g, AICORE_REG_COPY_STATUS, 8)) == AICORE_COPY_BUSY)
            ck_assert(aic_now_ns() < deadline);
        ck_assert_uint_eq(st, AICORE_COPY_ERROR);
    }
    /* A LAUNCH whose tables, records and result are nowhere anyone mapped. */
    vu_raw_write(fd, g, AICORE_REG_RUN_CTRL_TABLE, 8, ~0ull - 7);
    vu_raw_write(fd, g, AICORE_REG_RUN_PMU_TABLE, 8, AICORE_DEVMEM_BASE - 8);
    vu_raw_write(fd, g, AICORE_REG_RUN_WORKERS, 8, 0xffffffffffffffc0ull);
    vu_raw_write(fd, g, AICORE_REG_RUN_WORKERS_COUNT, 8, ~0ull);
    vu_raw_write(fd, g, AICORE_REG_RUN_RESULT, 8, 0xfffffffffffffff8ull);
    vu_raw_write(fd, g, AICORE_REG_RUN_EPOCH, 8, ~0ull);
    vu_raw_write(fd, g, AICORE_REG_LAUNCH, 8, AICORE_LAUNCH_VALUE);
    ck_assert_uint_eq(vu_raw_read(fd, g, AICORE_REG_LAUNCH_STATUS, 8), AICORE_LAUNCH_ACCEPTED);
    /* Dispatch values of every kind into every window, live or not. */
    const uint32_t values[] = {
        0,          1, AICORE_TOKEN_MAX, AICORE_TOKEN_MAX + 1, AICORE_DMB_IDLE, AICORE_DMB_EXIT,
        0xffffffffu};
    for (uint32_t id = 0; id < AICORE_MAX_SUBCORES; id += 5) {
        uint64_t w = (uint64_t)id * AICORE_WINDOW_STRIDE;
        vu_raw_write(fd, c, w + AICORE_CTRL_FAST_PATH, 4, AICORE_FAST_PATH_OPEN);
        for (size_t k = 0; k < sizeof(values) / sizeof(values[0]); k++)
            vu_raw_write(fd, c, w + AICORE_CTRL_DMB, 8, values[k] | (uint64_t)values[k] << 32);
    }
    vu_raw_write(fd, g, AICORE_REG_LAUNCH, 8, AICORE_LAUNCH_VALUE);
    uint64_t err = vu_raw_read(fd, g, AICORE_REG_GLOBAL_ERR, 8);
    ck_assert(err & AICORE_ERR_COPY);
    ck_assert(err & AICORE_ERR_DISPATCH_ABSENT);
    ck_assert(err & AICORE_ERR_LAUNCH_REFUSED);
    /* Every sub-core found a table it could not read: nobody is ready, nothing was written. */
    uint64_t deadline = aic_now_ns() + AIC_GENEROUS_NS;
    while (vu_raw_read(fd, AICORE_BAR_TESTPORT, AICORE_TP_TABLE_MISMATCHES, 8) != 69)
        ck_assert(aic_now_ns() < deadline);
    close(fd);
    well_formed_client_runs_exact();
}
END_TEST

/*
 * One client leaves while the model's DMA_WRITE to it waits for an answer; the
 * next client must open, negotiate and run as if the first had never been.
 */
static void leave_without_answering_the_models_dma(void)
{
    int fd = vu_raw_handshake();
    const uint32_t g = AICORE_BAR_GLOBAL;
    /* Memory without an fd: the model must write the ready records by DMA_WRITE messages,
     * which this client never answers before it leaves. */
    vu_raw_dma_map_nofd(fd, 0x100000, 0x10000);
    /* No RESET here: it would clear the device memory, the table with it. */
    vu_raw_write(fd, g, AICORE_REG_RUN_CTRL_TABLE, 8, CTRL_TABLE);
    vu_raw_write(fd, g, AICORE_REG_RUN_PMU_TABLE, 8, 0);
    vu_raw_write(fd, g, AICORE_REG_RUN_WORKERS, 8, 0x100000);
    vu_raw_write(fd, g, AICORE_REG_RUN_WORKERS_COUNT, 8, AICORE_MAX_SUBCORES);
    vu_raw_write(fd, g, AICORE_REG_RUN_RESULT, 8, 0x108000);
    vu_raw_write(fd, g, AICORE_REG_RUN_EPOCH, 8, 1);
    /* LAUNCH by hand: the model's first DMA_WRITE may come before the reply. */
    uint8_t body[sizeof(struct npv_vu_region_access) + 8];
    struct npv_vu_region_access a = {.offset = AICORE_REG_LAUNCH, .region = g, .count = 8};
    uint64_t go = AICORE_LAUNCH_VALUE;
    memcpy(body, &a, sizeof(a));
    memcpy(body + sizeof(a), &go, sizeof(go));
    struct npv_vu_hdr h = {.msg_id = 4242, .cmd = NPV_VU_CMD_REGION_WRITE};
    ck_assert_int_eq(npv_vu_send(fd, &h, body, sizeof(body), NULL, 0, VU_RAW_TIMEOUT_NS), 0);
    bool replied = false, dma_seen = false;
    while (!replied || !dma_seen) {
        struct npv_vu_msg msg;
        ck_assert_int_eq(npv_vu_recv(fd, &msg, 1u << 20, 0, VU_RAW_TIMEOUT_NS), 0);
        if ((msg.hdr.flags & NPV_VU_F_TYPE_MASK) == NPV_VU_F_TYPE_REPLY) {
            ck_assert_uint_eq(msg.hdr.msg_id, 4242);
            ck_assert(!(msg.hdr.flags & NPV_VU_F_ERROR));
            replied = true;
        } else {
            ck_assert_uint_eq(msg.hdr.cmd, NPV_VU_CMD_DMA_WRITE); /* never answered */
            dma_seen = true;
        }
        npv_vu_msg_release(&msg);
    }
    close(fd);
}

START_TEST(a_client_that_leaves_without_answering_the_models_dma_takes_its_run_with_it)
{
    /* Tables in device memory from a well-formed client: the sub-cores will get ready. */
    well_formed_client_runs_exact();
    /*
     * Several times: the model's DMA for the client that left may still be on
     * its way as the next one connects (it once reached the next client's
     * version negotiation, which failed its open).
     */
    for (int i = 0; i < 8; i++) {
        leave_without_answering_the_models_dma();
        well_formed_client_runs_exact();
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("aicore_hostile");
    TCase *protocol = tcase_create("protocol");
    vu_hostile_set_target(&aicore_target);
    vu_hostile_add_cases(protocol);
    tcase_set_timeout(protocol, 120);
    TCase *tc = tcase_create("model");
    tcase_add_checked_fixture(tc, vu_hostile_start, vu_hostile_stop);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, bad_register_accesses_are_refused_counted_and_the_model_keeps_serving);
    tcase_add_test(tc, wild_launch_dispatch_and_copy_values_are_device_errors_not_crashes);
    tcase_add_test(tc, a_client_that_leaves_without_answering_the_models_dma_takes_its_run_with_it);
    suite_add_tcase(s, protocol);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    aic_require_model("hostile probing targets the model");
    return npv_test_run(suite());
}
