/* pace.h: how many requests a sweep keeps in flight. The caller's bound
 * (fleet.each's concurrency, --concurrency) is a ceiling; under it an
 * adaptive controller finds what the apiserver takes, by the rule TCP
 * congestion control uses (additive increase, multiplicative decrease),
 * with the queue estimate of TCP Vegas deciding when to stop growing:
 *
 *   - the window starts at PACE_START and grows by one per answer (slow
 *     start: it doubles each round trip) until one answer's own round trip
 *     says more than PACE_SS_QUEUE request waited (the estimate below on
 *     that answer alone: the average lags a doubling window by a round
 *     trip, and against a flow of 3 seats and a queue of 4 slow start then
 *     ran to 9 or 10 in flight and was refused), a throttle or the queue
 *     below; then by 1/window per answer (one per round trip);
 *   - it grows only while the apiserver queues fewer than PACE_QUEUE_LOW
 *     of its requests, and shrinks by 1/window per answer (one per round
 *     trip) while it queues more than PACE_QUEUE_HIGH. The queue is
 *     estimated from the answers' round trips: window * (1 - base/smoothed),
 *     base the fastest answer of the sweep, smoothed their moving average
 *     (PACE_SMOOTH per answer). API Priority and Fairness holds what its seats
 *     cannot take in a queue before refusing it with 429 (and a
 *     Retry-After of seconds): its queue shows as a longer round trip
 *     first, so the window stops short of the refusals;
 *   - a throttle cuts it to PACE_CUT of itself (at least 1), at most once
 *     per round trip: answers to requests sent before the last cut tell of
 *     the window before it and are counted, never cut again;
 *   - a throttle that carries Retry-After holds the window (no increase)
 *     until that many seconds passed: the server said when to come back;
 *   - it never passes the ceiling; with adapt off it is the ceiling.
 *
 * API Priority and Fairness names the priority level of every answer
 * (X-Kubernetes-PF-PriorityLevel-UID). A level of type Exempt (the admin's
 * system:masters, probes) is never queued nor refused: answers from one of
 * the levels pace_exempt named skip the queue estimate (a busy apiserver's
 * round trips grow with its load, not with a queue of the flow's) and the
 * window grows to the ceiling, as a fixed pace would send; throttles still
 * cut it. Without those names (the levels could not be read) every level
 * counts as one that queues.
 *
 * A throttle is an answer 503, or a 429 that speaks of load: one carrying
 * Retry-After, or whose body is not a Kubernetes Status (API Priority and
 * Fairness refuses in plain text, with Retry-After, when the flow's seats
 * and queue are full; so does the max-inflight filter without it). A 429
 * Status without Retry-After (the eviction API refusing what a
 * PodDisruptionBudget forbids) is about one object, not load: it counts as
 * an answer. The X-Kubernetes-PF-PriorityLevel-UID of the last throttle is
 * kept for the sweep's summary, so an operator can name the priority level
 * that throttled it.
 *
 * Pure: times are passed in (monotonic seconds); no I/O, no allocation. */
#ifndef COZY_PACE_H
#define COZY_PACE_H

#define PACE_START 2      /* the window's start (slow start: 8 after 2 round trips) */
#define PACE_CUT 0.5      /* the multiplicative decrease on a throttle */
/* Grow while fewer than PACE_QUEUE_LOW requests wait at the server, shrink
 * while more than PACE_QUEUE_HIGH do. Higher than TCP Vegas's 1 and 3
 * packets: a few requests waiting keep the flow's seats busy while answers
 * travel back and the next request is made (with 3 seats and a queue of 4,
 * 6 to 8 in flight was the fastest fixed point, where 1 and 3 held the
 * window at 3 to 5: docs/performance.md (p)); and the estimate reads high,
 * since the fastest round trip of a sweep is a lucky one. 5 is still short
 * of the default priority levels' queues (50 a queue). */
#define PACE_QUEUE_LOW 3
#define PACE_QUEUE_HIGH 5
#define PACE_SMOOTH 0.25  /* the moving average's weight of each round trip */
#define PACE_SS_QUEUE 1.0 /* slow start ends at an answer showing more waited */

#define PACE_EXEMPT_MAX 4 /* Exempt priority levels remembered */

struct pace {
    int ceiling, adapt;
    double window;
    double ssthresh;     /* slow start below it; additive increase above */
    double cut_at;       /* monotonic time of the last cut (0: none) */
    double hold_until;   /* no increase before this (Retry-After) */
    double base, srtt;   /* the fastest round trip, their moving average (0: none yet) */
    /* what the sweep saw, for its summary */
    unsigned long answers, throttled, cuts;
    int low, high;       /* the least and most requests the window allowed */
    char level[48];      /* the APF priority level of the last throttle */
    char exempt[PACE_EXEMPT_MAX][48]; /* the Exempt levels' UIDs (pace_exempt) */
    int nexempt;
    int exempt_seen;     /* an answer came from one of them */
};

/* ceiling: 1..REST_POOL_MAX; adapt 0: the window is the ceiling. The
 * window starts at PACE_START, or at the ceiling if lower. */
void pace_init(struct pace *p, int ceiling, int adapt);
/* Names a priority level of type Exempt (its UID): answers from it skip
 * the queue estimate. Past PACE_EXEMPT_MAX, or a UID too long, is ignored. */
void pace_exempt(struct pace *p, const char *uid);
/* How many requests may be in flight now (>= 1). */
int pace_allowed(const struct pace *p);
/* An HTTP answer arrived at now to an attempt sent at sent_at: status,
 * whether its body is a Kubernetes Status (JSON), Retry-After (-1: none)
 * and the APF priority level UID ("" or NULL: none). 1 when it was a
 * throttle, else 0. */
int pace_answer(struct pace *p, double sent_at, double now, long status, int status_body,
                double retry_after, const char *pf_level);
#endif
