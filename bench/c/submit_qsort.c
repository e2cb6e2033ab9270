/*
 * submit_qsort (BENCH.md, zap's benchmark): quicksort 10,000,000 u32 where each partition
 * submits both halves as new tasks (submit, not join), leaves of 2,048 sorted sequentially,
 * completion by an atomic count of sorted elements. The same program on pool (pool_submit_to
 * on a pool of THREADS workers) and on a naive pool (one mutex + condvar queue, THREADS
 * threads), against the same sort run sequentially. Prints median and min-max of RUNS runs
 * (default 7) and the ratios of medians.
 *   cc -O2 -Iinclude bench/c/submit_qsort.c target/release/libpool.a -lpthread -ldl -lm
 */
#define _POSIX_C_SOURCE 200809L
#include <pool.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LEN 10000000u
#define LEAF 2048u

static uint32_t *data;

/* ---- the sort: one partition function and one leaf sort for every contender ---- */

static void swap(uint32_t *a, uint32_t *b)
{
    uint32_t t = *a;
    *a = *b;
    *b = t;
}

/* Hoare partition around the median of three; returns mid with 0 < mid < n. */
static size_t partition(uint32_t *v, size_t n)
{
    size_t m = n / 2;
    if (v[m] < v[0]) swap(&v[m], &v[0]);
    if (v[n - 1] < v[0]) swap(&v[n - 1], &v[0]);
    if (v[n - 1] < v[m]) swap(&v[n - 1], &v[m]);
    uint32_t pivot = v[m];
    size_t i = 0, j = n - 1;
    for (;;) {
        while (v[i] < pivot) i++;
        while (v[j] > pivot) j--;
        if (i >= j) return j + 1;
        swap(&v[i], &v[j]);
        i++;
        j--;
    }
}

static void sort_seq(uint32_t *v, size_t n)
{
    while (n > 16) {
        size_t mid = partition(v, n);
        sort_seq(v, mid);
        v += mid;
        n -= mid;
    }
    for (size_t i = 1; i < n; i++) {
        uint32_t x = v[i];
        size_t j = i;
        while (j > 0 && v[j - 1] > x) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

/* ---- the task-parallel sort, written once against a `submit` function ---- */

struct job {
    struct task task;
    uint32_t *v;
    size_t n;
};

static struct job *arena;
static atomic_size_t arena_next;
static atomic_size_t sorted;
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static int done;
static void (*submit)(struct task *);

static void finished(size_t n)
{
    if (atomic_fetch_add(&sorted, n) + n == LEN) {
        pthread_mutex_lock(&done_lock);
        done = 1;
        pthread_cond_signal(&done_cond);
        pthread_mutex_unlock(&done_lock);
    }
}

static void job_run(struct task *t);

static void spawn(uint32_t *v, size_t n)
{
    struct job *j = &arena[atomic_fetch_add(&arena_next, 1)];
    j->task.callback = job_run;
    j->v = v;
    j->n = n;
    submit(&j->task);
}

static void job_run(struct task *t)
{
    struct job *j = (struct job *)((char *)t - offsetof(struct job, task));
    if (j->n <= LEAF) {
        sort_seq(j->v, j->n);
        finished(j->n);
        return;
    }
    size_t mid = partition(j->v, j->n);
    spawn(j->v, mid);
    spawn(j->v + mid, j->n - mid);
}

static void run_parallel(void)
{
    atomic_store(&arena_next, 0);
    atomic_store(&sorted, 0);
    done = 0;
    spawn(data, LEN);
    pthread_mutex_lock(&done_lock);
    while (!done) pthread_cond_wait(&done_cond, &done_lock);
    pthread_mutex_unlock(&done_lock);
}

/* ---- pool ---- */

static struct pool *the_pool;

static void pool_submit_job(struct task *t)
{
    if (pool_submit_to(the_pool, t) != POOL_OK) abort();
}

/* ---- the naive pool: one mutex, one condvar, a FIFO list ---- */

static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER;
static struct task *q_head, *q_tail;
static int q_stop;

static void naive_submit(struct task *t)
{
    t->next = NULL;
    pthread_mutex_lock(&q_lock);
    if (q_tail) q_tail->next = t; else q_head = t;
    q_tail = t;
    pthread_cond_signal(&q_cond);
    pthread_mutex_unlock(&q_lock);
}

static void *naive_worker(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&q_lock);
        while (!q_head && !q_stop) pthread_cond_wait(&q_cond, &q_lock);
        if (!q_head) {
            pthread_mutex_unlock(&q_lock);
            return NULL;
        }
        struct task *t = q_head;
        q_head = t->next;
        if (!q_head) q_tail = NULL;
        pthread_mutex_unlock(&q_lock);
        t->callback(t);
    }
}

