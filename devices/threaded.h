/* SPDX-License-Identifier: MIT */
/*
 * The threaded sample: each device's requests as an npv_share serves them to
 * many threads (npuvfio/share.h), for the bench's thread rows. Per device:
 * the share's driver calls, and per slot (a request in flight of one thread)
 * buffers of its own, a request built for iteration i and a check of its
 * output against the CPU reference.
 */
#ifndef NPV_DEVICES_THREADED_H
#define NPV_DEVICES_THREADED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <npuvfio/share.h>

#define THREADED_REQ_MAX 64u /* bytes of one request as prepare writes it */

struct threaded_sample;

/*
 * For device name ("testdev", "edgetpu", "rknpu", "aicore") on its driver
 * drv (as the device table's driver_open opened it), with slots request
 * slots. -ENOTSUP for another device, -ENOMEM, or the driver's errno.
 */
int threaded_sample_open(const char *name, void *drv, unsigned slots, struct threaded_sample **out);
void threaded_sample_close(struct threaded_sample *ts);

/*
 * Run nthreads threads, each with depth requests of slots of its own in
 * flight (nthreads * depth <= slots), for duration_ns, then let them finish
 * what they submitted. *per_s: completions per second over the whole run;
 * *wrong: outputs that differ from the reference plus failed or misrouted
 * completions. 0 or a negative errno (a submit or wait failed).
 */
int threaded_sample_measure(struct threaded_sample *ts, unsigned nthreads, unsigned depth,
                            uint64_t duration_ns, double *per_s, uint64_t *wrong);

/*
 * The lock-free per-queue paths (no share, no lock). testdev: thread 0 on
 * the driver's own ring, thread t on queue t (npv_testdev_queue_open), each
 * with depth COPY jobs of its own slots in flight, pushed, submitted and
 * polled on its own ring. rknpu: thread t on core t's queue
 * (npv_rknpu_queue_open, domain 0), each with depth matmuls of its own
 * slots in flight, submitted and polled on its own queue. For duration_ns,
 * then drained. As threaded_sample_measure, except that *per_s counts only
 * the completions reaped within duration_ns (steady state: no drain, no
 * wait for the last thread to notice the end); -ENOTSUP for another device,
 * -ERANGE when nthreads exceeds the device's queues (cores).
 */
int threaded_sample_measure_queues(struct threaded_sample *ts, unsigned nthreads, unsigned depth,
                                   uint64_t duration_ns, double *per_s, uint64_t *wrong);

#endif
