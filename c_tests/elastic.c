/*
 * elastic.c: a live pool's thread count from C (pool_set_max_threads, pool_refresh_max_threads,
 * pool_stats.surplus_threads).
 *
 *   1. bad input: NULL, 0 and above the creation's max_threads give POOL_ERR_INVALID;
 *   2. a pool of 4 (all prestarted) runs 4 blockers; lowered to 1 meanwhile, the 40 quick tasks
 *      submitted next run one at a time once the blockers end, and 3 threads park as surplus;
 *   3. raised to 4 again, 4 blockers run at once; pool_refresh_max_threads sets a count from
 *      1 to 4 and reports it; after pool_shutdown the count cannot change.
 *
 * A 60 s watchdog turns a hang into exit status 2.
 */
#include "common.h"

#include <stdatomic.h>
#include <stdint.h>

/* Blockers and quick tasks counted apart: the quick tasks' concurrency is what the lowered
 * count bounds (blockers started before it finish on their threads). */
static atomic_int active, done, release, qactive, qmost;

static void blocker(void *arg)
{
    (void)arg;
    atomic_fetch_add(&active, 1);
    while (!atomic_load(&release))
        sleep_us(200);
    atomic_fetch_sub(&active, 1);
    atomic_fetch_add(&done, 1);
}

static void quick(void *arg)
{
    (void)arg;
    int now = atomic_fetch_add(&qactive, 1) + 1;
    int seen = atomic_load(&qmost);
    while (now > seen && !atomic_compare_exchange_weak(&qmost, &seen, now)) {}
    sleep_us(300);
    atomic_fetch_sub(&qactive, 1);
    atomic_fetch_add(&done, 1);
}

static int active_is(void *want) { return atomic_load(&active) == *(int *)want; }
static int done_is(void *want) { return atomic_load(&done) == *(int *)want; }
static int surplus_is(void *pool)
{
    struct pool_stats st;
    return pool_stats(pool, &st) == POOL_OK && st.surplus_threads == 3;
}
static void report(void *ctx)
{
    (void)ctx;
    printf("  active %d, done %d\n", atomic_load(&active), atomic_load(&done));
}

static void reset(void)
{
    atomic_store(&active, 0);
    atomic_store(&qmost, 0);
    atomic_store(&done, 0);
    atomic_store(&release, 0);
}

int main(void)
{
    test_watchdog_start(60);
    struct pool_config cfg;
    pool_config_init(&cfg);
    cfg.max_threads = 4;
    cfg.min_threads = 4;
    struct pool *pool = NULL;
    if (!CHECK_STATUS(pool_create(&cfg, &pool), POOL_OK, "create 4, all prestarted")) return test_finish();

    /* 1. bad input */
    CHECK_STATUS(pool_set_max_threads(NULL, 1), POOL_ERR_INVALID, "set_max_threads(NULL)");
    CHECK_STATUS(pool_set_max_threads(pool, 0), POOL_ERR_INVALID, "set_max_threads(0)");
    CHECK_STATUS(pool_set_max_threads(pool, 5), POOL_ERR_INVALID, "set_max_threads(5 of 4)");
    CHECK_STATUS(pool_set_max_threads(pool, (size_t)-1), POOL_ERR_INVALID, "set_max_threads(SIZE_MAX)");
    CHECK_STATUS(pool_refresh_max_threads(NULL, NULL), POOL_ERR_INVALID, "refresh(NULL)");

    /* 2. shrink while 4 blockers run */
    reset();
    for (int i = 0; i < 4; i++)
        CHECK_STATUS(pool_submit_fn(pool, blocker, NULL), POOL_OK, i == 0 ? "submit blocker" : NULL);
    int four = 4;
    wait_until(active_is, &four, report, "4 blockers run at once");
    CHECK_STATUS(pool_set_max_threads(pool, 1), POOL_OK, "set_max_threads(1)");
    for (int i = 0; i < 40; i++)
        CHECK_STATUS(pool_submit_fn(pool, quick, NULL), POOL_OK, i == 0 ? "submit quick" : NULL);
    atomic_store(&release, 1);
    int all = 44;
    wait_until(done_is, &all, report, "blockers and quick tasks done");
    CHECK_EQ(atomic_load(&qmost), 1, "the quick tasks ran one at a time on a pool lowered to 1");
    wait_until(surplus_is, pool, NULL, "3 threads parked as surplus");

    /* 3. grow again */
    reset();
    CHECK_STATUS(pool_set_max_threads(pool, 4), POOL_OK, "set_max_threads(4)");
    for (int i = 0; i < 4; i++)
        CHECK_STATUS(pool_submit_fn(pool, blocker, NULL), POOL_OK, i == 0 ? "submit blocker again" : NULL);
    wait_until(active_is, &four, report, "4 blockers run at once after growing");
    atomic_store(&release, 1);
    wait_until(done_is, &four, report, "blockers done");
    struct pool_stats st;
    CHECK_STATUS(pool_stats(pool, &st), POOL_OK, "stats");
    CHECK_EQ(st.surplus_threads, 0, "no surplus thread at 4 of 4");
    size_t n = 0;
    CHECK_STATUS(pool_refresh_max_threads(pool, &n), POOL_OK, "refresh");
    CHECK(n >= 1 && n <= 4, "refresh: a count from 1 to the creation's 4");
    CHECK_STATUS(pool_refresh_max_threads(pool, NULL), POOL_OK, "refresh without an out");
    CHECK_STATUS(pool_shutdown(pool), POOL_OK, "shutdown");
    CHECK_STATUS(pool_set_max_threads(pool, 2), POOL_ERR_SHUTDOWN, "set_max_threads after shutdown");
    pool_destroy(pool);
    return test_finish();
}
