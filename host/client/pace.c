/* pace.c: the adaptive in-flight bound of a sweep (pace.h has the rule and
 * its constants). Owns the window's arithmetic only; restpool.c asks it
 * how many requests may be in flight and tells it each answer. */
#include "client/pace.h"

#include <stdio.h>
#include <string.h>

void pace_init(struct pace *p, int ceiling, int adapt)
{
    *p = (struct pace){0};
    p->ceiling = ceiling < 1 ? 1 : ceiling;
    p->adapt = adapt;
    p->window = adapt && p->ceiling > PACE_START ? PACE_START : p->ceiling;
    p->ssthresh = p->ceiling;
    p->low = p->high = (int)p->window;
}

void pace_exempt(struct pace *p, const char *uid)
{
    if (!uid || !*uid || strlen(uid) >= sizeof p->exempt[0] || p->nexempt >= PACE_EXEMPT_MAX)
        return;
    snprintf(p->exempt[p->nexempt++], sizeof p->exempt[0], "%s", uid);
}

static int is_exempt(const struct pace *p, const char *level)
{
    for (int i = 0; level && *level && i < p->nexempt; i++)
        if (strcmp(p->exempt[i], level) == 0)
            return 1;
    return 0;
}

int pace_allowed(const struct pace *p)
{
    int n = (int)p->window;
    return n < 1 ? 1 : n > p->ceiling ? p->ceiling : n;
}

static void seen(struct pace *p)
{
    int n = pace_allowed(p);
    if (n < p->low)
        p->low = n;
    if (n > p->high)
        p->high = n;
}

/* Load, not an answer about one object (pace.h). */
static int is_throttle(long status, int status_body, double retry_after)
{
    if (status == 503)
        return 1;
    /* a Status 429 without Retry-After names one object's refusal */
    return status == 429 && (retry_after >= 0 || !status_body);
}

/* An answer that was no throttle: the window moves by the queue the round
 * trips show (pace.h). */
static void answered(struct pace *p, double rtt, double now, int exempt)
{
    if (rtt > 0) {
        if (p->base <= 0 || rtt < p->base)
            p->base = rtt;
        p->srtt = p->srtt <= 0 ? rtt : p->srtt + (rtt - p->srtt) * PACE_SMOOTH;
    }
    if (!p->adapt || now < p->hold_until)
        return;
    if (exempt) {
        /* nothing queues this flow: its round trips say nothing of a queue */
        if (p->window < p->ceiling)
            p->window += p->window < p->ssthresh ? 1.0 : 1.0 / p->window;
        if (p->window > p->ceiling)
            p->window = p->ceiling;
        return;
    }
    /* slow start ends at the first answer that shows a queue (pace.h):
     * the smoothed estimate below lags a doubling window */
    if (p->window < p->ssthresh && rtt > 0 && p->window * (1 - p->base / rtt) > PACE_SS_QUEUE)
        p->ssthresh = p->window;
    double queued = p->srtt > 0 ? p->window * (1 - p->base / p->srtt) : 0;
    if (queued > PACE_QUEUE_HIGH) {
        p->window -= 1.0 / p->window;
        if (p->window < 1)
            p->window = 1;
        p->ssthresh = p->window;
    } else if (queued < PACE_QUEUE_LOW && p->window < p->ceiling) {
        p->window += p->window < p->ssthresh ? 1.0 : 1.0 / p->window;
        if (p->window > p->ceiling)
            p->window = p->ceiling;
    }
}

int pace_answer(struct pace *p, double sent_at, double now, long status, int status_body,
                double retry_after, const char *pf_level)
{
    p->answers++;
    if (!is_throttle(status, status_body, retry_after)) {
        int exempt = is_exempt(p, pf_level);
        p->exempt_seen |= exempt;
        answered(p, now - sent_at, now, exempt);
        seen(p);
        return 0;
    }
    p->throttled++;
    if (pf_level && *pf_level)
        snprintf(p->level, sizeof p->level, "%s", pf_level);
    if (!p->adapt)
        return 1;
    if (retry_after > 0 && now + retry_after > p->hold_until)
        p->hold_until = now + retry_after;
    /* sent before the last cut: it tells of the window the cut replaced */
    if (p->cuts > 0 && sent_at < p->cut_at)
        return 1;
    p->window *= PACE_CUT;
    if (p->window < 1)
        p->window = 1;
    p->ssthresh = p->window;
    p->cut_at = now;
    p->cuts++;
    seen(p);
    return 1;
}
