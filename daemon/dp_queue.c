/* The two queues between the control thread and the data threads: commands
 * in (dthread_cmd, one queue per data thread, taken by its loop) and events
 * out (struct evq, one for the daemon, multi-producer, read by the event
 * loop when its eventfd fires). Both carry struct dcmd embedded in jobs, so
 * nothing is allocated; a mutex orders everything written before a push. */
#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "dp.h"
#include "log.h"

/* ---- events: data threads -> control thread ---- */

int evq_init(struct evq *q)
{
	memset(q, 0, sizeof(*q));
	STAILQ_INIT(&q->q);
	q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->efd < 0)
		return -errno;
	pthread_mutex_init(&q->lock, NULL);
	return 0;
}

void evq_fini(struct evq *q)
{
	if (q->efd >= 0)
		close(q->efd);
	q->efd = -1;
	pthread_mutex_destroy(&q->lock);
}

void evq_push(struct evq *q, struct dcmd *ev)
{
	uint64_t one = 1;

	pthread_mutex_lock(&q->lock);
	STAILQ_INSERT_TAIL(&q->q, ev, link);
	pthread_mutex_unlock(&q->lock);
	if (write(q->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "eventfd write: %s", strerror(errno));
}

void evq_take(struct evq *q, struct dcmd_list *out)
{
	uint64_t v;

	if (read(q->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "eventfd read: %s", strerror(errno));
	STAILQ_INIT(out);
	pthread_mutex_lock(&q->lock);
	STAILQ_CONCAT(out, &q->q);
	pthread_mutex_unlock(&q->lock);
}

/* ---- commands: control thread -> one data thread ---- */

void dthread_cmd(struct dthread *t, struct dcmd *c)
{
	pthread_mutex_lock(&t->cmd_lock);
	STAILQ_INSERT_TAIL(&t->cmds, c, link);
	atomic_store_explicit(&t->cmd_pending, 1, memory_order_release);
	pthread_mutex_unlock(&t->cmd_lock);
	if (t->wake_fd >= 0) {
		uint64_t one = 1;
		(void)!write(t->wake_fd, &one, sizeof(one));
	}
}

void dp_cmds_take(struct dthread *t, struct dcmd_list *out)
{
	STAILQ_INIT(out);
	pthread_mutex_lock(&t->cmd_lock);
	STAILQ_CONCAT(out, &t->cmds);
	atomic_store_explicit(&t->cmd_pending, 0, memory_order_relaxed);
	pthread_mutex_unlock(&t->cmd_lock);
}
