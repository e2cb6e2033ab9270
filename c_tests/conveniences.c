/* The conveniences: pool_submit_fn (fn + arg, one allocation per call), pool_parallel_for
 * (chunks over fork-join), pool_wait_idle (every task submitted so far has finished), worker thread names (pool_config.thread_name_prefix) and thread
 * start/stop hooks (pool_config.on_thread_start / on_thread_stop). */
#define _GNU_SOURCE
#include "common.h"
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/* ---- pool_submit_fn ----------------------------------------------------------------------- */

static atomic_long fn_sum;
static void add_arg(void *arg) { atomic_fetch_add(&fn_sum, (long)(intptr_t)arg); }

struct done_latch { struct pool_latch latch; atomic_long calls; };
static void count_and_done(void *arg)
{
    struct done_latch *d = arg;
    atomic_fetch_add(&d->calls, 1);
    pool_latch_done(&d->latch);
}

static void test_submit_fn(struct pool *pool)
{
    struct done_latch d;
    size_t n = scaled(10000, 100);
    atomic_init(&d.calls, 0);
    pool_latch_init(&d.latch);
    pool_latch_add(&d.latch, n);
    for (size_t i = 0; i < n; i++) {
        int rc = pool_submit_fn(pool, count_and_done, &d);
        if (rc != POOL_OK) { CHECK_STATUS(rc, POOL_OK, "pool_submit_fn"); return; }
    }
    CHECK_STATUS(pool_latch_wait(pool, &d.latch), POOL_OK, "latch wait");
    CHECK_EQ(atomic_load(&d.calls), (long)n, "each fn called once");

    CHECK_STATUS(pool_submit_fn(NULL, add_arg, NULL), POOL_ERR_INVALID, "submit_fn(NULL pool)");
    CHECK_STATUS(pool_submit_fn(pool, NULL, NULL), POOL_ERR_INVALID, "submit_fn(NULL fn)");
}

/* ---- pool_parallel_for -------------------------------------------------------------------- */

struct pfor { unsigned char *hits; size_t grain; atomic_long chunks; atomic_int too_big; };
static void mark(void *ctx, size_t begin, size_t end)
{
    struct pfor *p = ctx;
    if (end <= begin || (p->grain && end - begin > p->grain)) atomic_store(&p->too_big, 1);
    for (size_t i = begin; i < end; i++) p->hits[i]++;
    atomic_fetch_add(&p->chunks, 1);
}

static void check_parallel_for(struct pool *pool, size_t n, size_t grain)
{
    struct pfor p;
    char what[96];
    p.hits = calloc(n ? n : 1, 1);
    p.grain = grain;
    atomic_init(&p.chunks, 0);
    atomic_init(&p.too_big, 0);
    snprintf(what, sizeof what, "parallel_for n=%zu grain=%zu", n, grain);
    CHECK_STATUS(pool_parallel_for(pool, n, grain, mark, &p), POOL_OK, what);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += p.hits[i] != 1;
    snprintf(what, sizeof what, "n=%zu grain=%zu: every index exactly once", n, grain);
    CHECK_EQ(wrong, 0, what);
    snprintf(what, sizeof what, "n=%zu grain=%zu: chunks non-empty and at most grain", n, grain);
    CHECK(!atomic_load(&p.too_big), what);
    if (grain && n) {
        snprintf(what, sizeof what, "n=%zu grain=%zu: at least n/grain chunks", n, grain);
        CHECK(atomic_load(&p.chunks) >= (long)((n + grain - 1) / grain), what);
    }
    if (!n) CHECK_EQ(atomic_load(&p.chunks), 0, "n=0 calls nothing");
    free(p.hits);
}

/* From inside a task: the caller is a pool thread and helps. */
struct nested { struct pool *pool; struct pool_latch latch; struct task task; };
static void nested_parallel_for(struct task *t)
{
    struct nested *n = POOL_CONTAINER_OF(t, struct nested, task);
    check_parallel_for(n->pool, 5000, 7);
    pool_latch_done(&n->latch);
}

static void test_parallel_for(struct pool *pool)
{
    check_parallel_for(pool, 0, 10);
    check_parallel_for(pool, 1, 0);
    check_parallel_for(pool, 1000, 1);
    check_parallel_for(pool, 100000, 0);
    check_parallel_for(pool, 100003, 1000);
    struct nested n = { .pool = pool, .task = { .callback = nested_parallel_for } };
    pool_latch_init(&n.latch);
    pool_latch_add(&n.latch, 1);
    CHECK_STATUS(pool_submit_to(pool, &n.task), POOL_OK, "submit nested");
    CHECK_STATUS(pool_latch_wait(pool, &n.latch), POOL_OK, "wait nested");
    CHECK_STATUS(pool_parallel_for(NULL, 10, 1, mark, NULL), POOL_ERR_INVALID, "parallel_for(NULL pool)");
    CHECK_STATUS(pool_parallel_for(pool, 10, 1, NULL, NULL), POOL_ERR_INVALID, "parallel_for(NULL fn)");
}

