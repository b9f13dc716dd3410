/* How much of an allreduce goes to the aggregators (split.h): the model and the adaptive controller. */
#include "split.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hostport.h"

int split_parse(const char *s, double *out)
{
	char *end;
	double v;

	if (!s || !*s || !strcasecmp(s, "auto")) {
		*out = SPLIT_AUTO;
		return 0;
	}
	if (!strcasecmp(s, "model")) {
		*out = SPLIT_MODEL;
		return 0;
	}
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !(v >= 0 && v <= 1))
		return -EINVAL;
	*out = v;
	return 0;
}

/* Share of its link the aggregator path reaches while the ring runs too. */
static double agg_eff(const struct split_model *m)
{
	return m->agg_eff > 0 && m->agg_eff <= 1 ? m->agg_eff : 1;
}

double split_model_fraction(const struct split_model *m)
{
	double n = m->nranks, r, k, ke, a;

	if (m->naggs == 0)
		return 0;
	if (m->nranks < 2)
		return 1;
	r = 2 * (n - 1) / n;
	/* k: aggregator time per byte of a, in units of node-link time. */
	k = n * m->link_gbps / (m->naggs * m->agg_gbps);
	if (k <= 1)
		return 1; /* at a = 1 the node link is still the slower one */
	/* a + (1 - a) r = a k/e  ->  a = r / (k/e + r - 1) */
	ke = k / agg_eff(m);
	a = r / (ke + r - 1);
	/* a = 1 costs k node-link times (one pipeline, no e); the split a + (1-a) r. */
	return k <= a + (1 - a) * r ? 1 : a;
}

double split_fraction(const struct split_model *m, size_t bytes)
{
	double n = m->nranks, b = (double)bytes, r, lk, ag, fa, ta, tr, ts, ca, cs;

	if (m->naggs == 0)
		return 0;
	if (m->fixed >= 0)
		return m->fixed;
	if (m->nranks < 2)
		return 1;
	if (bytes <= m->small_bytes)
		return 2 < 2 * (n - 1) ? 1 : 0;
	r = 2 * (n - 1) / n;
	lk = 8 / m->link_gbps;                  /* ns per byte on a node link */
	ag = 8 / m->agg_gbps * n / m->naggs;    /* ns per byte of a on an aggregator */
	fa = split_model_fraction(m);
	ca = lk > ag ? lk : ag;
	ta = 2 * m->lat_us * 1e3 + b * ca;
	tr = 2 * (n - 1) * m->lat_us * 1e3 + b * r * lk;
	cs = (fa + (1 - fa) * r) * lk;
	if (fa * ag / agg_eff(m) > cs)
		cs = fa * ag / agg_eff(m);
	ts = 2 * n * m->lat_us * 1e3 + b * cs;
	if (!m->shared_host && fa > 0 && fa < 1 && ts < ta && ts < tr)
		return fa;
	return ta < tr ? 1 : 0;
}

bool split_window_agg(const struct split_model *m, size_t bytes, bool gather)
{
	double n = m->nranks, b = (double)bytes, lk, ag, ta, tr;

	if (m->naggs == 0 || bytes == 0 || bytes > SPLIT_WINDOW_AGG_MAX)
		return false;
	if (m->fixed >= 0)
		return m->fixed > 0;
	/* ns per window byte on the busiest direction of a node link and of
	 * an aggregator link (owner-only: reduce-scatter sends the whole
	 * window up, N/M windows into each aggregator; allgather brings
	 * (N-1)/N of it down, (N-1)/M windows out of each aggregator) */
	lk = 8 / m->link_gbps * (gather ? (n - 1) / n : 1);
	ag = 8 / m->agg_gbps * (gather ? n - 1 : n) / m->naggs;
	ta = 2 * m->lat_us * 1e3 + b * (lk > ag ? lk : ag);
	tr = (n - 1) * m->lat_us * 1e3 + b * (n - 1) / n * 8 / m->link_gbps;
	return ta < tr;
}

bool split_hosts_local(const char *aggs)
{
	const char *p = aggs;
	struct hostport hp;
	int n = 0, rc;

	while ((rc = hostport_list_next(&p, &hp, NULL, 0)) > 0) {
		if (!hostport_is_loopback(hp.host))
			return false;
		n++;
	}
	return rc == 0 && n > 0;
}

