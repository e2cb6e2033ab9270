/*
 * blocking.c: the blocking pool from C (pool_blocking_*).
 *
 *   - a host struct embeds `struct pool_blocking_task` and recovers itself with
 *     POOL_CONTAINER_OF(task, struct job, bt.task);
 *   - sleeping tasks on a small cap: the cap holds, every task runs exactly once;
 *   - keep-alive: the pool goes back to zero threads;
 *   - shutdown with tasks still queued: mandatory ones (and those without a cancel callback)
 *     run, the others come back through their cancel callback, so the host frees them;
 *   - a bounded queue (pool_blocking_set_max_queued): producers racing for the places get
 *     POOL_OK or POOL_ERR_FULL, accepted + refused = attempts, never more waiting than the
 *     bound, a refused task untouched; a place frees when a waiting task starts;
 *   - the global blocking pool; metrics; bad arguments get status codes.
 *
 * Build: make lib && cc -std=c11 -Wall -Wextra -Werror -Iinclude c_tests/blocking.c \
 *        target/release/libpool.a -lpthread -ldl -lm -o build/blocking && ./build/blocking
 */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>

struct job {
    int id;
    unsigned sleep_us;
    atomic_int *ran;       /* per-id counters owned by the test */
    atomic_int *cancelled;
    struct pool_blocking_task bt;
    int heap;              /* freed by whichever callback is called */
};

static atomic_int total_done;

static void job_run(struct task *t)
{
    struct job *j = POOL_CONTAINER_OF(t, struct job, bt.task);
    if (j->sleep_us)
        sleep_us((long)j->sleep_us);
    atomic_fetch_add(&j->ran[j->id], 1);
    int heap = j->heap;
    if (heap)
        free(j);
    atomic_fetch_add(&total_done, 1);
}

static void job_cancel(struct task *t)
{
    struct job *j = POOL_CONTAINER_OF(t, struct job, bt.task);
    atomic_fetch_add(&j->cancelled[j->id], 1);
    if (j->heap)
        free(j);
    atomic_fetch_add(&total_done, 1);
}

static struct job *new_job(int id, unsigned sleep_us, atomic_int *ran, atomic_int *cancelled, int cancellable,
                           unsigned flags)
{
    struct job *j = malloc(sizeof *j);
    if (!j) {
        printf("FAIL: out of memory\n");
        exit(1);
    }
    j->id = id;
    j->sleep_us = sleep_us;
    j->ran = ran;
    j->cancelled = cancelled;
    j->heap = 1;
    int rc = pool_blocking_task_init(&j->bt, job_run, cancellable ? job_cancel : NULL, flags);
    if (rc != POOL_OK) {
        printf("FAIL: pool_blocking_task_init: %s\n", pool_status_str(rc));
        exit(1);
    }
    return j;
}

struct done_ctx {
    int want;
};

static int done_reached(void *ctx)
{
    return atomic_load(&total_done) >= ((struct done_ctx *)ctx)->want;
}

static void done_report(void *ctx)
{
    printf("  done %d of %d\n", atomic_load(&total_done), ((struct done_ctx *)ctx)->want);
}

static void wait_done(int want)
{
    struct done_ctx c = {want};
    wait_until(done_reached, &c, done_report, "blocking tasks to finish");
}

