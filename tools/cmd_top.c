/* sumcastctl top: status and jobs, refreshed every --interval; q or
 * Ctrl-C quits. With --json one object per line. */
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "sumcastctl.h"

static struct termios tty_saved;
static bool tty_raw;

static void tty_restore(void)
{
	if (tty_raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &tty_saved);
	tty_raw = false;
}

static void on_signal(int sig)
{
	(void)sig;
	quit_flag = 1;
}

/* Waits up to s seconds for 'q' on a terminal stdin; true if the user quit. */
static bool top_wait(double s)
{
	double end = sc_now_s() + s;

	while (!quit_flag) {
		double left = end - sc_now_s();
		if (left <= 0)
			return false;
		if (!tty_raw) {
			sleep_s(left);
			continue;
		}
		struct pollfd p = { STDIN_FILENO, POLLIN, 0 };
		if (poll(&p, 1, (int)(left * 1000) + 1) > 0) {
			char ch;
			if (read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q' || ch == 3))
				return true;
		}
	}
	return true;
}

int cmd_top(struct opts *o)
{
	struct sigaction sa = { 0 };
	bool clear = isatty(STDOUT_FILENO) && !o->json;
	json_t *prev = NULL;
	double prev_t = 0;

	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (isatty(STDIN_FILENO) && !tcgetattr(STDIN_FILENO, &tty_saved)) {
		struct termios t = tty_saved;
		t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		t.c_cc[VMIN] = 0;
		t.c_cc[VTIME] = 0;
		if (!tcsetattr(STDIN_FILENO, TCSANOW, &t)) {
			tty_raw = true;
			atexit(tty_restore);
		}
	}
	if (o->interval_s <= 0)
		o->interval_s = 1;
	for (long it = 0; !quit_flag && (!o->iterations || it < o->iterations); it++) {
		struct status_view s = { 0 };
		if (!prev) {
			/* First frame: a baseline, so even frame 1 shows current rates. */
			prev = get_json("/stats");
			prev_t = sc_now_s();
			if (top_wait(o->interval_s))
				break;
		}
		status_collect(&s, prev, prev_t);
		if (o->json) {
			json_t *j = status_json(o, &s);
			json_object_set_new(j, "jobs_detail", jobs_json(s.stats, prev, s.rate_window));
			json_print_line(j);
			json_decref(j);
		} else {
			char ts[32];
			if (clear)
				fputs("\033[H\033[2J", stdout);
			else if (it)
				fputs("\n", stdout);
			printf("sumcastctl top - %s - every %.1f s%s\n", fmt_clock(ts, sizeof(ts)), o->interval_s,
			       tty_raw ? ", q to quit" : "");
			status_print(o, &s);
			printf("\n");
			jobs_print(s.stats, prev, s.rate_window > 0 ? s.rate_window : 1);
		}
		fflush(stdout);
		json_decref(prev);
		prev = json_incref(s.stats);
		prev_t = sc_now_s();
		status_free(&s);
		if (o->iterations && it + 1 >= o->iterations)
			break;
		if (top_wait(o->interval_s))
			break;
	}
	json_decref(prev);
	tty_restore();
	return 0;
}
