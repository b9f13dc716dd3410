/* Weighted shares of the daemon's capacity (docs/daemon.md, "Weights").
 *
 * A weight scales a job's window, and that alone gives a job its weighted
 * share where the daemon's CPU is what the jobs wait for. Where the link is
 * (TCP), the kernel shares it per connection, about equally whatever the
 * windows (measured: weight 2 carried 0.60 of the bytes, not 0.67). So
 * when jobs of different weights move data at once, the control thread
 * measures every PACE_TICK_MS what each job's results carried (bytes_out),
 * takes the daemon's capacity as the highest total it carried over
 * PACE_WINDOW ticks (decaying by
 * PACE_DECAY a tick while data moves: never while the jobs are idle, so a
 * pause between steps does not make the pacer start from nothing), divides
 * it by weight among the jobs that want more
 * than they get (pace_shares), and each job's data thread holds its result
 * sends to that rate (a token bucket, dp_result.c). The credit does the rest:
 * a rank sends its next chunk only once it has a result, so the job's
 * incoming bytes follow. Jobs of one weight are not paced: the kernel's
 * per-connection sharing already gives them 0.49-0.51 each, and a pacer
 * could only cost them headroom.
 *
 * The control thread writes job->pace_bps; the data thread reads it. */
#ifndef SUMCASTD_PACER_H
#define SUMCASTD_PACER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PACE_TICK_MS 100
#define PACE_DECAY 0.995
#define PACE_WINDOW 5 /* ticks the daemon's total is taken over */
#define PACE_WARM_TICKS 3 /* a job's rate measured this often before it is held */
#define PACE_MAX_JOBS 64
/* A job that wants more is held to its share times this: room for the
 * total to grow past a stale capacity, 2 % a tick. On a full link it is
 * also all that the light job gets above its share. */
#define PACE_ROOM 1.02

struct daemon;
struct event;

/* The control thread's side (struct daemon's pace). */
struct pacer {
	struct event *ev;
	uint64_t last_ns;
	double capacity; /* bytes/s (see above) */
	double total;    /* bytes/s carried over the last PACE_WINDOW ticks */
	double win_bytes[PACE_WINDOW], win_s[PACE_WINDOW];
	unsigned at;
	uint32_t paced; /* jobs held to a rate at the last tick (for the log line) */
};

/* One job in pace_shares. rate: bytes/s it carried (smoothed); cap: in, the
 * rate it was held to last time (0: not held); out, the rate to hold it to. */
struct pace_share {
	uint32_t weight;
	double rate, cap;
	bool link; /* under its share of a full link: counted as wanting more */
};

/* Weighted max-min shares of capacity (bytes/s) among v[0..n), n at most
 * PACE_MAX_JOBS (the rest keep their caps): a job held
 * to its cap that used at least 90 % of it wants more (so does one not held
 * yet, and one marked link); one that used less wants 1.25 times its rate
 * and is charged its rate. The jobs that want more share what is left by weight, each capped
 * at PACE_ROOM times its share;
 * no job's cap is below its weighted share of the whole capacity, so a job
 * that slowed down can always come back to it. */
void pace_shares(struct pace_share *v, size_t n, double capacity);

/* The control thread's timer: starts ticking (0 or -ENOMEM); stops. */
int pacer_start(struct daemon *d);
void pacer_stop(struct daemon *d);

#endif
