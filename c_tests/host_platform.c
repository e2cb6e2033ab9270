/*
 * host_platform.c: a pool on a platform provided by the host (pool_create_with_platform).
 *
 * The "host" here is this program with its own pthread-based callbacks, standing in for an
 * RTOS or a game engine: it starts the pool's threads itself (pthread_create, with the
 * requested stack size), gives each thread a parker made of a mutex + condition variable +
 * token, and joins its threads when the pool asks. Checked:
 *
 *   - every NULL pointer (platform, out, each callback) -> POOL_ERR_INVALID, *out untouched;
 *   - 100k tasks run exactly once, all on threads the host started, never more than
 *     max_threads of them;
 *   - tasks that submit more tasks from inside the pool (a fan-out tree) all run;
 *   - idle workers block in the host's park (parks counted), and wake for new work;
 *   - a delayed submit (pool_submit_after) runs once, not early, after a worker waited for
 *     its deadline in the host's park_timeout; one pending at shutdown runs then;
 *   - shutdown calls the host's join once, after which every thread the host started has
 *     returned from `entry`; every parker the pool made is freed by pool_destroy;
 *   - a host that cannot start any thread: submit fails with POOL_ERR_SPAWN, the task is
 *     still the caller's; a host that starts only one thread: everything still runs;
 *   - a parker_new that returns NULL still gives a working (busy-yielding) pool;
 *   - create / work / destroy in a loop leaks no thread and no parker.
 *
 * Build: cc -std=c11 -O2 -Wall -Wextra -Werror -pedantic -Iinclude c_tests/host_platform.c \
 *          target/release/libpool.a -lpthread -ldl -lm -o build/host_platform
 */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* ---- the host: threads ------------------------------------------------------------------ */

#define HOST_MAX_THREADS 64

struct host {
    pthread_mutex_t lock;
    pthread_t threads[HOST_MAX_THREADS];
    int nthreads;          /* started and not yet joined */
    int spawn_limit;       /* spawn fails once this many threads were started (-1: no limit) */
    atomic_int spawned;    /* successful spawns, ever */
    atomic_int finished;   /* threads that returned from entry */
    atomic_int joins;      /* calls of the join callback */
    atomic_int parkers;    /* parkers alive */
    atomic_int parkers_made;
    atomic_int parks;
    atomic_int park_timeouts;
    atomic_int unparks;
    int null_parkers;      /* parker_new returns NULL */
    size_t last_stack_size;
};

/* What one host thread runs: the pool's entry, marked as a host thread. */
struct host_start {
    struct host *host;
    pool_thread_entry entry;
    void *arg;
};

static _Thread_local int on_host_thread;

static void *host_thread_main(void *p)
{
    struct host_start start = *(struct host_start *)p;
    free(p);
    on_host_thread = 1;
    start.entry(start.arg);
    atomic_fetch_add(&start.host->finished, 1);
    return NULL;
}

static int host_spawn(void *context, pool_thread_entry entry, void *arg, size_t stack_size)
{
    struct host *h = context;
    struct host_start *start;
    pthread_attr_t attr;
    int rc;
    pthread_mutex_lock(&h->lock);
    if (h->nthreads == HOST_MAX_THREADS
        || (h->spawn_limit >= 0 && atomic_load(&h->spawned) >= h->spawn_limit)) {
        pthread_mutex_unlock(&h->lock);
        return -1;
    }
    start = malloc(sizeof *start);
    if (start == NULL) {
        pthread_mutex_unlock(&h->lock);
        return -1;
    }
    start->host = h;
    start->entry = entry;
    start->arg = arg;
    h->last_stack_size = stack_size;
    pthread_attr_init(&attr);
    if (stack_size != 0)
        pthread_attr_setstacksize(&attr, stack_size);
    rc = pthread_create(&h->threads[h->nthreads], &attr, host_thread_main, start);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        free(start);
        pthread_mutex_unlock(&h->lock);
        return -1;
    }
    h->nthreads++;
    atomic_fetch_add(&h->spawned, 1);
    pthread_mutex_unlock(&h->lock);
    return 0;
}

static void host_join(void *context)
{
    struct host *h = context;
    int i;
    pthread_mutex_lock(&h->lock);
    for (i = 0; i < h->nthreads; i++)
        pthread_join(h->threads[i], NULL);
    h->nthreads = 0;
    pthread_mutex_unlock(&h->lock);
    atomic_fetch_add(&h->joins, 1);
}

