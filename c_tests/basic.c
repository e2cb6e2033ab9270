/*
 * basic.c: the basics of the C API, in plain C99 (no C11 atomics: a mutex counts).
 *
 *   - `struct task` embedded in a host struct, NOT as its first member, recovered with
 *     container_of; the callback gets exactly the pointer that was submitted;
 *   - pool_config_init / pool_create / pool_submit_to / pool_shutdown / pool_destroy;
 *   - every task runs exactly once, on a pool thread (never the submitting thread), with
 *     its result checked; at most max_threads distinct worker threads;
 *   - pool_shutdown is a completion barrier: everything queued has run when it returns;
 *   - a callback may free its own task (heap jobs; ASan/valgrind see any later touch);
 *   - a callback may resubmit its own task (a chain);
 *   - a small worker stack (stack_size = 64 KiB) works;
 *   - the global pool (pool_submit) with no init call.
 *
 * Build: cc -std=c99 -O2 -Wall -Wextra -Werror -pedantic -Iinclude c_tests/basic.c \
 *          target/release/libpool.a -lpthread -ldl -lm -o build/basic
 */
#include "common.h"

#include <pthread.h>
#include <stdint.h>

#define MAX_SEEN 64

/* Completion state shared by all jobs of one phase, guarded by a mutex (C99: no atomics). */
struct tally {
    pthread_mutex_t lock;
    long done;              /* callbacks finished */
    long target;            /* callbacks expected */
    int on_main_thread;     /* callbacks that ran on the submitting thread (must stay 0) */
    int nseen;              /* distinct threads that ran callbacks */
    pthread_t seen[MAX_SEEN];
    int seen_overflow;
};

static pthread_t main_thread;

/* Resets the tally for a new phase (the mutex is initialised once, in main). */
static void tally_init(struct tally *t, long target)
{
    pthread_mutex_lock(&t->lock);
    t->done = 0;
    t->target = target;
    t->on_main_thread = 0;
    t->nseen = 0;
    t->seen_overflow = 0;
    pthread_mutex_unlock(&t->lock);
}

/* Called at the end of every callback: count it, remember which thread ran it. */
static void tally_add(struct tally *t)
{
    pthread_t self = pthread_self();
    int i, found = 0;
    pthread_mutex_lock(&t->lock);
    if (pthread_equal(self, main_thread))
        t->on_main_thread++;
    for (i = 0; i < t->nseen; i++) {
        if (pthread_equal(t->seen[i], self)) {
            found = 1;
            break;
        }
    }
    if (!found) {
        if (t->nseen < MAX_SEEN)
            t->seen[t->nseen++] = self;
        else
            t->seen_overflow = 1;
    }
    t->done++;
    pthread_mutex_unlock(&t->lock);
}

static long tally_done(struct tally *t)
{
    long d;
    pthread_mutex_lock(&t->lock);
    d = t->done;
    pthread_mutex_unlock(&t->lock);
    return d;
}

static int tally_complete(void *ctx)
{
    struct tally *t = ctx;
    return tally_done(t) >= t->target;
}

static void tally_report(void *ctx)
{
    struct tally *t = ctx;
    printf("  %ld of %ld callbacks ran\n", tally_done(t), t->target);
}

/* ---- jobs: the task is deliberately in the middle of the struct ---- */

struct job {
    uint64_t input;
    char pad[13];            /* odd padding so offsetof(struct job, task) is not 0 */
    struct task task;
    uint64_t output;
    int runs;                /* written under tally.lock */
    struct task *seen_ptr;   /* the pointer the callback received */
    struct tally *tally;
};

static uint64_t work(uint64_t x)
{
    /* Collatz steps of x + 1: a little real computation with a known answer. */
    uint64_t n = x + 1, steps = 0;
    while (n != 1) {
        n = (n & 1) ? 3 * n + 1 : n / 2;
        steps++;
    }
    return steps;
}

static void job_run(struct task *t)
{
    struct job *j = container_of(t, struct job, task);
    j->seen_ptr = t;
    j->output = work(j->input);
    pthread_mutex_lock(&j->tally->lock);
    j->runs++;
    pthread_mutex_unlock(&j->tally->lock);
    tally_add(j->tally);
}

static void init_jobs(struct job *jobs, size_t n, struct tally *tally)
{
    size_t i;
    memset(jobs, 0, n * sizeof *jobs);
    for (i = 0; i < n; i++) {
        jobs[i].input = i;
        jobs[i].task.callback = job_run;
        jobs[i].task.next = NULL;
        jobs[i].tally = tally;
    }
}

