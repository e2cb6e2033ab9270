/*
 * destroy_race.c: pool_destroy while another thread is still inside pool_shutdown (and
 * pool_blocking_destroy while another is inside pool_blocking_shutdown) is memory-safe:
 * destroy waits for that shutdown to finish, then frees (README.md, "Process and threading
 * rules"). Run plain, under valgrind and under ASan by `make test`.
 *
 * Each round, for each kind of pool:
 *   1. a slow task runs on the pool; it blocks until a releaser thread lets it go;
 *   2. a second thread calls the shutdown function, which waits for that task;
 *   3. main sees the shutdown in progress (its probe submits are refused), starts the releaser
 *      (which lets the task go 100 ms later) and calls destroy;
 *   4. destroy must not return before the slow task has finished (it waited for the shutdown
 *      in progress), and the shutdown call returns POOL_OK.
 * A destroy that frees at once returns before the task finished (and the pool's threads then
 * use freed memory: valgrind's invalid reads).
 */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>

#define ROUNDS 3
#define PROBES 4096

static atomic_int task_started;
static atomic_int task_release;
static atomic_int task_finished;
static atomic_int destroy_entered;

static void slow_run(struct task *t)
{
    (void)t;
    atomic_store(&task_started, 1);
    while (!atomic_load(&task_release))
        sleep_us(200);
    atomic_store(&task_finished, 1);
}

static void probe_run(struct task *t)
{
    (void)t;
}

static int started(void *ctx)
{
    (void)ctx;
    return atomic_load(&task_started);
}

/* Lets the slow task go 100 ms after main entered destroy. */
static void *releaser(void *arg)
{
    (void)arg;
    while (!atomic_load(&destroy_entered))
        sleep_us(200);
    sleep_us(100 * 1000);
    atomic_store(&task_release, 1);
    return NULL;
}

static void reset_flags(void)
{
    atomic_store(&task_started, 0);
    atomic_store(&task_release, 0);
    atomic_store(&task_finished, 0);
    atomic_store(&destroy_entered, 0);
}

/* ---- the task pool ---- */

struct shutter {
    struct pool *pool;
    int status;
};

static void *shut_pool(void *arg)
{
    struct shutter *s = arg;
    s->status = pool_shutdown(s->pool);
    return NULL;
}

static struct task probes[PROBES];

static void task_pool_round(void)
{
    struct pool_config cfg;
    struct pool *pool = NULL;
    struct task slow = { NULL, slow_run };
    struct shutter s;
    pthread_t shut_thread, release_thread;
    int i, r = POOL_OK;

    reset_flags();
    pool_config_init(&cfg);
    cfg.max_threads = 2;
    CHECK_STATUS(pool_create(&cfg, &pool), POOL_OK, "pool_create");
    CHECK_STATUS(pool_submit_to(pool, &slow), POOL_OK, "submit the slow task");
    wait_until(started, NULL, NULL, "the slow task started");

    s.pool = pool;
    s.status = 1;
    pthread_create(&shut_thread, NULL, shut_pool, &s);
    /* The shutdown has begun once submits are refused; the slow task holds it there. */
    for (i = 0; i < PROBES; i++) {
        probes[i].next = NULL;
        probes[i].callback = probe_run;
        r = pool_submit_to(pool, &probes[i]);
        if (r != POOL_OK)
            break;
        sleep_us(1000);
    }
    CHECK_STATUS(r, POOL_ERR_SHUTDOWN, "a submit during the shutdown in progress");

    pthread_create(&release_thread, NULL, releaser, NULL);
    atomic_store(&destroy_entered, 1);
    pool_destroy(pool);
    CHECK(atomic_load(&task_finished), "pool_destroy returned only after the shutdown in progress finished");
    pthread_join(shut_thread, NULL);
    pthread_join(release_thread, NULL);
    CHECK_STATUS(s.status, POOL_OK, "pool_shutdown racing pool_destroy");
}

/* ---- the blocking pool ---- */

struct blocking_shutter {
    struct pool_blocking *pool;
    int status;
};

static void *shut_blocking(void *arg)
{
    struct blocking_shutter *s = arg;
    s->status = pool_blocking_shutdown(s->pool);
    return NULL;
}

static struct pool_blocking_task blocking_probes[PROBES];

static void blocking_pool_round(void)
{
    struct pool_blocking *pool = NULL;
    struct pool_blocking_task slow;
    struct blocking_shutter s;
    pthread_t shut_thread, release_thread;
    int i, r = POOL_OK;

    reset_flags();
    CHECK_STATUS(pool_blocking_create(NULL, &pool), POOL_OK, "pool_blocking_create");
    CHECK_STATUS(pool_blocking_task_init(&slow, slow_run, NULL, 0), POOL_OK, "init the slow task");
    CHECK_STATUS(pool_blocking_submit_to(pool, &slow), POOL_OK, "submit the slow blocking task");
    wait_until(started, NULL, NULL, "the slow blocking task started");

    s.pool = pool;
    s.status = 1;
    pthread_create(&shut_thread, NULL, shut_blocking, &s);
    for (i = 0; i < PROBES; i++) {
        pool_blocking_task_init(&blocking_probes[i], probe_run, NULL, 0);
        r = pool_blocking_submit_to(pool, &blocking_probes[i]);
        if (r != POOL_OK)
            break;
        sleep_us(1000);
    }
    CHECK_STATUS(r, POOL_ERR_SHUTDOWN, "a blocking submit during the shutdown in progress");

    pthread_create(&release_thread, NULL, releaser, NULL);
    atomic_store(&destroy_entered, 1);
    pool_blocking_destroy(pool);
    CHECK(atomic_load(&task_finished),
          "pool_blocking_destroy returned only after the shutdown in progress finished");
    pthread_join(shut_thread, NULL);
    pthread_join(release_thread, NULL);
    CHECK_STATUS(s.status, POOL_OK, "pool_blocking_shutdown racing pool_blocking_destroy");
}

int main(void)
{
    int round;
    test_watchdog_start(120);
    for (round = 0; round < ROUNDS; round++) {
        task_pool_round();
        blocking_pool_round();
    }
    return test_finish();
}
