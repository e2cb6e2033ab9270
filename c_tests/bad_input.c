/*
 * bad_input.c: every entry point with bad arguments, each status code checked exactly,
 * one line printed per check. Plain C99.
 *
 *   - NULL everywhere: pool_create(NULL config) is fine, NULL out is INVALID; submit NULL
 *     task; task with NULL callback; submit_to NULL pool; batch with NULL first; shutdown
 *     NULL; destroy NULL (no-op); pool_config_init(NULL) (no-op);
 *   - out-of-range config: max_threads 1000000 / 16384 / SIZE_MAX, stack_size 1 / 16383 /
 *     above 1 GiB / SIZE_MAX, idle_spins above POOL_MAX_IDLE_SPINS (and the boundary values
 *     that are accepted); *out untouched on error;
 *   - submit / submit_batch after pool_shutdown -> POOL_ERR_SHUTDOWN, the task not run;
 *     shutdown twice -> POOL_ERR_SHUTDOWN;
 *   - pool_shutdown from one of the pool's own tasks -> POOL_ERR_INVALID, pool_destroy from
 *     one is ignored (both documented in pool.h);
 *   - pool_status_str on every code and on unknown codes: never NULL, distinct for known codes.
 *
 * Build: cc -std=c99 -O2 -Wall -Wextra -Werror -pedantic -Iinclude c_tests/bad_input.c \
 *          target/release/libpool.a -lpthread -ldl -lm -o build/bad_input
 */
#include "common.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>

/* A task that counts its runs (under a mutex: plain C99). */
struct counted {
    int tag;
    struct task task;
    int runs;
};

static pthread_mutex_t runs_lock = PTHREAD_MUTEX_INITIALIZER;

static void counted_run(struct task *t)
{
    struct counted *c = container_of(t, struct counted, task);
    pthread_mutex_lock(&runs_lock);
    c->runs++;
    pthread_mutex_unlock(&runs_lock);
}

static int runs_of(struct counted *c)
{
    int r;
    pthread_mutex_lock(&runs_lock);
    r = c->runs;
    pthread_mutex_unlock(&runs_lock);
    return r;
}

static void counted_init(struct counted *c, int tag)
{
    c->tag = tag;
    c->task.next = NULL;
    c->task.callback = counted_run;
    c->runs = 0;
}

static int counted_ran(void *ctx)
{
    return runs_of(ctx) > 0;
}

/* Creates a pool with `cfg`; expects `want`. On error, *out must be left as it was. */
static void try_create_spins(size_t max_threads, size_t stack_size, uint32_t idle_spins, int want,
                             const char *what)
{
    struct pool_config cfg;
    struct pool *sentinel = (struct pool *)(void *)&cfg; /* any recognisable non-NULL value */
    struct pool *p = sentinel;
    int rc;
    char msg[200];
    pool_config_init(&cfg);
    cfg.max_threads = max_threads;
    cfg.stack_size = stack_size;
    cfg.idle_spins = idle_spins;
    rc = pool_create(&cfg, &p);
    CHECK_STATUS(rc, want, what);
    if (rc != POOL_OK) {
        snprintf(msg, sizeof msg, "%s: *out left untouched on error", what);
        CHECK(p == sentinel, msg);
    } else {
        snprintf(msg, sizeof msg, "%s: *out set to a pool", what);
        CHECK(p != NULL && p != sentinel, msg);
        if (p != NULL && p != sentinel)
            pool_destroy(p);
    }
}

static void try_create(size_t max_threads, size_t stack_size, int want, const char *what)
{
    try_create_spins(max_threads, stack_size, POOL_DEFAULT_IDLE_SPINS, want, what);
}

/* ---- calls made from inside a pool task ---- */

struct inside {
    struct task task;
    struct pool *pool;
    int shutdown_rc;
    int destroyed_survived;   /* 1 when pool_destroy from inside returned */
    int submit_after_rc;      /* a submit to the same pool after those calls */
    struct counted after;
    pthread_mutex_t lock;
    int done;
};

static void inside_run(struct task *t)
{
    struct inside *in = container_of(t, struct inside, task);
    int shutdown_rc = pool_shutdown(in->pool);  /* from its own task: INVALID */
    int submit_rc;
    pool_destroy(in->pool);                     /* from its own task: detected, ignored */
    submit_rc = pool_submit_to(in->pool, &in->after.task); /* the pool must still work */
    pthread_mutex_lock(&in->lock);
    in->shutdown_rc = shutdown_rc;
    in->destroyed_survived = 1;
    in->submit_after_rc = submit_rc;
    in->done = 1;
    pthread_mutex_unlock(&in->lock);
}

