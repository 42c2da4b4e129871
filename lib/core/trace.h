/*
 * USDT trace points (provider "npuvfio"), for perf, bpftrace and SystemTap.
 *
 * Each probe is one nop instruction plus an ELF note (.note.stapsdt) that
 * tells a tracer where the nop is and where the arguments live; a tracer
 * turns the nop into a breakpoint while it runs. The probes use no
 * semaphores (_SDT_HAS_SEMAPHORES stays undefined): every argument passed is
 * a value the code holds already, so there is nothing to skip, and a
 * semaphore would add a load and a branch to every untraced submit. So an
 * untraced probe costs the nop alone: no system call, no lock, no branch.
 *
 * NPV_HAVE_USDT comes from npv_config.h (configure found sys/sdt.h and
 * NPUVFIO_USDT is ON); without it every probe expands to nothing. Builds that
 * do not use the generated config (the arm64 cross check) get nothing too.
 *
 * The probe list is fixed by tests/packaging/usdt_probes.sh and the README's
 * "Tracing" section; keep the three together.
 */
#ifndef NPV_TRACE_H
#define NPV_TRACE_H

#include "npv_config.h"

#if defined(NPV_HAVE_USDT) && NPV_HAVE_USDT
#include <sys/sdt.h>
#define NPV_TRACE1(name, a)          DTRACE_PROBE1(npuvfio, name, a)
#define NPV_TRACE2(name, a, b)       DTRACE_PROBE2(npuvfio, name, a, b)
#define NPV_TRACE3(name, a, b, c)    DTRACE_PROBE3(npuvfio, name, a, b, c)
#define NPV_TRACE4(name, a, b, c, d) DTRACE_PROBE4(npuvfio, name, a, b, c, d)
#else
/* Arguments are not evaluated, as with the probes: none has side effects. */
#define NPV_TRACE1(name, a)          ((void)0)
#define NPV_TRACE2(name, a, b)       ((void)0)
#define NPV_TRACE3(name, a, b, c)    ((void)0)
#define NPV_TRACE4(name, a, b, c, d) ((void)0)
#endif

#endif
