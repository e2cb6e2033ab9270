/*
 * stress.c: many tasks, many submitters, tasks that submit tasks; exact-once everywhere.
 *
 *   1. 1,000,000 tasks through pool_submit (the global pool) from the main thread;
 *   2. 8 host pthreads each submitting 125,000 tasks through pool_submit_to to one pool;
 *   3. a binary tree of tasks: each task with depth > 0 submits its 2 children to the same
 *      pool from inside its callback (own pool, and the global pool);
 *   4. the same tree with pool_shutdown called right after the root is submitted: the
 *      children that running tasks submit during shutdown are part of the queued work, so
 *      when pool_shutdown returns the whole tree has run, every child submit was POOL_OK;
 *   5. host threads submitting while the main thread calls pool_shutdown: each submit is
 *      either POOL_OK (and then it runs exactly once: checked after pool_destroy, which
 *      joins every thread) or POOL_ERR_SHUTDOWN (and then it never runs);
 *   6. bursts of 1..4 tasks, each waited for, workers parking in between (max_threads 1
 *      and 2): a lost wake-up shows as a burst that never completes; the watchdog then
 *      submits one more task to tell "queued but nobody woken" from "lost".
 *
 * Every task has its own run counter (must end at exactly 1) and bumps a shared total.
 * Waiting is a poll with a 30 s watchdog (POOL_TEST_WAIT_S) that prints what is missing
 * and exits 2, so a lost wake-up fails fast instead of hanging.
 * Counts scale with POOL_TEST_SCALE (default 1.0; 0.01 for valgrind).
 *
 * Build: cc -std=c11 -O2 -Wall -Wextra -Werror -pedantic -Iinclude c_tests/stress.c \
 *          target/release/libpool.a -lpthread -ldl -lm -o build/stress
 */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

struct item {
    atomic_uint runs;
    uint32_t id;
    struct task task;
};

static atomic_long total;

static void item_run(struct task *t)
{
    struct item *it = container_of(t, struct item, task);
    atomic_fetch_add_explicit(&it->runs, 1, memory_order_relaxed);
    /* release: a reader that sees the total also sees every runs++ before it */
    atomic_fetch_add_explicit(&total, 1, memory_order_release);
}

struct wait_ctx {
    atomic_long *counter;
    long target;
    struct item *items;
    size_t n;
};

static int counter_reached(void *p)
{
    struct wait_ctx *w = p;
    return atomic_load_explicit(w->counter, memory_order_acquire) >= w->target;
}

static void report_missing(void *p)
{
    struct wait_ctx *w = p;
    size_t i, missing = 0, twice = 0;
    printf("  counter = %ld, want %ld\n", atomic_load(w->counter), w->target);
    for (i = 0; i < w->n; i++) {
        unsigned r = atomic_load(&w->items[i].runs);
        if (r == 0) {
            if (missing < 10)
                printf("  task %lu has not run\n", (unsigned long)i);
            missing++;
        } else if (r > 1) {
            if (twice < 10)
                printf("  task %lu ran %u times\n", (unsigned long)i, r);
            twice++;
        }
    }
    printf("  %lu tasks never ran, %lu ran more than once\n", (unsigned long)missing,
           (unsigned long)twice);
}

static void wait_total(long target, struct item *items, size_t n, const char *what)
{
    struct wait_ctx w;
    w.counter = &total;
    w.target = target;
    w.items = items;
    w.n = n;
    wait_until(counter_reached, &w, report_missing, what);
}

/* Every item ran exactly once. */
static void check_exactly_once(struct item *items, size_t n, const char *phase)
{
    size_t i, zero = 0, many = 0;
    char what[200];
    for (i = 0; i < n; i++) {
        unsigned r = atomic_load_explicit(&items[i].runs, memory_order_relaxed);
        if (r == 0)
            zero++;
        else if (r > 1)
            many++;
    }
    snprintf(what, sizeof what, "%s: tasks that never ran", phase);
    CHECK_EQ(zero, 0, what);
    snprintf(what, sizeof what, "%s: tasks that ran more than once", phase);
    CHECK_EQ(many, 0, what);
}

static struct item *alloc_items(size_t n)
{
    struct item *items = malloc(n * sizeof *items);
    size_t i;
    if (items == NULL) {
        printf("FAIL: out of memory for %lu items\n", (unsigned long)n);
        exit(1);
    }
    for (i = 0; i < n; i++) {
        atomic_init(&items[i].runs, 0);
        items[i].id = (uint32_t)i;
        items[i].task.next = NULL;
        items[i].task.callback = item_run;
    }
    return items;
}

/* ---- 1. the global pool, one submitter ---- */

