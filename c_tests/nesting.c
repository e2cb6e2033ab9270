/*
 * nesting.c: a worker that waits nests unrelated work only while at most half its stack is in
 * use (src/scheduler/context.rs, "Bounded helping").
 *
 *   1. one worker with a 512 KiB stack, 100,000 queued root tasks, each with an 8 KiB frame,
 *      each forking one child (pool_fork) and waiting for it on a latch: the waiting worker
 *      runs its own fork first, never another root, so the run completes (before bounded
 *      helping, the waiting root ran other roots from its queue inside its wait, hundreds of
 *      frames deep, and overflowed the stack) and the deepest nesting is 2;
 *   2. the same on two workers, with children that spin a little so the other worker steals
 *      some of them and the waiting root may run other roots meanwhile: the deepest nesting
 *      of tasks on one worker stack is at most 4 (a root, two unrelated roots inside its wait,
 *      and a child);
 *   3. a task that waits for a task it *submitted* (not forked) on a one-worker pool, one level
 *      deep, still completes (unrelated work may run inside a wait within the bound).
 *
 * A 120 s watchdog turns a hang into exit status 2.
 */
#include "common.h"

#include <stdatomic.h>
#include <stdlib.h>

#define FRAME_BYTES 8192

static _Thread_local int depth;
static atomic_int max_depth;

static void enter(void)
{
    int d = ++depth;
    int seen = atomic_load(&max_depth);
    while (d > seen && !atomic_compare_exchange_weak(&max_depth, &seen, d)) {
    }
}

static void leave(void)
{
    depth--;
}

struct root;

struct child {
    struct task task;
    struct pool_latch *latch;
    unsigned spin;
};

struct root {
    struct task task;
    struct child child;
    struct pool_latch latch;
    struct pool *pool;
    struct pool_latch *all; /* counts finished roots */
    int status;
};

static void child_run(struct task *task)
{
    struct child *c = container_of(task, struct child, task);
    enter();
    volatile unsigned x = 0;
    for (unsigned i = 0; i < c->spin; i++) {
        x += i;
    }
    leave();
    pool_latch_done(c->latch);
}

static void root_run(struct task *task)
{
    struct root *r = container_of(task, struct root, task);
    enter();
    volatile char frame[FRAME_BYTES];
    frame[0] = 1;
    frame[FRAME_BYTES - 1] = 1;
    int st = pool_latch_init(&r->latch);
    if (st == POOL_OK) {
        st = pool_latch_add(&r->latch, 1);
    }
    if (st == POOL_OK) {
        r->child.latch = &r->latch;
        r->child.task.callback = child_run;
        st = pool_fork(r->pool, &r->child.task);
    }
    if (st == POOL_OK) {
        st = pool_latch_wait(r->pool, &r->latch);
    }
    r->status = st + (frame[0] + frame[FRAME_BYTES - 1] - 2);
    leave();
    pool_latch_done(r->all);
}

/* Submits `n` roots to a pool of `threads` workers with `stack` bytes of stack; waits for all
 * from outside; returns the deepest nesting seen. */
static int run_roots(size_t threads, size_t stack, size_t n, unsigned spin)
{
    struct pool_config cfg;
    pool_config_init(&cfg);
    cfg.max_threads = threads;
    cfg.stack_size = stack;
    struct pool *pool = NULL;
    CHECK_STATUS(pool_create(&cfg, &pool), POOL_OK, "pool_create");
    struct root *roots = calloc(n, sizeof *roots);
    CHECK(roots != NULL, "roots allocated");
    if (!roots) {
        pool_destroy(pool);
        return -1;
    }
    struct pool_latch all;
    CHECK_STATUS(pool_latch_init(&all), POOL_OK, "latch init");
    CHECK_STATUS(pool_latch_add(&all, n), POOL_OK, "latch add");
    atomic_store(&max_depth, 0);
    /* One batch: every root is queued before the first runs, so a waiting root always has
     * other roots queued behind it (the case that used to nest them). */
    for (size_t i = 0; i < n; i++) {
        roots[i].task.callback = root_run;
        roots[i].task.next = i + 1 < n ? &roots[i + 1].task : NULL;
        roots[i].pool = pool;
        roots[i].all = &all;
        roots[i].child.spin = spin;
        roots[i].status = -1;
    }
    CHECK_STATUS(pool_submit_batch_to(pool, &roots[0].task), POOL_OK, "submit the roots");
    CHECK_STATUS(pool_latch_wait(pool, &all), POOL_OK, "wait for every root");
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        bad += roots[i].status != POOL_OK;
    }
    CHECK_EQ(bad, 0, "every root forked, waited and finished with POOL_OK");
    CHECK_STATUS(pool_shutdown(pool), POOL_OK, "shutdown");
    pool_destroy(pool);
    free(roots);
    return atomic_load(&max_depth);
}

/* 3: a task that waits for a task it submitted. */
struct submitter {
    struct task task;
    struct task inner;
    struct pool_latch latch;
    struct pool *pool;
    atomic_int inner_ran;
    int status;
    struct pool_latch *done;
};

static void inner_run(struct task *task)
{
    struct submitter *s = container_of(task, struct submitter, inner);
    atomic_store(&s->inner_ran, 1);
    pool_latch_done(&s->latch);
}

static void submitter_run(struct task *task)
{
    struct submitter *s = container_of(task, struct submitter, task);
    int st = pool_latch_init(&s->latch);
    if (st == POOL_OK) {
        st = pool_latch_add(&s->latch, 1);
    }
    if (st == POOL_OK) {
        s->inner.callback = inner_run;
        st = pool_submit_to(s->pool, &s->inner);
    }
    if (st == POOL_OK) {
        st = pool_latch_wait(s->pool, &s->latch);
    }
    s->status = st;
    pool_latch_done(s->done);
}

int main(void)
{
    test_watchdog_start(120);
    size_t n = scaled(100000, 100);

    int d1 = run_roots(1, 512 << 10, n, 0);
    printf("one worker, %zu roots with 8 KiB frames: deepest nesting %d\n", n, d1);
    CHECK(d1 >= 1 && d1 <= 2, "one worker: a waiting root runs only its own child (nesting <= 2)");

    int d2 = run_roots(2, 512 << 10, n / 10 + 1, 2000);
    printf("two workers, roots forking a spinning child: deepest nesting %d\n", d2);
    CHECK(d2 >= 1 && d2 <= 4, "two workers: nesting on one stack <= 4");

    struct pool_config cfg;
    pool_config_init(&cfg);
    cfg.max_threads = 1;
    struct pool *pool = NULL;
    CHECK_STATUS(pool_create(&cfg, &pool), POOL_OK, "pool_create (1 worker)");
    struct submitter s = { 0 };
    struct pool_latch done;
    pool_latch_init(&done);
    pool_latch_add(&done, 1);
    s.task.callback = submitter_run;
    s.pool = pool;
    s.done = &done;
    s.status = -1;
    CHECK_STATUS(pool_submit_to(pool, &s.task), POOL_OK, "submit the submitter");
    CHECK_STATUS(pool_latch_wait(pool, &done), POOL_OK, "wait for it");
    CHECK_STATUS(s.status, POOL_OK, "a wait for submitted work, one level deep, completes");
    CHECK_EQ(atomic_load(&s.inner_ran), 1, "the submitted task ran inside the wait");
    CHECK_STATUS(pool_shutdown(pool), POOL_OK, "shutdown");
    pool_destroy(pool);
    return test_finish();
}
