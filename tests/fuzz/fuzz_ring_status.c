/* SPDX-License-Identifier: MIT */
/*
 * The ring engine's reading of device-written status (lib/ring/ring.c): the
 * completed head, the error word and the error index, in both shapes the
 * devices of the tree use. Byte 0 bit 0 picks the shape: clear, testdev's
 * (free-running head, index doorbell, per-job error word with its index);
 * set, the Edge TPU's (head masked to the ring, slot doorbell, sticky fatal
 * word). The rest is a script of 6-byte steps: op, then a 32-bit value and a
 * count:
 *   op % 4 == 0  submit (count % 8) jobs
 *   op % 4 == 1  the device writes value as its completed head
 *   op % 4 == 2  the device writes value as its error word (and count as the index)
 *   op % 4 == 3  poll
 * Aborts when a job completes twice or was never submitted, when more jobs
 * complete than were claimed, or on a status outside the documented set;
 * ASan catches any read or write outside the ring and the status block.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npuvfio/common.h>
#include <npuvfio/ctx.h>
#include <npuvfio/ring.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ENTRIES   8u
#define DESC_SIZE 32u
#define MAX_JOBS  4096u

struct status_block {
    uint32_t head;
    uint32_t error;
    uint32_t error_index;
    uint32_t pad[29];
};

struct harness {
    uint8_t *desc;
    struct status_block *sb;
    uint8_t *bar_mem;
    uint8_t direct[1];
    struct npv_bar bar;
    unsigned resets;
};

static int reset_device(void *arg)
{
    struct harness *h = arg;
    h->resets++;
    return 0;
}

static void quiet(void *user, enum npv_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

/* Say which invariant broke (the fuzzer's crash report and the replay test show it). */
static void require(bool ok, const char *what, uint64_t v)
{
    if (!ok) {
        fprintf(stderr, "fuzz_ring_status: %s (%llu)\n", what, (unsigned long long)v);
        abort();
    }
}

static bool status_known(int32_t s)
{
    return s == 0 || s == -EIO || s == -ETIMEDOUT || s == -NPV_EDEVFAULT || s == -ECANCELED;
}

static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct npv_ctx *ctx;
    if (ctx == NULL) {
        require(npv_ctx_new(&ctx) == 0, "context", 0);
        npv_ctx_set_log_sink(ctx, quiet, NULL);
    }
    if (size < 1)
        return 0;
    bool etpu = data[0] & 1;
    struct harness h = {0};
    h.desc = aligned_alloc(4096, 4096);
    h.sb = aligned_alloc(128, sizeof(*h.sb));
    h.bar_mem = aligned_alloc(4096, 4096);
    require(h.desc != NULL && h.sb != NULL && h.bar_mem != NULL, "memory", 0);
    memset(h.desc, 0, 4096);
    memset(h.sb, 0, sizeof(*h.sb));
    memset(h.bar_mem, 0, 4096);
    h.direct[0] = 1;
    h.bar.base = h.bar_mem;
    h.bar.size = 4096;
    h.bar.direct = h.direct;

    struct npv_ring_config cfg = {
        .entries = ENTRIES,
        .desc_size = DESC_SIZE,
        .desc_vaddr = h.desc,
        .desc_iova = 0x100000,
        .status_vaddr = h.sb,
        .status_iova = 0x200000,
        .status_size = sizeof(*h.sb),
        .fields = {.head = 0, .error = 4, .error_index = etpu ? NPV_RING_NO_FIELD : 8},
        .head_format = etpu ? NPV_RING_HEAD_SLOT : NPV_RING_HEAD_COUNT,
        .error_format = etpu ? NPV_RING_ERROR_FATAL : NPV_RING_ERROR_PER_JOB,
        .db_bar = &h.bar,
        .db_off = 0x40,
        .db_width = etpu ? 8 : 4,
        .db_format = etpu ? NPV_RING_DB_SLOT : NPV_RING_DB_INDEX,
        /* No deadlines: a fuzz input must not depend on the clock. */
        .job_timeout_ns = UINT64_MAX,
        .reset = reset_device,
        .reset_arg = &h,
    };
    struct npv_ring *r;
    require(npv_ring_new(ctx, &cfg, &r) == 0, "ring config", 0);
    /* done[c]: cookie c completed; cookies are 1.. in submission order. */
    static uint8_t done[MAX_JOBS + 1];
    memset(done, 0, sizeof(done));
    uint64_t next_cookie = 1, completed = 0;

    for (size_t at = 1; at + 6 <= size; at += 6) {
        uint8_t op = data[at];
        uint32_t v = rd32(data + at + 1);
        uint8_t count = data[at + 5];
        switch (op % 4) {
        case 0:
            for (unsigned i = 0; i < count % 8u && next_cookie <= MAX_JOBS; i++) {
                void *slot;
                if (npv_ring_next(r, next_cookie, &slot) < 0)
                    break;
                memset(slot, (int)(next_cookie & 0xff), DESC_SIZE);
                next_cookie++;
            }
            (void)npv_ring_submit(r);
            break;
        case 1:
            __atomic_store_n(&h.sb->head, v, __ATOMIC_RELEASE);
            break;
        case 2:
            h.sb->error_index = count;
            __atomic_store_n(&h.sb->error, v, __ATOMIC_RELEASE);
            break;
        default: {
            struct npv_cpl cpl[ENTRIES * 2];
            int n = npv_ring_poll(r, cpl, ENTRIES * 2);
            if (n < 0) {
                /* A fault or a dead ring: a plain errno, then a reset brings it back. */
                require(n >= -4095 || n == -NPV_EDEVFAULT, "poll returned no errno", (uint64_t)-n);
                (void)npv_ring_reset(r);
                break;
            }
            for (int i = 0; i < n; i++) {
                uint64_t c = cpl[i].cookie;
                require(c != 0 && c < next_cookie, "a cookie never submitted", c);
                require(!done[c], "a job completed twice", c);
                done[c] = 1;
                completed++;
                require(status_known(cpl[i].status), "undocumented status",
                        (uint64_t)-cpl[i].status);
                require(cpl[i].status == -EIO || cpl[i].dev_error == 0,
                        "a device error word without -EIO", cpl[i].dev_error);
            }
            break;
        }
        }
        require(completed <= next_cookie - 1, "more completions than jobs", completed);
        require(npv_ring_in_flight(r) <= npv_ring_capacity(r), "more in flight than fit",
                npv_ring_in_flight(r));
    }
    npv_ring_free(r);
    free(h.desc);
    free(h.sb);
    free(h.bar_mem);
    return 0;
}