static void phase_global(size_t n)
{
    struct item *items = alloc_items(n);
    size_t i, errors = 0;
    double t0 = now_sec(), t1;
    char what[200];
    atomic_store(&total, 0);
    for (i = 0; i < n; i++)
        if (pool_submit(&items[i].task) != POOL_OK)
            errors++;
    t1 = now_sec();
    snprintf(what, sizeof what, "global: %lu x pool_submit returned POOL_OK", (unsigned long)n);
    CHECK_EQ(errors, 0, what);
    wait_total((long)(n - errors), items, n, "global: all tasks");
    printf("  global: %lu tasks submitted in %.3f s, all run in %.3f s\n", (unsigned long)n,
           t1 - t0, now_sec() - t0);
    check_exactly_once(items, n, "global");
    sleep_us(10000);
    CHECK_EQ(atomic_load(&total), (long)n, "global: total runs (10 ms after completion)");
    free(items);
}

/* ---- 2. 8 host threads submitting to one pool ---- */

#define SUBMITTERS 8

struct submitter {
    pthread_t thread;
    struct pool *pool;
    struct item *items;
    size_t n;
    size_t errors;
    int first_error;
};

static void *submitter_main(void *p)
{
    struct submitter *s = p;
    size_t i;
    for (i = 0; i < s->n; i++) {
        int rc = pool_submit_to(s->pool, &s->items[i].task);
        if (rc != POOL_OK && s->errors++ == 0)
            s->first_error = rc;
    }
    return NULL;
}

static void phase_submitters(size_t per_thread)
{
    struct pool *pool = NULL;
    struct submitter subs[SUBMITTERS];
    size_t n = per_thread * SUBMITTERS, errors = 0;
    struct item *items = alloc_items(n);
    double t0;
    int i, rc, first_error = POOL_OK;
    char what[200];

    rc = pool_create(NULL, &pool);
    CHECK_EQ(rc, POOL_OK, "submitters: pool_create(NULL)");
    if (rc != POOL_OK) {
        free(items);
        return;
    }
    atomic_store(&total, 0);
    t0 = now_sec();
    for (i = 0; i < SUBMITTERS; i++) {
        subs[i].pool = pool;
        subs[i].items = items + (size_t)i * per_thread;
        subs[i].n = per_thread;
        subs[i].errors = 0;
        subs[i].first_error = POOL_OK;
        if (pthread_create(&subs[i].thread, NULL, submitter_main, &subs[i]) != 0) {
            printf("FAIL: pthread_create\n");
            exit(1);
        }
    }
    for (i = 0; i < SUBMITTERS; i++) {
        pthread_join(subs[i].thread, NULL);
        if (subs[i].errors && first_error == POOL_OK)
            first_error = subs[i].first_error;
        errors += subs[i].errors;
    }
    snprintf(what, sizeof what, "submitters: %d x %lu x pool_submit_to returned POOL_OK (first error %s)",
             SUBMITTERS, (unsigned long)per_thread, status_name(first_error));
    CHECK_EQ(errors, 0, what);
    wait_total((long)(n - errors), items, n, "submitters: all tasks");
    printf("  submitters: %lu tasks from %d threads, all run in %.3f s\n", (unsigned long)n,
           SUBMITTERS, now_sec() - t0);
    check_exactly_once(items, n, "submitters");
    CHECK_EQ(pool_shutdown(pool), POOL_OK, "submitters: pool_shutdown");
    CHECK_EQ(atomic_load(&total), (long)n, "submitters: total runs after pool_shutdown");
    pool_destroy(pool);
    free(items);
}

/* ---- 3./4. a tree of tasks submitting their children ---- */

/* Heap-ordered complete binary tree: node i has children 2i+1 and 2i+2. */
struct tree {
    struct pool *pool;          /* NULL: the global pool */
    struct item *nodes;
    size_t n;                   /* 2^(depth+1) - 1 */
    atomic_long child_errors;
    atomic_int first_error;
};

static struct tree the_tree;

/* Nodes in the subtree rooted at heap index i of a complete tree of n nodes. */
static size_t subtree_size(size_t i, size_t n)
{
    size_t count = 0, lo = i, hi = i;
    while (lo < n) {
        count += (hi < n ? hi : n - 1) - lo + 1;
        lo = 2 * lo + 1;
        hi = 2 * hi + 2;
    }
    return count;
}

