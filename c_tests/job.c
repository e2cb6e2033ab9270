/*
 * job.c: fork-join with struct pool_job and the worker passed down (pool_install,
 * pool_worker_fork, pool_worker_join, pool.h's inline pool_job_fork / pool_job_join,
 * pool_current_worker and their _global forms).
 *
 *   1. fib(N) with a fork at every level on pools of 1, 2 and 4 workers: the right answer,
 *      and every forked job ran exactly once (a counter per run against the fork count);
 *   1b. an idle worker gets work: a job forks X, then keeps forking and joining small jobs
 *      until X has started on another thread (a fresh pool, then a warm one, several rounds):
 *      a busy worker that forks offers its oldest latent job while another worker is idle;
 *   2. one function forking 200 jobs before joining them in reverse (deeper than the frame
 *      stack: the later forks are queued at once), on 1 and 4 workers: each ran once;
 *   3. misuse is refused and changes nothing: joins out of order, a second join, NULLs, a
 *      NULL run, an install on a shut-down pool;
 *   4. pool_current_worker inside a submitted task (and NULL outside, or for another pool);
 *      pool_install from a worker runs inline; the global pool's forms;
 *   5. pool_fork's forks stay private to the forking worker until its latch wait runs them,
 *      and are never stranded: forks a task does not wait for (it returns; a job returns
 *      to its join) run anyway, and a wait finds its forks under a job forked after them.
 *
 * Sections 1 to 3 run with pool_worker_fork / pool_worker_join, with pool.h's inline
 * pool_job_fork / pool_job_join (whose common case never calls into the library), and
 * (1 and 2) with each job forked by one pair and joined by the other.
 *
 * A 120 s watchdog turns a hang into exit status 2.
 */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define N 22

/* The pair after pool_worker_fork / pool_worker_join: pool.h's inline functions here, the
 * library's exported symbols of the same names in job_exported.c (which includes this file). */
#ifndef JOB_SECOND_PAIR_NAME
#define JOB_SECOND_PAIR_NAME "pool_job_fork / pool_job_join (inline)"
#endif

/* Checks described by their own text. */
#define EXPECT_EQ(got, want) CHECK_EQ(got, want, #got " == " #want)
#define EXPECT(cond) CHECK(cond, #cond)

static atomic_long runs;

/* The pair under test: the library's calls (LIBRARY), pool.h's inline fast paths (INLINE), or
 * one of each per job (MIXED: by an address bit, a job forked with one pair is joined with the
 * other, so the two must be one protocol). */
enum pair { LIBRARY, INLINE, MIXED };
static enum pair pair;

static int inline_fork(const struct pool_job *job)
{
    return pair == INLINE || (pair == MIXED && ((uintptr_t)job >> 4) % 2);
}

static int inline_join(const struct pool_job *job)
{
    return pair == INLINE || (pair == MIXED && !(((uintptr_t)job >> 4) % 2));
}

static int fork_job(struct pool_worker *w, struct pool_job *job)
{
    return inline_fork(job) ? pool_job_fork(w, job) : pool_worker_fork(w, job);
}

static int join_job(struct pool_worker *w, struct pool_job *job)
{
    return inline_join(job) ? pool_job_join(w, job) : pool_worker_join(w, job);
}

struct fib {
    struct pool_job job;
    unsigned n;
    uint64_t out;
};

static void fib_run(struct pool_job *job, struct pool_worker *w);

static uint64_t fib(struct pool_worker *w, unsigned n)
{
    if (n < 2) {
        /* A little work at the leaves, so idle workers find something to take. */
        volatile unsigned spin = 0;
        for (unsigned i = 0; i < 50; i++) {
            spin += i;
        }
        return n;
    }
    struct fib right;
    right.job.run = fib_run;
    right.n = n - 2;
    if (fork_job(w, &right.job) != POOL_OK) {
        abort();
    }
    uint64_t left = fib(w, n - 1);
    if (join_job(w, &right.job) != POOL_OK) {
        abort();
    }
    return left + right.out;
}

static void fib_run(struct pool_job *job, struct pool_worker *w)
{
    struct fib *f = POOL_CONTAINER_OF(job, struct fib, job);
    atomic_fetch_add(&runs, 1);
    f->out = fib(w, f->n);
}

static uint64_t fib_seq(unsigned n)
{
    return n < 2 ? n : fib_seq(n - 1) + fib_seq(n - 2);
}

