/*
 * lz4_threadpool.c: lz4's thread pool (`programs/threadpool.h`: TPool_create, TPool_submitJob,
 * TPool_jobsCompleted, TPool_free) on libpool, in place of lz4's own `programs/threadpool.c`
 * (a mutex, two condition variables and a ring of jobs).
 *
 * As zstd's shim: one `struct pool` per TPool with `nbThreads` threads, and one
 * `struct pool_queue` on it whose width is `nbThreads` and whose bound is lz4's `queueSize`.
 * `scripts/external-lz4.sh` builds the lz4 program with it and checks it against the same
 * sources built with lz4's pool, and runs lz4's own test scripts on it.
 *
 * What lz4's pool promises and where the queue gives it:
 *   - TPool_submitJob blocks while `queueSize` jobs wait: pool_queue_submit_timeout with no
 *     limit, woken by a freed place. lz4 calls it from the pool's own jobs too: its reader
 *     (LZ4IO_readAndProcess) queues a compression job and then the next read on the pool that
 *     runs it. A queue accepts that from its own task as from anywhere, and, full, waits while
 *     another of its runners can free a place (pool.h), as lz4's pool would. In practice each
 *     read starts only after the compression job queued before it, so lz4's chain keeps two
 *     or three jobs queued and does not fill the queue;
 *   - at most nbThreads jobs run at once, started in the order submitted: the queue's width
 *     and FIFO start. The writer pools (TPool_create(1, n)) rely on it: blocks are written in
 *     the order their jobs were queued;
 *   - TPool_jobsCompleted waits for every job, those queued by jobs included: pool_queue_wait
 *     (from outside the pool, as lz4 calls it);
 *   - TPool_free finishes the queued jobs, then frees: wait, then destroy.
 *
 * Differences: none that lz4 sees. A job the pool refuses (no thread could start) or one
 * whose record cannot be allocated runs on the submitting thread, as lz4's single-threaded
 * build runs every job, rather than being lost. A job that would wait for itself (a full
 * width-1 queue, from its own job: lz4's pool hangs there) aborts, so a test sees it.
 */
#include <stdio.h>
#include <stdlib.h>

#include "threadpool.h" /* lz4's programs/threadpool.h (the API implemented here) */
#include "../../include/pool.h"

struct TPool_s {
    struct pool *pool;
    struct pool_queue queue;
};

/* One job: a task the queue runs, lz4's function and its argument; freed as it starts. */
struct job {
    struct task task;
    void (*function)(void *);
    void *arg;
};

static void run_job(struct task *task)
{
    struct job *job = POOL_CONTAINER_OF(task, struct job, task);
    void (*function)(void *) = job->function;
    void *arg = job->arg;
    free(job);
    function(arg);
}

TPool *TPool_create(int nbThreads, int queueSize)
{
    if (nbThreads < 1 || queueSize < 1)
        return NULL;
    TPool *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL)
        return NULL;
    struct pool_config config;
    pool_config_init(&config);
    config.max_threads = (size_t)nbThreads;
    config.thread_name_prefix = "lz4";
    if (pool_create(&config, &ctx->pool) != POOL_OK) {
        free(ctx);
        return NULL;
    }
    if (pool_queue_init(&ctx->queue, ctx->pool, (size_t)nbThreads, (size_t)queueSize, NULL) != POOL_OK) {
        pool_destroy(ctx->pool);
        free(ctx);
        return NULL;
    }
    return ctx;
}

void TPool_free(TPool *ctx)
{
    if (ctx == NULL)
        return;
    pool_queue_wait(&ctx->queue);
    pool_queue_destroy(&ctx->queue);
    pool_destroy(ctx->pool);
    free(ctx);
}

void TPool_submitJob(TPool *ctx, void (*job_function)(void *), void *arg)
{
    struct job *job = malloc(sizeof *job);
    if (job == NULL) {
        job_function(arg);
        return;
    }
    job->task.next = NULL;
    job->task.callback = run_job;
    job->function = job_function;
    job->arg = arg;
    int status = pool_queue_submit_timeout(&ctx->queue, &job->task, -1);
    if (status == POOL_OK)
        return;
    free(job);
    if (status == POOL_ERR_INVALID) {
        /* A job of this pool waiting for a place only its own slot could free: lz4's pool
         * would hang here; running it now would start it before older jobs. Neither is lz4's
         * behaviour, so stop loudly (the test fails). */
        fprintf(stderr, "lz4_threadpool: a job would wait for itself (%s)\n", pool_status_str(status));
        abort();
    }
    /* Refused (the pool could not start a thread): run it here rather than lose it. */
    job_function(arg);
}

void TPool_jobsCompleted(TPool *ctx)
{
    pool_queue_wait(&ctx->queue);
}
