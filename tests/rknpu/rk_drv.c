/* SPDX-License-Identifier: MIT */
#include "rk_drv.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <npuvfio/ctx.h>
#include <npuvfio/dev.h>
#include <npuvfio/domain.h>

#include "rknpu/model.h"

static void serve_rknpu(const char *path, void *arg)
{
    (void)arg;
    int r = npv_rknpu_serve(path, false);
    if (r < 0)
        fprintf(stderr, "rknpu server: %s\n", npv_strerror(r));
}

void rk_require_model(const char *why)
{
    const char *hw = getenv("NPUVFIO_TEST_RKNPU");
    if (hw != NULL && hw[0] != '\0') {
        printf("SKIPPED: %s; NPUVFIO_TEST_RKNPU=%s names a real NPU\n", why, hw);
        exit(77);
    }
}

static void open_client(struct rk *t, const struct npv_rknpu_config *cfg)
{
    const char *hw = getenv("NPUVFIO_TEST_RKNPU");
    ck_assert_int_eq(npv_ctx_new(&t->ctx), 0);
    /* The NPU's device addresses are 32 bits. */
    struct npv_domain_opts o = {.aperture_start = 0, .aperture_last = 0xffffffffull};
    ck_assert_int_eq(npv_domain_new(t->ctx, &o, &t->dom), 0);
    struct npv_dev_opts dopts = {.request_timeout_ns = GENEROUS_NS};
    int r;
    if (!t->hardware)
        r = npv_dev_open_vfio_user(t->ctx, t->srv.path, t->dom, &dopts, &t->dev);
    else if (strchr(hw, ':') != NULL)
        r = npv_dev_open_pci(t->ctx, hw, t->dom, &dopts, &t->dev);
    else
        r = npv_dev_open_platform(t->ctx, hw, t->dom, &dopts, &t->dev);
    ck_assert_msg(r == 0, "open device: %s", npv_strerror(r));
    if (!t->hardware)
        ck_assert_int_eq(npv_bar_map(t->dev, RKNPU_TP_BAR_INDEX, &t->port), 0);
    r = npv_rknpu_open(t->dev, cfg, &t->npu);
    ck_assert_msg(r == 0, "rknpu open: %s", npv_strerror(r));
}

void rk_open(struct rk *t, const struct npv_rknpu_config *cfg)
{
    memset(t, 0, sizeof(*t));
    const char *hw = getenv("NPUVFIO_TEST_RKNPU");
    t->hardware = hw != NULL && hw[0] != '\0';
    if (!t->hardware)
        vu_server_start(&t->srv, serve_rknpu, NULL);
    open_client(t, cfg);
}

void rk_reopen(struct rk *t, const struct npv_rknpu_config *cfg)
{
    open_client(t, cfg);
}

void rk_close_client(struct rk *t)
{
    npv_rknpu_close(t->npu);
    npv_bar_unmap(t->port);
    npv_dev_close(t->dev);
    npv_domain_put(t->dom);
    npv_ctx_free(t->ctx);
    t->npu = NULL;
    t->port = NULL;
    t->dev = NULL;
    t->dom = NULL;
    t->ctx = NULL;
}

void rk_close(struct rk *t)
{
    rk_close_client(t);
    vu_server_kill(&t->srv);
    memset(t, 0, sizeof(*t));
}

void rk_fault(struct rk *t, unsigned core, enum rknpu_fault fault)
{
    ck_assert_ptr_nonnull(t->port);
    ck_assert_int_eq(npv_bar_write(t->port, RKNPU_TP_CORE(core) + RKNPU_TP_FAULT, 4, fault), 0);
}

uint32_t rk_port_read(struct rk *t, uint32_t off)
{
    uint64_t v = 0;
    ck_assert_ptr_nonnull(t->port);
    ck_assert_int_eq(npv_bar_read(t->port, off, 4, &v), 0);
    return (uint32_t)v;
}

int rk_run_tasks(struct rk *t, const struct npv_rknpu_task *tasks, uint32_t nr, uint32_t core_mask,
                 uint32_t domain_id, uint64_t timeout_ns)
{
    struct npv_rknpu_job job = {
        .tasks = tasks,
        .nr_tasks = nr,
        .core_mask = core_mask,
        .domain_id = domain_id,
        .timeout_ns = timeout_ns,
    };
    return npv_rknpu_run(t->npu, &job);
}

int rk_run_mm(struct rk *t, struct rknpu_sample_mm *s, uint32_t core_mask, uint64_t *mismatches)
{
    rknpu_sample_mm_poison(s);
    int r = rk_run_tasks(t, &s->task, 1, core_mask, npv_rknpu_mem_domain(s->a), 0);
    *mismatches = rknpu_sample_mm_check(s);
    return r;
}

void rk_assert_exact(struct rk *t, struct rknpu_sample_mm *s, uint32_t core_mask)
{
    uint64_t bad = 1;
    int r = rk_run_mm(t, s, core_mask, &bad);
    if (r != 0 || bad != 0)
        rk_dump(t);
    ck_assert_msg(r == 0, "mask 0x%x: %s", core_mask, npv_strerror(r));
    ck_assert_msg(bad == 0, "mask 0x%x: %llu elements differ from the CPU", core_mask,
                  (unsigned long long)bad);
}

unsigned rk_fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    unsigned n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own fd */
}

/*
 * Mappings of memfds (DMA memory) and device nodes: what the library maps.
 * Anonymous mappings are left out: the C library's and ASan's allocators
 * make and keep them as they please.
 */
unsigned rk_map_count(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    ck_assert_ptr_nonnull(f);
    unsigned n = 0;
    char line[512];
    while (fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, "/memfd:") != NULL || strstr(line, " /dev/") != NULL;
    fclose(f);
    return n;
}

uint64_t rk_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(f);
    unsigned long size = 0, resident = 0;
    ck_assert_int_eq(fscanf(f, "%lu %lu", &size, &resident), 2);
    fclose(f);
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

void rk_dump(struct rk *t)
{
    if (t->port == NULL)
        return;
    for (unsigned c = 0; c < NPV_RKNPU_NUM_CORES; c++) {
        uint32_t base = RKNPU_TP_CORE(c);
        fprintf(stderr,
                "core %u: state %u runs %u tasks %u config_errors %u bad_word %08x%08x "
                "dma_faults %u fault_iova %08x resets %u\n",
                c, rk_port_read(t, base + RKNPU_TP_STATE), rk_port_read(t, base + RKNPU_TP_RUNS),
                rk_port_read(t, base + RKNPU_TP_TASKS_EXECUTED),
                rk_port_read(t, base + RKNPU_TP_CONFIG_ERRORS),
                rk_port_read(t, base + RKNPU_TP_BAD_WORD_HI),
                rk_port_read(t, base + RKNPU_TP_BAD_WORD_LO),
                rk_port_read(t, base + RKNPU_TP_DMA_FAULTS),
                rk_port_read(t, base + RKNPU_TP_FAULT_IOVA),
                rk_port_read(t, base + RKNPU_TP_RESETS));
    }
}
