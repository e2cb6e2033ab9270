/*
 * samba_pthreadpool.c: Samba's thread pool (`lib/pthreadpool/pthreadpool.h`: pthreadpool_init,
 * _add_job, _cancel_job, _stop, _destroy, _max_threads, _queued_jobs) on libpool, in place of
 * Samba's own `lib/pthreadpool/pthreadpool.c` (a mutex, a condition variable, a ring of jobs,
 * threads started on demand up to `max_threads` that exit after one idle second).
 *
 * One `struct pool_blocking` per pthreadpool, capped at `max_threads`, with a keep-alive of one
 * second: Samba's jobs block (getaddrinfo, file I/O), which is what a blocking pool is for.
 * `scripts/external-samba.sh` builds Samba's own tests of the API (`lib/pthreadpool/tests.c`,
 * through its pipe and tevent wrappers) with this file and with Samba's pool, and runs both.
 *
 * What Samba's pool promises and where it comes from here:
 *   - a job runs on a thread of the pool, then `signal_fn(job_id, fn, private_data, ...)` is
 *     called on that thread: the blocking task's callback does both, in that order;
 *   - `max_threads` jobs at most run at once: the blocking pool's thread cap. 0 means "no
 *     thread": `pthreadpool_add_job` runs the job and its signal on the caller's thread, as
 *     Samba's does (no blocking pool is made);
 *   - `pthreadpool_add_job` fails with the error of the thread start when the pool has no
 *     thread and none could be started, and leaves nothing queued: POOL_ERR_SPAWN (EAGAIN);
 *   - `pthreadpool_cancel_job` takes back the matching jobs that have not started; they are
 *     never run nor signalled. `pthreadpool_stop` takes back every job that has not started and
 *     refuses new ones (EINVAL), running jobs finish and are signalled. The blocking pool has
 *     no cancel of one task, so this file keeps the list of jobs not yet started: a job taken
 *     back is unlinked and marked, and its task frees it without running it;
 *   - `pthreadpool_destroy` takes back the jobs not started and frees the pool; called from
 *     one of the pool's own jobs (its signal function, say), it returns at once and a task of
 *     the process-wide blocking pool frees it when the running jobs are done;
 *   - after fork() a child's pools are stopped (Samba's atfork handler): the blocking pool
 *     refuses work there (POOL_ERR_FORKED), and this file answers as a stopped pool for
 *     any pool made by another process. Destroying such a pool frees it without waiting.
 *
 * Differences: `pthreadpool_destroy` from outside the pool waits for the jobs that run (Samba's
 * returns at once and its last thread frees the pool; Samba's callers destroy only a pool with
 * no job left, or one whose jobs need nothing of the destroying thread). `signal_fn` returning
 * non-zero ends the thread in Samba's pool; here the thread stays (the pool's threads are the
 * pool's). A destroy from a job that finds no thread to hand the wait to (out of memory) leaves
 * the stopped pool allocated. None of these is seen by Samba's tests.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "pthreadpool.h" /* Samba's lib/pthreadpool/pthreadpool.h (the API implemented here) */
#include "../../include/pool.h"

typedef int (*signal_fn_t)(int, void (*)(void *), void *, void *);

struct job {
    struct pool_blocking_task task;
    struct pthreadpool *pool;
    int id;
    void (*fn)(void *);
    void *private_data;
    bool taken_back; /* cancelled or stopped before it started: never runs */
    struct job *prev, *next; /* in the pool's list of jobs not yet started */
};

struct pthreadpool {
    pthread_mutex_t mutex;
    struct pool_blocking *blocking; /* NULL when max_threads is 0 */
    signal_fn_t signal_fn;
    void *signal_private;
    unsigned max_threads;
    pid_t pid; /* the process that made it: any other sees it stopped */
    bool stopped;
    size_t queued; /* jobs in the list: accepted, not started, not taken back */
    struct job *head, *tail;
};