static int inside_done(void *ctx)
{
    struct inside *in = ctx;
    int d;
    pthread_mutex_lock(&in->lock);
    d = in->done;
    pthread_mutex_unlock(&in->lock);
    return d && runs_of(&in->after) > 0;
}

int main(void)
{
    struct pool_config cfg;
    struct pool *pool = NULL;
    struct counted a, b, c, d;
    struct task null_cb;
    int rc, i;

    test_watchdog_start(60);
    test_verbose_ = 1; /* one line per check */

    /* ---- pool_config_init / pool_create / pool_destroy with NULL ---- */
    pool_config_init(NULL);
    CHECK(1, "pool_config_init(NULL) returned (no-op)");
    pool_destroy(NULL);
    CHECK(1, "pool_destroy(NULL) returned (no-op)");
    pool_platform_init(NULL);
    CHECK(1, "pool_platform_init(NULL) returned (no-op)");
    CHECK(pool_version() != NULL && pool_version()[0] != '\0', "pool_version() is a non-empty string");
    CHECK_STATUS(pool_fork_global(NULL), POOL_ERR_INVALID, "pool_fork_global(NULL)");
    null_cb.next = NULL;
    null_cb.callback = NULL;
    CHECK_STATUS(pool_fork_global(&null_cb), POOL_ERR_INVALID, "pool_fork_global(task without a callback)");

    CHECK_STATUS(pool_create(NULL, NULL), POOL_ERR_INVALID, "pool_create(NULL, NULL)");
    pool_config_init(&cfg);
    CHECK(cfg.max_threads == 0 && cfg.stack_size == 0 && cfg.idle_spins == POOL_DEFAULT_IDLE_SPINS,
          "pool_config_init fills the defaults");
    CHECK_STATUS(pool_create(&cfg, NULL), POOL_ERR_INVALID, "pool_create(&config, NULL)");
    rc = pool_create(NULL, &pool);
    CHECK_STATUS(rc, POOL_OK, "pool_create(NULL config, &pool)");
    CHECK(rc != POOL_OK || pool != NULL, "pool_create(NULL config) gave a non-NULL pool");
    if (rc != POOL_OK || pool == NULL)
        return test_finish();

    /* ---- out-of-range configs (and the accepted boundaries) ---- */
    try_create(1000000, 0, POOL_ERR_INVALID, "pool_create(max_threads=1000000)");
    try_create(16384, 0, POOL_ERR_INVALID, "pool_create(max_threads=16384)");
    try_create(SIZE_MAX, 0, POOL_ERR_INVALID, "pool_create(max_threads=SIZE_MAX)");
    try_create(16383, 0, POOL_OK, "pool_create(max_threads=16383, the maximum)");
    try_create(0, 1, POOL_ERR_INVALID, "pool_create(stack_size=1)");
    try_create(0, 16383, POOL_ERR_INVALID, "pool_create(stack_size=16383)");
    try_create(0, ((size_t)1 << 30) + 1, POOL_ERR_INVALID, "pool_create(stack_size=1 GiB + 1)");
    try_create(0, SIZE_MAX, POOL_ERR_INVALID, "pool_create(stack_size=SIZE_MAX)");
    try_create(1000000, 1, POOL_ERR_INVALID, "pool_create(max_threads=1000000, stack_size=1)");
    try_create(2, 16384, POOL_OK, "pool_create(stack_size=16384, the minimum)");
    try_create(2, (size_t)1 << 30, POOL_OK, "pool_create(stack_size=1 GiB, the maximum)");
    try_create(1, 0, POOL_OK, "pool_create(max_threads=1)");
    try_create_spins(2, 0, 0, POOL_OK, "pool_create(idle_spins=0, no spin)");
    try_create_spins(2, 0, POOL_MAX_IDLE_SPINS, POOL_OK, "pool_create(idle_spins=POOL_MAX_IDLE_SPINS)");
    try_create_spins(2, 0, POOL_MAX_IDLE_SPINS + 1, POOL_ERR_INVALID, "pool_create(idle_spins=POOL_MAX_IDLE_SPINS + 1)");
    try_create_spins(2, 0, UINT32_MAX, POOL_ERR_INVALID, "pool_create(idle_spins=UINT32_MAX)");

    /* ---- NULL task, NULL callback, NULL pool ---- */
    null_cb.next = NULL;
    null_cb.callback = NULL;
    counted_init(&a, 1);
    CHECK_STATUS(pool_submit(NULL), POOL_ERR_INVALID, "pool_submit(NULL)");
    CHECK_STATUS(pool_submit(&null_cb), POOL_ERR_INVALID, "pool_submit(task with NULL callback)");
    CHECK_STATUS(pool_submit_to(pool, NULL), POOL_ERR_INVALID, "pool_submit_to(pool, NULL)");
    CHECK_STATUS(pool_submit_to(pool, &null_cb), POOL_ERR_INVALID,
                 "pool_submit_to(pool, task with NULL callback)");
    CHECK_STATUS(pool_submit_to(NULL, &a.task), POOL_ERR_INVALID, "pool_submit_to(NULL, task)");
    CHECK_STATUS(pool_submit_to(NULL, NULL), POOL_ERR_INVALID, "pool_submit_to(NULL, NULL)");
    CHECK_STATUS(pool_submit_batch(NULL), POOL_ERR_INVALID, "pool_submit_batch(NULL)");
    CHECK_STATUS(pool_submit_batch(&null_cb), POOL_ERR_INVALID,
                 "pool_submit_batch(list of 1 with NULL callback)");
    CHECK_STATUS(pool_submit_batch_to(pool, NULL), POOL_ERR_INVALID,
                 "pool_submit_batch_to(pool, NULL)");
    CHECK_STATUS(pool_submit_batch_to(NULL, &a.task), POOL_ERR_INVALID,
                 "pool_submit_batch_to(NULL, list)");
    CHECK_STATUS(pool_submit_batch_to(pool, &null_cb), POOL_ERR_INVALID,
                 "pool_submit_batch_to(pool, list of 1 with NULL callback)");
    CHECK_STATUS(pool_shutdown(NULL), POOL_ERR_INVALID, "pool_shutdown(NULL)");
    /* `a` went to no pool: it must not have run. Run a marker through the pool first so a
     * wrongly queued `a` would have had its chance. */
    counted_init(&b, 2);
    CHECK_STATUS(pool_submit_to(pool, &b.task), POOL_OK, "pool_submit_to(pool, marker task)");
    wait_until(counted_ran, &b, NULL, "the marker task");
    sleep_us(10000);
    CHECK_EQ(runs_of(&a), 0, "a task passed with a NULL pool never ran");
    CHECK_EQ(runs_of(&b), 1, "the marker task ran exactly once");

    /* ---- calls from inside the pool's own task ---- */
    {
        struct inside in;
        memset(&in, 0, sizeof in);
        pthread_mutex_init(&in.lock, NULL);
        in.task.callback = inside_run;
        in.pool = pool;
        in.shutdown_rc = 12345;
        counted_init(&in.after, 3);
        CHECK_STATUS(pool_submit_to(pool, &in.task), POOL_OK, "pool_submit_to(task calling shutdown/destroy inside)");
        wait_until(inside_done, &in, NULL, "the task calling pool_shutdown/pool_destroy on its own pool");
        CHECK_STATUS(in.shutdown_rc, POOL_ERR_INVALID, "pool_shutdown(own pool) from inside a task");
        CHECK(in.destroyed_survived, "pool_destroy(own pool) from inside a task returned (ignored)");
        CHECK_STATUS(in.submit_after_rc, POOL_OK, "pool_submit_to after those calls, from the task");
        CHECK_EQ(runs_of(&in.after), 1, "the task submitted after them ran exactly once");
        pthread_mutex_destroy(&in.lock);
    }

    /* ---- shutdown, then submits are refused; shutdown twice ---- */
    CHECK_STATUS(pool_shutdown(pool), POOL_OK, "pool_shutdown(pool)");
    counted_init(&c, 4);
    counted_init(&d, 5);
    c.task.next = &d.task;
    CHECK_STATUS(pool_submit_to(pool, &c.task), POOL_ERR_SHUTDOWN, "pool_submit_to after pool_shutdown");
    c.task.next = &d.task;
    CHECK_STATUS(pool_submit_batch_to(pool, &c.task), POOL_ERR_SHUTDOWN,
                 "pool_submit_batch_to(list of 2) after pool_shutdown");
    CHECK_STATUS(pool_submit_to(pool, NULL), POOL_ERR_INVALID,
                 "pool_submit_to(pool, NULL) after pool_shutdown");
    CHECK_STATUS(pool_shutdown(pool), POOL_ERR_SHUTDOWN, "pool_shutdown(pool) a second time");
    CHECK_STATUS(pool_shutdown(pool), POOL_ERR_SHUTDOWN, "pool_shutdown(pool) a third time");
    pool_destroy(pool);
    pool = NULL;
    CHECK_EQ(runs_of(&c), 0, "a task refused after shutdown never ran (not even at pool_destroy)");
    CHECK_EQ(runs_of(&d), 0, "a batch refused after shutdown never ran");

    /* shutdown of a pool that never ran anything; twice; then destroy */
    rc = pool_create(NULL, &pool);
    CHECK_STATUS(rc, POOL_OK, "pool_create(NULL, &pool) for an idle shutdown");
    if (rc == POOL_OK) {
        CHECK_STATUS(pool_shutdown(pool), POOL_OK, "pool_shutdown(pool that never ran a task)");
        CHECK_STATUS(pool_shutdown(pool), POOL_ERR_SHUTDOWN, "pool_shutdown(same pool) again");
        counted_init(&a, 6);
        CHECK_STATUS(pool_submit_to(pool, &a.task), POOL_ERR_SHUTDOWN,
                     "pool_submit_to(never-started pool) after pool_shutdown");
        pool_destroy(pool);
        CHECK_EQ(runs_of(&a), 0, "the refused task never ran");
    }

    /* ---- pool_status_str ---- */
    {
        static const int codes[] = {POOL_OK, POOL_ERR_INVALID, POOL_ERR_SHUTDOWN, POOL_ERR_SPAWN,
                                    POOL_ERR_NOMEM, POOL_ERR_PANIC, POOL_ERR_RANGE, POOL_ERR_STARTED,
                                    POOL_ERR_FORKED, POOL_ERR_FULL, POOL_ERR_BUSY};
        enum { KNOWN = sizeof codes / sizeof codes[0] };
        static const int unknown[] = {1, 2, -11, -100, INT_MIN, INT_MAX};
        const char *strs[KNOWN];
        int j, distinct = 1;
        char msg[200];
        CHECK_EQ(POOL_OK, 0, "POOL_OK == 0");
        CHECK_EQ(POOL_ERR_INVALID, -1, "POOL_ERR_INVALID == -1");
        CHECK_EQ(POOL_ERR_SHUTDOWN, -2, "POOL_ERR_SHUTDOWN == -2");
        CHECK_EQ(POOL_ERR_SPAWN, -3, "POOL_ERR_SPAWN == -3");
        CHECK_EQ(POOL_ERR_NOMEM, -4, "POOL_ERR_NOMEM == -4");
        CHECK_EQ(POOL_ERR_PANIC, -5, "POOL_ERR_PANIC == -5");
        CHECK_EQ(POOL_ERR_RANGE, -6, "POOL_ERR_RANGE == -6");
        CHECK_EQ(POOL_ERR_STARTED, -7, "POOL_ERR_STARTED == -7");
        CHECK_EQ(POOL_ERR_FORKED, -8, "POOL_ERR_FORKED == -8");
        CHECK_EQ(POOL_ERR_FULL, -9, "POOL_ERR_FULL == -9");
        CHECK_EQ(POOL_ERR_BUSY, -10, "POOL_ERR_BUSY == -10");
        for (i = 0; i < KNOWN; i++) {
            const char *s = pool_status_str(codes[i]);
            strs[i] = s;
            snprintf(msg, sizeof msg, "pool_status_str(%s = %d) = \"%s\": non-NULL, non-empty",
                     status_name(codes[i]), codes[i], s ? s : "(null)");
            CHECK(s != NULL && s[0] != '\0', msg);
        }
        for (i = 0; i < KNOWN; i++)
            for (j = i + 1; j < KNOWN; j++)
                if (strs[i] == NULL || strs[j] == NULL || strcmp(strs[i], strs[j]) == 0)
                    distinct = 0;
        CHECK(distinct, "pool_status_str gives a distinct string for each known code");
        for (i = 0; i < 6; i++) {
            const char *s = pool_status_str(unknown[i]);
            int is_known = 0;
            for (j = 0; j < KNOWN; j++)
                if (s != NULL && strs[j] != NULL && strcmp(s, strs[j]) == 0)
                    is_known = 1;
            snprintf(msg, sizeof msg,
                     "pool_status_str(unknown %d) = \"%s\": non-NULL, not a known code's text",
                     unknown[i], s ? s : "(null)");
            CHECK(s != NULL && s[0] != '\0' && !is_known, msg);
        }
    }

    /* ---- the global pool still works after all that ---- */
    counted_init(&a, 7);
    CHECK_STATUS(pool_submit(&a.task), POOL_OK, "pool_submit(valid task) on the global pool");
    wait_until(counted_ran, &a, NULL, "a global-pool task");
    CHECK_EQ(runs_of(&a), 1, "the global-pool task ran exactly once");

    return test_finish();
}
