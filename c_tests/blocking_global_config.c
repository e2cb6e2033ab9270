/*
 * blocking_global_config.c: configuring the process-wide blocking pool from C
 * (pool_blocking_global_configure), in a process of its own so the pool starts unbuilt.
 *
 *   - NULL and out-of-range configurations get POOL_ERR_INVALID and change nothing;
 *   - reading the global metrics before first use gives zeros and does not build the pool;
 *   - the first valid configuration succeeds, a second one gets POOL_ERR_STARTED;
 *   - pool_blocking_submit then runs on the configured pool: its cap (2) holds and its
 *     keep-alive (50 ms) takes it back to zero threads;
 *   - pool_status_str names POOL_ERR_STARTED.
 *
 * Build: make lib && cc -std=c11 -Wall -Wextra -Werror -Iinclude c_tests/blocking_global_config.c \
 *        target/release/libpool.a -lpthread -ldl -lm -o build/blocking_global_config
 */
#include "common.h"

#include <stdatomic.h>

#define CAP 2
#define KEEP_ALIVE_MS 50

struct job {
    struct pool_blocking_task bt;
    atomic_int *done;
};

static void job_run(struct task *t)
{
    struct job *j = POOL_CONTAINER_OF(t, struct job, bt.task);
    sleep_us(2000);
    atomic_fetch_add(j->done, 1);
}

struct progress {
    atomic_int *done;
    int want;
};

static int all_done(void *ctx)
{
    struct progress *p = ctx;
    return atomic_load(p->done) >= p->want;
}

static int no_thread(void *ctx)
{
    struct pool_blocking_metrics m;
    (void)ctx;
    return pool_blocking_global_metrics(&m) == POOL_OK && m.threads == 0;
}

int main(void)
{
    test_watchdog_start(60);
    struct pool_blocking_config cfg;
    struct pool_blocking_metrics m;

    CHECK_STATUS(pool_blocking_global_configure(NULL), POOL_ERR_INVALID, "configure(NULL)");
    pool_blocking_config_init(&cfg);
    cfg.max_threads = POOL_BLOCKING_MAX_THREADS + 1;
    CHECK_STATUS(pool_blocking_global_configure(&cfg), POOL_ERR_INVALID, "configure(cap out of range)");
    pool_blocking_config_init(&cfg);
    cfg.stack_size = 100;
    CHECK_STATUS(pool_blocking_global_configure(&cfg), POOL_ERR_INVALID, "configure(stack too small)");

    memset(&m, 0xff, sizeof m);
    CHECK_STATUS(pool_blocking_global_metrics(&m), POOL_OK, "global metrics before first use");
    CHECK(m.threads == 0 && m.tasks_run == 0 && m.threads_spawned == 0 && m.peak_threads == 0,
          "metrics are all zero before first use");

    pool_blocking_config_init(&cfg);
    cfg.max_threads = CAP;
    cfg.keep_alive_ms = KEEP_ALIVE_MS;
    CHECK_STATUS(pool_blocking_global_configure(&cfg), POOL_OK, "configure(cap 2, keep-alive 50 ms) before first use");
    pool_blocking_config_init(&cfg);
    CHECK_STATUS(pool_blocking_global_configure(&cfg), POOL_ERR_STARTED, "configure again");

    enum { N = 32 };
    static struct job jobs[N];
    static atomic_int done;
    int submitted = 0;
    for (int i = 0; i < N; i++) {
        jobs[i].done = &done;
        if (pool_blocking_task_init(&jobs[i].bt, job_run, NULL, 0) == POOL_OK && pool_blocking_submit(&jobs[i].bt) == POOL_OK)
            submitted++;
    }
    CHECK_EQ(submitted, N, "every task initialised and submitted to the global pool");
    struct progress p = { &done, N };
    wait_until(all_done, &p, NULL, "every global blocking task ran");
    CHECK_EQ(atomic_load(&done), N, "each task ran once");
    CHECK_STATUS(pool_blocking_global_metrics(&m), POOL_OK, "global metrics");
    CHECK(m.peak_threads >= 1 && m.peak_threads <= CAP, "the configured cap holds (peak 1..2 threads)");
    CHECK_STATUS(pool_blocking_global_configure(&cfg), POOL_ERR_STARTED, "configure after use");

    /* The configured keep-alive (50 ms; the default would be 10 s) empties the pool. */
    wait_until_for(no_thread, NULL, NULL, "global blocking pool back to zero threads", 5.0);
    CHECK_STATUS(pool_blocking_global_metrics(&m), POOL_OK, "global metrics after keep-alive");
    CHECK_EQ(m.threads, 0, "no thread after the keep-alive");
    CHECK_EQ(m.threads_exited, m.threads_spawned, "every started thread exited");

    const char *s = pool_status_str(POOL_ERR_STARTED);
    CHECK(s != NULL && strcmp(s, "unknown status") != 0, "pool_status_str(POOL_ERR_STARTED) names it");
    return test_finish();
}