/* The pool whose job runs on this thread, if any. */
static _Thread_local struct pthreadpool *current_pool;

static bool inherited(const struct pthreadpool *pool)
{
    return pool->pid != getpid();
}

static void unlink_job(struct pthreadpool *pool, struct job *job)
{
    if (job->prev) job->prev->next = job->next; else pool->head = job->next;
    if (job->next) job->next->prev = job->prev; else pool->tail = job->prev;
    job->prev = job->next = NULL;
    pool->queued -= 1;
}

/* Under the lock: a job not started is taken back (it will not run). */
static void take_back(struct pthreadpool *pool, struct job *job)
{
    unlink_job(pool, job);
    job->taken_back = true;
}

static void run_job(struct task *task)
{
    struct job *job = POOL_CONTAINER_OF(task, struct job, task.task);
    struct pthreadpool *pool = job->pool;
    pthread_mutex_lock(&pool->mutex);
    bool run = !job->taken_back;
    if (run) {
        unlink_job(pool, job);
    }
    pthread_mutex_unlock(&pool->mutex);
    if (run) {
        current_pool = pool;
        job->fn(job->private_data);
        pool->signal_fn(job->id, job->fn, job->private_data, pool->signal_private);
        current_pool = NULL; /* before the free: `pool` may be gone once the signal returned */
    }
    free(job);
}

/* The blocking pool's shutdown hands back a job that had not started: taken back already,
 * as destroy stops the pool (taking back every job not started) before it shuts it down. */
static void drop_job(struct task *task)
{
    struct job *job = POOL_CONTAINER_OF(task, struct job, task.task);
    assert(job->taken_back);
    free(job);
}

int pthreadpool_init(unsigned max_threads, struct pthreadpool **presult, signal_fn_t signal_fn,
                     void *signal_fn_private_data)
{
    struct pthreadpool *pool = calloc(1, sizeof *pool);
    if (pool == NULL) {
        return ENOMEM;
    }
    int ret = pthread_mutex_init(&pool->mutex, NULL);
    if (ret != 0) {
        free(pool);
        return ret;
    }
    if (max_threads != 0) {
        struct pool_blocking_config config;
        pool_blocking_config_init(&config);
        config.max_threads = max_threads < POOL_BLOCKING_MAX_THREADS ? max_threads : POOL_BLOCKING_MAX_THREADS;
        config.keep_alive_ms = 1000; /* Samba's threads leave after one idle second */
        int status = pool_blocking_create(&config, &pool->blocking);
        if (status != POOL_OK) {
            pthread_mutex_destroy(&pool->mutex);
            free(pool);
            return status == POOL_ERR_NOMEM ? ENOMEM : EINVAL;
        }
    }
    pool->signal_fn = signal_fn;
    pool->signal_private = signal_fn_private_data;
    pool->max_threads = max_threads;
    pool->pid = getpid();
    *presult = pool;
    return 0;
}

size_t pthreadpool_max_threads(struct pthreadpool *pool)
{
    return pool->stopped || inherited(pool) ? 0 : pool->max_threads;
}

size_t pthreadpool_queued_jobs(struct pthreadpool *pool)
{
    if (inherited(pool)) {
        return 0;
    }
    pthread_mutex_lock(&pool->mutex);
    size_t n = pool->stopped ? 0 : pool->queued;
    pthread_mutex_unlock(&pool->mutex);
    return n;
}