size_t split_count(double frac, size_t count, size_t elem_size)
{
	size_t per = 64 / elem_size, a;

	if (frac <= 0)
		return 0;
	if (frac >= 1)
		return count;
	a = (size_t)floor((double)count * frac);
	a -= a % per;
	return a > count ? count : a;
}

/* ---- the adaptive split (split.h) ---- */

int split_adapt_class(size_t bytes)
{
	int c;

	if (bytes < (size_t)1 << SPLIT_ADAPT_MIN_SHIFT)
		return -1;
	c = 63 - __builtin_clzll((unsigned long long)bytes) - (int)SPLIT_ADAPT_MIN_SHIFT;
	return c < (int)SPLIT_ADAPT_CLASSES ? c : (int)SPLIT_ADAPT_CLASSES - 1;
}

static int32_t to_ppm(double f)
{
	return f <= 0 ? 0 : f >= 1 ? SPLIT_PPM : (int32_t)(f * SPLIT_PPM + 0.5);
}

void split_adapt_init(struct split_adapt *sa, const struct split_model *m)
{
	memset(sa, 0, sizeof(*sa));
	sa->ends_only = m->shared_host;
	for (unsigned c = 0; c < SPLIT_ADAPT_CLASSES; c++) {
		struct split_class *cl = &sa->c[c];
		cl->ppm = to_ppm(split_fraction(m, (size_t)1 << (SPLIT_ADAPT_MIN_SHIFT + c)));
		cl->last_meas_ppm = -1;
		cl->armed = true; /* a new job climbs once */
	}
}

/* A climb is due once steady: neither way lost yet, `first` (+1, -1, 0)
 * the way it tries first. */
static void arm(struct split_class *cl, int first)
{
	cl->armed = true;
	cl->lost = 0;
	cl->dir = 0;
	cl->first = (int8_t)(first > 0 ? 1 : first < 0 ? -1 : 0);
	cl->hinted = false;
	cl->fine = false;
	cl->stable = 0;
}

void split_adapt_rearm(struct split_adapt *sa, int first)
{
	for (unsigned c = 0; c < SPLIT_ADAPT_CLASSES; c++) {
		struct split_class *cl = &sa->c[c];
		if (cl->trial) /* a trial ends, and climbs on, by itself */
			continue;
		arm(cl, first);
		/* with a way to go, at once: at the class's next window */
		cl->hinted = first != 0;
	}
}

/* The neighbour a trial goes to, dir -1 (towards the ring) or +1: `step`
 * away, an endpoint when that comes within half a SPLIT_ADAPT_TRY_STEP of
 * it; -1 when there is none that way. */
static int32_t neighbour(int32_t ppm, int dir, double step, bool ends_only)
{
	double s = ppm / (double)SPLIT_PPM, t = s + dir * step;

	if ((dir < 0 && ppm == 0) || (dir > 0 && ppm == SPLIT_PPM))
		return -1;
	if (ends_only)
		return dir < 0 ? 0 : SPLIT_PPM;
	if (t < SPLIT_ADAPT_TRY_STEP / 2)
		t = 0;
	if (t > 1 - SPLIT_ADAPT_TRY_STEP / 2)
		t = 1;
	return to_ppm(t);
}

/* The next trial of a steady class (armed): on in the direction the last
 * kept trial went, else the way not yet lost (cl->first's first, the
 * ring's when none). The first trial after a hinted rearm goes twice as
 * far (a tenant more or less moves the best split more than a step), and
 * once that one is kept the climb goes on in half steps.
 * Disarms when both ways lost. */
