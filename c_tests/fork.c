/*
 * fork.c: fork() in a process that uses the pool (pool.h, POOL_ERR_FORKED; README, "Process
 * and threading rules"). Every case runs in forked children; each child has its own alarm
 * (CHILD_LIMIT_S: a hang exits with status 2) and the parent a watchdog over everything.
 *
 *   1. the global pool busy: two producer threads keep submitting to the global pool (and
 *      the global blocking pool) while the main thread forks FORKS times; each child's
 *      global pool, reset in place, runs its own tasks exactly once;
 *   2. an explicit pool and a blocking pool inherited from the parent, with tasks queued
 *      behind a task that blocks: in the child every call returns POOL_ERR_FORKED (submit,
 *      batch, fork, latch wait, shutdown), none of the parent's tasks runs, destroy returns,
 *      and a pool created in the child works; the parent's pools are unaffected;
 *   3. the global blocking pool, configured before its first use: in the child it works
 *      and keeps its configuration (at most its cap of threads at once; configuring it again
 *      is POOL_ERR_STARTED);
 *   4. fork then exec with the global pool busy: the new image uses the pool and exits 0.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define FORKS 10
#define CHILD_TASKS 1000
#define CHILD_LIMIT_S 20
#define BLOCKING_CAP 3

/* ---- counting tasks (heap-allocated, freed by their callback) ---- */

static atomic_size_t ran;

struct counted {
    struct task task;
};

static void counted_run(struct task *t)
{
    atomic_fetch_add(&ran, 1);
    free(container_of(t, struct counted, task));
}

static int submit_counted(struct pool *pool)
{
    struct counted *c = malloc(sizeof *c);
    int rc;
    if (c == NULL)
        return POOL_ERR_NOMEM;
    c->task.next = NULL;
    c->task.callback = counted_run;
    rc = pool == NULL ? pool_submit(&c->task) : pool_submit_to(pool, &c->task);
    if (rc != POOL_OK)
        free(c);
    return rc;
}

struct counted_blocking {
    struct pool_blocking_task task;
};

static atomic_int blocking_now, blocking_peak;

static void counted_blocking_run(struct task *t)
{
    int now = atomic_fetch_add(&blocking_now, 1) + 1;
    int peak = atomic_load(&blocking_peak);
    while (now > peak && !atomic_compare_exchange_weak(&blocking_peak, &peak, now)) {
    }
    sleep_us(2000);
    atomic_fetch_sub(&blocking_now, 1);
    atomic_fetch_add(&ran, 1);
    free(container_of(t, struct counted_blocking, task.task));
}

static int submit_counted_blocking(void)
{
    struct counted_blocking *c = malloc(sizeof *c);
    int rc;
    if (c == NULL)
        return POOL_ERR_NOMEM;
    pool_blocking_task_init(&c->task, counted_blocking_run, NULL, POOL_BLOCKING_MANDATORY);
    rc = pool_blocking_submit(&c->task);
    if (rc != POOL_OK)
        free(c);
    return rc;
}

/* Waits (in a child) until `ran` reaches `want`; the child's alarm catches a hang. */
static void wait_ran(size_t want)
{
    while (atomic_load(&ran) < want)
        sleep_us(200);
}

/*
 * A child's verdict: 0 passed, 10+ a failed check, written to memory shared with the parent
 * just before the child exits (-1 until then: a hang ends in the child's alarm, status 2,
 * without a verdict). The verdict, not the exit status, decides: under valgrind or
 * LeakSanitizer a child's exit status also reports what the parent's threads had allocated
 * (their thread-start records live on stacks that do not exist in the child), which the child
 * can neither use nor free.
 */
static volatile int *verdict;

static void child_start(void)
{
    signal(SIGALRM, SIG_DFL);
    test_watchdog_start(CHILD_LIMIT_S);
}

static void child_exit(int code)
{
    *verdict = code;
    _exit(code);
}

static pid_t fork_child(void)
{
    *verdict = -1;
    fflush(stdout);
    return fork();
}

