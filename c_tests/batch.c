/*
 * batch.c: pool_submit_batch_to (own pool) and pool_submit_batch (global pool).
 *
 *   - lists of 1, 2, 255, 256, 257 and 10000 tasks (around the ring size and far past it),
 *     linked through `next`, NULL-terminated: every task runs exactly once;
 *   - all or nothing: a list whose 5th task (also: 1st, last) has a NULL callback returns
 *     POOL_ERR_INVALID and none of the list runs; the tasks stay the caller's, so the same
 *     tasks, repaired and relinked, can then be submitted and run exactly once;
 *   - a list with a cycle is POOL_ERR_INVALID (documented in pool.h);
 *   - a task running on a pool submits a batch to the same pool;
 *   - after pool_shutdown a batch is refused with POOL_ERR_SHUTDOWN and does not run.
 *
 * Build: cc -std=c11 -O2 -Wall -Wextra -Werror -pedantic -Iinclude c_tests/batch.c \
 *          target/release/libpool.a -lpthread -ldl -lm -o build/batch
 */
#include "common.h"

#include <stdatomic.h>
#include <stdint.h>

struct item {
    uint32_t id;
    atomic_int runs;          /* times the callback ran: must end at exactly 1 */
    struct task task;         /* not the first member */
    atomic_long *done;        /* shared completion counter */
};

static void item_run(struct task *t)
{
    struct item *it = container_of(t, struct item, task);
    atomic_fetch_add(&it->runs, 1);
    atomic_fetch_add(it->done, 1);
}

/* A second callback so lists mix callbacks: counts twice as "weight" but once as a run. */
static atomic_long weight;
static void item_run_weighted(struct task *t)
{
    struct item *it = container_of(t, struct item, task);
    atomic_fetch_add(&weight, (long)it->id);
    atomic_fetch_add(&it->runs, 1);
    atomic_fetch_add(it->done, 1);
}

/* Initialises n items and links them into a NULL-terminated list; returns the head. */
static struct task *make_list(struct item *items, size_t n, atomic_long *done)
{
    size_t i;
    for (i = 0; i < n; i++) {
        items[i].id = (uint32_t)i;
        atomic_init(&items[i].runs, 0);
        items[i].task.callback = (i % 3 == 2) ? item_run_weighted : item_run;
        items[i].task.next = (i + 1 < n) ? &items[i + 1].task : NULL;
        items[i].done = done;
    }
    return n ? &items[0].task : NULL;
}

struct wait_ctx {
    atomic_long *done;
    long target;
    struct item *items;
    size_t n;
};

static int wait_done(void *p)
{
    struct wait_ctx *w = p;
    return atomic_load(w->done) >= w->target;
}

static void wait_report(void *p)
{
    struct wait_ctx *w = p;
    size_t i, shown = 0;
    printf("  %ld of %ld tasks ran\n", atomic_load(w->done), w->target);
    for (i = 0; i < w->n && shown < 10; i++) {
        int r = atomic_load(&w->items[i].runs);
        if (r != 1) {
            printf("  task %lu ran %d times\n", (unsigned long)i, r);
            shown++;
        }
    }
}

/* Exact-once check over the items; returns the number of bad ones. */
static size_t count_bad(struct item *items, size_t n, int want)
{
    size_t i, bad = 0;
    for (i = 0; i < n; i++) {
        int r = atomic_load(&items[i].runs);
        if (r != want) {
            if (bad < 5)
                printf("  task %lu ran %d times, want %d\n", (unsigned long)i, r, want);
            bad++;
        }
    }
    return bad;
}

static long weight_of(size_t n)
{
    long w = 0;
    size_t i;
    for (i = 0; i < n; i++)
        if (i % 3 == 2)
            w += (long)i;
    return w;
}