/* ---- thread names and hooks --------------------------------------------------------------- */

struct hooks { atomic_int started, stopped; };
static _Thread_local int hooked; /* set by on_thread_start on each worker */
static void on_start(void *ctx) { hooked = 1; atomic_fetch_add(&((struct hooks *)ctx)->started, 1); }
static void on_stop(void *ctx) { hooked = 0; atomic_fetch_add(&((struct hooks *)ctx)->stopped, 1); }

struct probe { char name[16]; int hooked; struct pool_latch *latch; struct task task; };
static void probe_thread(struct task *t)
{
    struct probe *p = POOL_CONTAINER_OF(t, struct probe, task);
    pthread_getname_np(pthread_self(), p->name, sizeof p->name);
    p->hooked = hooked;
    pool_latch_done(p->latch);
}

static void test_names_and_hooks(void)
{
    struct hooks h;
    struct pool_config cfg;
    struct pool *pool = NULL;
    struct pool_latch latch;
    struct probe probes[8];
    atomic_init(&h.started, 0);
    atomic_init(&h.stopped, 0);
    pool_config_init(&cfg);
    CHECK(cfg.thread_name_prefix == NULL && cfg.on_thread_start == NULL && cfg.on_thread_stop == NULL,
          "pool_config_init: no name, no hooks");
    cfg.max_threads = 2;
    cfg.thread_name_prefix = "conv-";
    cfg.on_thread_start = on_start;
    cfg.on_thread_stop = on_stop;
    cfg.hook_context = &h;
    if (!CHECK_STATUS(pool_create(&cfg, &pool), POOL_OK, "create with name and hooks")) return;
    pool_latch_init(&latch);
    pool_latch_add(&latch, 8);
    for (int i = 0; i < 8; i++) {
        probes[i] = (struct probe){ .latch = &latch, .task = { .callback = probe_thread } };
        CHECK_STATUS(pool_submit_to(pool, &probes[i].task), POOL_OK, "submit probe");
    }
    CHECK_STATUS(pool_latch_wait(pool, &latch), POOL_OK, "wait probes");
    for (int i = 0; i < 8; i++) {
        CHECK(strcmp(probes[i].name, "conv-0") == 0 || strcmp(probes[i].name, "conv-1") == 0,
              "worker named conv-0 or conv-1");
        CHECK_EQ(probes[i].hooked, 1, "on_thread_start ran on the worker before its tasks");
    }
    CHECK_STATUS(pool_shutdown(pool), POOL_OK, "shutdown");
    CHECK(atomic_load(&h.started) >= 1 && atomic_load(&h.started) <= 2, "1 or 2 threads started");
    CHECK_EQ(atomic_load(&h.stopped), atomic_load(&h.started), "every started thread ran on_thread_stop");
    pool_destroy(pool);
}

/* ---- prestart (pool_config.min_threads) ------------------------------------------------------ */

struct named_hooks { atomic_int started; char names[4][16]; };
static void on_start_named(void *ctx)
{
    struct named_hooks *h = ctx;
    int i = atomic_fetch_add(&h->started, 1);
    if (i < 4)
        pthread_getname_np(pthread_self(), h->names[i], sizeof h->names[i]);
}

/* When pool_create returns, each of min_threads threads has started, is named and has run
 * on_thread_start; above the thread limit min_threads is refused. */
static void test_prestart(void)
{
    static struct named_hooks h;
    struct pool_config cfg;
    struct pool *pool = NULL;
    pool_config_init(&cfg);
    CHECK_EQ(cfg.min_threads, 0, "pool_config_init: min_threads 0");
    cfg.max_threads = 4;
    cfg.min_threads = 5;
    CHECK_STATUS(pool_create(&cfg, &pool), POOL_ERR_INVALID, "min_threads above max_threads");
    cfg.min_threads = 3;
    cfg.thread_name_prefix = "pre-";
    cfg.on_thread_start = on_start_named;
    cfg.hook_context = &h;
    if (!CHECK_STATUS(pool_create(&cfg, &pool), POOL_OK, "create with min_threads 3")) return;
    CHECK_EQ(atomic_load(&h.started), 3, "3 threads hooked when pool_create returned");
    int named = 0;
    for (int i = 0; i < 3; i++)
        named += strcmp(h.names[i], "pre-0") == 0 || strcmp(h.names[i], "pre-1") == 0 || strcmp(h.names[i], "pre-2") == 0;
    CHECK_EQ(named, 3, "each prestarted thread named pre-0..pre-2");
    struct pool_stats st;
    CHECK_STATUS(pool_stats(pool, &st), POOL_OK, "stats");
    CHECK_EQ(st.threads, 3, "stats.threads after create");
    pool_destroy(pool);
}