static bool climb(struct split_class *cl, int64_t x, bool ends_only)
{
	int f = cl->first ? cl->first : -1;
	int order[2] = { cl->dir ? cl->dir : f, cl->dir ? 0 : -f };

	for (int i = 0; i < 2; i++) {
		int d = order[i];
		double step = cl->hinted && d == cl->first ? 2 * SPLIT_ADAPT_TRY_STEP
			      : cl->fine ? SPLIT_ADAPT_TRY_STEP / 2 : SPLIT_ADAPT_TRY_STEP;
		int32_t to;
		if (!d || (cl->lost >> (d > 0) & 1) || (to = neighbour(cl->ppm, d, step, ends_only)) < 0)
			continue;
		cl->trial = step > SPLIT_ADAPT_TRY_STEP ? 2 : 1;
		cl->ref_ppm = cl->ppm;
		cl->ref_x = x;
		cl->ppm = to;
		cl->stable = 0;
		cl->hinted = false;
		return true;
	}
	cl->armed = false;
	cl->first = 0;
	cl->hinted = false;
	return false;
}

/* ---- the controller of one class, as a state machine ----
 *
 * States (split_state_of: read from the class's fields, which the unit
 * tests look at):
 *   STEADY    nothing due: the split follows the balance, X is watched
 *   CLIMBING  a climb is due (armed): a trial after SPLIT_ADAPT_STABLE
 *             settled windows
 *   HINTED    a climb is due with a way to try at once (split_adapt_rearm)
 *   TRIAL     a neighbour is measured (trial: 1 a step, 2 a hinted
 *             double step, 3 one step after two lost)
 *
 * Events: a window of the class with SPLIT_ADAPT_MIN_N requests or more
 * (fewer: nothing happens); `settled` when it and the one before ran at
 * the split in use. Per state:
 *   TRIAL     unsettled: nothing. The first settled window: its X kept.
 *             The second: judged against the reference (trial_end) ->
 *             TRIAL on the same way (kept, climb goes on), CLIMBING (lost
 *             after a double step: one step that way, trial 3), STEADY
 *             (both ways lost, or no neighbour), CLIMBING/STEADY as
 *             climb() finds. Always told. Unless overtaken
 *             (trial_overtaken: both windows below the reference by
 *             SPLIT_ADAPT_MOVED, the balance past the tried split the way
 *             it went) -> the balance step from there, CLIMBING that way.
 *   others    X moved twice the same way -> CLIMBING (watch_moved); then
 *             HINTED and the balance asks less than a trial's step ->
 *             TRIAL (hinted_jump); else a balance of HYST or more -> the
 *             split steps (balance_step), -> CLIMBING after a step of a
 *             trial's size; else CLIMBING settled SPLIT_ADAPT_STABLE
 *             times -> TRIAL (steady_window). Told when the split moved. */
enum split_state { SPLIT_STEADY, SPLIT_CLIMBING, SPLIT_HINTED, SPLIT_TRIAL };

static enum split_state split_state_of(const struct split_class *cl)
{
	if (cl->trial)
		return SPLIT_TRIAL;
	if (cl->armed)
		return cl->hinted ? SPLIT_HINTED : SPLIT_CLIMBING;
	return SPLIT_STEADY;
}