/* ---- the host: parkers (a binary semaphore) ----------------------------------------------- */

struct host_parker {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int token;
};

static void *host_parker_new(void *context)
{
    struct host *h = context;
    struct host_parker *p;
    if (h->null_parkers)
        return NULL;
    p = malloc(sizeof *p);
    if (p == NULL)
        return NULL;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->token = 0;
    atomic_fetch_add(&h->parkers, 1);
    atomic_fetch_add(&h->parkers_made, 1);
    return p;
}

static void host_parker_free(void *context, void *parker)
{
    struct host *h = context;
    struct host_parker *p = parker;
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p);
    atomic_fetch_sub(&h->parkers, 1);
}

static void host_park(void *context, void *parker)
{
    struct host *h = context;
    struct host_parker *p = parker;
    atomic_fetch_add(&h->parks, 1);
    pthread_mutex_lock(&p->lock);
    while (!p->token)
        pthread_cond_wait(&p->cond, &p->lock);
    p->token = 0;
    pthread_mutex_unlock(&p->lock);
}

static void host_park_timeout(void *context, void *parker, unsigned long long timeout_ns)
{
    struct host *h = context;
    struct host_parker *p = parker;
    struct timespec deadline;
    atomic_fetch_add(&h->park_timeouts, 1);
    clock_gettime(CLOCK_REALTIME, &deadline);
    if (timeout_ns > 3600ULL * 1000000000ULL)
        timeout_ns = 3600ULL * 1000000000ULL;
    deadline.tv_sec += (time_t)(timeout_ns / 1000000000ULL);
    deadline.tv_nsec += (long)(timeout_ns % 1000000000ULL);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->lock);
    while (!p->token) {
        if (pthread_cond_timedwait(&p->cond, &p->lock, &deadline) == ETIMEDOUT)
            break;
    }
    p->token = 0;
    pthread_mutex_unlock(&p->lock);
}

static void host_unpark(void *context, void *parker)
{
    struct host *h = context;
    struct host_parker *p = parker;
    atomic_fetch_add(&h->unparks, 1);
    pthread_mutex_lock(&p->lock);
    p->token = 1;
    pthread_mutex_unlock(&p->lock);
    pthread_cond_signal(&p->cond);
}

static void host_init(struct host *h, int spawn_limit)
{
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->lock, NULL);
    h->spawn_limit = spawn_limit;
}

static struct pool_platform host_platform(struct host *h)
{
    struct pool_platform p;
    pool_platform_init(&p);
    p.context = h;
    p.spawn = host_spawn;
    p.join = host_join;
    p.parker_new = host_parker_new;
    p.parker_free = host_parker_free;
    p.park = host_park;
    p.park_timeout = host_park_timeout;
    p.unpark = host_unpark;
    return p;
}

/* ---- the work ----------------------------------------------------------------------------- */

struct job {
    uint64_t input;
    struct task task; /* not first: recovered with container_of */
    atomic_int runs;
    atomic_int off_host; /* ran on a thread the host did not start */
};

static atomic_long jobs_done;

static void job_run(struct task *t)
{
    struct job *j = container_of(t, struct job, task);
    atomic_fetch_add(&j->runs, 1);
    if (!on_host_thread)
        atomic_fetch_add(&j->off_host, 1);
    atomic_fetch_add(&jobs_done, 1);
}

/* A fan-out tree: each node submits its two children from inside the pool. */
struct node {
    struct task task;
    struct pool *pool;
    int depth;
};

static atomic_long nodes_done;
static atomic_int submit_errors;

static void node_run(struct task *t);

static void node_submit(struct pool *pool, int depth)
{
    struct node *n = malloc(sizeof *n);
    if (n == NULL) {
        atomic_fetch_add(&submit_errors, 1);
        return;
    }
    n->task.callback = node_run;
    n->pool = pool;
    n->depth = depth;
    if (pool_submit_to(pool, &n->task) != POOL_OK) {
        atomic_fetch_add(&submit_errors, 1);
        free(n);
    }
}

static void node_run(struct task *t)
{
    struct node *n = container_of(t, struct node, task);
    struct pool *pool = n->pool;
    int depth = n->depth;
    free(n);
    if (depth > 0) {
        node_submit(pool, depth - 1);
        node_submit(pool, depth - 1);
    }
    atomic_fetch_add(&nodes_done, 1);
}

