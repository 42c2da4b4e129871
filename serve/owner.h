/* SPDX-License-Identifier: MIT */
/*
 * The owner of one RKNPU, serving it to other processes (`npuvfio serve`,
 * docs/sharing.md). The owner runs the real driver (npv_rknpu) on the device
 * it opened; every client that connects to its socket gets a virtual RKNPU
 * of its own over vfio-user: the same register map as the model's (a
 * forwarding model, devices/rknpu/model.h), so an unchanged driver opens it
 * with npv_dev_open_vfio_user.
 *
 * Isolation: each client has one of the driver's 16 domains. Its DMA maps
 * (memory it shares by fd) are mapped at its own IOVAs into its domain only,
 * and each of its runs is submitted as a laid-out job of that domain, so the
 * IOMMU attached while it runs holds nothing of another client.
 *
 * Scheduling: one thread owns the driver. Clients take turns (round robin);
 * a turn submits up to `batch` of the client's runs back to back, so the
 * device switches domains once per turn, not once per run.
 *
 * Counters: npv_owner_clients, and the stats endpoint of the owner's context
 * (npv_stats_serve, `npuvfio stats`): the source "serve", an entity
 * client<id> per client with the fields of npv_owner_client_stats.
 *
 * Thread-safety: npv_owner_run on one thread; npv_owner_stop from any thread
 * or a signal handler; npv_owner_clients from any thread.
 */
#ifndef NPV_SERVE_OWNER_H
#define NPV_SERVE_OWNER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <npuvfio/ctx.h>
#include <npuvfio/rknpu.h>

struct npv_owner;

struct npv_owner_opts {
    const char *socket_path; /* where clients connect */
    unsigned max_clients;    /* 1..NPV_RKNPU_MAX_DOMAINS; 0: all 16 */
    /*
     * Runs of one client on the device at once, 1..3 (0: 3, one per core);
     * its other runs wait in the owner for its next turn.
     */
    unsigned max_jobs;
    uint64_t max_bytes;      /* bytes one client may map; 0: 4 GiB (its whole domain) */
    unsigned batch;          /* runs of one client per turn; 0: all it has waiting */
    uint64_t job_timeout_ns; /* a run's deadline on the device; 0: the driver's (1 s) */
    /*
     * Who may connect: the socket is mode 0600 (the owner's user) when
     * socket_gid is -1, else group socket_gid with mode 0660.
     */
    long socket_gid;
};

/* One client's counters; a departed client keeps its last ones. */
struct npv_owner_client_stats {
    uint64_t id;        /* 1, 2, ... in connection order */
    unsigned domain_id; /* its domain on the device */
    pid_t pid;          /* SO_PEERCRED at connect */
    uid_t uid;
    bool connected;
    uint64_t runs;         /* runs started on its virtual cores and accepted */
    uint64_t runs_ok;      /* completed with status 0 */
    uint64_t runs_failed;  /* completed with an error (-EIO: a DMA fault, -ETIMEDOUT, ...) */
    uint64_t runs_dropped; /* abandoned by its own reset, or cancelled when it left */
    uint64_t runs_peak;    /* the most of its runs on the device at once (<= max_jobs) */
    uint64_t maps_refused; /* over max_bytes or its most mappings, or without an fd */
    uint64_t mapped_bytes; /* now */
    uint64_t maps;         /* mappings now */
    uint64_t wait_ns;      /* total time its runs waited in the owner before the device */
    uint64_t switches;     /* turns that switched the device to its domain */
};

/*
 * Serve npu (open, owned by the caller, idle) on opts->socket_path: listen
 * now, serve in npv_owner_run. -EINVAL (bad opts), -EADDRINUSE (an owner
 * answers there), -EEXIST (ctx has a stats source "serve" already: one
 * owner per context), -ENOMEM, or the socket's error.
 */
int npv_owner_new(struct npv_ctx *ctx, struct npv_rknpu *npu, const struct npv_owner_opts *opts,
                  struct npv_owner **out);
/*
 * Accept and serve clients until npv_owner_stop, or until the device is
 * lost. Every client is dropped (its runs finished or cancelled, its
 * mappings and domain released) before it returns: its connection ends, so
 * its next call fails with -ENOTCONN. 0 after npv_owner_stop; the device's
 * error when it was lost (-ENOTCONN: its vfio-user server went away;
 * -ENODEV: a PCI function that reads all ones; -EIO: a core that no reset
 * revives); another negative errno when the listener failed.
 */
int npv_owner_run(struct npv_owner *o);
/* Make npv_owner_run return. Async-signal-safe. */
void npv_owner_stop(struct npv_owner *o);
/* After npv_owner_run returned (or was never called). NULL is a no-op. */
void npv_owner_free(struct npv_owner *o);
/*
 * Copy up to max clients' counters, oldest first (departed ones included,
 * the last 64 of them). Returns how many there are.
 */
size_t npv_owner_clients(struct npv_owner *o, struct npv_owner_client_stats *out, size_t max);

#endif
