/* preview.h: `cozy-migrate preview`, what an upgrade would do: every
 * pending Lua migration of the tier dry-run in order against a copy-on-write
 * view of the cluster (overlay.h), with each object it would change and the
 * records the run would write. Takes no lock and persists nothing.
 * Returns 0 when the run would succeed (as far as it can tell: a migration
 * it cannot predict is reported unpredictable, not failed), 1 when it would
 * stop (naming the migration), or the exit code of a refusal (as `run`). */
#ifndef COZY_PREVIEW_H
#define COZY_PREVIEW_H
#include "run/runner.h"

int preview_run(const struct runner_opts *o);
#endif