static long want_;
static int jobs_complete(void *ctx) { (void)ctx; return atomic_load(&jobs_done) >= want_; }
static int nodes_complete(void *ctx) { (void)ctx; return atomic_load(&nodes_done) >= want_; }

/* Submits n jobs, waits for them, checks exactly-once and on-host-thread. */
static void run_jobs(struct pool *pool, size_t n, const char *what)
{
    struct job *jobs = calloc(n, sizeof *jobs);
    size_t i;
    int bad_runs = 0, off_host = 0, rejected = 0;
    if (!CHECK(jobs != NULL, "calloc jobs"))
        return;
    atomic_store(&jobs_done, 0);
    for (i = 0; i < n; i++) {
        jobs[i].input = i;
        jobs[i].task.callback = job_run;
        if (pool_submit_to(pool, &jobs[i].task) != POOL_OK)
            rejected++;
    }
    CHECK_EQ(rejected, 0, what);
    want_ = (long)n - rejected;
    wait_until(jobs_complete, NULL, NULL, what);
    for (i = 0; i < n; i++) {
        bad_runs += atomic_load(&jobs[i].runs) != 1;
        off_host += atomic_load(&jobs[i].off_host);
    }
    CHECK_EQ(bad_runs, 0, "every job ran exactly once");
    CHECK_EQ(off_host, 0, "every job ran on a host-started thread");
    free(jobs);
}

/* ---- the tests ---------------------------------------------------------------------------- */

