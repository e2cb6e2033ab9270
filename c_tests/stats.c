/*
 * stats.c: the scheduler counters from C (`pool_stats`, `pool_worker_stats`,
 * `pool_global_stats`).
 *
 *   1. bad input: NULL pool / out give POOL_ERR_INVALID, a worker index at or beyond
 *      `workers` gives POOL_ERR_RANGE, and `*out` is untouched on every error;
 *   2. a fresh pool (2 workers, no thread started): every counter 0, `workers` == 2;
 *   3. N tasks submitted from the main thread: once they all ran, `polled` == N exactly, in
 *      the total and summed over the workers; the workers fetched from the injector; no async
 *      spawn counted;
 *   4. idle: the workers park (`parks` > 0 within the wait limit);
 *   5. stealing, made deterministic: one task submits M tasks to its own worker's queue and
 *      then spins until all M ran, so the other worker must steal every one of them:
 *      `stolen` grows by exactly M, `steals` by at least 1;
 *   6. after pool_shutdown the counters are still readable and `threads` is 0;
 *   7. the global pool's counters.
 *
 * A 60 s watchdog turns a hang into exit status 2.
 */
#include "common.h"

#include <stdatomic.h>
#include <stdint.h>

#define M 200 /* < the ring's 256 slots: the M tasks stay in the submitting worker's ring */

static atomic_size_t ran;

static void count_run(struct task *t)
{
    (void)t;
    atomic_fetch_add(&ran, 1);
}

static size_t ran_target;
static int all_ran(void *ctx)
{
    (void)ctx;
    return atomic_load(&ran) >= ran_target;
}

static void report_ran(void *ctx)
{
    (void)ctx;
    printf("  %zu of %zu tasks ran\n", (size_t)atomic_load(&ran), ran_target);
}

/* Sum of one field over every worker of `pool`. */
static size_t sum_workers(struct pool *pool, size_t offset)
{
    struct pool_stats total, w;
    size_t sum = 0;
    if (pool_stats(pool, &total) != POOL_OK)
        return (size_t)-1;
    for (size_t i = 0; i < total.workers; i++) {
        if (pool_worker_stats(pool, i, &w) != POOL_OK)
            return (size_t)-1;
        sum += *(const size_t *)(const void *)((const char *)&w + offset);
    }
    return sum;
}

static struct pool *parks_pool;
static int parked(void *ctx)
{
    (void)ctx;
    struct pool_stats s;
    return pool_stats(parks_pool, &s) == POOL_OK && s.parks > 0;
}

/* Section 5: the spinner submits M tasks to its own worker, then waits for them without
 * running any itself. */
static struct pool *steal_pool;
static struct task steal_tasks[M];
static atomic_int spinner_status;

static int stolen_done(void *ctx)
{
    (void)ctx;
    return atomic_load(&ran) >= M;
}

static void spinner(struct task *t)
{
    (void)t;
    for (int i = 0; i < M; i++) {
        steal_tasks[i] = (struct task){.callback = count_run};
        int rc = pool_submit_to(steal_pool, &steal_tasks[i]);
        if (rc != POOL_OK) {
            atomic_store(&spinner_status, rc);
            return;
        }
    }
    /* Not helping: the other worker has to take every task from this worker's ring. */
    wait_until(stolen_done, NULL, report_ran, "the other worker steals the spinner's tasks");
}

