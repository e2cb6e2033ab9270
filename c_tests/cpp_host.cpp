// cpp_host.cpp: pool.h used from C++17.
//
//   - the header compiles as C++ (extern "C" guarded) with -Wall -Wextra -Werror -pedantic;
//   - a standard-layout class with a `task` member (not the first one) and a static
//     callback that recovers `this` with an offsetof-based container_of;
//   - RAII ownership of a `struct pool *` (std::unique_ptr with pool_destroy as deleter);
//   - host std::threads submitting to one pool, std::atomic counters, exact-once checks;
//   - heap "closure" tasks (std::function) deleted by their own callback;
//   - the global pool (pool_submit, pool_submit_batch).
//
// Build: c++ -std=c++17 -O2 -Wall -Wextra -Werror -Iinclude c_tests/cpp_host.cpp
//          target/release/libpool.a -lpthread -ldl -lm -o build/cpp_host

#include "pool.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <unistd.h>
#include <vector>

namespace {

int passed = 0;
int failed = 0;

bool check(bool ok, const std::string &what)
{
    if (ok) {
        ++passed;
    } else {
        ++failed;
        std::printf("FAIL: %s\n", what.c_str());
        std::fflush(stdout);
    }
    return ok;
}

bool check_eq(long long got, long long want, const std::string &what)
{
    if (got == want)
        return check(true, what);
    return check(false, what + ": got " + std::to_string(got) + ", want " + std::to_string(want));
}

double scale()
{
    const char *s = std::getenv("POOL_TEST_SCALE");
    if (s == nullptr || *s == '\0')
        return 1.0;
    double v = std::strtod(s, nullptr);
    return v > 0.0 ? v : 1.0;
}

std::size_t scaled(std::size_t n, std::size_t min)
{
    auto r = static_cast<std::size_t>(static_cast<double>(n) * scale());
    return r < min ? min : r;
}

// Polls `done` with back-off; after 30 s (POOL_TEST_WAIT_S) prints what is missing and
// exits 2, so a lost wake-up fails fast instead of hanging.
template <class Done, class Report>
void wait_until(Done done, Report report, const char *what)
{
    double limit = 30.0;
    if (const char *s = std::getenv("POOL_TEST_WAIT_S"))
        if (std::strtod(s, nullptr) > 0.0)
            limit = std::strtod(s, nullptr);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit);
    auto nap = std::chrono::microseconds(20);
    for (int spins = 0; !done(); ++spins) {
        if (spins < 200) {
            std::this_thread::yield();
            continue;
        }
        if (std::chrono::steady_clock::now() > deadline) {
            std::printf("FAIL: watchdog: %s: not complete after %.0f s\n", what, limit);
            report();
            std::printf("%d passed, %d failed\n", passed, failed + 1);
            std::fflush(stdout);
            std::exit(2);
        }
        std::this_thread::sleep_for(nap);
        if (nap < std::chrono::microseconds(1000))
            nap *= 2;
    }
}

extern "C" void watchdog_fired(int)
{
    static const char msg[] = "FAIL: watchdog: the test did not finish in time\n";
    ssize_t r = write(STDOUT_FILENO, msg, sizeof msg - 1);
    (void)r;
    _exit(2);
}

// container_of for a standard-layout class.
template <class T>
T *owner_of(task *t, std::size_t member_offset)
{
    return reinterpret_cast<T *>(reinterpret_cast<char *>(t) - member_offset);
}

// A unit of work: computes the sum of 1..n. The task is deliberately not the first member.
class SumJob {
public:
    SumJob() = default;
    void init(std::uint64_t n, std::atomic<long> *done)
    {
        n_ = n;
        result_ = 0;
        runs_.store(0);
        done_ = done;
        task_.next = nullptr;
        task_.callback = &SumJob::run;
    }
    task *as_task() { return &task_; }
    std::uint64_t result() const { return result_; }
    int runs() const { return runs_.load(); }
    std::uint64_t n() const { return n_; }

    static void run(task *t)
    {
        SumJob *self = owner_of<SumJob>(t, task_offset());
        self->execute();
    }
    static std::size_t task_offset() { return offsetof(SumJob, task_); }

private:
    void execute()
    {
        std::uint64_t s = 0;
        for (std::uint64_t i = 1; i <= n_; ++i)
            s += i;
        result_ = s;
        runs_.fetch_add(1, std::memory_order_relaxed);
        done_->fetch_add(1, std::memory_order_release);
    }

    std::uint64_t n_ = 0;
    std::uint64_t result_ = 0;
    std::atomic<int> runs_{0};
    task task_{};                 // not first: container_of must subtract a real offset
    std::atomic<long> *done_ = nullptr;
};

static_assert(std::is_standard_layout<SumJob>::value, "offsetof needs a standard-layout class");
static_assert(std::is_standard_layout<task>::value, "struct task is standard layout");

// A heap closure: owns a std::function (through a pointer, so the class stays standard
// layout), deleted by its own callback.
class Closure {
public:
    explicit Closure(std::function<void()> f) : f_(new std::function<void()>(std::move(f)))
    {
        task_.next = nullptr;
        task_.callback = &Closure::run;
    }
    ~Closure() { delete f_; }
    Closure(const Closure &) = delete;
    Closure &operator=(const Closure &) = delete;
    task *as_task() { return &task_; }
    static void run(task *t)
    {
        std::unique_ptr<Closure> self(owner_of<Closure>(t, offsetof(Closure, task_)));
        if (self->magic_ != 0xC105u) // a wrong container_of would read garbage here
            std::abort();
        (*self->f_)();
    }

private:
    unsigned magic_ = 0xC105u;
    task task_{};
    std::function<void()> *f_;
};

