/*
 * c_fib (BENCH.md): fib(30) in C with a fork at every level, two ways, against plain recursive
 * C fib, on a pool of THREADS workers (argument, default 2):
 *   - latch: pool_fork + pool_latch_wait (tasks and a latch per level);
 *   - job:   pool_worker_fork + pool_worker_join (a job per level, the worker passed down);
 *   - inline: the same with pool.h's inline pool_job_fork + pool_job_join.
 * Prints the median and min-max of RUNS runs (default 7) of each and the ratios of medians.
 *   cc -O2 -Iinclude bench/c/fib.c target/release/libpool.a -lpthread -ldl -lm -o build/c_fib
 */
#define _POSIX_C_SOURCE 200809L
#include <pool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef N
#define N 30
#endif

struct node {
    struct task task;
    unsigned n;
    uint64_t result;
    struct pool *pool;
    struct pool_latch *parent;
};

static uint64_t fib_seq(unsigned n)
{
    return n < 2 ? n : fib_seq(n - 1) + fib_seq(n - 2);
}

static void fib_run(struct task *task);

static uint64_t fib_fork(struct pool *pool, unsigned n)
{
    if (n < 2) {
        return n;
    }
    struct pool_latch latch;
    pool_latch_init(&latch);
    pool_latch_add(&latch, 1);
    struct node right = { .task = { .callback = fib_run }, .n = n - 2, .pool = pool, .parent = &latch };
    pool_fork(pool, &right.task);
    uint64_t left = fib_fork(pool, n - 1);
    pool_latch_wait(pool, &latch);
    return left + right.result;
}

static void fib_run(struct task *task)
{
    struct node *node = (struct node *)((char *)task - offsetof(struct node, task));
    node->result = fib_fork(node->pool, node->n);
    pool_latch_done(node->parent);
}

struct fib_job {
    struct pool_job job;
    unsigned n;
    uint64_t result;
};

/* fib through the job pair FORK / JOIN, as NAME (NAME_run is its job's function). */
#define FIB_THROUGH(NAME, FORK, JOIN)                                                       \
    static void NAME##_run(struct pool_job *job, struct pool_worker *worker);               \
    static uint64_t NAME(struct pool_worker *worker, unsigned n)                            \
    {                                                                                       \
        if (n < 2) {                                                                        \
            return n;                                                                       \
        }                                                                                   \
        struct fib_job right; /* only .run needs a value: the fork writes the rest */      \
        right.job.run = NAME##_run;                                                         \
        right.n = n - 2;                                                                    \
        FORK(worker, &right.job);                                                           \
        uint64_t left = NAME(worker, n - 1);                                                \
        JOIN(worker, &right.job);                                                           \
        return left + right.result;                                                         \
    }                                                                                       \
    static void NAME##_run(struct pool_job *job, struct pool_worker *worker)                \
    {                                                                                       \
        struct fib_job *f = POOL_CONTAINER_OF(job, struct fib_job, job);                    \
        f->result = NAME(worker, f->n);                                                     \
    }

FIB_THROUGH(fib_worker, pool_worker_fork, pool_worker_join)
FIB_THROUGH(fib_inline, pool_job_fork, pool_job_join)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    size_t threads = argc > 1 ? strtoul(argv[1], NULL, 10) : 2;
    int runs = argc > 2 ? atoi(argv[2]) : 7;
    struct pool_config cfg;
    pool_config_init(&cfg);
    cfg.max_threads = threads;
    struct pool *pool;
    if (pool_create(&cfg, &pool) != POOL_OK) {
        return 1;
    }
    double seq[64], par[64], job[64], inl[64];
    for (int r = 0; r < runs && r < 64; r++) {
        double t = now();
        uint64_t a = fib_seq(N);
        seq[r] = now() - t;
        t = now();
        struct pool_latch latch;
        pool_latch_init(&latch);
        pool_latch_add(&latch, 1);
        struct node root = { .task = { .callback = fib_run }, .n = N, .pool = pool, .parent = &latch };
        pool_submit_to(pool, &root.task);
        pool_latch_wait(pool, &latch);
        par[r] = now() - t;
        t = now();
        struct fib_job top;
        top.job.run = fib_worker_run;
        top.n = N;
        int status = pool_install(pool, &top.job);
        job[r] = now() - t;
        t = now();
        struct fib_job top_inline;
        top_inline.job.run = fib_inline_run;
        top_inline.n = N;
        status |= pool_install(pool, &top_inline.job);
        inl[r] = now() - t;
        if (root.result != a || status != POOL_OK || top.result != a || top_inline.result != a) {
            fprintf(stderr, "wrong result\n");
            return 1;
        }
    }
    qsort(seq, runs, sizeof seq[0], cmp);
    qsort(par, runs, sizeof par[0], cmp);
    qsort(job, runs, sizeof job[0], cmp);
    qsort(inl, runs, sizeof inl[0], cmp);
    printf("c_fib(%d) %zu workers: sequential %.2f ms (%.2f-%.2f); pool_fork+latch %.2f ms (%.2f-%.2f), ratio %.2f; "
           "pool_worker_fork+join %.2f ms (%.2f-%.2f), ratio %.2f; pool_job_fork+join (inline) %.2f ms (%.2f-%.2f), ratio %.2f\n",
           N, threads, seq[runs / 2], seq[0], seq[runs - 1], par[runs / 2], par[0], par[runs - 1], par[runs / 2] / seq[runs / 2],
           job[runs / 2], job[0], job[runs - 1], job[runs / 2] / seq[runs / 2], inl[runs / 2], inl[0], inl[runs - 1],
           inl[runs / 2] / seq[runs / 2]);
    pool_destroy(pool);
    return 0;
}