/* TRIAL, a settled window. */
static void trial_window(struct split_adapt *sa, struct split_class *cl, const struct split_meas *mm,
			 char why[96])
{
	double s = cl->ppm / (double)SPLIT_PPM;

	if (!cl->trial_x) { /* the better of two windows, as the reference */
		cl->trial_x = mm->x_bps;
		return;
	}
	int64_t xt = mm->x_bps > cl->trial_x ? mm->x_bps : cl->trial_x;
	cl->trial_x = 0;
	int dir = cl->ppm < cl->ref_ppm ? -1 : 1;
	/* the way the tenants' change points needs no margin: that the
	 * aggregators have more room (or less) is known, the trial only has
	 * to be no slower */
	double margin = cl->first && dir == cl->first ? 0 : SPLIT_ADAPT_MARGIN;
	bool better = (double)xt >= (double)cl->ref_x * (1 + margin);
	snprintf(why, 96, "tried %.3f: %.1f MB/s against %.1f at %.3f: %s", s, xt / 1e6, cl->ref_x / 1e6,
		 cl->ref_ppm / (double)SPLIT_PPM, better ? "kept" : "back");
	cl->prev_x = 0;
	if (better) {
		/* on that way. Should that lose, the way back (where this trial
		 * came from) is tried again unless this one won by twice the
		 * margin: a trial kept by noise (2 % is within a window's
		 * spread) is undone, not held until conditions change, and a
		 * clear win is not measured twice */
		bool clear = (double)xt >= (double)cl->ref_x * (1 + 2 * SPLIT_ADAPT_MARGIN);
		cl->dir = (int8_t)dir;
		cl->lost = clear ? (uint8_t)(1u << (dir < 0)) : 0;
		cl->steady_x = xt;
		if (cl->trial == 3) { /* the step beyond lost already */
			cl->dir = 0;
			cl->lost |= (uint8_t)(1u << (dir > 0));
		}
	} else {
		cl->ppm = cl->ref_ppm;
		cl->dir = 0;
		cl->steady_x = cl->ref_x;
		if (cl->trial != 2) { /* two steps too far: one, that way, below */
			cl->first = 0; /* the other way is judged as usual */
			cl->lost |= (uint8_t)(1u << (dir > 0));
		}
	}
	bool halve = !better && cl->trial == 2;
	/* a hinted jump kept: the optimum is about there, and a step past it
	 * costs ~10 % for the trial's five windows (the second tenant's
	 * scenario); the climb goes on in half steps */
	if (better && cl->trial == 2)
		cl->fine = true;
	cl->trial = 0;
	cl->stable = 0;
	/* a kept trial was measured settled: the next step that way starts
	 * now; after two steps lost, one step that way */
	if ((better || halve) && climb(cl, better ? xt : cl->ref_x, sa->ends_only)) {
		if (halve)
			cl->trial = 3;
		size_t l = strlen(why);
		snprintf(why + l, 96 - l, "; trying %.3f", cl->ppm / (double)SPLIT_PPM);
	}
}

/* Not TRIAL: whether X moved off steady_x twice in a row the same way
 * (the conditions changed since the last climb); one window off is noise
 * (a drained pipeline refilling). */
static bool watch_moved(struct split_class *cl, const struct split_meas *mm, bool settled)
{
	if (settled && !cl->steady_x) {
		cl->steady_x = mm->x_bps; /* the reference from here on */
	} else if (settled) {
		double dev = (double)mm->x_bps / (double)cl->steady_x - 1;
		int sign = dev > SPLIT_ADAPT_MOVED ? 1 : dev < -SPLIT_ADAPT_MOVED ? -1 : 0;
		cl->moved = sign && sign == cl->moved_sign ? cl->moved + 1 : sign != 0;
		cl->moved_sign = (int8_t)sign;
	}
	return cl->moved >= 2;
}

/* Interior, both paths measured: their balance, and the step towards it
 * (at most SPLIT_ADAPT_MAX_STEP). A window of an earlier split counts only
 * when it asks to go on past the split in use the way from there to here:
 * a change landed within the window that made the last step, which was
 * then too short (when the node links bound both paths the balance of a
 * window is its own split, which always points back). */
struct split_balance {
	bool balanced; /* a balance to follow */
	bool big;      /* its step is a trial's size or more */
	double bal, d;
};

static struct split_balance balance_of(const struct split_adapt *sa, const struct split_class *cl,
				       const struct split_meas *mm)
{
	double s = cl->ppm / (double)SPLIT_PPM;
	struct split_balance b = {
		.balanced = !sa->ends_only && cl->ppm > 0 && cl->ppm < SPLIT_PPM && mm->agg_bps > 0 &&
			    mm->ring_bps > 0,
	};

	b.bal = b.balanced ? (double)mm->agg_bps / (double)(mm->agg_bps + mm->ring_bps) : s;
	if (b.balanced && mm->ppm != cl->ppm && (mm->ppm < cl->ppm ? b.bal <= s : b.bal >= s))
		b.balanced = false, b.bal = s;
	b.d = fmax(-SPLIT_ADAPT_MAX_STEP, fmin(SPLIT_ADAPT_MAX_STEP, b.bal - s));
	b.big = fabs(b.d) >= SPLIT_ADAPT_TRY_STEP - 1e-9;
	return b;
}

/* HINTED, and the balance asks less than a trial's step: the trial that
 * way at this class's first window since the hint, settled or not (a step
 * just made would hold it off two more windows), its reference this
 * window's throughput; no small balance step before it (each would
 * unsettle the windows again: one a window kept it off for a whole 64 MiB
 * sample). The hint is spent here (climb clears it). */
