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

	ev->next = NULL;
	pthread_mutex_lock(&q->lock);
	if (q->tail)
		q->tail->next = ev;
	else
		q->head = ev;
	q->tail = ev;
	pthread_mutex_unlock(&q->lock);
	if (write(q->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "eventfd write: %s", strerror(errno));
}

struct dcmd *evq_take(struct evq *q)
{
	uint64_t v;
	struct dcmd *h;

	if (read(q->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		SC_LOG_RATELIMIT(SC_LOG_WARN, 1000, "eventfd read: %s", strerror(errno));
	pthread_mutex_lock(&q->lock);
	h = q->head;
	q->head = q->tail = NULL;
	pthread_mutex_unlock(&q->lock);
	return h;
}

/* ---- commands: control thread -> one data thread ---- */

void dthread_cmd(struct dthread *t, struct dcmd *c)
{
	c->next = NULL;
	pthread_mutex_lock(&t->cmd_lock);
	if (t->cmd_tail)
		t->cmd_tail->next = c;
	else
		t->cmd_head = c;
	t->cmd_tail = c;
	atomic_store_explicit(&t->cmd_pending, 1, memory_order_release);
	pthread_mutex_unlock(&t->cmd_lock);
	if (t->wake_fd >= 0) {
		uint64_t one = 1;
		(void)!write(t->wake_fd, &one, sizeof(one));
	}
}

struct dcmd *dp_cmds_take(struct dthread *t)
{
	struct dcmd *c;

	pthread_mutex_lock(&t->cmd_lock);
	c = t->cmd_head;
	t->cmd_head = t->cmd_tail = NULL;
	atomic_store_explicit(&t->cmd_pending, 0, memory_order_relaxed);
	pthread_mutex_unlock(&t->cmd_lock);
	return c;
}
