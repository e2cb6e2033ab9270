/*
 * queue.c: `struct pool_queue` from C, as a program replacing its own FIFO pool would use it.
 *
 *   1. bad input: NULL queue / pool / task give POOL_ERR_INVALID, a width above the pool's
 *      threads too; the struct has its fixed size;
 *   2. a serial queue (width 1) on a pool of 4: 2,000 tasks start strictly in order, one at
 *      a time, each once;
 *   3. the blockers-then-quick scenario on a width-4 queue of a pool of 4: 4 blockers, then
 *      16 quick tasks (malloc'd); no quick task starts while the blockers block; cancelling
 *      all 16 succeeds and each is freed at once (ASan / valgrind: no use after free); a
 *      second cancel is POOL_ERR_BUSY; none of them runs; `pool_queue_stats` reads 4 running,
 *      16 cancelled;
 *   4. a bounded queue (bound 2): POOL_ERR_FULL with the task untouched, a timed submit
 *      that times out, and destroy handing the waiting tasks to the cancel callback;
 *   5. destroy running the waiting tasks itself (no cancel callback), each of which calls the
 *      queue being destroyed: its submit is refused (SHUTDOWN), cancel is BUSY, wait returns,
 *      destroy is INVALID, and nothing touches freed memory (ASan, valgrind);
 *   6. a queue on a target queue (pool_queue_init_target, libuv's slow-I/O cap): bad input
 *      and a bounded target give POOL_ERR_INVALID; 4 blockers fill the width-4 target, then
 *      4 quick tasks of the width-2 queue on it stay waiting (none starts beside the
 *      blockers) and are cancelled and freed at once; the target's destroy is POOL_ERR_BUSY
 *      while the queue on it exists;
 *   7. tasks that submit to their own queue with a blocking submit: lz4's reader chain (a
 *      link queues a slow work item, then the next link) on a width-2 queue bounded at one
 *      waiting task, every submit OK and every item run once; and, from a task of a full
 *      width-1 queue, POOL_ERR_INVALID at once (only its own slot could free a place) with
 *      the child untouched;
 *   8. a handoff queue (POOL_QUEUE_HANDOFF, zstd's queueSize 0) of width 2: two blockers
 *      fill it before either starts, so a third task is POOL_ERR_FULL at once and after a
 *      timed wait; with the blockers released, a blocking submit is accepted as they end;
 *      a handoff queue is refused as a target, as any bounded one.
 *
 * A 60 s watchdog turns a hang into exit status 2.
 */
#include "common.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

_Static_assert(sizeof(struct pool_queue) == POOL_QUEUE_WORDS * sizeof(uint64_t), "fixed-size queue");

struct job {
    struct task task;
    int n;
    int blocks;
    atomic_int runs;
};

static atomic_int next_start;
static atomic_int active;
static atomic_int max_active;
static atomic_int out_of_order;
static atomic_int release;
static atomic_int started;
static atomic_int handed_back;

static void job_run(struct task *task);

/* A task that the queue's destroy runs; it calls the queue being destroyed. */
struct closing {
    struct task task;
    struct pool_queue *queue;
    struct job follow;
    int submit, cancel, wait, destroy;
};
static void closing_run(struct task *task)
{
    struct closing *c = container_of(task, struct closing, task);
    c->follow = (struct job){ .task = { .callback = job_run }, .n = -1 };
    c->submit = pool_queue_submit(c->queue, &c->follow.task);
    c->cancel = pool_queue_cancel(c->queue, &c->follow.task);
    c->wait = pool_queue_wait(c->queue);
    c->destroy = pool_queue_destroy(c->queue);
}

static void job_run(struct task *task)
{
    struct job *job = container_of(task, struct job, task);
    int now = atomic_fetch_add(&active, 1) + 1;
    int max = atomic_load(&max_active);
    while (now > max && !atomic_compare_exchange_weak(&max_active, &max, now)) {
    }
    atomic_fetch_add(&started, 1);
    if (job->n >= 0 && atomic_fetch_add(&next_start, 1) != job->n)
        atomic_fetch_add(&out_of_order, 1);
    while (job->blocks && !atomic_load(&release))
        sleep_us(100);
    atomic_fetch_add(&job->runs, 1);
    atomic_fetch_sub(&active, 1);
}

static void job_cancel(struct task *task)
{
    (void)task;
    atomic_fetch_add(&handed_back, 1);
}

/* Part 7: lz4's reader chain on its own queue. */
#define LINKS 50
struct link {
    struct task task;
    int i;
};
static struct pool_queue chain_q;
static struct link reads[LINKS];
static struct job works[LINKS];
static atomic_int chain_errors;

