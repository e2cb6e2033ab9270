/*
 * zstd_pool.c: zstd's thread pool (`lib/common/pool.h`: POOL_create, POOL_add, POOL_tryAdd,
 * POOL_joinJobs, POOL_resize, POOL_free) on libpool, in place of zstd's own
 * `lib/common/pool.c` (a mutex, two condition variables and a ring of jobs).
 *
 * This is how a C program replaces its own FIFO pool with a queue (README, "Queues"): one
 * `struct pool` per POOL_ctx with `numThreads` threads, and one `struct pool_queue` on it whose
 * width is `numThreads` and whose bound is zstd's `queueSize` (0: a handoff queue).
 * `scripts/external-zstd.sh` builds zstd's own pool test (`tests/poolTests.c`) and the zstd
 * program with it, and checks them against the same sources built with zstd's pool.
 *
 * What zstd's pool promises and where the queue gives it:
 *   - POOL_add blocks while the queue is full: pool_queue_submit_timeout with no limit,
 *     woken by a freed place;
 *   - POOL_tryAdd returns 0 when full: pool_queue_submit's POOL_ERR_FULL (the task untouched);
 *   - at most numThreads jobs run at once, in the order added: the queue's width and FIFO start;
 *   - POOL_joinJobs: pool_queue_wait;
 *   - POOL_resize: the queue's width and the pool's live thread count (pool_set_max_threads),
 *     down to 1 and up to the thread count given at creation; above it (a pool's limit is
 *     fixed when it is made), a new pool and queue with the new count, once the old queue
 *     has finished its jobs (zstdmt resizes between frames, with no job queued);
 *   - POOL_free finishes every queued job first: wait, then destroy;
 *   - queueSize 0 (zstdmt's own pools): a job is accepted only if a thread is free to start
 *     it, so none waits behind busy threads: a handoff queue (POOL_QUEUE_HANDOFF), which
 *     POOL_tryAdd finds full, and POOL_add waits on, while every thread has a job.
 *
 * Differences (zstd's callers handle each):
 *   - with queueSize 0 and several threads free, zstd's pool takes one job at a time (its
 *     one-slot ring is full until a thread takes the job); the handoff queue accepts one per
 *     free thread at once;
 *   - POOL_resize above the creation count waits for the jobs already queued;
 *   - customMem is not used (the pool allocates with malloc).
 */
#include <stdint.h>
#include <stdlib.h>

#include "pool.h"      /* zstd's lib/common/pool.h (the API implemented here) */
#include "../../include/pool.h"

struct POOL_ctx_s {
    struct pool *pool;
    struct pool_queue *queue; /* its own allocation: a new one is made before the old goes */
    size_t limit;             /* the pool's thread limit (its creation count) */
    size_t bound;
};

/* A pool of `threads` threads and a queue on it as wide, holding at most `bound` waiting jobs. */
static int make_pool(size_t threads, size_t bound, struct pool **pool, struct pool_queue **queue)
{
    struct pool_config config;
    pool_config_init(&config);
    config.max_threads = threads;
    config.thread_name_prefix = "zstd";
    *queue = malloc(sizeof **queue);
    if (*queue == NULL)
        return -1;
    if (pool_create(&config, pool) != POOL_OK) {
        free(*queue);
        return -1;
    }
    if (pool_queue_init(*queue, *pool, threads, bound, NULL) != POOL_OK) {
        pool_destroy(*pool);
        free(*queue);
        return -1;
    }
    return 0;
}

/* Finishes the queue's jobs, then frees the queue and its pool. */
static void free_pool(struct pool *pool, struct pool_queue *queue)
{
    pool_queue_wait(queue);
    pool_queue_destroy(queue);
    free(queue);
    pool_destroy(pool);
}

/* One job: a task the queue runs, zstd's function and its argument; freed as it starts. */
struct job {
    struct task task;
    POOL_function function;
    void *opaque;
};

static void run_job(struct task *task)
{
    struct job *job = POOL_CONTAINER_OF(task, struct job, task);
    POOL_function function = job->function;
    void *opaque = job->opaque;
    free(job);
    function(opaque);
}

POOL_ctx *POOL_create_advanced(size_t numThreads, size_t queueSize, ZSTD_customMem customMem)
{
    (void)customMem;
    if (numThreads == 0)
        return NULL;
    POOL_ctx *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL)
        return NULL;
    ctx->limit = numThreads;
    ctx->bound = queueSize ? queueSize : POOL_QUEUE_HANDOFF;
    if (make_pool(numThreads, ctx->bound, &ctx->pool, &ctx->queue) != 0) {
        free(ctx);
        return NULL;
    }
    return ctx;
}

POOL_ctx *POOL_create(size_t numThreads, size_t queueSize)
{
    return POOL_create_advanced(numThreads, queueSize, ZSTD_defaultCMem);
}

void POOL_free(POOL_ctx *ctx)
{
    if (ctx == NULL)
        return;
    free_pool(ctx->pool, ctx->queue);
    free(ctx);
}

void POOL_joinJobs(POOL_ctx *ctx)
{
    pool_queue_wait(ctx->queue);
}

int POOL_resize(POOL_ctx *ctx, size_t numThreads)
{
    if (ctx == NULL || numThreads == 0)
        return 1;
    if (numThreads > ctx->limit) {
        struct pool *pool;
        struct pool_queue *queue;
        if (make_pool(numThreads, ctx->bound, &pool, &queue) != 0)
            return 1; /* the old pool stays, as zstd's own on a failed allocation */
        free_pool(ctx->pool, ctx->queue);
        ctx->pool = pool;
        ctx->queue = queue;
        ctx->limit = numThreads;
        return 0;
    }
    if (pool_set_max_threads(ctx->pool, numThreads) != POOL_OK)
        return 1;
    return pool_queue_set_width(ctx->queue, numThreads) != POOL_OK;
}

size_t POOL_sizeof(const POOL_ctx *ctx)
{
    /* The pool's own memory is not visible through pool.h; count the context and the queue. */
    return ctx == NULL ? 0 : sizeof *ctx + sizeof *ctx->queue;
}

/* Queues a job; `wait`: for a place while the queue is full. Returns 1 when queued. */
static int add(POOL_ctx *ctx, POOL_function function, void *opaque, int wait)
{
    struct job *job = malloc(sizeof *job);
    if (job == NULL) { /* zstd's POOL_add cannot fail: run it here, as zstd does without threads */
        function(opaque);
        return 1;
    }
    job->task.next = NULL;
    job->task.callback = run_job;
    job->function = function;
    job->opaque = opaque;
    int status = wait ? pool_queue_submit_timeout(ctx->queue, &job->task, -1)
                      : pool_queue_submit(ctx->queue, &job->task);
    if (status == POOL_OK)
        return 1;
    free(job);
    if (status == POOL_ERR_FULL && !wait)
        return 0;
    /* The pool refused the job (no thread could start): run it here rather than lose it. */
    function(opaque);
    return 1;
}

void POOL_add(POOL_ctx *ctx, POOL_function function, void *opaque)
{
    add(ctx, function, opaque, 1);
}

int POOL_tryAdd(POOL_ctx *ctx, POOL_function function, void *opaque)
{
    return add(ctx, function, opaque, 0);
}