/* Sleeping tasks on cap 8: the cap holds, all run once, keep-alive brings threads to 0. */
static void test_cap_and_keep_alive(void)
{
    enum { N = 400 };
    static atomic_int ran[N], cancelled[N];
    struct pool_blocking_config cfg;
    pool_blocking_config_init(&cfg);
    CHECK_EQ(cfg.max_threads, 512, "default cap");
    CHECK_EQ(cfg.keep_alive_ms, 10000, "default keep-alive");
    cfg.max_threads = 8;
    cfg.keep_alive_ms = 50;
    struct pool_blocking *p = NULL;
    CHECK_STATUS(pool_blocking_create(&cfg, &p), POOL_OK, "create");
    atomic_store(&total_done, 0);
    size_t max_threads = 0;
    for (int i = 0; i < N; i++) {
        struct job *j = new_job(i, 500, ran, cancelled, 1, 0);
        int rc = pool_blocking_submit_to(p, &j->bt);
        if (rc != POOL_OK) {
            CHECK_STATUS(rc, POOL_OK, "submit");
            free(j);
        }
        struct pool_blocking_metrics m;
        pool_blocking_metrics(p, &m);
        if (m.threads > max_threads)
            max_threads = m.threads;
    }
    wait_done(N);
    struct pool_blocking_metrics m;
    CHECK_STATUS(pool_blocking_metrics(p, &m), POOL_OK, "metrics");
    CHECK(m.peak_threads <= 8 && max_threads <= 8, "cap 8 respected");
    CHECK(m.peak_threads >= 2, "the pool grew beyond one thread");
    int once = 1;
    for (int i = 0; i < N; i++)
        once &= atomic_load(&ran[i]) == 1 && atomic_load(&cancelled[i]) == 0;
    CHECK(once, "every task ran exactly once");
    /* Keep-alive: back to zero threads. The counters are read one by one: a thread leaving gives
     * its place back (threads) before it counts its exit (threads_exited), so wait for both. */
    double t0 = now_sec();
    do {
        pool_blocking_metrics(p, &m);
        if (m.threads == 0 && m.threads_spawned == m.threads_exited)
            break;
        sleep_us(1000);
    } while (now_sec() - t0 < 5.0);
    CHECK_EQ(m.threads, 0, "zero threads after the keep-alive");
    CHECK_EQ(m.idle_threads, 0, "zero idle threads");
    CHECK_EQ(m.threads_spawned, m.threads_exited, "every thread that started exited");
    CHECK_EQ(m.tasks_run, N, "tasks_run");
    /* It grows again on demand. */
    atomic_store(&total_done, 0);
    struct job *j = new_job(0, 0, ran, cancelled, 1, 0);
    CHECK_STATUS(pool_blocking_submit_to(p, &j->bt), POOL_OK, "submit after shrinking");
    wait_done(1);
    CHECK_STATUS(pool_blocking_shutdown(p), POOL_OK, "shutdown");
    CHECK_STATUS(pool_blocking_shutdown(p), POOL_ERR_SHUTDOWN, "shutdown twice");
    pool_blocking_destroy(p);
}

/* Gate that holds the pool's only thread until shutdown has begun. */
static atomic_int gate_open, gate_entered;

static void gate_run(struct task *t)
{
    (void)t;
    atomic_store(&gate_entered, 1);
    while (!atomic_load(&gate_open))
        sleep_us(200);
}

struct shutdown_arg {
    struct pool_blocking *p;
    int rc;
};

static void *shutdown_thread(void *arg)
{
    struct shutdown_arg *a = arg;
    a->rc = pool_blocking_shutdown(a->p);
    return NULL;
}