/* ---- pool_wait_idle ----------------------------------------------------------------------- */

static atomic_long idle_runs;
static atomic_int release_waiter;

static void slow_add(void *arg)
{
    (void)arg;
    sleep_us(200);
    atomic_fetch_add(&idle_runs, 1);
}

/* A task that waits on a latch that an outside thread releases: while it waits its worker
 * sleeps, counted idle, yet the pool is not idle. */
struct blocked { struct task task; struct pool *pool; struct pool_latch latch; };
static void blocked_run(struct task *t)
{
    struct blocked *b = container_of(t, struct blocked, task);
    pool_latch_wait(b->pool, &b->latch);
    atomic_fetch_add(&idle_runs, 1);
}

static int wait_idle_from_task_status = 1;
static void wait_idle_inside(struct task *t);
struct inside { struct task task; struct pool *pool; struct pool_latch done; };
static void wait_idle_inside(struct task *t)
{
    struct inside *in = container_of(t, struct inside, task);
    wait_idle_from_task_status = pool_wait_idle(in->pool);
    pool_latch_done(&in->done);
}

static void *release_later(void *arg)
{
    struct blocked *b = arg;
    sleep_us(50000);
    atomic_store(&release_waiter, 1);
    pool_latch_done(&b->latch);
    return NULL;
}

static void test_wait_idle(struct pool *pool)
{
    size_t n = scaled(200, 20);
    CHECK_STATUS(pool_wait_idle(NULL), POOL_ERR_INVALID, "pool_wait_idle(NULL)");
    CHECK_STATUS(pool_wait_idle(pool), POOL_OK, "pool_wait_idle on an idle pool");
    atomic_store(&idle_runs, 0);
    for (size_t i = 0; i < n; i++) CHECK_STATUS(pool_submit_fn(pool, slow_add, NULL), POOL_OK, "submit_fn");
    CHECK_STATUS(pool_wait_idle(pool), POOL_OK, "pool_wait_idle after submits");
    CHECK_EQ(atomic_load(&idle_runs), (long)n, "every task submitted before pool_wait_idle has run");

    /* A task blocked in a latch wait keeps the pool busy until it is released. */
    atomic_store(&idle_runs, 0);
    atomic_store(&release_waiter, 0);
    struct blocked b = { .task = { .callback = blocked_run }, .pool = pool };
    pool_latch_init(&b.latch);
    pool_latch_add(&b.latch, 1);
    CHECK_STATUS(pool_submit_to(pool, &b.task), POOL_OK, "submit the blocked task");
    pthread_t releaser;
    pthread_create(&releaser, NULL, release_later, &b);
    CHECK_STATUS(pool_wait_idle(pool), POOL_OK, "pool_wait_idle with a blocked task");
    CHECK_EQ(atomic_load(&release_waiter), 1, "it returned only after the task was released");
    CHECK_EQ(atomic_load(&idle_runs), 1, "the blocked task finished");
    pthread_join(releaser, NULL);

    /* From one of the pool's own tasks: refused. */
    struct inside in = { .task = { .callback = wait_idle_inside }, .pool = pool };
    pool_latch_init(&in.done);
    pool_latch_add(&in.done, 1);
    CHECK_STATUS(pool_submit_to(pool, &in.task), POOL_OK, "submit the task that calls pool_wait_idle");
    pool_latch_wait(pool, &in.done);
    CHECK_STATUS(wait_idle_from_task_status, POOL_ERR_INVALID, "pool_wait_idle from the pool's own task");
}

int main(void)
{
    struct pool_config cfg;
    struct pool *pool = NULL;
    test_watchdog_start(120);
    pool_config_init(&cfg);
    cfg.max_threads = 4;
    if (!CHECK_STATUS(pool_create(&cfg, &pool), POOL_OK, "pool_create")) return test_finish();
    test_submit_fn(pool);
    test_parallel_for(pool);
    test_wait_idle(pool);
    pool_destroy(pool);
    test_names_and_hooks();
    test_prestart();
    return test_finish();
}