static void work_run(struct task *task)
{
    struct job *job = container_of(task, struct job, task);
    sleep_us(200);
    atomic_fetch_add(&job->runs, 1);
}

static void read_run(struct task *task)
{
    struct link *l = container_of(task, struct link, task);
    if (pool_queue_submit_timeout(&chain_q, &works[l->i].task, -1) != POOL_OK)
        atomic_fetch_add(&chain_errors, 1);
    if (l->i + 1 < LINKS && pool_queue_submit_timeout(&chain_q, &reads[l->i + 1].task, -1) != POOL_OK)
        atomic_fetch_add(&chain_errors, 1);
}

/* Part 7: a task of a full width-1 queue submitting to it. */
struct own {
    struct task task;
    struct pool_queue *queue;
    struct job child;
    int rc;
};

static void own_run(struct task *task)
{
    struct own *o = container_of(task, struct own, task);
    struct pool_queue_stats st;
    do {
        pool_queue_stats(o->queue, &st);
        sleep_us(100);
    } while (st.waiting < 1); /* the main thread queues one; the watchdog bounds the wait */
    o->rc = pool_queue_submit_timeout(o->queue, &o->child.task, -1);
}

static int queue_running_is_one(void *ctx)
{
    struct pool_queue_stats st;
    pool_queue_stats(ctx, &st);
    return st.running == 1;
}

static int started_is(void *ctx)
{
    return atomic_load(&started) == *(int *)ctx;
}

static void report_started(void *ctx)
{
    (void)ctx;
    fprintf(stderr, "started: %d\n", atomic_load(&started));
}

