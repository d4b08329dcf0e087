/* One owner per run directory: an exclusive flock on RUN/.lock, held for the life of the process that trains
 * into the directory (the `local` supervisor, the single-process trainer, or a hand-started chief). */
#ifndef TFX_STORE_RUNLOCK_H
#define TFX_STORE_RUNLOCK_H

#include <stddef.h>

#include "common/err.h"

/* The environment variable `local` sets in its children: the supervisor holds the lock of their run directory. */
#define TFX_RUN_LOCK_HELD_ENV "TFX_RUN_LOCK_HELD"

/* Takes the lock of run_dir (made if missing) and writes "pid PID host HOST" into it; *fd receives the open lock
 * (owned by the caller: closing it, or exiting, releases the lock). TFX_EINVAL naming the holder's pid and host
 * when another process holds it. */
int tfx_run_lock(const char *run_dir, int *fd, tfx_err *err);

/* After a run that failed before writing anything: when run_dir holds nothing but its lock, removes the lock
 * and, if this process made the directory (made_it), the directory, so bad input leaves no run behind. Releases
 * the lock (closes fd). */
void tfx_run_unlock_empty(const char *run_dir, int fd, int made_it);

/* --fresh: moves what an earlier run left in run_dir (checkpoints, metrics, events, logs, saved experiment and
 * config, exports) into run_dir/previous-N/ (N the first free number), so the new run starts clean and nothing is
 * deleted; *moved says how many entries moved (0: nothing there) and where (caller's buffer) into which
 * directory. Keys and the lock stay. */
int tfx_run_set_aside(const char *run_dir, int *moved, char *where, size_t where_size, tfx_err *err);

#endif
