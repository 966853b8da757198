/*
 * fault.h: named fault-injection points, compiled in only for test builds.
 *
 * Robustness tests need the rare failures (an LMDB commit that returns EIO,
 * a PostgreSQL connection that drops mid-epoch, a Kafka transaction that
 * does not commit, a socket that takes half a buffer, malloc returning NULL)
 * on demand and at an exact call, the way SQLite's test builds fail the Nth
 * allocation or I/O. Code guards a call with FAULT("point") and takes its
 * failure path when it is true.
 *
 * Built with `meson setup -Dfault_injection=true`, FAULT(name) is true when
 * the environment variable WEIR_FAULT selects that call:
 *
 *   WEIR_FAULT="point:N"          the Nth call of point fails, once
 *   WEIR_FAULT="point:N:once"     the same
 *   WEIR_FAULT="point:N:always"   the Nth call and every later one fail
 *   WEIR_FAULT="a:3,b:1:always"   several points (up to FAULT_MAX_RULES)
 *   WEIR_FAULT="point:N:hold"     the Nth call and every later one wait while
 *                                 the file named by WEIR_FAULT_HOLD exists, then
 *                                 go on without failing (a target that hangs
 *                                 and comes back; the test removes the file)
 *
 * Each injected failure is logged on stderr ("weir: fault injected: point
 * (call N)"), so a test can tell a run where the fault fired from one where
 * the workload never reached the Nth call. With WEIR_FAULT_COUNTS=path,
 * fault_counts_write() (called at exit) writes "point calls" per line, so a
 * test can learn how many calls a workload makes. The points are listed in
 * common/README.md.
 *
 * Without the option FAULT(name) is the constant false: the guarded code
 * compiles to what it was, with no call, no branch and no string.
 */
#ifndef WEIR_COMMON_FAULT_H
#define WEIR_COMMON_FAULT_H

#include <stdbool.h>
#include <stddef.h>

#define FAULT_MAX_RULES 8

#ifdef WEIR_FAULT_INJECTION
/* True when this call of point name must fail (thread-safe). name must be
 * a string literal: points are told apart by their text. */
bool fault_hit(const char *name);
#define FAULT(name) fault_hit(name)
/* n, or about half of n (at least 1) when this call must be short. */
#define FAULT_SHORT(name, n) (fault_hit(name) && (n) > 1 ? (n) / 2 : (n))
#else
#define FAULT(name) false
#define FAULT_SHORT(name, n) (n)
#endif

#endif