/* Shutdown with tasks queued: mandatory run, cancellable ones come back, none lost. */
static void test_shutdown_hand_back(void)
{
    enum { N = 90 };
    static atomic_int ran[N], cancelled[N];
    static atomic_int probe_ran[1], probe_cancelled[1];
    struct pool_blocking_config cfg;
    pool_blocking_config_init(&cfg);
    cfg.max_threads = 1;
    struct pool_blocking *p = NULL;
    CHECK_STATUS(pool_blocking_create(&cfg, &p), POOL_OK, "create cap 1");
    struct pool_blocking_task gate;
    CHECK_STATUS(pool_blocking_task_init(&gate, gate_run, NULL, POOL_BLOCKING_MANDATORY), POOL_OK, "gate init");
    CHECK_STATUS(pool_blocking_submit_to(p, &gate), POOL_OK, "submit gate");
    while (!atomic_load(&gate_entered))
        sleep_us(100);
    atomic_store(&total_done, 0);
    for (int i = 0; i < N; i++) {
        /* i % 3: 0 mandatory, 1 cancellable, 2 no cancel callback (runs). */
        struct job *j = new_job(i, 0, ran, cancelled, i % 3 != 2, i % 3 == 0 ? POOL_BLOCKING_MANDATORY : 0);
        CHECK_STATUS(pool_blocking_submit_to(p, &j->bt), POOL_OK, "submit behind the gate");
    }
    struct pool_blocking_metrics m;
    pool_blocking_metrics(p, &m);
    CHECK_EQ(m.queue_depth, N, "queue depth while the gate holds the thread");
    pthread_t th;
    struct shutdown_arg arg = {p, 1};
    CHECK(pthread_create(&th, NULL, shutdown_thread, &arg) == 0, "start the shutdown thread");
    /* Shutdown has begun once submits are refused. */
    struct job *probe = new_job(0, 0, probe_ran, probe_cancelled, 1, 0);
    int rc, probes = 0;
    while ((rc = pool_blocking_submit_to(p, &probe->bt)) == POOL_OK) {
        /* Accepted before shutdown began: it will be handed back (and freed) like the
         * others; take a fresh probe. */
        probes++;
        probe = new_job(0, 0, probe_ran, probe_cancelled, 1, 0);
        sleep_us(200);
    }
    CHECK_STATUS(rc, POOL_ERR_SHUTDOWN, "submit after shutdown began");
    free(probe);
    atomic_store(&gate_open, 1);
    pthread_join(th, NULL);
    CHECK_STATUS(arg.rc, POOL_OK, "shutdown");
    int ok = 1;
    for (int i = 0; i < N; i++) {
        int r = atomic_load(&ran[i]), c = atomic_load(&cancelled[i]);
        if (i % 3 == 1)
            ok &= r == 0 && c == 1;
        else
            ok &= r == 1 && c == 0;
    }
    CHECK(ok, "mandatory and uncancellable tasks ran once, the others were handed back");
    CHECK(atomic_load(&total_done) == N + probes, "every task came back exactly once");
    CHECK(atomic_load(&probe_ran[0]) == 0 && atomic_load(&probe_cancelled[0]) == probes,
          "probes accepted before shutdown were handed back");
    pool_blocking_metrics(p, &m);
    CHECK_EQ(m.threads, 0, "no thread after shutdown");
    CHECK_EQ(m.queue_depth, 0, "empty queue after shutdown");
    struct pool_blocking_task late;
    pool_blocking_task_init(&late, job_run, job_cancel, 0);
    CHECK_STATUS(pool_blocking_submit_to(p, &late), POOL_ERR_SHUTDOWN, "submit after shutdown");
    pool_blocking_destroy(p);
}

/* A bounded queue behind a gate holding the only thread. */
static atomic_int bound_gate_open, bound_gate_entered;

static void bound_gate_run(struct task *t)
{
    (void)t;
    atomic_store(&bound_gate_entered, 1);
    while (!atomic_load(&bound_gate_open))
        sleep_us(200);
}

enum { BOUND = 4, PRODUCERS = 4, TRIES = 50 };
static atomic_int bound_ran[PRODUCERS * TRIES], bound_cancelled[PRODUCERS * TRIES];

struct producer {
    struct pool_blocking *p;
    int first_id;
    int ok, full, other, untouched;
    size_t max_depth;
};

static void *bounded_producer(void *arg)
{
    struct producer *a = arg;
    a->untouched = 1;
    for (int i = 0; i < TRIES; i++) {
        struct job *j = new_job(a->first_id + i, 0, bound_ran, bound_cancelled, 1, 0);
        struct pool_blocking_task before = j->bt;
        int rc = pool_blocking_submit_to(a->p, &j->bt);
        if (rc == POOL_OK) {
            a->ok++;
        } else {
            if (rc == POOL_ERR_FULL)
                a->full++;
            else
                a->other++;
            /* Field by field: the struct's padding is never written, by anyone. */
            a->untouched &= before.task.next == j->bt.task.next && before.task.callback == j->bt.task.callback
                && before.cancel == j->bt.cancel && before.flags == j->bt.flags;
            free(j);
        }
        struct pool_blocking_metrics m;
        pool_blocking_metrics(a->p, &m);
        if (m.queue_depth > a->max_depth)
            a->max_depth = m.queue_depth;
    }
    return NULL;
}