static void hinted_jump(struct split_adapt *sa, struct split_class *cl, const struct split_meas *mm,
			char why[96])
{
	double s = cl->ppm / (double)SPLIT_PPM;

	if (climb(cl, mm->x_bps, sa->ends_only))
		snprintf(why, 96, "tenants changed: trying %.3f (%.1f MB/s at %.3f)",
			 cl->ppm / (double)SPLIT_PPM, cl->ref_x / 1e6, s);
}

/* A balance to follow, by HYST or more: the step (an endpoint only by
 * trial). After a step of a trial's size or more, climb again from there,
 * on the way the balance went: the other way is the path that was held up
 * (this also spends a hint). Smaller steps only follow the balance (two
 * adaptive jobs on the aggregators nudge each other's: a trial after each
 * cost 10-20 % for 2 windows). */
static void balance_step(struct split_class *cl, const struct split_meas *mm, const struct split_balance *b,
			 char why[96])
{
	double t = cl->ppm / (double)SPLIT_PPM + b->d;

	if (t < SPLIT_ADAPT_HYST)
		t = SPLIT_ADAPT_HYST;
	if (t > 1 - SPLIT_ADAPT_HYST)
		t = 1 - SPLIT_ADAPT_HYST;
	cl->ppm = to_ppm(t);
	cl->stable = 0;
	if (b->big) {
		arm(cl, 0);
		cl->dir = b->d < 0 ? -1 : 1;
		cl->lost = b->d < 0 ? 2 : 1;
	}
	cl->steady_x = 0; /* taken again once settled at the new split */
	cl->prev_x = 0;
	snprintf(why, 96, "balance %.3f (aggregators %.1f, ring %.1f MB/s)", b->bal, mm->agg_bps / 1e6,
		 mm->ring_bps / 1e6);
}

/* TRIAL, the window that judges it: whether the conditions changed under
 * the trial, the way it went. Its two windows run below the reference by
 * more than SPLIT_ADAPT_MOVED (a step of SPLIT_ADAPT_TRY_STEP costs less
 * where the node links bound X) and their balance asks to go on past the
 * tried split that way: the path the trial moved bytes off is the one held
 * up now (the aggregator's link halved within the trial, whose reference
 * was taken before). Going back would run the slower side for two windows
 * more; the trial ends where it is and the split follows the balance, the
 * climb armed that way. */
static bool trial_overtaken(struct split_adapt *sa, struct split_class *cl, const struct split_meas *mm,
			    char why[96])
{
	int64_t xt = mm->x_bps > cl->trial_x ? mm->x_bps : cl->trial_x;
	int dir = cl->ppm < cl->ref_ppm ? -1 : 1;

	if ((double)xt >= (double)cl->ref_x * (1 - SPLIT_ADAPT_MOVED))
		return false;
	struct split_balance b = balance_of(sa, cl, mm);
	if (!b.balanced || b.d * dir < SPLIT_ADAPT_HYST)
		return false;
	double s = cl->ppm / (double)SPLIT_PPM, ref = cl->ref_ppm / (double)SPLIT_PPM;
	int64_t ref_x = cl->ref_x;
	cl->trial = 0;
	cl->trial_x = 0;
	balance_step(cl, mm, &b, why);
	arm(cl, 0);
	cl->dir = (int8_t)dir;
	cl->lost = dir < 0 ? 2 : 1;
	snprintf(why, 96, "tried %.3f: %.1f MB/s against %.1f at %.3f, balance %.3f: on from there", s,
		 xt / 1e6, ref_x / 1e6, ref, b.bal);
	return true;
}

/* Neither: the reference of a trial is the better of this window and the
 * one before at this split (one window can be a pipeline refilling);
 * CLIMBING after SPLIT_ADAPT_STABLE settled windows, the trial. */
static void steady_window(struct split_adapt *sa, struct split_class *cl, const struct split_meas *mm,
			  bool settled, char why[96])
{
	double s = cl->ppm / (double)SPLIT_PPM;
	int64_t ref = mm->x_bps > cl->prev_x ? mm->x_bps : cl->prev_x;

	cl->prev_x = settled ? mm->x_bps : 0;
	if (settled && cl->armed && ++cl->stable >= SPLIT_ADAPT_STABLE && climb(cl, ref, sa->ends_only))
		snprintf(why, 96, "trying %.3f (%.1f MB/s at %.3f)", cl->ppm / (double)SPLIT_PPM,
			 cl->ref_x / 1e6, s);
}