int main(void)
{
    test_watchdog_start(60);
    struct pool_config config;
    pool_config_init(&config);
    config.max_threads = 4;
    struct pool *pool = NULL;
    CHECK_STATUS(pool_create(&config, &pool), POOL_OK, "pool_create");
    struct pool_queue q;
    struct job one = { .task = { .callback = job_run }, .n = -1 };

    /* 1. bad input */
    CHECK_STATUS(pool_queue_init(NULL, pool, 1, 0, NULL), POOL_ERR_INVALID, "init(NULL queue)");
    CHECK_STATUS(pool_queue_init(&q, NULL, 1, 0, NULL), POOL_ERR_INVALID, "init(NULL pool)");
    CHECK_STATUS(pool_queue_init(&q, pool, 5, 0, NULL), POOL_ERR_INVALID, "init(width 5 on 4 threads)");
    CHECK_STATUS(pool_queue_init(&q, pool, 1, 0, NULL), POOL_OK, "init");
    CHECK_STATUS(pool_queue_submit(&q, NULL), POOL_ERR_INVALID, "submit(NULL)");
    CHECK_STATUS(pool_queue_submit(NULL, &one.task), POOL_ERR_INVALID, "submit(NULL queue)");
    struct task no_callback = { .callback = NULL };
    CHECK_STATUS(pool_queue_submit(&q, &no_callback), POOL_ERR_INVALID, "submit(NULL callback)");
    CHECK_STATUS(pool_queue_submit_timeout(NULL, &one.task, 0), POOL_ERR_INVALID, "submit_timeout(NULL queue)");
    CHECK_STATUS(pool_queue_submit_timeout(&q, NULL, -1), POOL_ERR_INVALID, "submit_timeout(NULL task)");
    CHECK_STATUS(pool_queue_submit_timeout(&q, &no_callback, 0), POOL_ERR_INVALID, "submit_timeout(NULL callback)");
    CHECK_STATUS(pool_queue_cancel(NULL, &one.task), POOL_ERR_INVALID, "cancel(NULL queue)");
    CHECK_STATUS(pool_queue_cancel(&q, NULL), POOL_ERR_INVALID, "cancel(NULL task)");
    CHECK_STATUS(pool_queue_set_width(NULL, 1), POOL_ERR_INVALID, "set_width(NULL)");
    CHECK_STATUS(pool_queue_set_width(&q, 5), POOL_ERR_INVALID, "set_width(5 on 4 threads)");
    CHECK_STATUS(pool_queue_set_width(&q, (size_t)-1), POOL_ERR_INVALID, "set_width(SIZE_MAX)");
    CHECK_STATUS(pool_queue_wait(NULL), POOL_ERR_INVALID, "wait(NULL)");
    CHECK_STATUS(pool_queue_destroy(NULL), POOL_ERR_INVALID, "destroy(NULL)");
    CHECK_STATUS(pool_queue_cancel(&q, &one.task), POOL_ERR_BUSY, "cancel(never submitted)");

    /* 2. serial order */
    size_t n = scaled(2000, 100);
    struct job *jobs = calloc(n, sizeof *jobs);
    for (size_t i = 0; i < n; i++) {
        jobs[i].task.callback = job_run;
        jobs[i].n = (int)i;
        CHECK_STATUS(pool_queue_submit(&q, &jobs[i].task), POOL_OK, i == 0 ? "serial submit" : NULL);
    }
    CHECK_STATUS(pool_queue_wait(&q), POOL_OK, "wait");
    int once = 1;
    for (size_t i = 0; i < n; i++)
        once &= atomic_load(&jobs[i].runs) == 1;
    CHECK(once, "each serial task ran once");
    CHECK_EQ(atomic_load(&out_of_order), 0, "serial tasks started out of order");
    CHECK_EQ(atomic_load(&max_active), 1, "serial queue: one at a time");
    CHECK_STATUS(pool_queue_destroy(&q), POOL_OK, "destroy");
    free(jobs);

    /* 3. blockers then quick tasks, cancelled and freed at once */
    atomic_store(&max_active, 0);
    atomic_store(&started, 0);
    CHECK_STATUS(pool_queue_init(&q, pool, 4, 0, NULL), POOL_OK, "init width 4");
    struct job blockers[4];
    for (int i = 0; i < 4; i++) {
        blockers[i] = (struct job){ .task = { .callback = job_run }, .n = -1, .blocks = 1 };
        pool_queue_submit(&q, &blockers[i].task);
    }
    struct job *quick[16];
    for (int i = 0; i < 16; i++) {
        quick[i] = calloc(1, sizeof *quick[i]);
        quick[i]->task.callback = job_run;
        quick[i]->n = -1;
        pool_queue_submit(&q, &quick[i]->task);
    }
    int four = 4;
    wait_until(started_is, &four, report_started, "4 blockers started");
    sleep_us(2000);
    CHECK_EQ(atomic_load(&started), 4, "only the blockers started");
    int cancelled = 0;
    for (int i = 0; i < 16; i++) {
        struct task *t = &quick[i]->task;
        cancelled += pool_queue_cancel(&q, t) == POOL_OK;
        free(quick[i]);
        CHECK_STATUS(pool_queue_cancel(&q, t), POOL_ERR_BUSY, i == 0 ? "cancel twice (freed task, never read)" : NULL);
    }
    CHECK_EQ(cancelled, 16, "every quick task cancelled");
    struct pool_queue_stats qs;
    CHECK_STATUS(pool_queue_stats(NULL, &qs), POOL_ERR_INVALID, "stats(NULL queue)");
    CHECK_STATUS(pool_queue_stats(&q, NULL), POOL_ERR_INVALID, "stats(NULL out)");
    CHECK_STATUS(pool_queue_stats(&q, &qs), POOL_OK, "stats");
    CHECK(qs.width == 4 && qs.running == 4 && qs.waiting == 0 && qs.started == 4 && qs.cancelled == 16 && qs.refused == 0,
          "stats while the blockers run: width 4, 4 running, 4 started, 16 cancelled");
    atomic_store(&release, 1);
    CHECK_STATUS(pool_queue_wait(&q), POOL_OK, "wait");
    CHECK_EQ(atomic_load(&started), 4, "no cancelled task ran");
    CHECK_STATUS(pool_queue_destroy(&q), POOL_OK, "destroy");

    /* 4. bounded, timed, destroy hands back */
    atomic_store(&release, 0);
    CHECK_STATUS(pool_queue_init(&q, pool, 0, 2, job_cancel), POOL_OK, "init bounded, suspended");
    struct job b[3];
    for (int i = 0; i < 3; i++)
        b[i] = (struct job){ .task = { .callback = job_run }, .n = -1 };
    CHECK_STATUS(pool_queue_submit(&q, &b[0].task), POOL_OK, "bounded submit 1");
    CHECK_STATUS(pool_queue_submit(&q, &b[1].task), POOL_OK, "bounded submit 2");
    CHECK_STATUS(pool_queue_submit(&q, &b[2].task), POOL_ERR_FULL, "bounded submit 3");
    CHECK_STATUS(pool_queue_submit_timeout(&q, &b[2].task, 5000000), POOL_ERR_FULL, "timed submit");
    CHECK_STATUS(pool_queue_destroy(&q), POOL_OK, "destroy");
    CHECK_EQ(atomic_load(&handed_back), 2, "destroy handed the waiting tasks back");
    CHECK_EQ(atomic_load(&b[0].runs) + atomic_load(&b[1].runs) + atomic_load(&b[2].runs), 0, "none ran");

    /* 5. destroy runs the waiting tasks (no cancel callback); each calls the queue meanwhile */
    CHECK_STATUS(pool_queue_init(&q, pool, 0, 0, NULL), POOL_OK, "init suspended, no cancel callback");
    struct closing c[2];
    for (int i = 0; i < 2; i++) {
        c[i] = (struct closing){ .task = { .callback = closing_run }, .queue = &q };
        CHECK_STATUS(pool_queue_submit(&q, &c[i].task), POOL_OK, "submit to be run by destroy");
    }
    CHECK_STATUS(pool_queue_destroy(&q), POOL_OK, "destroy runs the waiting tasks");
    for (int i = 0; i < 2; i++) {
        CHECK_STATUS(c[i].submit, POOL_ERR_SHUTDOWN, "submit from a task run by destroy");
        CHECK_STATUS(c[i].cancel, POOL_ERR_BUSY, "cancel from a task run by destroy");
        CHECK_STATUS(c[i].wait, POOL_OK, "wait from a task run by destroy");
        CHECK_STATUS(c[i].destroy, POOL_ERR_INVALID, "destroy from a task run by destroy");
    }
    CHECK_EQ(atomic_load(&c[0].follow.runs), 0, "the refused follow-up never ran");

    /* 6. a queue on a target queue */
    struct pool_queue slow;
    CHECK_STATUS(pool_queue_init(&q, pool, 4, 1, NULL), POOL_OK, "init bounded");
    CHECK_STATUS(pool_queue_init_target(&slow, &q, 1, 0, NULL), POOL_ERR_INVALID, "init_target(bounded target)");
    CHECK_STATUS(pool_queue_destroy(&q), POOL_OK, "destroy bounded");
    CHECK_STATUS(pool_queue_init(&q, pool, 4, 0, NULL), POOL_OK, "init target");
    CHECK_STATUS(pool_queue_init_target(NULL, &q, 1, 0, NULL), POOL_ERR_INVALID, "init_target(NULL queue)");
    CHECK_STATUS(pool_queue_init_target(&slow, NULL, 1, 0, NULL), POOL_ERR_INVALID, "init_target(NULL target)");
    CHECK_STATUS(pool_queue_init_target(&slow, &q, 5, 0, NULL), POOL_ERR_INVALID, "init_target(width 5 on 4 threads)");
    CHECK_STATUS(pool_queue_init_target(&slow, &q, 2, 0, NULL), POOL_OK, "init_target");
    atomic_store(&release, 0);
    atomic_store(&started, 0);
    for (int i = 0; i < 4; i++) {
        blockers[i] = (struct job){ .task = { .callback = job_run }, .n = -1, .blocks = 1 };
        CHECK_STATUS(pool_queue_submit(&q, &blockers[i].task), POOL_OK, i == 0 ? "submit a blocker to the target" : NULL);
    }
    for (int i = 0; i < 4; i++) {
        quick[i] = calloc(1, sizeof *quick[i]);
        quick[i]->task.callback = job_run;
        quick[i]->n = -1;
        CHECK_STATUS(pool_queue_submit(&slow, &quick[i]->task), POOL_OK, i == 0 ? "submit to the queue on the target" : NULL);
    }
    wait_until(started_is, &four, report_started, "4 blockers started");
    sleep_us(2000);
    CHECK_EQ(atomic_load(&started), 4, "a task of the queue on the target started beside the blockers");
    cancelled = 0;
    for (int i = 0; i < 4; i++) {
        cancelled += pool_queue_cancel(&slow, &quick[i]->task) == POOL_OK;
        free(quick[i]);
    }
    CHECK_EQ(cancelled, 4, "every task behind the target's busy slots cancelled");
    CHECK_STATUS(pool_queue_destroy(&q), POOL_ERR_BUSY, "destroy a target with a queue on it");
    atomic_store(&release, 1);
    CHECK_STATUS(pool_queue_wait(&slow), POOL_OK, "wait on the queue on the target");
    CHECK_STATUS(pool_queue_wait(&q), POOL_OK, "wait on the target");
    CHECK_EQ(atomic_load(&started), 4, "no cancelled task ran");
    CHECK_STATUS(pool_queue_destroy(&slow), POOL_OK, "destroy the queue on the target");
    CHECK_STATUS(pool_queue_destroy(&q), POOL_OK, "destroy the target after it");

    /* 7. tasks that submit to their own queue */
    CHECK_STATUS(pool_queue_init(&chain_q, pool, 2, 1, NULL), POOL_OK, "init width 2, bound 1");
    for (int i = 0; i < LINKS; i++) {
        reads[i] = (struct link){ .task = { .callback = read_run }, .i = i };
        works[i] = (struct job){ .task = { .callback = work_run }, .n = -1 };
    }
    CHECK_STATUS(pool_queue_submit(&chain_q, &reads[0].task), POOL_OK, "submit the chain's first link");
    CHECK_STATUS(pool_queue_wait(&chain_q), POOL_OK, "wait for the chain");
    CHECK_EQ(atomic_load(&chain_errors), 0, "a link's blocking submit to its own queue failed");
    int ran_once = 0;
    for (int i = 0; i < LINKS; i++)
        ran_once += atomic_load(&works[i].runs) == 1;
    CHECK_EQ(ran_once, LINKS, "every work item of the chain ran once");
    struct pool_queue_stats st;
    CHECK_STATUS(pool_queue_stats(&chain_q, &st), POOL_OK, "stats of the chain's queue");
    CHECK_EQ((int)st.started, 2 * LINKS, "the chain's queue started every link and item");
    CHECK_STATUS(pool_queue_destroy(&chain_q), POOL_OK, "destroy the chain's queue");

    CHECK_STATUS(pool_queue_init(&q, pool, 1, 1, NULL), POOL_OK, "init width 1, bound 1");
    struct own o = { .task = { .callback = own_run }, .queue = &q, .child = { .task = { .callback = job_run }, .n = -1 } };
    struct job behind = { .task = { .callback = job_run }, .n = -1 };
    CHECK_STATUS(pool_queue_submit(&q, &o.task), POOL_OK, "submit the task that submits to its own queue");
    wait_until(queue_running_is_one, &q, NULL, "the task runs");
    CHECK_STATUS(pool_queue_submit(&q, &behind.task), POOL_OK, "fill the queue behind it");
    CHECK_STATUS(pool_queue_wait(&q), POOL_OK, "wait");
    CHECK_STATUS(o.rc, POOL_ERR_INVALID, "blocking submit from a task of a full width-1 queue");
    CHECK_EQ(atomic_load(&o.child.runs), 0, "the refused child never ran");
    CHECK_EQ(atomic_load(&behind.runs), 1, "the task behind it ran");
    CHECK_STATUS(pool_queue_destroy(&q), POOL_OK, "destroy");

    /* 8. a handoff queue */
    atomic_store(&release, 0);
    CHECK_STATUS(pool_queue_init(&q, pool, 2, POOL_QUEUE_HANDOFF, NULL), POOL_OK, "init handoff, width 2");
    CHECK_STATUS(pool_queue_init_target(&slow, &q, 1, 0, NULL), POOL_ERR_INVALID, "init_target(handoff target)");
    struct job h[3];
    for (int i = 0; i < 3; i++)
        h[i] = (struct job){ .task = { .callback = job_run }, .n = -1, .blocks = i < 2 };
    CHECK_STATUS(pool_queue_submit(&q, &h[0].task), POOL_OK, "handoff submit 1");
    CHECK_STATUS(pool_queue_submit(&q, &h[1].task), POOL_OK, "handoff submit 2");
    CHECK_STATUS(pool_queue_submit(&q, &h[2].task), POOL_ERR_FULL, "handoff submit 3: both slots taken");
    CHECK_STATUS(pool_queue_submit_timeout(&q, &h[2].task, 5000000), POOL_ERR_FULL, "timed handoff submit");
    CHECK_STATUS(pool_queue_stats(&q, &st), POOL_OK, "handoff stats");
    CHECK(st.bound == POOL_QUEUE_HANDOFF && st.waiting + st.running == 2 && st.refused == 2,
          "handoff stats: bound POOL_QUEUE_HANDOFF, 2 tasks in the slots, 2 refused");
    atomic_store(&release, 1);
    CHECK_STATUS(pool_queue_submit_timeout(&q, &h[2].task, -1), POOL_OK, "blocking handoff submit, accepted as a blocker ends");
    CHECK_STATUS(pool_queue_wait(&q), POOL_OK, "wait");
    CHECK_EQ(atomic_load(&h[0].runs) + atomic_load(&h[1].runs) + atomic_load(&h[2].runs), 3, "each handoff task ran once");
    CHECK_STATUS(pool_queue_destroy(&q), POOL_OK, "destroy");

    pool_destroy(pool);
    return test_finish();
}