/* Forks in fib(n): one per call with n >= 2, i.e. fib(n + 1) - 1. */
static long forks_of(unsigned n)
{
    return (long)fib_seq(n + 1) - 1;
}

static struct pool *make_pool(size_t threads)
{
    struct pool_config cfg;
    pool_config_init(&cfg);
    cfg.max_threads = threads;
    struct pool *pool = NULL;
    EXPECT_EQ(pool_create(&cfg, &pool), POOL_OK);
    return pool;
}

static void test_fib(size_t threads)
{
    struct pool *pool = make_pool(threads);
    for (int round = 0; round < 3; round++) {
        atomic_store(&runs, 0);
        struct fib root;
        root.job.run = fib_run;
        root.n = N;
        EXPECT_EQ(pool_install(pool, &root.job), POOL_OK);
        EXPECT_EQ(root.out, fib_seq(N));
        /* The root is installed, not forked: one run more than the forks. */
        EXPECT_EQ(atomic_load(&runs), forks_of(N) + 1);
    }
    pool_destroy(pool);
}

/* 1b: X must be taken by the other worker while the root keeps forking. */
struct steal {
    struct pool_job job;
    struct fib x;
    pthread_t root_thread;
    atomic_int x_started;
    pthread_t x_thread;
    int stolen, rounds;
};

static void x_run(struct pool_job *job, struct pool_worker *w)
{
    (void)w;
    struct steal *s = POOL_CONTAINER_OF(job, struct steal, x.job);
    s->x_thread = pthread_self();
    atomic_store(&s->x_started, 1);
}

static void steal_run(struct pool_job *job, struct pool_worker *w)
{
    struct steal *s = POOL_CONTAINER_OF(job, struct steal, job);
    s->root_thread = pthread_self();
    atomic_store(&s->x_started, 0);
    s->x.job.run = x_run;
    if (fork_job(w, &s->x.job) != POOL_OK) {
        abort();
    }
    /* Small forks and joins until X started elsewhere (or 10 s passed). */
    time_t deadline = time(NULL) + 10;
    while (!atomic_load(&s->x_started) && time(NULL) < deadline) {
        fib(w, 10);
    }
    s->stolen = atomic_load(&s->x_started) && !pthread_equal(s->x_thread, s->root_thread);
    if (join_job(w, &s->x.job) != POOL_OK) {
        abort();
    }
}

static void test_idle_gets_work(void)
{
    struct pool *pool = make_pool(2);
    int stolen = 0;
    for (int round = 0; round < 5; round++) {
        struct steal s;
        s.job.run = steal_run;
        s.stolen = 0;
        EXPECT_EQ(pool_install(pool, &s.job), POOL_OK);
        stolen += s.stolen;
        /* Let both workers go idle before the next round (a warm, sleeping pool). */
        EXPECT_EQ(pool_wait_idle(pool), POOL_OK);
    }
    EXPECT_EQ(stolen, 5);
    pool_destroy(pool);
}

/* Wide fork: WIDE jobs forked in a row, joined in reverse. */
#define WIDE 200

struct leaf {
    struct pool_job job;
    atomic_int ran;
};

static void leaf_run(struct pool_job *job, struct pool_worker *w)
{
    (void)w;
    struct leaf *l = POOL_CONTAINER_OF(job, struct leaf, job);
    volatile unsigned spin = 0;
    for (unsigned i = 0; i < 2000; i++) {
        spin += i;
    }
    atomic_fetch_add(&l->ran, 1);
}

struct wide {
    struct pool_job job;
    struct leaf leaves[WIDE];
    int fork_failures, join_failures;
};

static void wide_run(struct pool_job *job, struct pool_worker *w)
{
    struct wide *s = POOL_CONTAINER_OF(job, struct wide, job);
    for (int i = 0; i < WIDE; i++) {
        s->leaves[i].job.run = leaf_run;
        atomic_init(&s->leaves[i].ran, 0);
        s->fork_failures += fork_job(w, &s->leaves[i].job) != POOL_OK;
    }
    for (int i = WIDE - 1; i >= 0; i--) {
        s->join_failures += join_job(w, &s->leaves[i].job) != POOL_OK;
    }
}