/* One class, one window: whether to tell (the split moved, or a trial
 * ended). */
static bool class_decide(struct split_adapt *sa, struct split_class *cl, const struct split_meas *mm,
			 char why[96])
{
	int32_t before = cl->ppm;
	bool settled;

	if (mm->n < (int64_t)SPLIT_ADAPT_MIN_N)
		return false;
	settled = mm->ppm == cl->ppm && cl->last_meas_ppm == cl->ppm;
	cl->last_meas_ppm = mm->ppm;
	if (split_state_of(cl) == SPLIT_TRIAL) {
		if (!settled)
			return false;
		bool was_judged = cl->trial_x != 0;
		if (was_judged && trial_overtaken(sa, cl, mm, why))
			return true;
		trial_window(sa, cl, mm, why);
		return was_judged; /* a trial's end is always told */
	}
	if (watch_moved(cl, mm, settled)) {
		/* climb again (a climb already due keeps its count of steady
		 * windows) */
		cl->moved = 0;
		if (split_state_of(cl) == SPLIT_STEADY)
			arm(cl, 0);
		cl->steady_x = mm->x_bps;
	}
	struct split_balance b = balance_of(sa, cl, mm);
	if (split_state_of(cl) == SPLIT_HINTED && !b.big)
		hinted_jump(sa, cl, mm, why);
	else if (b.balanced && fabs(b.d) >= SPLIT_ADAPT_HYST)
		balance_step(cl, mm, &b, why);
	else
		steady_window(sa, cl, mm, settled, why);
	return cl->ppm != before;
}

unsigned split_adapt_decide(struct split_adapt *sa, const struct split_meas *meas, char why[][96])
{
	unsigned changed = 0;

	for (unsigned c = 0; c < SPLIT_ADAPT_CLASSES; c++)
		if (class_decide(sa, &sa->c[c], &meas[c], why[c]))
			changed |= 1u << c;
	return changed;
}

/* Adds [a, b) to a union of intervals met in order of their starts. */
static void union_add(uint64_t a, uint64_t b, uint64_t *end, uint64_t *len)
{
	if (b <= a)
		return;
	if (a >= *end) {
		*len += b - a;
		*end = b;
	} else if (b > *end) {
		*len += b - *end;
		*end = b;
	}
}

static int64_t rate(uint64_t bytes, uint64_t ns)
{
	return ns ? (int64_t)((double)bytes * 1e9 / (double)ns) : 0;
}

static uint64_t max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

void split_meas_window(const struct split_rec *rec, size_t n, int cls, struct split_ends *ends,
		       struct split_meas *out)
{
	uint64_t xb = 0, ab = 0, rb = 0, xe = 0, ae = 0, re = 0, xl = 0, al = 0, rl = 0;
	struct split_ends prev = *ends;

	memset(out, 0, sizeof(*out));
	out->ppm = -1;
	for (size_t i = 0; i < n; i++) {
		const struct split_rec *q = &rec[i];
		if (q->cls != cls)
			continue;
		if (!out->n++)
			out->ppm = q->ppm;
		xb += q->bytes;
		union_add(max64(q->t0, prev.end), q->t_end, &xe, &xl);
		ends->end = max64(ends->end, q->t_end);
		if (q->agg_bytes) {
			ab += q->agg_bytes;
			union_add(max64(q->t0, prev.agg), q->t_agg, &ae, &al);
			ends->agg = max64(ends->agg, q->t_agg);
		}
		if (q->bytes > q->agg_bytes) {
			rb += q->bytes - q->agg_bytes;
			union_add(max64(q->t0, prev.ring), q->t_ring, &re, &rl);
			ends->ring = max64(ends->ring, q->t_ring);
		}
	}
	out->x_bps = rate(xb, xl);
	out->agg_bps = rate(ab, al);
	out->ring_bps = rate(rb, rl);
}