int main(void)
{
    test_watchdog_start(60);
    struct pool_config config;
    pool_config_init(&config);
    config.max_threads = 2;
    struct pool *pool = NULL;
    CHECK_STATUS(pool_create(&config, &pool), POOL_OK, "pool_create(max_threads = 2)");
    if (pool == NULL)
        return test_finish();

    /* ---- 1. bad input ---- */
    struct pool_stats s, sentinel;
    memset(&sentinel, 0xab, sizeof sentinel);
    s = sentinel;
    CHECK_STATUS(pool_stats(NULL, &s), POOL_ERR_INVALID, "pool_stats(NULL, &s)");
    CHECK_STATUS(pool_stats(pool, NULL), POOL_ERR_INVALID, "pool_stats(pool, NULL)");
    CHECK_STATUS(pool_worker_stats(NULL, 0, &s), POOL_ERR_INVALID, "pool_worker_stats(NULL, 0, &s)");
    CHECK_STATUS(pool_worker_stats(pool, 0, NULL), POOL_ERR_INVALID, "pool_worker_stats(pool, 0, NULL)");
    CHECK_STATUS(pool_worker_stats(pool, 2, &s), POOL_ERR_RANGE, "pool_worker_stats(pool, 2 == workers, &s)");
    CHECK_STATUS(pool_worker_stats(pool, SIZE_MAX, &s), POOL_ERR_RANGE, "pool_worker_stats(pool, SIZE_MAX, &s)");
    CHECK_STATUS(pool_worker_stats(NULL, SIZE_MAX, NULL), POOL_ERR_INVALID, "pool_worker_stats(NULL, SIZE_MAX, NULL)");
    CHECK_STATUS(pool_global_stats(NULL), POOL_ERR_INVALID, "pool_global_stats(NULL)");
    CHECK(memcmp(&s, &sentinel, sizeof s) == 0, "*out untouched by every failed call");
    CHECK(pool_status_str(POOL_ERR_RANGE) != NULL && strcmp(pool_status_str(POOL_ERR_RANGE), "unknown status") != 0,
          "pool_status_str(POOL_ERR_RANGE) names it");

    /* ---- 2. fresh pool ---- */
    CHECK_STATUS(pool_stats(pool, &s), POOL_OK, "pool_stats on a fresh pool");
    CHECK_EQ(s.workers, 2, "fresh pool: workers == max_threads");
    CHECK_EQ(s.threads, 0, "fresh pool: no thread started yet");
    CHECK_EQ(s.polled + s.spawned + s.stolen + s.steals + s.parks + s.lifo_hits + s.injector_fetches, 0,
             "fresh pool: every counter 0");
    for (size_t i = 0; i < 2; i++) {
        CHECK_STATUS(pool_worker_stats(pool, i, &s), POOL_OK, "pool_worker_stats on a fresh pool");
        CHECK_EQ(s.polled + s.parks + s.workers, 2, "fresh worker: zero counters, workers == 2");
    }

    /* ---- 3. N tasks from outside ---- */
    size_t n = scaled(100000, 1000);
    struct task *tasks = calloc(n, sizeof *tasks);
    if (tasks == NULL)
        return 1;
    ran_target = n;
    int submit_failed = 0;
    for (size_t i = 0; i < n; i++) {
        tasks[i].callback = count_run;
        if (pool_submit_to(pool, &tasks[i]) != POOL_OK)
            submit_failed++;
    }
    CHECK_EQ(submit_failed, 0, "every submit accepted");
    wait_until(all_ran, NULL, report_ran, "N tasks from outside");
    /* Each worker counts a task before calling it, so once every callback ran (our acquire
     * load of `ran`), every count is visible. */
    CHECK_STATUS(pool_stats(pool, &s), POOL_OK, "pool_stats after N tasks");
    CHECK_EQ(s.polled, n, "polled == N (total)");
    CHECK_EQ(sum_workers(pool, offsetof(struct pool_stats, polled)), n, "polled == N (summed over workers)");
    CHECK(s.injector_fetches >= 1, "the workers fetched from the injector");
    CHECK_EQ(s.spawned, 0, "no async task spawned from C");
    CHECK(s.threads >= 1 && s.threads <= 2, "1 or 2 threads started");
    CHECK_EQ(s.stolen, sum_workers(pool, offsetof(struct pool_stats, stolen)), "stolen: total == sum of workers");
    CHECK(s.stolen >= s.steals, "every steal took at least one task");
    free(tasks);

    /* ---- 4. idle: the workers park ---- */
    parks_pool = pool;
    wait_until(parked, NULL, NULL, "a worker parks once the pool is idle");
    CHECK_STATUS(pool_stats(pool, &s), POOL_OK, "pool_stats when idle");
    CHECK(s.parks > 0, "parks > 0 after idle");
    CHECK_EQ(s.parks, sum_workers(pool, offsetof(struct pool_stats, parks)), "parks: total == sum of workers");

    /* ---- 5. deterministic stealing ---- */
    struct pool_stats before;
    CHECK_STATUS(pool_stats(pool, &before), POOL_OK, "pool_stats before the stealing round");
    atomic_store(&ran, 0);
    ran_target = M;
    steal_pool = pool;
    static struct task spin_task;
    spin_task = (struct task){.callback = spinner};
    CHECK_STATUS(pool_submit_to(pool, &spin_task), POOL_OK, "submit the spinner");
    wait_until(stolen_done, NULL, report_ran, "the stealing round");
    CHECK_EQ(atomic_load(&spinner_status), POOL_OK, "the spinner's submits were accepted");
    /* The spinner returns right after the M tasks ran; its own count came before. */
    CHECK_STATUS(pool_stats(pool, &s), POOL_OK, "pool_stats after the stealing round");
    CHECK_EQ(s.stolen - before.stolen, M, "the other worker stole exactly the M tasks");
    CHECK(s.steals - before.steals >= 1, "at least one steal");
    CHECK(s.polled - before.polled >= M, "the M tasks were counted as run");

    /* ---- 6. after shutdown ---- */
    CHECK_STATUS(pool_shutdown(pool), POOL_OK, "pool_shutdown");
    CHECK_STATUS(pool_stats(pool, &s), POOL_OK, "pool_stats after shutdown");
    CHECK_EQ(s.threads, 0, "no thread left after shutdown");
    CHECK_EQ(s.polled, n + M + 1, "polled: N + M tasks + the spinner");
    CHECK_STATUS(pool_worker_stats(pool, 1, &s), POOL_OK, "pool_worker_stats after shutdown");
    pool_destroy(pool);

    /* ---- 7. the global pool ---- */
    CHECK_STATUS(pool_global_stats(&s), POOL_OK, "pool_global_stats");
    CHECK(s.workers >= 1, "the global pool has worker slots");
    size_t polled_before = s.polled;
    static struct task global_task;
    atomic_store(&ran, 0);
    ran_target = 1;
    global_task = (struct task){.callback = count_run};
    CHECK_STATUS(pool_submit(&global_task), POOL_OK, "pool_submit");
    wait_until(all_ran, NULL, report_ran, "one task on the global pool");
    CHECK_STATUS(pool_global_stats(&s), POOL_OK, "pool_global_stats after a task");
    CHECK_EQ(s.polled - polled_before, 1, "the global pool counted the task");

    return test_finish();
}