static void test_wide(size_t threads)
{
    struct pool *pool = make_pool(threads);
    static struct wide s;
    s.job.run = wide_run;
    s.fork_failures = s.join_failures = 0;
    EXPECT_EQ(pool_install(pool, &s.job), POOL_OK);
    EXPECT_EQ(s.fork_failures, 0);
    EXPECT_EQ(s.join_failures, 0);
    int once = 0;
    for (int i = 0; i < WIDE; i++) {
        once += atomic_load(&s.leaves[i].ran) == 1;
    }
    EXPECT_EQ(once, WIDE);
    pool_destroy(pool);
}

/* Misuse inside a job: every refused call changes nothing. */
struct misuse {
    struct pool_job job;
    struct leaf a, b, null_run;
    int out_of_order, second_join, fork_null_worker, fork_null_job, fork_null_run, join_null;
    int ok_b, ok_a, ran_a, ran_b;
};

static void misuse_run(struct pool_job *job, struct pool_worker *w)
{
    struct misuse *m = POOL_CONTAINER_OF(job, struct misuse, job);
    m->a.job.run = leaf_run;
    m->b.job.run = leaf_run;
    m->null_run.job.run = NULL;
    atomic_init(&m->a.ran, 0);
    atomic_init(&m->b.ran, 0);
    m->fork_null_worker = fork_job(NULL, &m->a.job);
    m->fork_null_job = fork_job(w, NULL);
    m->fork_null_run = fork_job(w, &m->null_run.job);
    m->join_null = join_job(NULL, &m->a.job) == POOL_ERR_INVALID && join_job(w, NULL) == POOL_ERR_INVALID;
    if (fork_job(w, &m->a.job) != POOL_OK || fork_job(w, &m->b.job) != POOL_OK) {
        abort();
    }
    m->out_of_order = join_job(w, &m->a.job); /* b is newer: refused */
    m->ok_b = join_job(w, &m->b.job);
    m->ok_a = join_job(w, &m->a.job);
    m->second_join = join_job(w, &m->a.job); /* joined already: refused */
    m->ran_a = atomic_load(&m->a.ran);
    m->ran_b = atomic_load(&m->b.ran);
}

static void test_misuse(void)
{
    struct pool *pool = make_pool(2);
    struct misuse m;
    memset(&m, 0, sizeof m);
    m.job.run = misuse_run;
    EXPECT_EQ(pool_install(pool, &m.job), POOL_OK);
    EXPECT_EQ(m.fork_null_worker, POOL_ERR_INVALID);
    EXPECT_EQ(m.fork_null_job, POOL_ERR_INVALID);
    EXPECT_EQ(m.fork_null_run, POOL_ERR_INVALID);
    EXPECT(m.join_null);
    EXPECT_EQ(m.out_of_order, POOL_ERR_INVALID);
    EXPECT_EQ(m.ok_b, POOL_OK);
    EXPECT_EQ(m.ok_a, POOL_OK);
    EXPECT_EQ(m.second_join, POOL_ERR_INVALID);
    EXPECT_EQ(m.ran_a, 1);
    EXPECT_EQ(m.ran_b, 1);

    struct pool_job null_run = { .run = NULL };
    EXPECT_EQ(pool_install(NULL, &m.job), POOL_ERR_INVALID);
    EXPECT_EQ(pool_install(pool, NULL), POOL_ERR_INVALID);
    EXPECT_EQ(pool_install(pool, &null_run), POOL_ERR_INVALID);
    EXPECT_EQ(pool_install_global(NULL), POOL_ERR_INVALID);
    EXPECT_EQ(pool_install_global(&null_run), POOL_ERR_INVALID);
    EXPECT(pool_current_worker(NULL) == NULL);
    EXPECT(pool_current_worker(pool) == NULL); /* the main thread is no worker */
    EXPECT(pool_current_worker_global() == NULL);

    EXPECT_EQ(pool_shutdown(pool), POOL_OK);
    struct fib root;
    root.job.run = fib_run;
    root.n = 5;
    EXPECT_EQ(pool_install(pool, &root.job), POOL_ERR_SHUTDOWN);
    pool_destroy(pool);
}

/* A plain task finds its worker, forks and joins with it; another pool's worker is NULL. */
struct finder {
    struct task task;
    struct pool *pool, *other;
    struct pool_latch *done;
    int found, other_null, global_null;
    uint64_t out;
};