/* Checks outputs, run counts and the pointer each callback saw. */
static void check_jobs(const char *phase, struct job *jobs, size_t n)
{
    size_t i, bad_runs = 0, bad_out = 0, bad_ptr = 0;
    char msg[200];
    for (i = 0; i < n; i++) {
        if (jobs[i].runs != 1) {
            if (bad_runs < 5)
                printf("  %s: job %lu ran %d times\n", phase, (unsigned long)i, jobs[i].runs);
            bad_runs++;
        }
        if (jobs[i].output != work(jobs[i].input))
            bad_out++;
        if (jobs[i].seen_ptr != &jobs[i].task)
            bad_ptr++;
    }
    sprintf(msg, "%s: every job ran exactly once", phase);
    CHECK_EQ(bad_runs, 0, msg);
    sprintf(msg, "%s: every job computed the right output", phase);
    CHECK_EQ(bad_out, 0, msg);
    sprintf(msg, "%s: every callback got the submitted task pointer", phase);
    CHECK_EQ(bad_ptr, 0, msg);
}

/* ---- heap jobs freed by their own callback ---- */

struct heap_job {
    int id;
    struct task task;
    struct tally *tally;
    long *sum;                /* written under tally.lock */
};

static void heap_job_run(struct task *t)
{
    struct heap_job *j = container_of(t, struct heap_job, task);
    struct tally *tally = j->tally;
    pthread_mutex_lock(&tally->lock);
    *j->sum += j->id;
    pthread_mutex_unlock(&tally->lock);
    free(j); /* the pool must not touch the task after the callback started */
    tally_add(tally);
}

/* ---- a task that resubmits itself `remaining` times ---- */

struct chain {
    int remaining;
    int hops;
    struct task task;
    struct pool *pool;
    int resubmit_errors;
    struct tally *tally;
};

static void chain_run(struct task *t)
{
    struct chain *c = container_of(t, struct chain, task);
    c->hops++;
    if (c->remaining-- > 0) {
        if (pool_submit_to(c->pool, &c->task) != POOL_OK) {
            c->resubmit_errors++;
            tally_add(c->tally);
        }
        return;
    }
    tally_add(c->tally);
}

/* ---- a task that needs a bit of stack (for the small-stack pool) ---- */

