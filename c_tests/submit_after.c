/*
 * submit_after.c: delayed submits from C (`pool_submit_after`).
 *
 *   1. bad input: NULL pool, NULL task, NULL callback give POOL_ERR_INVALID;
 *   2. never early, exactly once, from several threads: 4 host pthreads each submit 500 tasks
 *      with delays of 0 to 9 ms; each task checks CLOCK_MONOTONIC against the time it was
 *      submitted plus its delay (the pool's clock is the same monotonic clock, read after the
 *      task's own reading, so a task that runs early shows); every task runs exactly once;
 *   3. pending at shutdown: 16 tasks an hour away (the last UINT64_MAX ns: saturated);
 *      pool_shutdown runs them (early) and returns without waiting for the deadline; after
 *      it, a delayed submit is refused;
 *   4. a delayed submit from a pool task (a chain of 20 hops 1 ms apart).
 *
 * A 120 s watchdog turns a hang into exit status 2. Lateness is not checked (noisy VMs).
 */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define THREADS 4
#define PER_THREAD 500
#define AT_SHUTDOWN 16

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

struct delayed {
    struct task task;
    uint64_t not_before; /* CLOCK_MONOTONIC ns */
    atomic_int runs;
};

static atomic_int total_runs;
static atomic_int early_runs;

static void delayed_run(struct task *task)
{
    struct delayed *d = container_of(task, struct delayed, task);
    if (mono_ns() < d->not_before)
        atomic_fetch_add(&early_runs, 1);
    atomic_fetch_add(&d->runs, 1);
    atomic_fetch_add(&total_runs, 1);
}

static struct delayed jobs[THREADS * PER_THREAD + AT_SHUTDOWN];
static atomic_int submit_errors;

struct submitter {
    struct pool *pool;
    int first;
};

static void *submit_thread(void *p)
{
    struct submitter *s = p;
    for (int i = 0; i < PER_THREAD; i++) {
        struct delayed *d = &jobs[s->first + i];
        uint64_t delay = (uint64_t)((s->first + i) % 10) * 1000000ULL;
        d->task.callback = delayed_run;
        d->not_before = mono_ns() + delay;
        if (pool_submit_after(s->pool, &d->task, delay) != POOL_OK)
            atomic_fetch_add(&submit_errors, 1);
    }
    return NULL;
}

static int all_ran(void *ctx)
{
    return atomic_load(&total_runs) >= *(int *)ctx;
}

static void report_runs(void *ctx)
{
    printf("     ran %d of %d\n", atomic_load(&total_runs), *(int *)ctx);
}

/* A task that re-submits itself, delayed, from the pool's own thread. */
struct hop {
    struct task task;
    struct pool *pool;
    uint64_t not_before;
    atomic_int hops;
    atomic_int early;
};

static void hop_run(struct task *task)
{
    struct hop *h = container_of(task, struct hop, task);
    if (mono_ns() < h->not_before)
        atomic_fetch_add(&h->early, 1);
    if (atomic_fetch_add(&h->hops, 1) + 1 < 20) {
        h->not_before = mono_ns() + 1000000ULL;
        if (pool_submit_after(h->pool, &h->task, 1000000ULL) != POOL_OK)
            atomic_fetch_add(&submit_errors, 1);
    }
}

static int hops_done(void *ctx)
{
    return atomic_load(&((struct hop *)ctx)->hops) >= 20;
}

int main(void)
{
    struct pool_config cfg;
    struct pool *pool = NULL;
    struct delayed bad;
    pthread_t threads[THREADS];
    struct submitter subs[THREADS];
    int want = THREADS * PER_THREAD;
    int failed_runs = 0;
    double t0;
    static struct hop hop;

    test_watchdog_start(120);
    pool_config_init(&cfg);
    cfg.max_threads = 4;
    if (!CHECK_STATUS(pool_create(&cfg, &pool), POOL_OK, "create"))
        return test_finish();

    /* 1. bad input */
    memset(&bad, 0, sizeof bad);
    CHECK_STATUS(pool_submit_after(NULL, &bad.task, 1), POOL_ERR_INVALID, "NULL pool");
    CHECK_STATUS(pool_submit_after(pool, NULL, 1), POOL_ERR_INVALID, "NULL task");
    CHECK_STATUS(pool_submit_after(pool, &bad.task, 1), POOL_ERR_INVALID, "NULL callback");

    /* 2. several threads, never early, exactly once */
    for (int t = 0; t < THREADS; t++) {
        subs[t].pool = pool;
        subs[t].first = t * PER_THREAD;
        pthread_create(&threads[t], NULL, submit_thread, &subs[t]);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    CHECK_EQ(atomic_load(&submit_errors), 0, "every delayed submit accepted");
    wait_until(all_ran, &want, report_runs, "delayed tasks from 4 threads");
    for (int i = 0; i < want; i++)
        failed_runs += atomic_load(&jobs[i].runs) != 1;
    CHECK_EQ(failed_runs, 0, "each delayed task ran exactly once");
    CHECK_EQ(atomic_load(&early_runs), 0, "no delayed task ran early");

    /* 4. from a pool task */
    hop.task.callback = hop_run;
    hop.pool = pool;
    hop.not_before = 0;
    CHECK_STATUS(pool_submit_to(pool, &hop.task), POOL_OK, "hop chain start");
    wait_until(hops_done, &hop, NULL, "delayed submits from a pool task");
    CHECK_EQ(atomic_load(&hop.early), 0, "no hop ran early");

    /* 3. pending at shutdown: run then, no wait for the deadline */
    for (int i = 0; i < AT_SHUTDOWN; i++) {
        struct delayed *d = &jobs[want + i];
        d->task.callback = delayed_run;
        d->not_before = 0; /* runs early on purpose */
        /* the last one as far as a uint64_t reaches: the deadline saturates, no overflow */
        uint64_t delay = i == AT_SHUTDOWN - 1 ? UINT64_MAX : 3600ULL * 1000000000ULL;
        CHECK_STATUS(pool_submit_after(pool, &d->task, delay), POOL_OK, "an hour (or UINT64_MAX ns) away");
    }
    t0 = now_sec();
    CHECK_STATUS(pool_shutdown(pool), POOL_OK, "shutdown");
    CHECK(now_sec() - t0 < 20.0, "shutdown did not wait for the deadline");
    failed_runs = 0;
    for (int i = 0; i < AT_SHUTDOWN; i++)
        failed_runs += atomic_load(&jobs[want + i].runs) != 1;
    CHECK_EQ(failed_runs, 0, "tasks pending at shutdown ran once, at shutdown");
    bad.task.callback = delayed_run;
    CHECK_STATUS(pool_submit_after(pool, &bad.task, 1000), POOL_ERR_SHUTDOWN, "refused after shutdown");
    CHECK_EQ(atomic_load(&bad.runs), 0, "the refused task did not run");
    pool_destroy(pool);
    return test_finish();
}