/* Submits one list of n tasks (to `pool`, or the global pool if NULL) and checks it. */
static void run_list(struct pool *pool, size_t n)
{
    struct item *items = calloc(n, sizeof *items);
    atomic_long done;
    struct wait_ctx w;
    char what[160];
    const char *where = pool ? "pool_submit_batch_to" : "pool_submit_batch";
    struct task *head;
    int rc;
    long w0;

    if (items == NULL) {
        printf("FAIL: out of memory\n");
        exit(1);
    }
    atomic_init(&done, 0);
    head = make_list(items, n, &done);
    w0 = atomic_load(&weight);
    rc = pool ? pool_submit_batch_to(pool, head) : pool_submit_batch(head);
    snprintf(what, sizeof what, "%s(list of %lu)", where, (unsigned long)n);
    if (CHECK_STATUS(rc, POOL_OK, what)) {
        w.done = &done;
        w.target = (long)n;
        w.items = items;
        w.n = n;
        wait_until(wait_done, &w, wait_report, what);
        snprintf(what, sizeof what, "%s(list of %lu): each task ran exactly once", where,
                 (unsigned long)n);
        CHECK_EQ(count_bad(items, n, 1), 0, what);
        /* A little later, still exactly once (nothing ran twice late). */
        sleep_us(2000);
        snprintf(what, sizeof what, "%s(list of %lu): total runs", where, (unsigned long)n);
        CHECK_EQ(atomic_load(&done), (long)n, what);
        snprintf(what, sizeof what, "%s(list of %lu): weighted callbacks", where,
                 (unsigned long)n);
        CHECK_EQ(atomic_load(&weight) - w0, weight_of(n), what);
    }
    free(items);
}

/*
 * All or nothing: a list of n whose task at `bad` has a NULL callback is refused as a whole.
 * Then the same tasks, repaired and relinked, run exactly once.
 */
static void run_invalid_list(struct pool *pool, size_t n, size_t bad)
{
    struct item *items = calloc(n, sizeof *items);
    atomic_long done;
    struct wait_ctx w;
    char what[200];
    const char *where = pool ? "pool_submit_batch_to" : "pool_submit_batch";
    struct task *head;
    int rc;

    if (items == NULL) {
        printf("FAIL: out of memory\n");
        exit(1);
    }
    atomic_init(&done, 0);
    head = make_list(items, n, &done);
    items[bad].task.callback = NULL;
    rc = pool ? pool_submit_batch_to(pool, head) : pool_submit_batch(head);
    snprintf(what, sizeof what, "%s(list of %lu, task #%lu has NULL callback)", where,
             (unsigned long)n, (unsigned long)bad + 1);
    CHECK_STATUS(rc, POOL_ERR_INVALID, what);

    /* Give a wrongly queued task time to run, then make sure none did. A marker task
     * submitted after it and run to completion shows the pool is otherwise live. */
    {
        struct item marker;
        atomic_long marker_done;
        atomic_init(&marker_done, 0);
        make_list(&marker, 1, &marker_done);
        rc = pool ? pool_submit_to(pool, &marker.task) : pool_submit(&marker.task);
        CHECK_EQ(rc, POOL_OK, "marker task submitted after the refused list");
        w.done = &marker_done;
        w.target = 1;
        w.items = &marker;
        w.n = 1;
        wait_until(wait_done, &w, wait_report, "marker task after the refused list");
        sleep_us(20000);
    }
    snprintf(what, sizeof what, "%s(list of %lu, NULL callback at #%lu): none of the list ran",
             where, (unsigned long)n, (unsigned long)bad + 1);
    CHECK_EQ(atomic_load(&done), 0, what);

    /* Still the caller's: repair, relink, resubmit; each runs exactly once. */
    head = make_list(items, n, &done);
    rc = pool ? pool_submit_batch_to(pool, head) : pool_submit_batch(head);
    snprintf(what, sizeof what, "%s: the refused list, repaired, is accepted", where);
    if (CHECK_STATUS(rc, POOL_OK, what)) {
        w.done = &done;
        w.target = (long)n;
        w.items = items;
        w.n = n;
        wait_until(wait_done, &w, wait_report, "the repaired list");
        snprintf(what, sizeof what, "%s: the repaired list ran exactly once", where);
        CHECK_EQ(count_bad(items, n, 1), 0, what);
    }
    free(items);
}

/* Lists with a cycle are refused (pool.h: "a task list with a cycle"). */
static void run_cycle_lists(struct pool *pool)
{
    struct item items[5];
    atomic_long done;
    const char *where = pool ? "pool_submit_batch_to" : "pool_submit_batch";
    char what[160];
    int rc;
    size_t len;

    atomic_init(&done, 0);
    for (len = 1; len <= 5; len++) {
        make_list(items, len, &done);
        items[len - 1].task.next = &items[0].task; /* last -> first */
        rc = pool ? pool_submit_batch_to(pool, &items[0].task) : pool_submit_batch(&items[0].task);
        snprintf(what, sizeof what, "%s(cycle of %lu)", where, (unsigned long)len);
        CHECK_STATUS(rc, POOL_ERR_INVALID, what);
    }
    /* A "rho": a tail into a cycle. */
    make_list(items, 5, &done);
    items[4].task.next = &items[2].task;
    rc = pool ? pool_submit_batch_to(pool, &items[0].task) : pool_submit_batch(&items[0].task);
    snprintf(what, sizeof what, "%s(tail of 2 into a cycle of 3)", where);
    CHECK_STATUS(rc, POOL_ERR_INVALID, what);
    sleep_us(20000);
    snprintf(what, sizeof what, "%s: no task of a cyclic list ran", where);
    CHECK_EQ(atomic_load(&done), 0, what);
}