static_assert(std::is_standard_layout<Closure>::value, "offsetof needs a standard-layout class");

using PoolPtr = std::unique_ptr<pool, decltype(&pool_destroy)>;

PoolPtr make_pool(std::size_t max_threads)
{
    pool_config cfg;
    pool_config_init(&cfg);
    cfg.max_threads = max_threads;
    pool *p = nullptr;
    int rc = pool_create(&cfg, &p);
    check_eq(rc, POOL_OK, std::string("pool_create: ") + pool_status_str(rc));
    return PoolPtr(rc == POOL_OK ? p : nullptr, &pool_destroy);
}

void check_jobs(const std::vector<SumJob> &jobs, const std::string &phase)
{
    std::size_t bad_runs = 0, bad_result = 0;
    for (const SumJob &j : jobs) {
        if (j.runs() != 1)
            ++bad_runs;
        if (j.result() != j.n() * (j.n() + 1) / 2)
            ++bad_result;
    }
    check_eq(static_cast<long long>(bad_runs), 0, phase + ": jobs that did not run exactly once");
    check_eq(static_cast<long long>(bad_result), 0, phase + ": jobs with a wrong result");
}

} // namespace

int main()
{
    std::signal(SIGALRM, watchdog_fired);
    alarm(120);

    const std::size_t n = scaled(20000, 100);
    std::printf("cpp_host: %zu jobs per phase, offsetof(SumJob, task_) = %zu\n", n,
                SumJob::task_offset());
    check(SumJob::task_offset() != 0, "the task is not the first member");

    // 1. One pool, 4 std::thread submitters.
    {
        PoolPtr pool = make_pool(0);
        if (!pool)
            return 1;
        std::vector<SumJob> jobs(n);
        std::atomic<long> done{0};
        for (std::size_t i = 0; i < n; ++i)
            jobs[i].init(i % 1000, &done);
        std::atomic<long> submit_errors{0};
        std::vector<std::thread> hosts;
        const std::size_t per = n / 4;
        for (std::size_t k = 0; k < 4; ++k) {
            std::size_t lo = k * per, hi = (k == 3) ? n : lo + per;
            hosts.emplace_back([&, lo, hi] {
                for (std::size_t i = lo; i < hi; ++i)
                    if (pool_submit_to(pool.get(), jobs[i].as_task()) != POOL_OK)
                        submit_errors.fetch_add(1);
            });
        }
        for (auto &t : hosts)
            t.join();
        check_eq(submit_errors.load(), 0, "4 std::threads: every pool_submit_to returned POOL_OK");
        wait_until([&] { return done.load(std::memory_order_acquire) >= static_cast<long>(n); },
                   [&] { std::printf("  %ld of %zu ran\n", done.load(), n); }, "4 std::threads");
        check_jobs(jobs, "4 std::threads");
        check_eq(pool_shutdown(pool.get()), POOL_OK, "pool_shutdown");
        check_eq(pool_shutdown(pool.get()), POOL_ERR_SHUTDOWN, "pool_shutdown twice");
        check_eq(done.load(), static_cast<long>(n), "4 std::threads: total runs after shutdown");
    } // unique_ptr -> pool_destroy

    // 2. Heap closures deleted by their own callback; results through captured state.
    {
        PoolPtr pool = make_pool(2);
        if (!pool)
            return 1;
        std::atomic<long> done{0};
        std::atomic<std::uint64_t> sum{0};
        std::uint64_t want = 0;
        long errors = 0;
        for (std::size_t i = 0; i < n; ++i) {
            want += i;
            auto *c = new Closure([&sum, &done, i] {
                sum.fetch_add(i);
                done.fetch_add(1, std::memory_order_release);
            });
            if (pool_submit_to(pool.get(), c->as_task()) != POOL_OK) {
                ++errors;
                delete c; // not queued: still ours
            }
        }
        check_eq(errors, 0, "closures: every pool_submit_to returned POOL_OK");
        pool.reset(); // pool_destroy: runs what is queued, joins
        check_eq(done.load(), static_cast<long>(n), "closures: all ran by the time pool_destroy returned");
        check(sum.load() == want, "closures: sum of captured values");
    }

    // 3. The global pool: single submits and one batch.
    {
        std::vector<SumJob> jobs(n);
        std::atomic<long> done{0};
        for (std::size_t i = 0; i < n; ++i)
            jobs[i].init(i % 500, &done);
        long errors = 0;
        const std::size_t half = n / 2;
        for (std::size_t i = 0; i < half; ++i)
            if (pool_submit(jobs[i].as_task()) != POOL_OK)
                ++errors;
        for (std::size_t i = half; i < n; ++i)
            jobs[i].as_task()->next = (i + 1 < n) ? jobs[i + 1].as_task() : nullptr;
        int rc = pool_submit_batch(jobs[half].as_task());
        check_eq(errors, 0, "global: every pool_submit returned POOL_OK");
        check_eq(rc, POOL_OK, "global: pool_submit_batch returned POOL_OK");
        long want = static_cast<long>(rc == POOL_OK ? n : half);
        wait_until([&] { return done.load(std::memory_order_acquire) >= want; },
                   [&] { std::printf("  %ld of %ld ran\n", done.load(), want); }, "global pool");
        check_jobs(jobs, "global");
    }

    // 4. Status strings and codes from C++.
    check(pool_status_str(POOL_ERR_INVALID) != nullptr, "pool_status_str is never NULL");
    check_eq(pool_submit(nullptr), POOL_ERR_INVALID, "pool_submit(nullptr)");
    check_eq(pool_submit_to(nullptr, nullptr), POOL_ERR_INVALID, "pool_submit_to(nullptr, nullptr)");

    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