static void node_run(struct task *t)
{
    struct item *it = container_of(t, struct item, task);
    struct tree *tr = &the_tree;
    size_t i = it->id, c;
    atomic_fetch_add_explicit(&it->runs, 1, memory_order_relaxed);
    for (c = 2 * i + 1; c <= 2 * i + 2 && c < tr->n; c++) {
        struct task *child = &tr->nodes[c].task;
        int rc = tr->pool ? pool_submit_to(tr->pool, child) : pool_submit(child);
        if (rc != POOL_OK) {
            int none = POOL_OK;
            atomic_compare_exchange_strong(&tr->first_error, &none, rc);
            atomic_fetch_add(&tr->child_errors, 1);
            /* count the lost subtree as "done" so the wait ends and the checks report */
            atomic_fetch_add_explicit(&total, (long)subtree_size(c, tr->n), memory_order_release);
        }
    }
    atomic_fetch_add_explicit(&total, 1, memory_order_release);
}

/* Runs the tree; with `shutdown_early`, calls pool_shutdown right after the root. */
static void phase_tree(struct pool *pool, unsigned depth, int shutdown_early, const char *phase)
{
    size_t n = ((size_t)1 << (depth + 1)) - 1, i;
    struct item *nodes = alloc_items(n);
    char what[200];
    int rc;
    double t0;

    for (i = 0; i < n; i++)
        nodes[i].task.callback = node_run;
    the_tree.pool = pool;
    the_tree.nodes = nodes;
    the_tree.n = n;
    atomic_store(&the_tree.child_errors, 0);
    atomic_store(&the_tree.first_error, POOL_OK);
    atomic_store(&total, 0);
    t0 = now_sec();
    rc = pool ? pool_submit_to(pool, &nodes[0].task) : pool_submit(&nodes[0].task);
    snprintf(what, sizeof what, "%s: submit the root", phase);
    CHECK_EQ(rc, POOL_OK, what);
    if (rc != POOL_OK) {
        free(nodes);
        return;
    }
    if (shutdown_early) {
        rc = pool_shutdown(pool);
        snprintf(what, sizeof what, "%s: pool_shutdown while the tree grows", phase);
        CHECK_EQ(rc, POOL_OK, what);
        snprintf(what, sizeof what,
                 "%s: the whole tree ran before pool_shutdown returned (nodes run)", phase);
        CHECK_EQ(atomic_load_explicit(&total, memory_order_acquire), (long)n, what);
    } else {
        wait_total((long)n, nodes, n, phase);
    }
    printf("  %s: %lu nodes (depth %u) in %.3f s\n", phase, (unsigned long)n, depth,
           now_sec() - t0);
    snprintf(what, sizeof what, "%s: child submits from callbacks returned POOL_OK (first error %s)",
             phase, status_name(atomic_load(&the_tree.first_error)));
    CHECK_EQ(atomic_load(&the_tree.child_errors), 0, what);
    check_exactly_once(nodes, n, phase);
    free(nodes);
}

/* ---- 5. submit racing with shutdown ---- */

#define RACERS 4
#define REFUSED 100u  /* runs value marking a task whose submit was refused */

struct racer {
    pthread_t thread;
    struct pool *pool;
    struct item *items;
    size_t n;
    atomic_int *go;
    size_t ok, refused, other;
};

static void *racer_main(void *p)
{
    struct racer *r = p;
    size_t i;
    while (!atomic_load(r->go))
        sched_yield();
    for (i = 0; i < r->n; i++) {
        int rc = pool_submit_to(r->pool, &r->items[i].task);
        if (rc == POOL_OK) {
            r->ok++;
        } else {
            if (rc == POOL_ERR_SHUTDOWN)
                r->refused++;
            else
                r->other++;
            /* not queued, so still ours: mark it; a later run would make it REFUSED + 1 */
            atomic_store(&r->items[i].runs, REFUSED);
        }
    }
    return NULL;
}

/*
 * `iterations` times: RACERS threads submit per_thread tasks each to a fresh pool while the
 * main thread calls pool_shutdown after ~1 ms. Every submit must return POOL_OK or
 * POOL_ERR_SHUTDOWN; every POOL_OK task must run exactly once (by the time pool_destroy has
 * returned: it joins every thread); no refused task may run.
 */
