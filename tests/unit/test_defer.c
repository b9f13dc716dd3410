/* common/defer.h: posts refused -FI_EAGAIN, retried on the next pass, in
 * any order or in order. Items are fakes whose retry answers from a script:
 * no fabric needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "defer.h"

#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#endif

struct item {
	struct defer d;
	int id;
	int refuse;  /* retries still to refuse with -FI_EAGAIN */
	int tries;
	struct defer_queue *q; /* where to_add goes */
	struct item *to_add;   /* queued by this item's retry, if any */
	struct item *to_cancel;
};

static int log_ids[32], nlog;

static int retry(struct defer *d)
{
	struct item *it = container_of(d, struct item, d);
	it->tries++;
	log_ids[nlog++] = it->id;
	if (it->to_add)
		defer_add(it->q, &it->to_add->d, retry);
	if (it->to_cancel)
		defer_cancel(it->q, &it->to_cancel->d);
	if (it->refuse > 0) {
		it->refuse--;
		return -FI_EAGAIN;
	}
	return 0;
}

static void setup(struct item *it, int n, struct defer_queue *q)
{
	memset(it, 0, (size_t)n * sizeof(*it));
	for (int i = 0; i < n; i++) {
		it[i].id = i;
		it[i].q = q;
	}
	defer_queue_init(q);
	nlog = 0;
}

/* Any order: every item is tried once per run; one refused again waits for
 * the next run, behind the others; adding twice queues once. */
static void test_any_order(void **state)
{
	struct defer_queue q;
	struct item it[3];

	(void)state;
	setup(it, 3, &q);
	it[1].refuse = 1;
	for (int i = 0; i < 3; i++)
		defer_add(&q, &it[i].d, retry);
	defer_add(&q, &it[0].d, retry); /* again: no second entry */
	assert_true(defer_run(&q, DEFER_ANY_ORDER));
	assert_int_equal(nlog, 3);
	assert_int_equal(log_ids[0], 0);
	assert_int_equal(log_ids[1], 1);
	assert_int_equal(log_ids[2], 2);
	assert_true(defer_queued(&it[1].d));
	assert_false(defer_queued(&it[0].d));
	assert_false(defer_run(&q, DEFER_ANY_ORDER));
	assert_int_equal(it[1].tries, 2);
	assert_int_equal(it[0].tries, 1);
	assert_true(defer_empty(&q));
}

/* Any order: what a retry queues waits for the next run (a post refused
 * again in the same pass would spin); a retry may cancel another item. */
static void test_any_order_added_meanwhile(void **state)
{
	struct defer_queue q;
	struct item it[4];

	(void)state;
	setup(it, 4, &q);
	it[0].to_add = &it[3];
	it[1].to_cancel = &it[2];
	for (int i = 0; i < 3; i++)
		defer_add(&q, &it[i].d, retry);
	assert_true(defer_run(&q, DEFER_ANY_ORDER));
	assert_int_equal(nlog, 2); /* 0 and 1; 2 cancelled; 3 next run */
	assert_int_equal(it[2].tries, 0);
	assert_true(defer_queued(&it[3].d));
	assert_false(defer_run(&q, DEFER_ANY_ORDER));
	assert_int_equal(it[3].tries, 1);
}

/* In order: the first refused ends the run, nothing behind it is tried;
 * once it goes, the rest follow in order. */
static void test_in_order(void **state)
{
	struct defer_queue q;
	struct item it[3];

	(void)state;
	setup(it, 3, &q);
	it[1].refuse = 2;
	for (int i = 0; i < 3; i++)
		defer_add(&q, &it[i].d, retry);
	assert_true(defer_run(&q, DEFER_IN_ORDER));
	assert_int_equal(nlog, 2);
	assert_int_equal(it[2].tries, 0);
	assert_true(defer_run(&q, DEFER_IN_ORDER));
	assert_int_equal(it[2].tries, 0);
	assert_false(defer_run(&q, DEFER_IN_ORDER));
	assert_int_equal(it[2].tries, 1);
	int want[] = { 0, 1, 1, 1, 2 };
	assert_int_equal(nlog, 5);
	assert_memory_equal(log_ids, want, sizeof(want));
	assert_true(defer_empty(&q));
}

/* cancel and clear: an item taken off is not tried and may be queued anew. */
static void test_cancel_clear(void **state)
{
	struct defer_queue q;
	struct item it[3];

	(void)state;
	setup(it, 3, &q);
	for (int i = 0; i < 3; i++)
		defer_add(&q, &it[i].d, retry);
	defer_cancel(&q, &it[1].d);
	defer_cancel(&q, &it[1].d); /* not queued: nothing */
	assert_false(defer_run(&q, DEFER_IN_ORDER));
	assert_int_equal(it[1].tries, 0);
	for (int i = 0; i < 3; i++)
		defer_add(&q, &it[i].d, retry);
	defer_clear(&q);
	assert_true(defer_empty(&q));
	for (int i = 0; i < 3; i++)
		assert_false(defer_queued(&it[i].d));
	defer_add(&q, &it[2].d, retry);
	assert_false(defer_run(&q, DEFER_ANY_ORDER));
	assert_int_equal(it[2].tries, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_any_order),
		cmocka_unit_test(test_any_order_added_meanwhile),
		cmocka_unit_test(test_in_order),
		cmocka_unit_test(test_cancel_clear),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