/* ---- harness ---- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void fill(void)
{
    uint32_t x = 0xdeadbeef;
    for (size_t i = 0; i < LEN; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        data[i] = x;
    }
}

static void check(const char *who)
{
    for (size_t i = 1; i < LEN; i++) {
        if (data[i - 1] > data[i]) {
            fprintf(stderr, "%s: not sorted at %zu\n", who, i);
            exit(1);
        }
    }
}

static void report(const char *who, double *t, int runs, double base)
{
    qsort(t, runs, sizeof t[0], cmp_double);
    printf("%-10s median %7.1f ms (%.1f-%.1f)  %.2fx sequential\n", who, t[runs / 2], t[0], t[runs - 1],
           t[runs / 2] / base);
}

int main(int argc, char **argv)
{
    size_t threads = argc > 1 ? strtoul(argv[1], NULL, 10) : 2;
    int runs = argc > 2 ? atoi(argv[2]) : 7;
    if (runs < 1 || runs > 64) runs = 7;
    data = malloc(LEN * sizeof *data);
    arena = malloc(4 * (LEN / LEAF + 16) * sizeof *arena);
    struct pool_config cfg;
    pool_config_init(&cfg);
    cfg.max_threads = threads;
    if (!data || !arena || pool_create(&cfg, &the_pool) != POOL_OK) return 1;
    pthread_t naive[64];
    for (size_t i = 0; i < threads && i < 64; i++) pthread_create(&naive[i], NULL, naive_worker, NULL);

    double seq[64], ours[64], theirs[64];
    for (int r = 0; r < runs; r++) {
        /* Interleaved, so a noisy moment hits every contender alike. */
        fill();
        double t = now_ms();
        sort_seq(data, LEN);
        seq[r] = now_ms() - t;
        check("sequential");

        fill();
        submit = pool_submit_job;
        t = now_ms();
        run_parallel();
        ours[r] = now_ms() - t;
        check("pool");

        fill();
        submit = naive_submit;
        t = now_ms();
        run_parallel();
        theirs[r] = now_ms() - t;
        check("naive");
    }
    qsort(seq, runs, sizeof seq[0], cmp_double);
    double base = seq[runs / 2];
    printf("submit_qsort: %u u32, leaves of %u, %zu threads, %d runs\n", LEN, LEAF, threads, runs);
    report("sequential", seq, runs, base);
    report("pool", ours, runs, base);
    report("naive", theirs, runs, base);
    printf("pool / naive (medians): %.2f\n", ours[runs / 2] / theirs[runs / 2]);
    struct pool_stats st;
    if (pool_stats(the_pool, &st) == POOL_OK) {
        printf("pool stats: polled %zu, steals %zu (stolen %zu), parks %zu, injector fetches %zu\n", (size_t)st.polled,
               (size_t)st.steals, (size_t)st.stolen, (size_t)st.parks, (size_t)st.injector_fetches);
    }

    pthread_mutex_lock(&q_lock);
    q_stop = 1;
    pthread_cond_broadcast(&q_cond);
    pthread_mutex_unlock(&q_lock);
    for (size_t i = 0; i < threads && i < 64; i++) pthread_join(naive[i], NULL);
    pool_destroy(the_pool);
    free(arena);
    free(data);
    return 0;
}