static void phase_shutdown_race(size_t per_thread, size_t iterations)
{
    size_t n = per_thread * RACERS, it;
    struct item *items = alloc_items(n);
    size_t total_ok = 0, total_refused = 0, other = 0, lost = 0, extra = 0, bad_iters = 0;
    int shutdown_errors = 0;
    char what[200];

    for (it = 0; it < iterations; it++) {
        struct pool *pool = NULL;
        struct racer racers[RACERS];
        size_t i, ok = 0, it_lost = 0, it_extra = 0;
        atomic_int go;
        int k, rc;

        rc = pool_create(NULL, &pool);
        if (rc != POOL_OK) {
            CHECK_EQ(rc, POOL_OK, "shutdown race: pool_create");
            break;
        }
        for (i = 0; i < n; i++)
            atomic_store(&items[i].runs, 0);
        atomic_init(&go, 0);
        atomic_store(&total, 0);
        for (k = 0; k < RACERS; k++) {
            racers[k].pool = pool;
            racers[k].items = items + (size_t)k * per_thread;
            racers[k].n = per_thread;
            racers[k].go = &go;
            racers[k].ok = racers[k].refused = racers[k].other = 0;
            if (pthread_create(&racers[k].thread, NULL, racer_main, &racers[k]) != 0) {
                printf("FAIL: pthread_create\n");
                exit(1);
            }
        }
        atomic_store(&go, 1);
        sleep_us(1000);
        if (pool_shutdown(pool) != POOL_OK)
            shutdown_errors++;
        for (k = 0; k < RACERS; k++) {
            pthread_join(racers[k].thread, NULL);
            ok += racers[k].ok;
            total_refused += racers[k].refused;
            other += racers[k].other;
        }
        total_ok += ok;
        pool_destroy(pool);
        for (k = 0; k < RACERS; k++) {
            size_t first = (size_t)-1, last = 0, nl = 0;
            for (i = 0; i < per_thread; i++) {
                unsigned r = atomic_load(&racers[k].items[i].runs);
                if (r == 0) {
                    if (first == (size_t)-1)
                        first = i;
                    last = i;
                    nl++;
                } else if (r != 1 && r != REFUSED) {
                    it_extra++;
                }
            }
            if (nl != 0 && bad_iters < 5)
                printf("  shutdown race iteration %lu, submitter %d: %lu tasks accepted with "
                       "POOL_OK never ran (its submits #%lu..#%lu; it had %lu accepted)\n",
                       (unsigned long)it, k, (unsigned long)nl, (unsigned long)first,
                       (unsigned long)last, (unsigned long)racers[k].ok);
            it_lost += nl;
        }
        if (it_lost || it_extra)
            bad_iters++;
        lost += it_lost;
        extra += it_extra;
    }
    printf("  shutdown race: %lu iterations, %lu submits accepted, %lu refused with "
           "POOL_ERR_SHUTDOWN\n",
           (unsigned long)iterations, (unsigned long)total_ok, (unsigned long)total_refused);
    CHECK_EQ(shutdown_errors, 0, "shutdown race: pool_shutdown returned POOL_OK");
    CHECK_EQ(other, 0, "shutdown race: every submit returned POOL_OK or POOL_ERR_SHUTDOWN");
    snprintf(what, sizeof what,
             "shutdown race: tasks accepted with POOL_OK that never ran (lost; in %lu of %lu "
             "iterations)", (unsigned long)bad_iters, (unsigned long)iterations);
    CHECK_EQ(lost, 0, what);
    CHECK_EQ(extra, 0, "shutdown race: tasks that ran twice, or ran although refused");
    free(items);
}

/* ---- 6. bursts: a few tasks at a time, workers parking in between ---- */

struct burst_ctx {
    struct wait_ctx w;
    struct pool *pool;
    struct item *kick;
};

/* On a timeout: show what is missing, then submit one more task. If the stuck tasks run
 * then, they were queued all along and no worker had been woken for them: a lost wake-up. */
static void burst_report(void *p)
{
    struct burst_ctx *b = p;
    long before = atomic_load(&total);
    int rc;
    report_missing(&b->w);
    atomic_store(&b->kick->runs, 0);
    b->kick->task.callback = item_run;
    rc = pool_submit_to(b->pool, &b->kick->task);
    sleep_us(500000);
    printf("  diagnosis: submitted one more task (%s); 0.5 s later %ld more tasks had run: %s\n",
           status_name(rc), atomic_load(&total) - before,
           atomic_load(&total) - before > 1
               ? "the stuck tasks were queued all along but no worker was woken for them "
                 "(LOST WAKE-UP)"
               : "the stuck tasks are still missing (lost, or the pool is stuck)");
}

static int burst_done(void *p)
{
    return counter_reached(&((struct burst_ctx *)p)->w);
}

/* Bursts of 1..4 tasks from the main thread, each waited for; every 64 bursts a short
 * sleep lets the workers park, so every path of the sleep/wake protocol is exercised. */