int pthreadpool_add_job(struct pthreadpool *pool, int job_id, void (*fn)(void *private_data), void *private_data)
{
    if (inherited(pool)) {
        return EINVAL;
    }
    pthread_mutex_lock(&pool->mutex);
    bool stopped = pool->stopped;
    pthread_mutex_unlock(&pool->mutex);
    if (stopped) {
        return EINVAL;
    }
    if (pool->max_threads == 0) {
        fn(private_data);
        return pool->signal_fn(job_id, fn, private_data, pool->signal_private);
    }
    struct job *job = calloc(1, sizeof *job);
    if (job == NULL) {
        return ENOMEM;
    }
    pool_blocking_task_init(&job->task, run_job, drop_job, 0);
    job->pool = pool;
    job->id = job_id;
    job->fn = fn;
    job->private_data = private_data;
    /* Listed before the submit: its task may start at once and look for itself. */
    pthread_mutex_lock(&pool->mutex);
    if (pool->stopped) {
        pthread_mutex_unlock(&pool->mutex);
        free(job);
        return EINVAL;
    }
    job->prev = pool->tail;
    if (pool->tail) pool->tail->next = job; else pool->head = job;
    pool->tail = job;
    pool->queued += 1;
    pthread_mutex_unlock(&pool->mutex);
    int status = pool_blocking_submit_to(pool->blocking, &job->task);
    if (status == POOL_OK) {
        return 0;
    }
    /* Not queued: still ours. */
    pthread_mutex_lock(&pool->mutex);
    if (!job->taken_back) {
        unlink_job(pool, job);
    }
    pthread_mutex_unlock(&pool->mutex);
    free(job);
    switch (status) {
    case POOL_ERR_SPAWN: return EAGAIN;
    case POOL_ERR_NOMEM: return ENOMEM;
    default: return EINVAL; /* shut down, inherited, refused */
    }
}

size_t pthreadpool_cancel_job(struct pthreadpool *pool, int job_id, void (*fn)(void *private_data), void *private_data)
{
    if (inherited(pool)) {
        return 0;
    }
    size_t n = 0;
    pthread_mutex_lock(&pool->mutex);
    for (struct job *job = pool->head, *next; job != NULL; job = next) {
        next = job->next;
        if (job->id == job_id && job->fn == fn && job->private_data == private_data) {
            take_back(pool, job);
            n += 1;
        }
    }
    pthread_mutex_unlock(&pool->mutex);
    return n;
}

int pthreadpool_stop(struct pthreadpool *pool)
{
    if (inherited(pool)) {
        return 0;
    }
    pthread_mutex_lock(&pool->mutex);
    pool->stopped = true;
    while (pool->head != NULL) {
        take_back(pool, pool->head);
    }
    pthread_mutex_unlock(&pool->mutex);
    return 0;
}

static void free_pool(struct pthreadpool *pool)
{
    pool_blocking_destroy(pool->blocking); /* waits for running jobs; NULL: nothing */
    pthread_mutex_destroy(&pool->mutex);
    free(pool);
}

/* A task of the process-wide blocking pool: frees a pool whose jobs still ran at destroy. */
struct destroyer {
    struct pool_blocking_task task;
    struct pthreadpool *pool;
};

static void run_destroyer(struct task *task)
{
    struct destroyer *d = POOL_CONTAINER_OF(task, struct destroyer, task.task);
    free_pool(d->pool);
    free(d);
}

int pthreadpool_destroy(struct pthreadpool *pool)
{
    if (inherited(pool)) {
        /* Its threads and jobs are the parent's: the blocking pool returns at once. */
        pool_blocking_destroy(pool->blocking);
        free(pool);
        return 0;
    }
    pthreadpool_stop(pool);
    /* From outside the pool: the blocking pool's shutdown waits for the running jobs. From
     * one of its jobs, that wait would be the job's own: another thread waits instead. */
    if (current_pool != pool) {
        free_pool(pool);
        return 0;
    }
    struct destroyer *d = calloc(1, sizeof *d);
    if (d != NULL) {
        pool_blocking_task_init(&d->task, run_destroyer, NULL, 0);
        d->pool = pool;
        if (pool_blocking_submit(&d->task) == POOL_OK) {
            return 0;
        }
        free(d);
    }
    /* No thread can free it after its jobs (out of memory, or no thread starts): left
     * allocated, stopped. Freeing it here would free it under its own running jobs. */
    return 0;
}
