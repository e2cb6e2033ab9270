/*
 * lifecycle.c: a program that creates, uses and destroys its own pools and touches no global
 * pool. Every block the library allocated for them is freed by the time they are destroyed:
 * `make test-c-frees` runs it under valgrind and requires as many frees as allocations (no
 * block left, "still reachable" included), as test suites that compare the two expect.
 *
 *   - task pools (2 workers) and blocking pools (cap 2), created, given work, waited for and
 *     destroyed, ROUNDS times; one task pool shut down before its destroy, one not;
 *   - the fork registry the pools link themselves into (pthread_atfork installed on the
 *     first create) holds nothing once the last pool is gone.
 */
#include "common.h"

#include <stdatomic.h>

#define ROUNDS 3
#define TASKS 64

static atomic_size_t ran;

static void count(struct task *t)
{
    (void)t;
    atomic_fetch_add(&ran, 1);
}

static void count_blocking(struct task *t)
{
    (void)t;
    atomic_fetch_add(&ran, 1);
}

static int all_ran(void *want)
{
    return atomic_load(&ran) >= *(size_t *)want;
}

int main(void)
{
    test_watchdog_start(60);
    for (int round = 0; round < ROUNDS; round++) {
        struct pool_config config;
        pool_config_init(&config);
        config.max_threads = 2;
        struct pool *pool = NULL;
        CHECK_STATUS(pool_create(&config, &pool), POOL_OK, "pool_create");

        struct pool_blocking_config bconfig;
        pool_blocking_config_init(&bconfig);
        bconfig.max_threads = 2;
        struct pool_blocking *blocking = NULL;
        CHECK_STATUS(pool_blocking_create(&bconfig, &blocking), POOL_OK, "pool_blocking_create");
        if (!pool || !blocking)
            return test_finish();

        static struct task tasks[TASKS];
        static struct pool_blocking_task btasks[TASKS];
        atomic_store(&ran, 0);
        int refused = 0;
        for (int i = 0; i < TASKS; i++) {
            tasks[i] = (struct task){ .callback = count };
            refused += pool_submit_to(pool, &tasks[i]) != POOL_OK;
            btasks[i] = (struct pool_blocking_task){ .task = { .callback = count_blocking } };
            refused += pool_blocking_submit_to(blocking, &btasks[i]) != POOL_OK;
        }
        CHECK_EQ(refused, 0, "every submit accepted");
        if (refused)
            return test_finish();
        size_t want = 2 * TASKS;
        wait_until(all_ran, &want, NULL, "every task ran");

        if (round % 2 == 0)
            CHECK_STATUS(pool_shutdown(pool), POOL_OK, "pool_shutdown");
        pool_destroy(pool);
        pool_blocking_destroy(blocking);
        CHECK_EQ(atomic_load(&ran), 2 * TASKS, "each task ran once");
    }
    return test_finish();
}
