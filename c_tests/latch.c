/*
 * latch.c: fork-join from C with `struct pool_latch` (no atomics in the host code).
 *
 *   1. bad input: NULL latch / pool give POOL_ERR_INVALID; add after a completed wait is
 *      refused until the latch is initialised again; an add past the count's range is
 *      POOL_ERR_RANGE and leaves the latch as it was; the struct has its fixed size;
 *   2. 8 host pthreads share one pool; each computes fib(FIB_N) by fork-join: every node
 *      with n >= 2 submits its two children (structs on its own stack) and waits on a latch
 *      on its stack (on a pool thread the wait runs other tasks); each host waits for its
 *      root from outside the pool (parks). Exact results;
 *   3. the same 8 hosts each sum 1..N in 64 chunk tasks with one latch: exact sums;
 *   4. the global pool: pool_fork_global + pool_latch_wait_global, fork-join fib(14).
 *
 * Checks are recorded by the host threads and reported by the main thread.
 * A 60 s watchdog turns a hang (a lost wake-up) into exit status 2.
 */
#include "common.h"

#include <pthread.h>
#include <stdint.h>

#define HOSTS 8
#define CHUNKS 64

_Static_assert(sizeof(struct pool_latch) == 8 * sizeof(uint64_t), "fixed-size latch");

static unsigned fib_n(void)
{
    return test_scale() < 0.1 ? 12 : 18;
}

static uint64_t fib_seq(unsigned n)
{
    return n < 2 ? n : fib_seq(n - 1) + fib_seq(n - 2);
}

/* One node of the fork-join fib: a task with its input, output and the parent's latch. */
struct fib_node {
    struct task task;
    unsigned n;
    uint64_t result;
    struct pool_latch *parent;
    struct pool *pool; /* NULL: the global pool */
    int status;        /* first non-OK status seen in this subtree */
};

/* Children go on the worker's fork-join deque (pool_fork): a waiting node runs its own
 * newest children first, so helping nests only as deep as the recursion. */
static int submit(struct pool *pool, struct task *t)
{
    return pool ? pool_fork(pool, t) : pool_fork_global(t);
}

static int wait_latch(struct pool *pool, struct pool_latch *l)
{
    return pool ? pool_latch_wait(pool, l) : pool_latch_wait_global(l);
}

static void fib_run(struct task *task)
{
    struct fib_node *node = container_of(task, struct fib_node, task);
    struct pool_latch *parent = node->parent;
    if (node->n < 2) {
        node->result = node->n;
    } else {
        struct pool_latch latch;
        struct fib_node kids[2];
        int st = pool_latch_init(&latch);
        if (st == POOL_OK)
            st = pool_latch_add(&latch, 2);
        for (int i = 0; i < 2; i++) {
            kids[i].task.callback = fib_run;
            kids[i].n = node->n - 1 - (unsigned)i;
            kids[i].result = 0;
            kids[i].parent = &latch;
            kids[i].pool = node->pool;
            kids[i].status = POOL_OK;
            if (st == POOL_OK)
                st = submit(node->pool, &kids[i].task);
        }
        if (st == POOL_OK)
            st = wait_latch(node->pool, &latch);
        node->result = kids[0].result + kids[1].result;
        if (st == POOL_OK)
            st = kids[0].status != POOL_OK ? kids[0].status : kids[1].status;
        node->status = st;
    }
    /* Last access to the node: the parent may return (and free it) right after. */
    pool_latch_done(parent);
}

/* Runs fib(n) as a fork-join tree on `pool` (NULL: global) from a non-pool thread. */
static uint64_t fib_forkjoin(struct pool *pool, unsigned n, int *status)
{
    struct pool_latch latch;
    struct fib_node root = {0};
    pool_latch_init(&latch);
    pool_latch_add(&latch, 1);
    root.task.callback = fib_run;
    root.n = n;
    root.parent = &latch;
    root.pool = pool;
    root.status = POOL_OK;
    *status = submit(pool, &root.task);
    if (*status != POOL_OK)
        return 0;
    *status = wait_latch(pool, &latch);
    if (*status == POOL_OK)
        *status = root.status;
    return root.result;
}

struct chunk {
    struct task task;
    uint64_t first, last, sum;
    struct pool_latch *latch;
};

static void chunk_run(struct task *task)
{
    struct chunk *c = container_of(task, struct chunk, task);
    struct pool_latch *latch = c->latch;
    uint64_t s = 0;
    for (uint64_t i = c->first; i <= c->last; i++)
        s += i;
    c->sum = s;
    pool_latch_done(latch);
}

static uint64_t parallel_sum(struct pool *pool, uint64_t n, int *status)
{
    struct pool_latch latch;
    struct chunk chunks[CHUNKS];
    uint64_t per = n / CHUNKS, total = 0;
    pool_latch_init(&latch);
    pool_latch_add(&latch, CHUNKS);
    for (int i = 0; i < CHUNKS; i++) {
        chunks[i].task.callback = chunk_run;
        chunks[i].first = (uint64_t)i * per + 1;
        chunks[i].last = i == CHUNKS - 1 ? n : (uint64_t)(i + 1) * per;
        chunks[i].latch = &latch;
        *status = pool_submit_to(pool, &chunks[i].task);
        if (*status != POOL_OK)
            return 0; /* the latch is never waited for: fine, it owns nothing */
    }
    *status = pool_latch_wait(pool, &latch);
    for (int i = 0; i < CHUNKS; i++)
        total += chunks[i].sum;
    return total;
}