static void finder_run(struct task *task)
{
    struct finder *f = container_of(task, struct finder, task);
    struct pool_worker *w = f->pool ? pool_current_worker(f->pool) : pool_current_worker_global();
    f->found = w != NULL;
    f->other_null = f->other == NULL || pool_current_worker(f->other) == NULL;
    f->global_null = f->pool == NULL || pool_current_worker_global() == NULL;
    if (w) {
        f->out = fib(w, 15);
    }
    pool_latch_done(f->done);
}

/* pool_install from a worker of the same pool runs inline, on the calling thread. */
struct nested {
    struct pool_job job, inner;
    struct pool *pool;
    pthread_t outer_thread, inner_thread;
    int status;
};

static void nested_inner(struct pool_job *job, struct pool_worker *w)
{
    (void)w;
    struct nested *n = POOL_CONTAINER_OF(job, struct nested, inner);
    n->inner_thread = pthread_self();
}

static void nested_outer(struct pool_job *job, struct pool_worker *w)
{
    (void)w;
    struct nested *n = POOL_CONTAINER_OF(job, struct nested, job);
    n->outer_thread = pthread_self();
    n->inner.run = nested_inner;
    n->status = pool_install(n->pool, &n->inner);
}

static void test_current_worker(void)
{
    struct pool *pool = make_pool(2);
    struct pool *other = make_pool(1);
    struct pool_latch done;
    pool_latch_init(&done);
    pool_latch_add(&done, 1);
    struct finder f = { .task = { .callback = finder_run }, .pool = pool, .other = other, .done = &done };
    EXPECT_EQ(pool_submit_to(pool, &f.task), POOL_OK);
    EXPECT_EQ(pool_latch_wait(pool, &done), POOL_OK);
    EXPECT(f.found);
    EXPECT(f.other_null);
    EXPECT(f.global_null);
    EXPECT_EQ(f.out, fib_seq(15));

    struct nested n = { .job = { .run = nested_outer }, .pool = pool };
    EXPECT_EQ(pool_install(pool, &n.job), POOL_OK);
    EXPECT_EQ(n.status, POOL_OK);
    EXPECT(pthread_equal(n.outer_thread, n.inner_thread));
    EXPECT(!pthread_equal(n.outer_thread, pthread_self()));

    /* The global pool: a submitted task finds its worker; pool_install_global runs fib. */
    struct pool_latch gdone;
    pool_latch_init(&gdone);
    pool_latch_add(&gdone, 1);
    struct finder g = { .task = { .callback = finder_run }, .pool = NULL, .other = pool, .done = &gdone };
    EXPECT_EQ(pool_submit(&g.task), POOL_OK);
    EXPECT_EQ(pool_latch_wait_global(&gdone), POOL_OK);
    EXPECT(g.found);
    EXPECT(g.other_null);
    EXPECT_EQ(g.out, fib_seq(15));
    atomic_store(&runs, 0);
    struct fib root;
    root.job.run = fib_run;
    root.n = 18;
    EXPECT_EQ(pool_install_global(&root.job), POOL_OK);
    EXPECT_EQ(root.out, fib_seq(18));
    EXPECT_EQ(atomic_load(&runs), forks_of(18) + 1);

    pool_destroy(other);
    pool_destroy(pool);
}

/* 5. Plain forks (pool_fork) mixed with jobs. */
struct plain {
    struct task task;
    struct pool_latch *latch;
    atomic_int *ran;
};

static void plain_run(struct task *task)
{
    struct plain *p = container_of(task, struct plain, task);
    atomic_fetch_add(p->ran, 1);
    pool_latch_done(p->latch);
}

#define PLAIN 100

struct forker {
    struct task task;
    struct pool_job job;
    struct pool *pool;
    struct plain children[PLAIN];
    struct pool_latch latch;
    atomic_int ran;
    struct leaf j;
    int status, join_status;
};

/* Forks PLAIN children and returns without waiting (the waiter is elsewhere). */
static void fork_and_return(struct forker *f)
{
    for (int i = 0; i < PLAIN; i++) {
        f->children[i] = (struct plain){ .task = { .callback = plain_run }, .latch = &f->latch, .ran = &f->ran };
        f->status |= pool_fork(f->pool, &f->children[i].task);
    }
}

static void forker_task(struct task *task)
{
    fork_and_return(container_of(task, struct forker, task));
}

