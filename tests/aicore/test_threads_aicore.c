/* SPDX-License-Identifier: MIT */
/*
 * Many threads on one AICore device (issue 24 item 1), against the model in
 * a child process. The device runs one run at a time in two pipeline slots:
 * a small queue in front of them (submit: prepare into a free slot, launch
 * when the device is idle; poll: drive the active run, release its slot,
 * launch the prepared one) is the driver an npv_share serves to 4 threads,
 * each with 2 sample graphs of its own in flight, every output compared
 * bit-exact with the CPU reference and every completion routed to its own
 * ticket once. A run is a whole graph on every usable sub-core, far slower
 * than a job of the other devices (~2.5 ms on the model here): 1,000 runs
 * per thread by default, and 10,000 per thread is this device's acceptance
 * size (NPUVFIO_THREADS_REQUESTS=10000, ~2 minutes).
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "aic_driver.h"
#include "threads_run.h"

#define DEPTH 2u
#define SLOTS (THREADS_N * DEPTH)

/* The two slots as one queue, used under the share's lock only. */
struct aicq {
    struct npv_aicore *ac;
    struct npv_aicore_run *run[NPV_AICORE_SLOTS];
    uint64_t cookie[NPV_AICORE_SLOTS];
    bool launched[NPV_AICORE_SLOTS];
    int failed[NPV_AICORE_SLOTS]; /* a launch's error, handed back by the next poll */
};

struct aict {
    struct aicd d;
    struct aicq q;
    struct aicore_sample_graph g[SLOTS];
};

static bool active(const struct aicq *q)
{
    for (unsigned s = 0; s < NPV_AICORE_SLOTS; s++)
        if (q->run[s] != NULL && q->launched[s])
            return true;
    return false;
}

/* Launch a prepared run when nothing runs. */
static void launch_next(struct aicq *q)
{
    if (active(q))
        return;
    for (unsigned s = 0; s < NPV_AICORE_SLOTS; s++) {
        if (q->run[s] == NULL || q->launched[s] || q->failed[s] != 0)
            continue;
        int r = npv_aicore_launch(q->run[s]);
        if (r == -EBUSY)
            return;
        if (r < 0)
            q->failed[s] = r;
        else
            q->launched[s] = true;
        return;
    }
}

static int q_submit(void *drv, const void *req, uint64_t cookie)
{
    struct aicq *q = drv;
    const struct npv_aicore_run_desc *desc;
    memcpy(&desc, req, sizeof(desc));
    for (unsigned s = 0; s < NPV_AICORE_SLOTS; s++) {
        if (q->run[s] != NULL)
            continue;
        int r = npv_aicore_prepare(q->ac, s, desc, &q->run[s]);
        if (r == -EBUSY)
            return -EAGAIN; /* the other slot's run is prepared, not launched yet */
        if (r < 0) {
            q->run[s] = NULL;
            return r;
        }
        q->cookie[s] = cookie;
        q->launched[s] = false;
        q->failed[s] = 0;
        launch_next(q);
        return 0;
    }
    return -EAGAIN;
}

static int q_poll(void *drv, struct npv_cpl *cpl, unsigned max)
{
    struct aicq *q = drv;
    unsigned got = 0;
    for (unsigned s = 0; s < NPV_AICORE_SLOTS && got < max; s++) {
        if (q->run[s] == NULL)
            continue;
        int r = q->failed[s];
        if (r == 0) {
            if (!q->launched[s])
                continue;
            r = npv_aicore_poll(q->run[s]);
            if (r == -EINPROGRESS)
                continue;
        }
        ck_assert_int_eq(npv_aicore_release(q->run[s]), 0);
        q->run[s] = NULL;
        cpl[got++] = (struct npv_cpl){.cookie = q->cookie[s], .status = r};
    }
    launch_next(q);
    return (int)got;
}

static const struct npv_share_ops q_ops = {.submit = q_submit, .poll = q_poll};

static uint32_t seed_of(unsigned th, uint64_t i)
{
    return (uint32_t)(i * THREADS_N + th + 1);
}

static void prepare(void *dev, unsigned th, unsigned slot, uint64_t i, void *req)
{
    struct aict *a = dev;
    struct aicore_sample_graph *g = &a->g[th * DEPTH + slot];
    aicore_sample_fill(g, seed_of(th, i));
    const struct npv_aicore_run_desc *desc = &g->desc;
    memcpy(req, &desc, sizeof(desc));
}

static bool check(void *dev, unsigned th, unsigned slot, uint64_t i)
{
    struct aict *a = dev;
    (void)i;
    return aicore_sample_check(&a->g[th * DEPTH + slot]) == 0;
}

START_TEST(four_threads_share_the_two_slots_exact_and_routed)
{
    static struct aict a;
    aicd_open(&a.d, NULL, NULL);
    for (unsigned k = 0; k < SLOTS; k++)
        ck_assert_int_eq(aicore_sample_build(a.d.ac, false, &a.g[k]), 0);
    a.q = (struct aicq){.ac = a.d.ac};
    struct threads_run run = {
        .ops = &q_ops,
        .drv = &a.q,
        .dev = &a,
        .depth = DEPTH,
        .requests = threads_requests(1000),
        .req_size = sizeof(const struct npv_aicore_run_desc *),
        .wait_ns = AIC_GENEROUS_NS,
        .prepare = prepare,
        .check = check,
    };
    threads_run_all(&run);
    printf("aicore: %u threads x %llu runs, exact\n", THREADS_N, (unsigned long long)run.requests);
    for (unsigned k = 0; k < SLOTS; k++)
        aicore_sample_free(a.d.ac, &a.g[k]);
    aicd_close(&a.d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("threads_aicore");
    TCase *tc = tcase_create("threads");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, four_threads_share_the_two_slots_exact_and_routed);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