struct host {
    pthread_t thread;
    struct pool *pool;
    unsigned id;
    uint64_t fib;
    int fib_status;
    uint64_t sum, sum_n;
    int sum_status;
};

static void *host_main(void *arg)
{
    struct host *h = arg;
    h->fib = fib_forkjoin(h->pool, fib_n(), &h->fib_status);
    h->sum_n = scaled(1000000, 1000) + h->id;
    h->sum = parallel_sum(h->pool, h->sum_n, &h->sum_status);
    return NULL;
}

int main(void)
{
    struct pool *pool = NULL;
    struct pool_config cfg;
    struct pool_latch latch;
    struct host hosts[HOSTS];
    uint64_t want = fib_seq(fib_n());
    int status;

    test_watchdog_start(60);

    /* 1. Bad input and the release rule. */
    CHECK_STATUS(pool_latch_init(NULL), POOL_ERR_INVALID, "init(NULL)");
    CHECK_STATUS(pool_latch_add(NULL, 1), POOL_ERR_INVALID, "add(NULL)");
    CHECK_STATUS(pool_latch_done(NULL), POOL_ERR_INVALID, "done(NULL)");
    CHECK_STATUS(pool_latch_wait(NULL, &latch), POOL_ERR_INVALID, "wait(NULL pool)");
    CHECK_STATUS(pool_latch_wait_global(NULL), POOL_ERR_INVALID, "wait_global(NULL)");
    CHECK_STATUS(pool_fork(NULL, NULL), POOL_ERR_INVALID, "fork(NULL)");

    pool_config_init(&cfg);
    cfg.max_threads = 4;
    CHECK_STATUS(pool_create(&cfg, &pool), POOL_OK, "pool_create");
    CHECK_STATUS(pool_latch_wait(pool, NULL), POOL_ERR_INVALID, "wait(NULL latch)");

    CHECK_STATUS(pool_latch_init(&latch), POOL_OK, "init");
    CHECK_STATUS(pool_latch_wait(pool, &latch), POOL_OK, "wait with nothing added returns");
    CHECK_STATUS(pool_latch_add(&latch, 1), POOL_ERR_INVALID, "add after the wait completed");
    CHECK_STATUS(pool_latch_init(&latch), POOL_OK, "re-init");
    CHECK_STATUS(pool_latch_add(&latch, 2), POOL_OK, "add after re-init");
    CHECK_STATUS(pool_latch_done(&latch), POOL_OK, "done");
    CHECK_STATUS(pool_latch_done(&latch), POOL_OK, "done");
    CHECK_STATUS(pool_latch_wait(pool, &latch), POOL_OK, "wait after all done");

    /* Overflow: refused with POOL_ERR_RANGE, the latch unchanged (the wait still returns). */
    CHECK_STATUS(pool_latch_init(&latch), POOL_OK, "init for overflow");
    CHECK_STATUS(pool_latch_add(&latch, SIZE_MAX), POOL_ERR_RANGE, "add(SIZE_MAX) on a fresh latch");
    CHECK_STATUS(pool_latch_add(&latch, 3), POOL_OK, "add(3) after the refused add");
    CHECK_STATUS(pool_latch_add(&latch, SIZE_MAX - 3), POOL_ERR_RANGE, "add past the range with 3 pending");
    CHECK_STATUS(pool_latch_add(&latch, SIZE_MAX - 4), POOL_OK, "add up to the range's end");
    CHECK_STATUS(pool_latch_add(&latch, 1), POOL_ERR_RANGE, "add(1) at the range's end");
    /* Back to 3 outstanding: re-initialise and redo the add that fits. */
    CHECK_STATUS(pool_latch_init(&latch), POOL_OK, "re-init after overflow checks");
    CHECK_STATUS(pool_latch_add(&latch, SIZE_MAX), POOL_ERR_RANGE, "add(SIZE_MAX) again");
    CHECK_STATUS(pool_latch_add(&latch, 3), POOL_OK, "add(3)");
    for (int i = 0; i < 3; i++)
        CHECK_STATUS(pool_latch_done(&latch), POOL_OK, "done");
    CHECK_STATUS(pool_latch_wait(pool, &latch), POOL_OK, "wait after a refused add returns");

    /* 2 + 3. Eight host threads, one pool. */
    for (unsigned i = 0; i < HOSTS; i++) {
        memset(&hosts[i], 0, sizeof hosts[i]);
        hosts[i].pool = pool;
        hosts[i].id = i;
        CHECK(pthread_create(&hosts[i].thread, NULL, host_main, &hosts[i]) == 0, "pthread_create");
    }
    for (unsigned i = 0; i < HOSTS; i++) {
        pthread_join(hosts[i].thread, NULL);
        CHECK_STATUS(hosts[i].fib_status, POOL_OK, "fork-join fib status");
        CHECK_EQ(hosts[i].fib, want, "fork-join fib exact");
        CHECK_STATUS(hosts[i].sum_status, POOL_OK, "parallel sum status");
        CHECK_EQ(hosts[i].sum, hosts[i].sum_n * (hosts[i].sum_n + 1) / 2, "parallel sum exact");
    }
    pool_destroy(pool);

    /* 4. The global pool. */
    CHECK_EQ(fib_forkjoin(NULL, 14, &status), fib_seq(14), "global-pool fork-join fib exact");
    CHECK_STATUS(status, POOL_OK, "global-pool fork-join status");

    printf("latch: fib(%u) = %llu on %d host threads\n", fib_n(), (unsigned long long)want, HOSTS);
    return test_finish();
}
