/* Sums 1..N in parallel on a pool of its own, waiting with a latch; checks the header and
 * library versions agree. Built by examples/cmake/CMakeLists.txt (and by scripts/test-install.sh
 * against pkg-config and the shared library). */
#include <stdio.h>
#include <string.h>
#include "pool.h"

#define CHUNKS 64
#define PER_CHUNK 10000L

struct chunk { long begin, end, sum; struct pool_latch *latch; struct task task; };

static void sum_chunk(struct task *t) {
    struct chunk *c = POOL_CONTAINER_OF(t, struct chunk, task);
    for (long i = c->begin; i < c->end; i++) c->sum += i;
    pool_latch_done(c->latch);
}

int main(void) {
    if (strcmp(pool_version(), POOL_VERSION_STRING) != 0) {
        fprintf(stderr, "header %s, library %s\n", POOL_VERSION_STRING, pool_version());
        return 1;
    }
    struct pool *pool;
    if (pool_create(NULL, &pool) != POOL_OK) return 1;
    static struct chunk chunks[CHUNKS];
    struct pool_latch latch;
    pool_latch_init(&latch);
    pool_latch_add(&latch, CHUNKS);
    for (int i = 0; i < CHUNKS; i++) {
        chunks[i] = (struct chunk){ .begin = i * PER_CHUNK + 1, .end = (i + 1) * PER_CHUNK + 1,
                                    .latch = &latch, .task = { .callback = sum_chunk } };
        if (pool_submit_to(pool, &chunks[i].task) != POOL_OK) return 1;
    }
    pool_latch_wait(pool, &latch);
    long total = 0;
    for (int i = 0; i < CHUNKS; i++) total += chunks[i].sum;
    pool_destroy(pool);
    long n = CHUNKS * PER_CHUNK;
    printf("pool %s: sum 1..%ld = %ld\n", pool_version(), n, total);
    return total == n * (n + 1) / 2 ? 0 : 1;
}
