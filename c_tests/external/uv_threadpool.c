/*
 * uv_threadpool.c: libuv's thread pool on libpool, in place of the worker threads, the
 * mutex-and-condvar queues and the cancel of libuv's `src/threadpool.c`.
 *
 * `scripts/external-libuv.sh` builds libuv 1.44.2 with a `src/threadpool.c` made of this
 * file between libuv's own parts that stay (`uv__cancelled` before it; `uv__work_done`,
 * `uv_queue_work` and `uv_cancel` after it), then runs libuv's own tests of its thread pool,
 * of the file system and DNS requests that run on it, and of the pool across `fork()`.
 * Everything libuv's headers define (QUEUE, container_of, uv_once, the loop's `wq` fields)
 * is in scope where this file is included.
 *
 * What libuv's pool promises and where the pool and its queue give it:
 *   - UV_THREADPOOL_SIZE threads (default 4, 1 to 1024), all started at the first request:
 *     a pool whose `min_threads` is that count;
 *   - requests start in the order submitted, on any thread, and one that waits behind busy
 *     threads stays queued until a thread frees up: one queue as wide as the pool (a task
 *     binds to a thread only when it starts);
 *   - slow I/O (DNS) runs on at most half the threads, (threads + 1) / 2: a second queue of
 *     that width whose target is the first (pool_queue_init_target), so its requests also
 *     start in submission order among all the others and wait, cancellable, behind busy
 *     threads (libuv's `threadpool_cancel_getaddrinfo` checks both);
 *   - uv_cancel succeeds exactly while the request still waits (then its done callback gets
 *     UV_ECANCELED), else UV_EBUSY: pool_queue_cancel, which reads only its own list;
 *   - a request costs no allocation: its `struct uv__work` ends with two pointers that
 *     libuv's pool used as its queue link; here they hold the `struct task` (its `next` and
 *     `callback`), given back to libuv's loop queue once the task has started;
 *   - after fork() the child starts a fresh pool at its next request (libuv's own
 *     pthread_atfork rule): the inherited one refuses work there (POOL_ERR_FORKED) and is
 *     left behind, as libuv leaves its old mutex and threads;
 *   - at library shutdown (uv_library_shutdown) queued work still runs, then the threads end:
 *     pool_queue_destroy without a cancel callback (the slow queue first: a target outlives
 *     the queues on it), then pool_destroy.
 */
#include "../../include/pool.h"

_Static_assert(sizeof(((struct uv__work *)0)->wq) == sizeof(struct task), "a task fits the request's queue link");

static uv_once_t pool_once = UV_ONCE_INIT;
static struct pool *uv_pool;
static struct pool_queue work_queue; /* every request, FIFO: as wide as the pool */
static struct pool_queue slow_queue; /* slow I/O, at most half the threads: its target is work_queue */

static struct task *task_of(struct uv__work *w)
{
    return (struct task *)(void *)w->wq;
}

/* Runs on a pool thread: the request's work, then hands it to its loop (libuv's `worker`). */
static void run_work(struct task *task)
{
    struct uv__work *w = container_of(task, struct uv__work, wq);
    w->work(w);
    uv_mutex_lock(&w->loop->wq_mutex);
    w->work = NULL; /* done executing (uv_cancel's reading in libuv's pool) */
    QUEUE_INSERT_TAIL(&w->loop->wq, &w->wq);
    uv_async_send(&w->loop->wq_async);
    uv_mutex_unlock(&w->loop->wq_mutex);
}

static void reset_once(void)
{
    uv_once_t child_once = UV_ONCE_INIT;
    memcpy(&pool_once, &child_once, sizeof(child_once));
    uv_pool = NULL;
}

static void init_once(void)
{
    if (pthread_atfork(NULL, NULL, &reset_once))
        abort();
    unsigned threads = 4;
    const char *val = getenv("UV_THREADPOOL_SIZE");
    if (val != NULL)
        threads = (unsigned)atoi(val);
    if (threads == 0)
        threads = 1;
    if (threads > 1024)
        threads = 1024;
    struct pool_config config;
    pool_config_init(&config);
    config.max_threads = threads;
    config.min_threads = threads;
    config.thread_name_prefix = "libuv-worker";
    struct pool *pool;
    if (pool_create(&config, &pool) != POOL_OK)
        abort();
    if (pool_queue_init(&work_queue, pool, threads, 0, NULL) != POOL_OK)
        abort();
    if (pool_queue_init_target(&slow_queue, &work_queue, (threads + 1) / 2, 0, NULL) != POOL_OK)
        abort();
    uv_pool = pool;
}

void uv__work_submit(uv_loop_t *loop, struct uv__work *w, enum uv__work_kind kind,
                     void (*work)(struct uv__work *w), void (*done)(struct uv__work *w, int status))
{
    uv_once(&pool_once, init_once);
    w->loop = loop;
    w->work = work;
    w->done = done;
    struct task *task = task_of(w);
    task->next = NULL;
    task->callback = run_work;
    struct pool_queue *queue = kind == UV__WORK_SLOW_IO ? &slow_queue : &work_queue;
    /* libuv's submit cannot fail; the queues are unbounded, so only a pool with no thread
     * (POOL_ERR_SPAWN) refuses, where libuv's pool would have aborted at its start. */
    if (pool_queue_submit(queue, task) != POOL_OK)
        abort();
}

static int uv__work_cancel(uv_loop_t *loop, uv_req_t *req, struct uv__work *w)
{
    (void)req;
    if (uv_pool == NULL)
        return UV_EBUSY;
    struct task *task = task_of(w);
    /* The request waits in at most one of the two lists; each cancel reads only its own. */
    if (pool_queue_cancel(&slow_queue, task) != POOL_OK && pool_queue_cancel(&work_queue, task) != POOL_OK)
        return UV_EBUSY;
    w->work = uv__cancelled;
    uv_mutex_lock(&loop->wq_mutex);
    QUEUE_INSERT_TAIL(&loop->wq, &w->wq);
    uv_async_send(&loop->wq_async);
    uv_mutex_unlock(&loop->wq_mutex);
    return 0;
}

void uv__threadpool_cleanup(void)
{
    if (uv_pool == NULL)
        return;
    pool_queue_destroy(&slow_queue);
    pool_queue_destroy(&work_queue);
    pool_destroy(uv_pool);
    uv_pool = NULL;
}