static void test_bounded_intake(void)
{
    struct pool_blocking_config cfg;
    pool_blocking_config_init(&cfg);
    cfg.max_threads = 1;
    struct pool_blocking *p = NULL;
    CHECK_STATUS(pool_blocking_create(&cfg, &p), POOL_OK, "create cap 1");
    CHECK_STATUS(pool_blocking_set_max_queued(NULL, 1), POOL_ERR_INVALID, "set_max_queued NULL");
    CHECK_STATUS(pool_blocking_set_max_queued(p, BOUND), POOL_OK, "set_max_queued");
    struct pool_blocking_task gate;
    pool_blocking_task_init(&gate, bound_gate_run, NULL, POOL_BLOCKING_MANDATORY);
    CHECK_STATUS(pool_blocking_submit_to(p, &gate), POOL_OK, "submit gate");
    while (!atomic_load(&bound_gate_entered))
        sleep_us(100);
    atomic_store(&total_done, 0);

    /* The only thread is held: producers race for BOUND places. */
    pthread_t th[PRODUCERS];
    struct producer a[PRODUCERS];
    for (int i = 0; i < PRODUCERS; i++) {
        a[i] = (struct producer){.p = p, .first_id = i * TRIES};
        CHECK(pthread_create(&th[i], NULL, bounded_producer, &a[i]) == 0, "start a producer");
    }
    int ok = 0, full = 0, other = 0, untouched = 1;
    size_t max_depth = 0;
    for (int i = 0; i < PRODUCERS; i++) {
        pthread_join(th[i], NULL);
        ok += a[i].ok;
        full += a[i].full;
        other += a[i].other;
        untouched &= a[i].untouched;
        if (a[i].max_depth > max_depth)
            max_depth = a[i].max_depth;
    }
    CHECK_EQ(ok, BOUND, "accepted while the thread is held: exactly the bound");
    CHECK_EQ(full, PRODUCERS * TRIES - BOUND, "refused: every other attempt, with POOL_ERR_FULL");
    CHECK_EQ(other, 0, "no other status");
    CHECK(untouched, "a refused task is untouched");
    CHECK(max_depth <= BOUND, "never more waiting than the bound");

    /* Lowering the bound drops nothing; raising it opens places at once. */
    CHECK_STATUS(pool_blocking_set_max_queued(p, 1), POOL_OK, "lower the bound");
    struct job *j = new_job(0, 0, bound_ran, bound_cancelled, 1, 0);
    CHECK_STATUS(pool_blocking_submit_to(p, &j->bt), POOL_ERR_FULL, "full below what waits");
    struct pool_blocking_metrics m;
    CHECK_STATUS(pool_blocking_metrics(p, &m), POOL_OK, "metrics");
    CHECK_EQ(m.tasks_refused, (size_t)full + 1, "every refusal counted in tasks_refused");
    CHECK_STATUS(pool_blocking_set_max_queued(p, 0), POOL_OK, "no bound");
    CHECK_STATUS(pool_blocking_submit_to(p, &j->bt), POOL_OK, "accepted without a bound");
    ok++;

    /* Open the gate: every accepted task runs once, the queue empties, places free. */
    atomic_store(&bound_gate_open, 1);
    wait_done(ok);
    int runs = 0;
    for (int i = 0; i < PRODUCERS * TRIES; i++)
        runs += atomic_load(&bound_ran[i]) + atomic_load(&bound_cancelled[i]);
    CHECK_EQ(runs, ok, "every accepted task ran exactly once");
    CHECK_STATUS(pool_blocking_set_max_queued(p, 1), POOL_OK, "bound 1");
    struct job *again = new_job(1, 0, bound_ran, bound_cancelled, 1, 0);
    CHECK_STATUS(pool_blocking_submit_to(p, &again->bt), POOL_OK, "a place freed once the tasks started");
    wait_done(ok + 1);
    CHECK_STATUS(pool_blocking_shutdown(p), POOL_OK, "shutdown");
    struct job *late = new_job(2, 0, bound_ran, bound_cancelled, 1, 0);
    CHECK_STATUS(pool_blocking_submit_to(p, &late->bt), POOL_ERR_SHUTDOWN, "shut down, not full");
    free(late);
    pool_blocking_destroy(p);
}