static void test_invalid(void)
{
    struct host h;
    struct pool_platform p, bad;
    struct pool *out = (struct pool *)(uintptr_t)0x1234;
    struct pool_config cfg;
    host_init(&h, -1);
    p = host_platform(&h);

    CHECK_STATUS(pool_create_with_platform(NULL, NULL, &out), POOL_ERR_INVALID, "NULL platform");
    CHECK_STATUS(pool_create_with_platform(NULL, &p, NULL), POOL_ERR_INVALID, "NULL out");
#define NULL_FIELD(field)                                                                       \
    do {                                                                                         \
        bad = p;                                                                                 \
        bad.field = NULL;                                                                        \
        CHECK_STATUS(pool_create_with_platform(NULL, &bad, &out), POOL_ERR_INVALID,              \
                     "NULL " #field);                                                            \
    } while (0)
    NULL_FIELD(spawn);
    NULL_FIELD(join);
    NULL_FIELD(parker_new);
    NULL_FIELD(parker_free);
    NULL_FIELD(park);
    NULL_FIELD(park_timeout);
    NULL_FIELD(unpark);
#undef NULL_FIELD
    pool_config_init(&cfg);
    cfg.max_threads = POOL_MAX_THREADS + 1;
    CHECK_STATUS(pool_create_with_platform(&cfg, &p, &out), POOL_ERR_INVALID, "max_threads too big");
    cfg.max_threads = 2;
    cfg.stack_size = 100;
    CHECK_STATUS(pool_create_with_platform(&cfg, &p, &out), POOL_ERR_INVALID, "stack_size too small");
    /* The host names and hooks its own threads: the config's name and hooks are refused. */
    pool_config_init(&cfg);
    cfg.thread_name_prefix = "w";
    CHECK_STATUS(pool_create_with_platform(&cfg, &p, &out), POOL_ERR_INVALID, "thread_name_prefix with a platform");
    pool_config_init(&cfg);
    cfg.on_thread_start = (void (*)(void *))free;
    CHECK_STATUS(pool_create_with_platform(&cfg, &p, &out), POOL_ERR_INVALID, "on_thread_start with a platform");
    pool_config_init(&cfg);
    cfg.reserved[0] = 1;
    CHECK_STATUS(pool_create_with_platform(&cfg, &p, &out), POOL_ERR_INVALID, "config reserved word set");
    pool_config_init(&cfg);
    bad = p;
    bad.reserved[POOL_RESERVED_WORDS - 1] = 1;
    CHECK_STATUS(pool_create_with_platform(&cfg, &bad, &out), POOL_ERR_INVALID, "platform reserved word set");
    CHECK(out == (struct pool *)(uintptr_t)0x1234, "*out untouched on error");
    CHECK_EQ(atomic_load(&h.spawned), 0, "no thread started by a failed create");

}

static void test_work(void)
{
    struct host h;
    struct pool_platform p;
    struct pool_config cfg;
    struct pool *pool = NULL;
    int parks_before;
    host_init(&h, -1);
    p = host_platform(&h);
    pool_config_init(&cfg);
    cfg.max_threads = 4;
    cfg.stack_size = 256 * 1024;
    if (!CHECK_STATUS(pool_create_with_platform(&cfg, &p, &pool), POOL_OK, "create on host platform"))
        return;
    CHECK_EQ(atomic_load(&h.spawned), 0, "no thread before the first submit");

    run_jobs(pool, scaled(100000, 1000), "100k jobs on host threads");
    CHECK(atomic_load(&h.spawned) >= 1 && atomic_load(&h.spawned) <= 4, "1..max_threads host threads");
    CHECK_EQ(h.last_stack_size, 256 * 1024, "stack_size passed to the host's spawn");

    atomic_store(&nodes_done, 0);
    want_ = (1L << 15) - 1; /* depth 14: 2^15 - 1 nodes */
    node_submit(pool, 14);
    wait_until(nodes_complete, NULL, NULL, "fan-out tree submitted from inside the pool");
    CHECK_EQ(atomic_load(&submit_errors), 0, "submits from pool threads accepted");

    /* Idle: the workers go to sleep in the host's park, then wake for new work. */
    sleep_us(100000);
    parks_before = atomic_load(&h.parks) + atomic_load(&h.park_timeouts);
    CHECK(parks_before > 0, "idle workers parked through the host's callbacks");
    run_jobs(pool, 1000, "work after idling");
    CHECK(atomic_load(&h.unparks) > 0, "sleeping workers woken through the host's unpark");

    CHECK_STATUS(pool_shutdown(pool), POOL_OK, "shutdown");
    CHECK_EQ(atomic_load(&h.joins), 1, "host join called once by shutdown");
    CHECK_EQ(atomic_load(&h.finished), atomic_load(&h.spawned), "every host thread returned before join");
    CHECK_EQ(h.nthreads, 0, "every host thread joined");
    pool_destroy(pool);
    CHECK_EQ(atomic_load(&h.joins), 1, "destroy after shutdown does not join again");
    CHECK_EQ(atomic_load(&h.parkers), 0, "every parker freed by pool_destroy");
    printf("     (host threads %d, parkers %d, parks %d, timed parks %d, unparks %d)\n",
           atomic_load(&h.spawned), atomic_load(&h.parkers_made), atomic_load(&h.parks),
           atomic_load(&h.park_timeouts), atomic_load(&h.unparks));
}

/* A delayed submit on the host's platform: the worker waits for the deadline in the host's
 * park_timeout; the task runs once, not early (CLOCK_MONOTONIC: the pool's clock too); one
 * pending an hour away runs at shutdown, which does not wait for it. */
static int delayed_ran(void *ctx)
{
    return atomic_load(&((struct job *)ctx)->runs) > 0;
}

static void test_delayed(void)
{
    struct host h;
    struct pool_platform p;
    struct pool *pool = NULL;
    struct job soon, far;
    struct timespec ts;
    double t0, ran_at;
    memset(&soon, 0, sizeof soon);
    memset(&far, 0, sizeof far);
    soon.task.callback = job_run;
    far.task.callback = job_run;
    host_init(&h, -1);
    p = host_platform(&h);
    if (!CHECK_STATUS(pool_create_with_platform(NULL, &p, &pool), POOL_OK, "create (delayed submit)"))
        return;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t0 = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    /* 300 ms: long enough that the worker is parked before the deadline even under valgrind. */
    CHECK_STATUS(pool_submit_after(pool, &soon.task, 300000000ULL), POOL_OK, "delayed submit on the host platform");
    wait_until(delayed_ran, &soon, NULL, "delayed task on the host platform");
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ran_at = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    CHECK(ran_at - t0 >= 0.300, "the delayed task did not run early");
    CHECK_EQ(atomic_load(&soon.off_host), 0, "ran on a host thread");
    CHECK(atomic_load(&h.park_timeouts) > 0, "a worker waited for the deadline in the host's park_timeout");
    CHECK_STATUS(pool_submit_after(pool, &far.task, 3600ULL * 1000000000ULL), POOL_OK, "an hour away");
    CHECK_STATUS(pool_shutdown(pool), POOL_OK, "shutdown with a delayed task pending");
    CHECK_EQ(atomic_load(&soon.runs), 1, "the delayed task ran once");
    CHECK_EQ(atomic_load(&far.runs), 1, "the pending delayed task ran at shutdown");
    pool_destroy(pool);
    CHECK_EQ(atomic_load(&h.parkers), 0, "every parker freed");
}

static void test_spawn_failure(void)
{
    struct host h;
    struct pool_platform p;
    struct pool *pool = NULL;
    struct job j;
    memset(&j, 0, sizeof j);
    j.task.callback = job_run;

    /* No thread at all: the work is refused and stays the caller's. */
    host_init(&h, 0);
    p = host_platform(&h);
    if (!CHECK_STATUS(pool_create_with_platform(NULL, &p, &pool), POOL_OK, "create (host has no threads)"))
        return;
    CHECK_STATUS(pool_submit_to(pool, &j.task), POOL_ERR_SPAWN, "submit when the host cannot start a thread");
    CHECK_EQ(atomic_load(&j.runs), 0, "refused task did not run");
    pool_destroy(pool);
    CHECK_EQ(atomic_load(&h.parkers), 0, "parkers freed (no threads)");

    /* One thread only, max_threads 8: everything runs on that one. */
    {
        struct pool_config cfg;
        host_init(&h, 1);
        p = host_platform(&h);
        pool_config_init(&cfg);
        cfg.max_threads = 8;
        pool = NULL;
        if (!CHECK_STATUS(pool_create_with_platform(&cfg, &p, &pool), POOL_OK, "create (host has 1 thread)"))
            return;
        run_jobs(pool, scaled(20000, 100), "jobs on a host that starts only one thread");
        CHECK_EQ(atomic_load(&h.spawned), 1, "exactly one host thread");
        pool_destroy(pool);
        CHECK_EQ(h.nthreads, 0, "joined (one thread)");
        CHECK_EQ(atomic_load(&h.parkers), 0, "parkers freed (one thread)");
    }
}

static void test_null_parkers(void)
{
    struct host h;
    struct pool_platform p;
    struct pool_config cfg;
    struct pool *pool = NULL;
    host_init(&h, -1);
    h.null_parkers = 1;
    p = host_platform(&h);
    pool_config_init(&cfg);
    cfg.max_threads = 2;
    if (!CHECK_STATUS(pool_create_with_platform(&cfg, &p, &pool), POOL_OK, "create (parker_new gives NULL)"))
        return;
    run_jobs(pool, scaled(10000, 100), "jobs with busy-yielding parkers");
    pool_destroy(pool);
    CHECK_EQ(atomic_load(&h.parks), 0, "a NULL parker is never passed to park");
    CHECK_EQ(h.nthreads, 0, "joined (NULL parkers)");
}

static void test_loop(void)
{
    int i, leaks = 0, unjoined = 0;
    int threads_before = count_live_threads();
    for (i = 0; i < 50; i++) {
        struct host h;
        struct pool_platform p;
        struct pool_config cfg;
        struct pool *pool = NULL;
        host_init(&h, -1);
        p = host_platform(&h);
        pool_config_init(&cfg);
        cfg.max_threads = 3;
        if (pool_create_with_platform(&cfg, &p, &pool) != POOL_OK) {
            leaks++;
            continue;
        }
        if (i % 2 == 0)
            run_jobs(pool, 200, "loop jobs");
        pool_destroy(pool);
        leaks += atomic_load(&h.parkers) != 0;
        unjoined += h.nthreads != 0 || atomic_load(&h.finished) != atomic_load(&h.spawned);
        pthread_mutex_destroy(&h.lock);
    }
    CHECK_EQ(leaks, 0, "create/destroy x50: no parker leaked");
    CHECK_EQ(unjoined, 0, "create/destroy x50: every host thread joined");
    CHECK_EQ(count_live_threads(), threads_before, "create/destroy x50: no thread left behind");
}

int main(void)
{
    test_watchdog_start(120);
    test_invalid();
    test_work();
    test_delayed();
    test_spawn_failure();
    test_null_parkers();
    test_loop();
    return test_finish();
}
