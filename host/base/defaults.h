/* defaults.h: every default the engine applies when neither a flag, the
 * environment nor a script header says otherwise, each named once. The CLI's
 * --help texts, the runner, the child supervisor and the kube module read
 * them from here; a number repeated in another file is a bug. */
#ifndef COZY_DEFAULTS_H
#define COZY_DEFAULTS_H

/* Where the ledger lives (DESIGN.md "Vocabulary"). */
#define DEFAULT_NAMESPACE "cozy-system"
#define DEFAULT_LEDGER_NAME "cozystack-version"
/* The runner lock is the Lease named <ledger><LEASE_SUFFIX>. */
#define LEASE_SUFFIX "-lock"
/* The component the runner's Events name as their source (and reporting
 * controller): no script may write an Event claiming it (guard.h). */
#define EVENT_COMPONENT "cozy-migrate"

/* One migration. */
#define DEFAULT_TIMEOUT_S (10 * 60.0)       /* header timeout= when absent */
#define DEFAULT_GRACE_S 10.0                /* TERM -> KILL at the deadline */
#define DEFAULT_MEMORY_MB 512               /* Lua memory cap */
#define DEFAULT_MAX_ATTEMPTS 3              /* background retries of a failed record */

/* The background tier's dispatch (dispatch.h): a failed attempt is retried
 * after BACKOFF, doubling with each attempt, at most BACKOFF_MAX. */
#define DEFAULT_RETRY_BACKOFF_S (10 * 60.0)
#define DEFAULT_RETRY_BACKOFF_MAX_S (2 * 3600.0)
/* A dispatched Job without the chart's template: its identity (the chart's
 * ServiceAccount for the Jobs that are not hooks), how long it is kept
 * after it ended, and its lock wait. */
#define DEFAULT_JOB_SERVICE_ACCOUNT "cozystack-migrations-jobs"
#define DEFAULT_JOB_TTL_S 86400
#define DEFAULT_JOB_LOCK_WAIT_S 300

/* The runner lock. */
/* leaseDurationSeconds: long enough that an apiserver restart (30-60 s)
 * does not end a run; a crashed runner's lock frees itself after it. */
#define DEFAULT_LEASE_S 90
#define DEFAULT_LOCK_WAIT_S (5 * 60.0)      /* how long a second runner waits */

/* Every request to the apiserver (rest.c's policy). */
#define DEFAULT_REQUEST_TIMEOUT_S 30.0      /* one attempt */
/* Transient failures are retried for a time, not a count: long enough for
 * an apiserver restart (--retry-for). The count is only a backstop. */
#define DEFAULT_REQUEST_ATTEMPTS 100        /* including the first */
#define DEFAULT_RETRY_BUDGET_S 60.0         /* all attempts of one request */
/* Writes one fleet.each has in flight at once (--concurrency; 1: one at a
 * time). Bounded by REST_POOL_MAX (client/restpool.h). */
#define DEFAULT_CONCURRENCY 8

/* What a failed migration keeps of its output (record field `output`). */
#define OUTPUT_TAIL_LINES 20
#define OUTPUT_TAIL_MAX 4096                /* bytes, NUL included */

/* An operator's skip: the longest --reason / SKIP_REASON (the record's
 * message holds it whole). */
#define SKIP_REASON_MAX 1000

/* The longest MIGRATIONS_IMAGE (the record's image holds it whole). */
#define IMAGE_MAX 255

/* One line of error text: a REST error (reason + 2 KiB message) with the
 * context a caller prefixes to it. Every buffer that carries such a line
 * has this size. */
#define ERRLINE_MAX 2600
#endif