static void check_child(pid_t pid, const char *what)
{
    int status = 0;
    if (!CHECK(pid > 0, "fork"))
        return;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    if (*verdict != 0 || !WIFEXITED(status))
        printf("  %s: verdict %d, child %s %d\n", what, *verdict, WIFEXITED(status) ? "exit status" : "killed by signal",
               WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    CHECK(WIFEXITED(status) && *verdict == 0, what);
}

/* ---- 1 and 4: the global pool busy ---- */

static atomic_int producers_stop;

static void *producer(void *arg)
{
    int blocking = arg != NULL;
    while (!atomic_load(&producers_stop)) {
        if (blocking)
            submit_counted_blocking();
        else
            for (int i = 0; i < 64; i++)
                submit_counted(NULL);
        sched_yield();
    }
    return NULL;
}

static int global_child(void)
{
    child_start();
    /* The parent's count, copied: restart it; nothing of the parent's queue runs here. */
    atomic_store(&ran, 0);
    for (int i = 0; i < CHILD_TASKS; i++)
        if (submit_counted(NULL) != POOL_OK)
            return 10;
    wait_ran(CHILD_TASKS);
    for (int i = 0; i < 4; i++)
        if (submit_counted_blocking() != POOL_OK)
            return 11;
    wait_ran(CHILD_TASKS + 4);
    sleep_us(20 * 1000);
    return atomic_load(&ran) == CHILD_TASKS + 4 ? 0 : 12; /* exactly once each */
}

static void case_global_busy(const char *self)
{
    pthread_t threads[3];
    atomic_store(&producers_stop, 0);
    pthread_create(&threads[0], NULL, producer, NULL);
    pthread_create(&threads[1], NULL, producer, NULL);
    pthread_create(&threads[2], NULL, producer, (void *)1);
    for (int i = 0; i < FORKS; i++) {
        pid_t pid = fork_child();
        if (pid == 0)
            child_exit(global_child());
        check_child(pid, "1. child of a busy global pool: its global pools work");
        sleep_us(1000);
    }
    /* 4. fork then exec, still busy. The new image inherits nothing (valgrind does not follow
     * an exec here): its exit status is the verdict. */
    pid_t pid = fork_child();
    if (pid == 0) {
        char *argv[] = {(char *)self, "exec-child", NULL};
        execv(self, argv);
        child_exit(13);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork and wait for the exec child");
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        printf("  exec child: status 0x%x\n", status);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "4. fork then exec: the new image uses the pool");
    atomic_store(&producers_stop, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(threads[i], NULL);
}

/* ---- 2: inherited explicit pools ---- */

static atomic_int gate_open;

static void gate_run(struct task *t)
{
    (void)t;
    while (!atomic_load(&gate_open))
        sleep_us(200);
}

static void noop_run(struct task *t)
{
    (void)t;
}

static int inherited_child(struct pool *pool, struct pool_blocking *blocking)
{
    struct task t = {NULL, noop_run}, u = {NULL, noop_run};
    struct pool_blocking_task bt;
    struct pool_latch latch;
    struct pool *fresh = NULL;
    size_t before = atomic_load(&ran);
    child_start();
    if (pool_submit_to(pool, &t) != POOL_ERR_FORKED)
        return 20;
    t.next = &u;
    if (pool_submit_batch_to(pool, &t) != POOL_ERR_FORKED)
        return 21;
    t.next = NULL;
    if (pool_fork(pool, &t) != POOL_ERR_FORKED)
        return 22;
    pool_latch_init(&latch);
    if (pool_latch_wait(pool, &latch) != POOL_ERR_FORKED)
        return 23;
    if (pool_shutdown(pool) != POOL_ERR_FORKED)
        return 24;
    pool_blocking_task_init(&bt, noop_run, NULL, 0);
    if (pool_blocking_submit_to(blocking, &bt) != POOL_ERR_FORKED)
        return 25;
    if (pool_blocking_shutdown(blocking) != POOL_ERR_FORKED)
        return 26;
    pool_destroy(pool);
    pool_blocking_destroy(blocking);
    sleep_us(50 * 1000);
    if (atomic_load(&ran) != before)
        return 27; /* a task queued in the parent ran in the child */
    if (pool_create(NULL, &fresh) != POOL_OK)
        return 28;
    atomic_store(&ran, 0);
    for (int i = 0; i < 100; i++)
        if (submit_counted(fresh) != POOL_OK)
            return 29;
    pool_destroy(fresh); /* runs what is queued */
    return atomic_load(&ran) == 100 ? 0 : 30;
}

static void case_inherited(void)
{
    struct pool_config cfg;
    struct pool *pool = NULL;
    struct pool_blocking *blocking = NULL;
    struct task gate = {NULL, gate_run};
    size_t before;
    pool_config_init(&cfg);
    cfg.max_threads = 1;
    atomic_store(&gate_open, 0);
    CHECK_STATUS(pool_create(&cfg, &pool), POOL_OK, "2. pool_create");
    CHECK_STATUS(pool_blocking_create(NULL, &blocking), POOL_OK, "2. pool_blocking_create");
    CHECK_STATUS(pool_submit_to(pool, &gate), POOL_OK, "2. submit the blocking gate task");
    before = atomic_load(&ran);
    for (int i = 0; i < 100; i++)
        submit_counted(pool); /* queued behind the gate */
    pid_t pid = fork_child();
    if (pid == 0)
        child_exit(inherited_child(pool, blocking));
    check_child(pid, "2. inherited pools: POOL_ERR_FORKED, nothing of the parent's runs, destroy returns");
    /* The parent's pools are untouched by the child. */
    atomic_store(&gate_open, 1);
    CHECK_STATUS(pool_shutdown(pool), POOL_OK, "2. the parent's pool_shutdown");
    CHECK_EQ(atomic_load(&ran) - before, 100, "2. the parent's queued tasks ran in the parent");
    pool_destroy(pool);
    pool_blocking_destroy(blocking);
}

/* ---- 3: the global blocking pool keeps its configuration ---- */

static int blocking_child(void)
{
    struct pool_blocking_config cfg;
    child_start();
    atomic_store(&ran, 0);
    /* The parent's tasks in flight at the fork were counted in this copy: they do not exist here. */
    atomic_store(&blocking_now, 0);
    atomic_store(&blocking_peak, 0);
    pool_blocking_config_init(&cfg);
    if (pool_blocking_global_configure(&cfg) != POOL_ERR_STARTED)
        return 40;
    for (int i = 0; i < 30; i++)
        if (submit_counted_blocking() != POOL_OK)
            return 41;
    wait_ran(30);
    return atomic_load(&blocking_peak) <= BLOCKING_CAP ? 0 : 42;
}

static void case_global_blocking(void)
{
    struct pool_blocking_config cfg;
    pool_blocking_config_init(&cfg);
    cfg.max_threads = BLOCKING_CAP;
    /* Only if nothing used it yet in this process: case 1 does, so run this case first. */
    CHECK_STATUS(pool_blocking_global_configure(&cfg), POOL_OK, "3. pool_blocking_global_configure");
    for (int i = 0; i < 10; i++)
        submit_counted_blocking();
    pid_t pid = fork_child();
    if (pid == 0)
        child_exit(blocking_child());
    check_child(pid, "3. the child's global blocking pool works with the parent's configuration");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "exec-child") == 0) {
        child_start();
        for (int i = 0; i < CHILD_TASKS; i++)
            if (submit_counted(NULL) != POOL_OK)
                return 50;
        wait_ran(CHILD_TASKS);
        return 0;
    }
    test_watchdog_start(300);
#if defined(__SANITIZE_ADDRESS__)
    /* gcc's AddressSanitizer allocator does not take its locks around fork: a child of a
     * process whose threads were allocating can deadlock inside it (google/sanitizers#774).
     * This program runs plain and under valgrind instead. */
    printf("SKIP: fork of a multi-threaded process under AddressSanitizer\n");
    return test_finish();
#endif
    verdict = mmap(NULL, sizeof *verdict, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (verdict == MAP_FAILED) {
        printf("FAIL: mmap\n");
        return 1;
    }
    case_global_blocking();
    case_inherited();
    case_global_busy(argv[0]);
    return test_finish();
}
