/* Private scratch directories that a killed process does not leave behind for good.
 *
 * A directory is named for the process that owns it: $TMPDIR (or /tmp)/NAME-PID-XXXXXX.  A
 * process killed with SIGKILL (an OOM kill, `kill -9` of a tracker mid-job, a crash) cannot
 * remove its own, so creating one first sweeps those of the same NAME whose process is gone:
 * owned by this user, their PID not alive, untouched for TT_WORKDIR_STALE_S (a process in another
 * PID namespace sharing /tmp looks dead from here; its live directory is written every round). */
#ifndef TT_BASE_WORKDIR_H
#define TT_BASE_WORKDIR_H

#include <stddef.h>

#include "base/status.h"

#define TT_WORKDIR_STALE_S 600.0

/* Creates a fresh directory NAME-PID-XXXXXX (mode 0700) into dir[size], after sweeping. */
tt_status tt_workdir_create(const char *name, char *dir, size_t size, tt_errbuf *err);
/* Removes `dir` and everything in it (not following symbolic links). */
void tt_workdir_remove(const char *dir);
/* Removes the directories NAME-PID-* (and NAME-PID) of dead processes untouched for stale_s
 * seconds; returns how many were removed.  tt_workdir_create calls it with TT_WORKDIR_STALE_S. */
int tt_workdir_sweep(const char *name, double stale_s);

#endif