static void stack_job_run(struct task *t)
{
    struct job *j = container_of(t, struct job, task);
    volatile unsigned char buf[16 * 1024];
    size_t i;
    uint64_t h = 0;
    for (i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(i * 7 + j->input);
    for (i = 0; i < sizeof buf; i++)
        h += buf[i];
    (void)h;
    j->output = work(j->input);
    pthread_mutex_lock(&j->tally->lock);
    j->runs++;
    pthread_mutex_unlock(&j->tally->lock);
    j->seen_ptr = t;
    tally_add(j->tally);
}

static void submit_all(struct pool *pool, struct job *jobs, size_t n, const char *phase)
{
    size_t i, errors = 0;
    int first_err = POOL_OK;
    char msg[200];
    for (i = 0; i < n; i++) {
        int rc = pool ? pool_submit_to(pool, &jobs[i].task) : pool_submit(&jobs[i].task);
        if (rc != POOL_OK) {
            if (errors++ == 0)
                first_err = rc;
        }
    }
    sprintf(msg, "%s: all %lu submits returned POOL_OK (first error %s)", phase,
            (unsigned long)n, status_name(first_err));
    CHECK_EQ(errors, 0, msg);
}

int main(void)
{
    size_t n = scaled(1000, 10);
    struct pool_config cfg;
    struct pool *pool = NULL;
    struct job *jobs = calloc(n, sizeof *jobs);
    struct tally tally;
    int rc;

    test_watchdog_start(120);
    main_thread = pthread_self();
    pthread_mutex_init(&tally.lock, NULL);
    if (jobs == NULL) {
        printf("FAIL: out of memory\n");
        return 1;
    }
    printf("basic: %lu jobs per phase, offsetof(struct job, task) = %lu\n", (unsigned long)n,
           (unsigned long)offsetof(struct job, task));
    CHECK(offsetof(struct job, task) != 0, "the task is not the first member of struct job");

    /* pool_config_init fills the documented defaults (0, 0) over garbage. */
    memset(&cfg, 0xAB, sizeof cfg);
    pool_config_init(&cfg);
    CHECK_EQ(cfg.max_threads, 0, "pool_config_init: max_threads default is 0");
    CHECK_EQ(cfg.stack_size, 0, "pool_config_init: stack_size default is 0");

    /* Phase 1: a 4-thread pool; wait on the counter. */
    cfg.max_threads = 4;
    rc = pool_create(&cfg, &pool);
    CHECK_EQ(rc, POOL_OK, "pool_create(max_threads=4)");
    CHECK(pool != NULL, "pool_create gave a pool");
    if (rc != POOL_OK || pool == NULL)
        return test_finish();
    tally_init(&tally, (long)n);
    init_jobs(jobs, n, &tally);
    submit_all(pool, jobs, n, "4 threads");
    wait_until(tally_complete, &tally, tally_report, "4 threads: all jobs");
    check_jobs("4 threads", jobs, n);
    CHECK_EQ(tally.on_main_thread, 0, "4 threads: no callback ran on the submitting thread");
    CHECK(tally.nseen >= 1 && tally.nseen <= 4 && !tally.seen_overflow,
          "4 threads: callbacks ran on 1..4 distinct threads");
    printf("  4 threads: callbacks ran on %d distinct threads\n", tally.nseen);

    /* Phase 2: same pool, pool_shutdown as the completion barrier. */
    tally_init(&tally, (long)n);
    init_jobs(jobs, n, &tally);
    submit_all(pool, jobs, n, "shutdown barrier");
    rc = pool_shutdown(pool);
    CHECK_EQ(rc, POOL_OK, "pool_shutdown");
    CHECK_EQ(tally_done(&tally), (long)n, "shutdown barrier: all queued jobs ran before pool_shutdown returned");
    check_jobs("shutdown barrier", jobs, n);
    pool_destroy(pool);
    pool = NULL;

    /* Phase 3: max_threads = 1: everything runs on one worker thread. */
    pool_config_init(&cfg);
    cfg.max_threads = 1;
    rc = pool_create(&cfg, &pool);
    CHECK_EQ(rc, POOL_OK, "pool_create(max_threads=1)");
    if (rc == POOL_OK) {
        tally_init(&tally, (long)n);
        init_jobs(jobs, n, &tally);
        submit_all(pool, jobs, n, "1 thread");
        wait_until(tally_complete, &tally, tally_report, "1 thread: all jobs");
        check_jobs("1 thread", jobs, n);
        CHECK_EQ(tally.nseen, 1, "1 thread: every callback ran on the same single worker");
        CHECK_EQ(tally.on_main_thread, 0, "1 thread: no callback ran on the submitting thread");
        pool_destroy(pool);
        pool = NULL;
    }

    /* Phase 4: heap jobs freed by their callback; destroy without waiting (destroy runs
     * what is queued). */
    rc = pool_create(NULL, &pool);
    CHECK_EQ(rc, POOL_OK, "pool_create(NULL config)");
    if (rc == POOL_OK) {
        long sum = 0, want = 0;
        size_t i, errors = 0;
        tally_init(&tally, (long)n);
        for (i = 0; i < n; i++) {
            struct heap_job *h = malloc(sizeof *h);
            if (h == NULL) {
                printf("FAIL: out of memory\n");
                return 1;
            }
            h->id = (int)i;
            h->task.next = NULL;
            h->task.callback = heap_job_run;
            h->tally = &tally;
            h->sum = &sum;
            want += (long)i;
            if (pool_submit_to(pool, &h->task) != POOL_OK) {
                errors++;
                free(h);
            }
        }
        CHECK_EQ(errors, 0, "heap jobs: all submits returned POOL_OK");
        pool_destroy(pool); /* shuts down: runs everything queued, joins */
        pool = NULL;
        CHECK_EQ(tally_done(&tally), (long)n, "heap jobs: pool_destroy ran every queued job first");
        CHECK_EQ(sum, want, "heap jobs: sum of ids");
    }

    /* Phase 5: a task that resubmits itself from its callback. */
    rc = pool_create(NULL, &pool);
    if (CHECK_EQ(rc, POOL_OK, "pool_create for the chain")) {
        struct chain c;
        memset(&c, 0, sizeof c);
        tally_init(&tally, 1);
        c.remaining = (int)n;
        c.task.callback = chain_run;
        c.pool = pool;
        c.tally = &tally;
        CHECK_EQ(pool_submit_to(pool, &c.task), POOL_OK, "chain: first submit");
        wait_until(tally_complete, &tally, tally_report, "chain of resubmits");
        CHECK_EQ(c.hops, (long)n + 1, "chain: the task ran once per (re)submit");
        CHECK_EQ(c.resubmit_errors, 0, "chain: every resubmit from the callback returned POOL_OK");
        pool_destroy(pool);
        pool = NULL;
    }

    /* Phase 6: small worker stacks (64 KiB) with tasks using 16 KiB of stack. */
    pool_config_init(&cfg);
    cfg.max_threads = 2;
    cfg.stack_size = 64 * 1024;
    rc = pool_create(&cfg, &pool);
    CHECK_EQ(rc, POOL_OK, "pool_create(stack_size=64 KiB)");
    if (rc == POOL_OK) {
        size_t i;
        tally_init(&tally, (long)n);
        init_jobs(jobs, n, &tally);
        for (i = 0; i < n; i++)
            jobs[i].task.callback = stack_job_run;
        submit_all(pool, jobs, n, "small stack");
        wait_until(tally_complete, &tally, tally_report, "small stack: all jobs");
        check_jobs("small stack", jobs, n);
        pool_destroy(pool);
        pool = NULL;
    }

    /* Phase 7: the global pool, no init call. */
    tally_init(&tally, (long)n);
    init_jobs(jobs, n, &tally);
    submit_all(NULL, jobs, n, "global pool");
    wait_until(tally_complete, &tally, tally_report, "global pool: all jobs");
    check_jobs("global pool", jobs, n);
    CHECK_EQ(tally.on_main_thread, 0, "global pool: no callback ran on the submitting thread");

    free(jobs);
    /* tally.lock is not destroyed: global-pool threads may still be inside its unlock. */
    return test_finish();
}