static void forker_job(struct pool_job *job, struct pool_worker *w)
{
    (void)w;
    fork_and_return(POOL_CONTAINER_OF(job, struct forker, job));
}

/* A job that forks one plain child, forks a job after it, and waits for the child before
 * joining the job: the child's frame is under the job's. */
static void under_job(struct pool_job *job, struct pool_worker *w)
{
    struct forker *f = POOL_CONTAINER_OF(job, struct forker, job);
    f->children[0] = (struct plain){ .task = { .callback = plain_run }, .latch = &f->latch, .ran = &f->ran };
    f->status |= pool_fork(f->pool, &f->children[0].task);
    f->j.job.run = leaf_run;
    atomic_init(&f->j.ran, 0);
    f->status |= pool_worker_fork(w, &f->j.job);
    f->status |= pool_latch_wait(f->pool, &f->latch);
    f->join_status = pool_worker_join(w, &f->j.job);
}

/* The outer job joins a job whose function forked plain tasks it did not wait for. */
struct outer {
    struct pool_job job;
    struct forker *f;
    int status;
};

static void outer_run(struct pool_job *job, struct pool_worker *w)
{
    struct outer *o = POOL_CONTAINER_OF(job, struct outer, job);
    o->f->job.run = forker_job;
    o->status = pool_worker_fork(w, &o->f->job);
    if (o->status == POOL_OK) {
        o->status = pool_worker_join(w, &o->f->job);
    }
}

static void test_plain_forks(size_t threads)
{
    struct pool *pool = make_pool(threads);
    static struct forker f;
    for (int round = 0; round < 20; round++) {
        /* (a) A task forks and returns; the main thread waits. */
        memset(&f, 0, sizeof f);
        f.pool = pool;
        f.task.callback = forker_task;
        pool_latch_init(&f.latch);
        pool_latch_add(&f.latch, PLAIN);
        EXPECT_EQ(pool_submit_to(pool, &f.task), POOL_OK);
        EXPECT_EQ(pool_latch_wait(pool, &f.latch), POOL_OK);
        EXPECT_EQ(f.status, POOL_OK);
        EXPECT_EQ(atomic_load(&f.ran), PLAIN);

        /* (b) A job forks and returns to its join; the main thread waits. */
        memset(&f, 0, sizeof f);
        f.pool = pool;
        pool_latch_init(&f.latch);
        pool_latch_add(&f.latch, PLAIN);
        struct outer o = { .job = { .run = outer_run }, .f = &f };
        EXPECT_EQ(pool_install(pool, &o.job), POOL_OK);
        EXPECT_EQ(o.status, POOL_OK);
        EXPECT_EQ(pool_latch_wait(pool, &f.latch), POOL_OK);
        EXPECT_EQ(atomic_load(&f.ran), PLAIN);

        /* (c) A wait finds its fork under a job forked after it. */
        memset(&f, 0, sizeof f);
        f.pool = pool;
        f.job.run = under_job;
        pool_latch_init(&f.latch);
        pool_latch_add(&f.latch, 1);
        EXPECT_EQ(pool_install(pool, &f.job), POOL_OK);
        EXPECT_EQ(f.status, POOL_OK);
        EXPECT_EQ(f.join_status, POOL_OK);
        EXPECT_EQ(atomic_load(&f.ran), 1);
        EXPECT_EQ(atomic_load(&f.j.ran), 1);
    }
    pool_destroy(pool);
}

int main(void)
{
    test_watchdog_start(120);
    static const char *const names[] = { "pool_worker_fork / pool_worker_join",
        JOB_SECOND_PAIR_NAME, "one pair forks, the other joins" };
    for (pair = LIBRARY; pair <= MIXED; pair++) {
        printf("-- %s\n", names[pair]);
        test_fib(1);
        test_fib(2);
        test_fib(4);
        test_idle_gets_work();
        test_wide(1);
        test_wide(4);
        test_misuse();
    }
    /* Outside a worker the inline pair refuses what the library refuses. */
    struct pool_job job = { .run = leaf_run };
    EXPECT_EQ(pool_job_fork(NULL, &job), POOL_ERR_INVALID);
    EXPECT_EQ(pool_job_join(NULL, &job), POOL_ERR_INVALID);
    test_current_worker();
    test_plain_forks(1);
    test_plain_forks(2);
    return test_finish();
}
