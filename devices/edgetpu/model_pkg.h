/* SPDX-License-Identifier: MIT */
/*
 * The Edge TPU model's compiled-model packages (internal): given the same
 * `*_edgetpu.tflite` files as the driver (NPV_EDGETPU_MODEL_PACKAGES, or
 * `npuvfio sim --device edgetpu --package FILE`), the model takes a fetched
 * chunk that has a package chunk's size as that chunk and checks it strictly
 * (package_check.h): every bit but the linked fields equal to the bitstream;
 * every linked address reached through the page table, in its direction, for
 * its buffer's whole size; an execution-only run only while its parameters
 * are cached under its token. It cannot execute DarwiNN code: outputs get the
 * data-path pattern (edgetpu_pkg_pattern), never the network's answer.
 *
 * Kept apart from model_internal.h: both sides name a `struct
 * npv_edgetpu_model` (the device model, the compiled model).
 */
#ifndef NPV_EDGETPU_MODEL_PKG_H
#define NPV_EDGETPU_MODEL_PKG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct edgetpu_pkgs;

/* Why the last chunk was refused (EDGETPU_MODEL_PKG_REJECT_WHY). */
enum edgetpu_pkg_why {
    EDGETPU_PKG_WHY_NONE = 0,
    EDGETPU_PKG_WHY_CHUNK = 1,      /* a bit outside the linked fields differs from the package */
    EDGETPU_PKG_WHY_NOT_CACHED = 2, /* execution-only run without its parameters cached */
    EDGETPU_PKG_WHY_PARAMS = 3,     /* the parameter address holds other bytes than the package's */
    EDGETPU_PKG_WHY_UNLINKED = 4,   /* an input or output of the executable has no address */
    EDGETPU_PKG_WHY_DMA = 5,        /* a linked address does not reach its buffer (HIB error) */
    EDGETPU_PKG_WHY_NOMEM = 6,
};

/* The model's DMA through its page table: 0 or the HIB error bits (*bad_va: the failing VA). */
struct edgetpu_pkg_io {
    void *arg;
    uint64_t (*copy)(void *arg, uint64_t va, void *buf, uint64_t len, bool write, uint64_t *bad_va);
};

/* Load the packages named in paths (separated by ':'). 0, or the loader's error (why names it). */
int edgetpu_pkgs_new(const char *paths, struct edgetpu_pkgs **out, char *why, size_t why_len);
void edgetpu_pkgs_free(struct edgetpu_pkgs *p);
/* A chunk of this size belongs to some package (so the model never runs it as its own format). */
bool edgetpu_pkgs_size_known(const struct edgetpu_pkgs *p, size_t len);
/*
 * Run a fetched chunk: 1 when no package has a chunk of its size (the caller
 * runs it as our instruction format); 0 when it ran (the caller raises
 * SC_HOST_0); -EPROTO when refused (*hib: HIB error bits to raise, 0 for a
 * program error; *bad_va with them).
 */
int edgetpu_pkgs_exec(struct edgetpu_pkgs *p, const uint8_t *chunk, size_t len,
                      const struct edgetpu_pkg_io *io, uint64_t *hib, uint64_t *bad_va);
/* A GCB reset: the parameters cached on the chip are gone. */
void edgetpu_pkgs_reset(struct edgetpu_pkgs *p);
/* Test-port registers EDGETPU_MODEL_PKG_*: true when off is one of them. */
bool edgetpu_pkgs_port(struct edgetpu_pkgs *p, uint64_t off, bool is_write, uint64_t *v);

#endif