/* The process-wide pool. */
static void test_global(void)
{
    enum { N = 64 };
    static atomic_int ran[N], cancelled[N];
    atomic_store(&total_done, 0);
    for (int i = 0; i < N; i++) {
        struct job *j = new_job(i, 100, ran, cancelled, 1, 0);
        CHECK_STATUS(pool_blocking_submit(&j->bt), POOL_OK, "global submit");
    }
    wait_done(N);
    struct pool_blocking_metrics m;
    CHECK_STATUS(pool_blocking_global_metrics(&m), POOL_OK, "global metrics");
    CHECK(m.tasks_run >= N, "global tasks ran");
    CHECK(m.peak_threads <= POOL_BLOCKING_DEFAULT_MAX_THREADS, "global cap");
}

/* Bad input gets status codes, never a crash. */
static void test_bad_input(void)
{
    struct pool_blocking *p = NULL;
    struct pool_blocking_config cfg;
    pool_blocking_config_init(NULL);
    pool_blocking_config_init(&cfg);
    CHECK_STATUS(pool_blocking_create(&cfg, NULL), POOL_ERR_INVALID, "create NULL out");
    cfg.max_threads = POOL_BLOCKING_MAX_THREADS + 1;
    CHECK_STATUS(pool_blocking_create(&cfg, &p), POOL_ERR_INVALID, "cap out of range");
    pool_blocking_config_init(&cfg);
    cfg.stack_size = 100;
    CHECK_STATUS(pool_blocking_create(&cfg, &p), POOL_ERR_INVALID, "stack too small");
    CHECK(p == NULL, "out untouched on error");
    CHECK_STATUS(pool_blocking_create(NULL, &p), POOL_OK, "create with defaults");
    struct pool_blocking_task t;
    CHECK_STATUS(pool_blocking_task_init(NULL, job_run, NULL, 0), POOL_ERR_INVALID, "init NULL task");
    CHECK_STATUS(pool_blocking_task_init(&t, NULL, NULL, 0), POOL_ERR_INVALID, "init NULL callback");
    CHECK_STATUS(pool_blocking_task_init(&t, job_run, NULL, 0x80), POOL_ERR_INVALID, "init unknown flag");
    CHECK_STATUS(pool_blocking_submit_to(NULL, &t), POOL_ERR_INVALID, "submit NULL pool");
    CHECK_STATUS(pool_blocking_submit_to(p, NULL), POOL_ERR_INVALID, "submit NULL task");
    t.task.callback = NULL;
    t.cancel = NULL;
    t.flags = 0;
    CHECK_STATUS(pool_blocking_submit_to(p, &t), POOL_ERR_INVALID, "submit without callback");
    CHECK_STATUS(pool_blocking_submit(NULL), POOL_ERR_INVALID, "global submit NULL");
    CHECK_STATUS(pool_blocking_metrics(NULL, NULL), POOL_ERR_INVALID, "metrics NULL");
    CHECK_STATUS(pool_blocking_metrics(p, NULL), POOL_ERR_INVALID, "metrics NULL out");
    CHECK_STATUS(pool_blocking_global_metrics(NULL), POOL_ERR_INVALID, "global metrics NULL");
    CHECK_STATUS(pool_blocking_shutdown(NULL), POOL_ERR_INVALID, "shutdown NULL");
    pool_blocking_destroy(NULL);
    pool_blocking_destroy(p); /* never used: no thread, nothing queued */
}

int main(void)
{
    test_watchdog_start(60);
    test_cap_and_keep_alive();
    test_shutdown_hand_back();
    test_bounded_intake();
    test_global();
    test_bad_input();
    return test_finish();
}
