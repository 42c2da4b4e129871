/* SPDX-License-Identifier: MIT */
/*
 * What the reliability suites share: the devices of the table (devices/
 * registry.c) that have a model and a driver, each model in a child process,
 * one open -> map -> submit -> wait -> close pass of the device's sample
 * workload, and the process's resource counts (fds, mappings, the library's
 * live objects) to compare before and after.
 */
#ifndef NPV_TEST_REL_HARNESS_H
#define NPV_TEST_REL_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <npuvfio/ctx.h>

#include "child_server.h"
#include "registry.h"

/* A device the reliability suites can run today: model, driver and sample workload. */
bool rel_device_runs(const struct npv_device_entry *e);
/*
 * Table entry i when it runs today; else NULL, after printing
 * "<tag> device=NAME <what> not-covered" for scripts/reliability-report.py.
 */
const struct npv_device_entry *rel_device_or_note(size_t i, const char *tag, const char *what);
/* The number of entries in the device table. */
size_t rel_device_count(void);

/*
 * A context whose log goes nowhere: the suites inject failures that the
 * library logs by design, and judge by results. NPV_REL_LOG=1 keeps stderr.
 */
struct npv_ctx *rel_ctx_new(void);

/* Serve e's model in a child process (forever, one client after another). */
void rel_model_start(struct vu_server *s, const struct npv_device_entry *e);
/*
 * The same with e's small model (registry.h, model_create_small): the failure
 * walk's, whose cost is calls of a pass x the time of a pass.
 */
void rel_model_start_small(struct vu_server *s, const struct npv_device_entry *e);
/* A new model on the socket of one that was SIGKILLed (vu_server_crash). */
void rel_model_restart(struct vu_server *s, const struct npv_device_entry *e);

/*
 * Sanitizer runtimes map shadow memory and allocator regions as they go, and
 * ASan holds freed memory in its quarantine (up to 256 MiB), so under ASan or
 * TSan mappings and RSS move without any leak: the suites compare them only
 * in plain builds (fds and the library's live objects always).
 */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define REL_COMPARE_MEMORY 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define REL_COMPARE_MEMORY 0
#endif
#endif
#ifndef REL_COMPARE_MEMORY
#define REL_COMPARE_MEMORY 1
#endif

struct rel_counts {
    long fds;      /* entries of /proc/<pid>/fd */
    long mappings; /* lines of /proc/<pid>/maps */
    long rss_kib;  /* VmRSS of /proc/<pid>/status */
    struct npv_ctx_resources lib;
};

/* Counts of process pid (0: this process); lib from ctx (NULL: zeros). */
void rel_counts_read(pid_t pid, struct npv_ctx *ctx, struct rel_counts *c);

/*
 * What one pass did. err: the first error the path returned (0: it ran to
 * the end). exact: every result equal to the CPU reference (meaningful when
 * err is 0). After an error in the workload, retried tells what a second run
 * on the same open driver did: 0 usable and exact, < 0 the driver answered
 * with an error (cleanly dead).
 */
struct rel_pass {
    int err;
    const char *step; /* where err came from: "domain", "open", "driver", "run" */
    bool exact;
    int retried;
};

/*
 * One pass on the device at path: domain, open, driver, sample (iterations
 * jobs), and on a failed run a retry, then close everything. before_retry
 * (may be NULL) runs between the failed run and the retry.
 */
void rel_pass_run(struct npv_ctx *ctx, const struct npv_device_entry *e, const char *path,
                  unsigned iterations, void (*before_retry)(void *), void *arg,
                  struct rel_pass *out);

struct rel_pass_opts {
    unsigned iterations;
    /* Every deadline of the driver (driver_open_deadline); 0: the driver's defaults. */
    uint64_t deadline_ns;
    void (*before_retry)(void *); /* may be NULL */
    void *arg;
};
/* rel_pass_run with the driver's deadlines chosen. */
void rel_pass_run_opts(struct npv_ctx *ctx, const struct npv_device_entry *e, const char *path,
                       const struct rel_pass_opts *o, struct rel_pass *out);

#endif