/* A task on the pool submits a batch of children to the same pool. */
#define CHILDREN 300
struct parent {
    struct task task;
    struct pool *pool;
    struct item children[CHILDREN];
    atomic_long done;
    atomic_int submit_rc;
};

static void parent_run(struct task *t)
{
    struct parent *p = container_of(t, struct parent, task);
    struct task *head = make_list(p->children, CHILDREN, &p->done);
    atomic_store(&p->submit_rc, p->pool ? pool_submit_batch_to(p->pool, head)
                                        : pool_submit_batch(head));
    atomic_fetch_add(&p->done, 1); /* the parent counts too: its last touch of *p */
}

static void run_batch_from_task(struct pool *pool)
{
    struct parent *p = calloc(1, sizeof *p);
    struct wait_ctx w;
    const char *where = pool ? "pool_submit_batch_to" : "pool_submit_batch";
    char what[160];
    int rc;
    if (p == NULL) {
        printf("FAIL: out of memory\n");
        exit(1);
    }
    p->pool = pool;
    p->task.callback = parent_run;
    atomic_init(&p->done, 0);
    atomic_init(&p->submit_rc, 99);
    rc = pool ? pool_submit_to(pool, &p->task) : pool_submit(&p->task);
    CHECK_EQ(rc, POOL_OK, "submit the parent task");
    w.done = &p->done;
    w.target = CHILDREN + 1;
    w.items = p->children;
    w.n = CHILDREN;
    wait_until(wait_done, &w, wait_report, "batch submitted from a task");
    snprintf(what, sizeof what, "%s from inside a task (%d children)", where, CHILDREN);
    CHECK_STATUS(atomic_load(&p->submit_rc), POOL_OK, what);
    snprintf(what, sizeof what, "%s from inside a task: each child ran exactly once", where);
    CHECK_EQ(count_bad(p->children, CHILDREN, 1), 0, what);
    free(p);
}

int main(void)
{
    static const size_t lens[] = {1, 2, 255, 256, 257, 10000};
    struct pool *pool = NULL;
    struct pool_config cfg;
    size_t i;
    int rc;

    test_watchdog_start(120);
    pool_config_init(&cfg);
    cfg.max_threads = 4;
    rc = pool_create(&cfg, &pool);
    CHECK_STATUS(rc, POOL_OK, "pool_create(max_threads=4)");
    if (rc != POOL_OK)
        return test_finish();

    for (i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        run_list(pool, lens[i]);
        run_list(NULL, lens[i]);
    }
    /* Longer lists: scaled, so a big run can push more through. */
    run_list(pool, scaled(100000, 1000));
    run_list(NULL, scaled(100000, 1000));

    run_invalid_list(pool, 10, 4);   /* the 5th task */
    run_invalid_list(NULL, 10, 4);
    run_invalid_list(pool, 10, 0);   /* the 1st */
    run_invalid_list(NULL, 10, 9);   /* the last */
    run_invalid_list(pool, 1, 0);    /* a list of one */
    run_invalid_list(pool, 300, 299);

    run_cycle_lists(pool);
    run_cycle_lists(NULL);

    run_batch_from_task(pool);
    run_batch_from_task(NULL);

    /* Batches after shutdown are refused and do not run. */
    rc = pool_shutdown(pool);
    CHECK_STATUS(rc, POOL_OK, "pool_shutdown");
    {
        struct item items[3];
        atomic_long done;
        atomic_init(&done, 0);
        rc = pool_submit_batch_to(pool, make_list(items, 3, &done));
        CHECK_STATUS(rc, POOL_ERR_SHUTDOWN, "pool_submit_batch_to after pool_shutdown");
        pool_destroy(pool);
        CHECK_EQ(atomic_load(&done), 0, "the refused batch did not run, not even at pool_destroy");
    }
    return test_finish();
}