static void phase_bursts(size_t rounds, size_t max_threads)
{
    struct pool *pool = NULL;
    struct pool_config cfg;
    struct item items[5];
    struct burst_ctx ctx;
    size_t r, errors = 0;
    long done_total = 0;
    double t0 = now_sec();
    char what[200];
    int rc, k;

    pool_config_init(&cfg);
    cfg.max_threads = max_threads;
    rc = pool_create(&cfg, &pool);
    snprintf(what, sizeof what, "bursts: pool_create(max_threads=%lu)", (unsigned long)max_threads);
    CHECK_EQ(rc, POOL_OK, what);
    if (rc != POOL_OK)
        return;
    atomic_store(&total, 0);
    ctx.pool = pool;
    ctx.kick = &items[4];
    ctx.w.counter = &total;
    ctx.w.items = items;
    snprintf(what, sizeof what, "bursts (max_threads=%lu): a burst of 1..4 tasks",
             (unsigned long)max_threads);
    for (r = 0; r < rounds; r++) {
        int burst = 1 + (int)(r % 4);
        for (k = 0; k < burst; k++) {
            atomic_store(&items[k].runs, 0);
            items[k].id = (uint32_t)k;
            items[k].task.callback = item_run;
            if (pool_submit_to(pool, &items[k].task) != POOL_OK)
                errors++;
        }
        done_total += burst;
        ctx.w.target = done_total;
        ctx.w.n = (size_t)burst;
        /* a burst of trivial tasks: 10 s (a third of POOL_TEST_WAIT_S) is plenty */
        wait_until_for(burst_done, &ctx, burst_report, what, test_wait_limit() / 3);
        for (k = 0; k < burst; k++)
            if (atomic_load(&items[k].runs) != 1)
                errors++;
        if (r % 64 == 63)
            sleep_us(200 + (long)(r % 7) * 300); /* let the workers go to sleep */
    }
    printf("  bursts (max_threads=%lu): %lu bursts of 1..4 tasks in %.3f s\n",
           (unsigned long)max_threads, (unsigned long)rounds, now_sec() - t0);
    snprintf(what, sizeof what,
             "bursts (max_threads=%lu): every burst submitted and ran exactly once",
             (unsigned long)max_threads);
    CHECK_EQ(errors, 0, what);
    CHECK_EQ(pool_shutdown(pool), POOL_OK, "bursts: pool_shutdown");
    pool_destroy(pool);
}

static unsigned tree_depth(double nodes_wanted)
{
    unsigned d = 1;
    while (d < 24 && (double)(((size_t)1 << (d + 2)) - 1) <= nodes_wanted)
        d++;
    return d;
}

/* One round of phases 1-5. */
static void one_round(size_t n_global, size_t per_thread, unsigned depth)
{
    struct pool_config cfg;
    struct pool *pool = NULL;
    int rc;

    phase_global(n_global);
    phase_submitters(per_thread);

    rc = pool_create(NULL, &pool);
    CHECK_EQ(rc, POOL_OK, "tree: pool_create");
    if (rc == POOL_OK) {
        phase_tree(pool, depth, 0, "tree (own pool)");
        pool_destroy(pool);
    }
    phase_tree(NULL, depth, 0, "tree (global pool)");

    rc = pool_create(NULL, &pool);
    CHECK_EQ(rc, POOL_OK, "tree+shutdown: pool_create");
    if (rc == POOL_OK) {
        phase_tree(pool, depth, 1, "tree + early shutdown");
        pool_destroy(pool);
    }
    pool_config_init(&cfg);
    cfg.max_threads = 1;
    rc = pool_create(&cfg, &pool);
    CHECK_EQ(rc, POOL_OK, "tree+shutdown 1 thread: pool_create");
    if (rc == POOL_OK) {
        phase_tree(pool, depth > 12 ? 12 : depth, 1, "tree + early shutdown (1 thread)");
        pool_destroy(pool);
    }

    phase_shutdown_race(scaled(20000, 50), scaled(20, 2));
}

int main(void)
{
    size_t rounds = scaled(3, 1), round;
    size_t n_global = scaled(1000000, 1000);
    size_t per_thread = scaled(125000, 100);
    unsigned depth = tree_depth((double)scaled(262143, 63));

    test_watchdog_start(300);
    printf("stress: scale %.3g, %lu rounds of: %lu global tasks, %d x %lu submitted tasks, "
           "tree depth %u\n",
           test_scale(), (unsigned long)rounds, (unsigned long)n_global, SUBMITTERS,
           (unsigned long)per_thread, depth);
    for (round = 0; round < rounds; round++) {
        printf("round %lu of %lu\n", (unsigned long)round + 1, (unsigned long)rounds);
        one_round(n_global, per_thread, depth);
    }
    phase_bursts(scaled(20000, 200), 1);
    phase_bursts(scaled(20000, 200), 2);
    return test_finish();
}
