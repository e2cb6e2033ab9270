/* c_spawn (BENCH.md): the spawn_remote workload written in C against pool.h and libpool.a.
 *
 *   c_spawn [tasks=1000000] [threads=2] [runs=1]
 *
 * Builds a pool with `threads` workers, allocates and initialises every task before the clock
 * starts, runs the workload once as a warm-up, then `runs` measured times, and prints one line
 * per measured run: the nanoseconds per task. The tiny task is the harness's (bench/src/common.rs):
 * one relaxed fetch_add on a shared counter; the task that brings it to N signals a mutex +
 * condition variable on which the main thread waits. The timed region runs from the first
 * pool_submit_to until the main thread wakes. The pool-bench `c_spawn` workload runs this
 * program once per measured run, interleaved with the Rust spawn_remote rows. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pool.h"

/* The counter on its own cache lines, away from the mutex (as the Rust harness's Padded). */
static struct {
    alignas(128) atomic_size_t counter;
    alignas(128) size_t target;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
} shared = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void tiny(struct task *task) {
    (void)task;
    if (atomic_fetch_add_explicit(&shared.counter, 1, memory_order_relaxed) + 1 == shared.target) {
        pthread_mutex_lock(&shared.lock);
        shared.done = 1;
        pthread_cond_signal(&shared.cond);
        pthread_mutex_unlock(&shared.lock);
    }
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* One run: returns ns per task, or a negative value on a pool error. */
static double run(struct pool *pool, struct task *tasks, size_t n) {
    atomic_store_explicit(&shared.counter, 0, memory_order_relaxed);
    shared.done = 0;
    for (size_t i = 0; i < n; i++) tasks[i] = (struct task){ .next = NULL, .callback = tiny };
    double start = now_ns();
    for (size_t i = 0; i < n; i++)
        if (pool_submit_to(pool, &tasks[i]) != POOL_OK) return -1.0;
    pthread_mutex_lock(&shared.lock);
    while (!shared.done) pthread_cond_wait(&shared.cond, &shared.lock);
    pthread_mutex_unlock(&shared.lock);
    double elapsed = now_ns() - start;
    size_t ran = atomic_load_explicit(&shared.counter, memory_order_relaxed);
    if (ran != n) {
        fprintf(stderr, "c_spawn: counter %zu after the run, expected %zu\n", ran, n);
        return -1.0;
    }
    return elapsed / (double)n;
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    size_t threads = argc > 2 ? strtoull(argv[2], NULL, 10) : 2;
    int runs = argc > 3 ? atoi(argv[3]) : 1;
    if (n == 0 || runs < 1) {
        fprintf(stderr, "usage: c_spawn [tasks>0] [threads] [runs>0]\n");
        return 2;
    }
    shared.target = n;
    struct task *tasks = malloc(n * sizeof *tasks);
    if (!tasks) return 1;
    struct pool_config config;
    pool_config_init(&config);
    config.max_threads = threads;
    struct pool *pool;
    int rc = pool_create(&config, &pool);
    if (rc != POOL_OK) {
        fprintf(stderr, "c_spawn: pool_create: %s\n", pool_status_str(rc));
        return 1;
    }
    if (run(pool, tasks, n) < 0) return 1; /* warm-up: starts the threads */
    for (int r = 0; r < runs; r++) {
        double ns = run(pool, tasks, n);
        if (ns < 0) return 1;
        printf("%.3f\n", ns);
    }
    pool_destroy(pool);
    free(tasks);
    return 0;
}
