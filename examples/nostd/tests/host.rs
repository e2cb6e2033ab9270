//! Runs the whole pool, built `#![no_std]` with `default-features = false`, on threads that
//! "the host" (this test, with std threads) starts through `HostThreads`' function pointers.

use core::ffi::c_void;
use core::ptr::NonNull;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pool::{container_of, Config, Error, Task, ThreadPool, ThreadStart};
use pool_nostd::{HostSpawner, HostThreads};

/// The host's own bookkeeping, reached through `HostThreads::context`.
#[derive(Default)]
struct Host {
    threads: Mutex<Vec<JoinHandle<()>>>,
    spawned: AtomicUsize,
    joins: AtomicUsize,
    /// Refuse to start more than this many threads.
    limit: usize,
}

std::thread_local! {
    static SLOT: Cell<*const ()> = const { Cell::new(core::ptr::null()) };
    static ON_HOST_THREAD: Cell<bool> = const { Cell::new(false) };
}

fn host_spawn(ctx: *mut c_void, start: ThreadStart, stack_size: usize) -> bool {
    // SAFETY: every context in these tests is a `Host` that outlives its pool.
    let host = unsafe { &*ctx.cast::<Host>() };
    let mut threads = host.threads.lock().unwrap();
    if threads.len() >= host.limit {
        return false;
    }
    let mut builder = std::thread::Builder::new().name("host-thread".into());
    if stack_size != 0 {
        builder = builder.stack_size(stack_size);
    }
    let spawned = builder.spawn(move || {
        ON_HOST_THREAD.with(|c| c.set(true));
        // SAFETY: run once, on this new thread (HostThreads::spawn's contract).
        unsafe { start.run() }
    });
    match spawned {
        Ok(handle) => {
            threads.push(handle);
            host.spawned.fetch_add(1, Ordering::Relaxed);
            true
        }
        Err(_) => false,
    }
}

fn host_join(ctx: *mut c_void) {
    // SAFETY: as in `host_spawn`.
    let host = unsafe { &*ctx.cast::<Host>() };
    for handle in std::mem::take(&mut *host.threads.lock().unwrap()) {
        handle.join().unwrap();
    }
    host.joins.fetch_add(1, Ordering::Relaxed);
}

fn tls_get() -> *const () {
    SLOT.with(Cell::get)
}

fn tls_set(worker: *const ()) {
    SLOT.with(|c| c.set(worker));
}

fn host_threads(host: &Host, tls: bool) -> HostThreads {
    HostThreads {
        context: core::ptr::from_ref(host).cast_mut().cast(),
        yield_now: std::thread::yield_now,
        tls: if tls { Some((tls_get, tls_set)) } else { None },
        parallelism: 2,
        ..HostThreads::new(host_spawn, host_join)
    }
}

/// A task that counts its runs and, while `depth > 0`, submits two children from inside the
/// pool (through the worker's own queue when the host has thread-local storage).
#[repr(C)]
struct Node {
    task: Task,
    pool: *const ThreadPool<HostSpawner>,
    depth: u32,
}

static NODES: AtomicUsize = AtomicUsize::new(0);
static OFF_HOST: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn node_run(task: *mut Task) {
    // SAFETY: every task with this callback is the `task` of a leaked `Box<Node>`.
    let node = unsafe { Box::from_raw(container_of!(task, Node, task)) };
    if !ON_HOST_THREAD.with(Cell::get) {
        OFF_HOST.fetch_add(1, Ordering::Relaxed);
    }
    if node.depth > 0 {
        for _ in 0..2 {
            // SAFETY: the pool outlives its tasks (shutdown runs them all before it returns).
            unsafe { submit_node(&*node.pool, node.depth - 1) };
        }
    }
    NODES.fetch_add(1, Ordering::Relaxed);
}

fn submit_node(pool: &ThreadPool<HostSpawner>, depth: u32) {
    let node = Box::leak(Box::new(Node { task: Task::new(node_run), pool, depth }));
    // SAFETY: the box lives until its callback frees it.
    unsafe { pool.submit(NonNull::from(&mut node.task)) }.expect("submit from a pool thread");
}

/// Flat tasks counted one by one, so "exactly once" is checked per task.
#[repr(C)]
struct Job {
    task: Task,
    runs: AtomicUsize,
}

unsafe extern "C" fn job_run(task: *mut Task) {
    // SAFETY: every task with this callback is the `task` of a `Job` in the test's vector.
    let job = unsafe { &*container_of!(task, Job, task) };
    job.runs.fetch_add(1, Ordering::Relaxed);
}

fn whole_pool(tls: bool) {
    let host = Host { limit: 64, ..Host::default() };
    let pool = ThreadPool::with_spawner(Config::default().with_max_threads(2).with_stack_size(0), HostSpawner::new(host_threads(&host, tls)))
        .unwrap();
    let mut jobs: Vec<Job> = (0..20_000).map(|_| Job { task: Task::new(job_run), runs: AtomicUsize::new(0) }).collect();
    for job in &mut jobs {
        // SAFETY: `jobs` outlives the pool's use of it (shutdown below runs everything).
        unsafe { pool.submit(NonNull::from(&mut job.task)) }.unwrap();
    }
    NODES.store(0, Ordering::Relaxed);
    submit_node(&pool, 12); // 2^13 - 1 nodes, each submitted from the pool but the first
    let deadline = Instant::now() + Duration::from_secs(60);
    while NODES.load(Ordering::Relaxed) < (1 << 13) - 1 {
        assert!(Instant::now() < deadline, "the tree did not finish: a lost wake-up?");
        std::thread::sleep(Duration::from_millis(1));
    }
    pool.shutdown().unwrap();
    assert!(jobs.iter().all(|j| j.runs.load(Ordering::Relaxed) == 1), "every task ran exactly once");
    assert_eq!(OFF_HOST.load(Ordering::Relaxed), 0, "every task ran on a host thread");
    let spawned = host.spawned.load(Ordering::Relaxed);
    assert!((1..=2).contains(&spawned), "1..=max_threads host threads, got {spawned}");
    assert_eq!(host.joins.load(Ordering::Relaxed), 1, "the host's join runs once, at shutdown");
    assert!(host.threads.lock().unwrap().is_empty());
    assert_eq!(pool.shutdown(), Err(Error::Shutdown));
    drop(pool);
    assert_eq!(host.joins.load(Ordering::Relaxed), 1, "dropping a shut-down pool joins nothing more");
}

// One test at a time: NODES and OFF_HOST are shared.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn whole_pool_with_thread_local_slot() {
    let _g = SERIAL.lock().unwrap();
    whole_pool(true);
}

#[test]
fn whole_pool_without_thread_local_slot() {
    let _g = SERIAL.lock().unwrap();
    whole_pool(false);
}

#[test]
fn a_host_without_threads_refuses_work() {
    let host = Host { limit: 0, ..Host::default() };
    let pool = ThreadPool::with_spawner(Config::default(), HostSpawner::new(host_threads(&host, true))).unwrap();
    assert_eq!(pool.max_threads(), 2, "max_threads 0 = the host's parallelism");
    assert_eq!(pool.spawn(|| unreachable!()), Err(Error::Spawn));
    drop(pool);
    assert_eq!(host.spawned.load(Ordering::Relaxed), 0);
}

#[test]
fn a_host_with_one_thread_runs_everything_on_it() {
    let host = Host { limit: 1, ..Host::default() };
    let pool = ThreadPool::with_spawner(Config::default().with_max_threads(4).with_stack_size(0), HostSpawner::new(host_threads(&host, true)))
        .unwrap();
    let hits = std::sync::Arc::new(AtomicUsize::new(0));
    for _ in 0..1000 {
        let hits = hits.clone();
        pool.spawn(move || {
            hits.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
    }
    pool.shutdown().unwrap();
    assert_eq!(hits.load(Ordering::Relaxed), 1000);
    assert_eq!(host.spawned.load(Ordering::Relaxed), 1);
}

#[test]
fn create_and_shut_down_in_a_loop() {
    for i in 0..20 {
        let host = Host { limit: 64, ..Host::default() };
        let pool = ThreadPool::with_spawner(Config::default().with_max_threads(2).with_stack_size(64 * 1024), HostSpawner::new(host_threads(&host, i % 2 == 0)))
            .unwrap();
        if i % 3 != 0 {
            pool.spawn(|| {}).unwrap();
        }
        drop(pool); // shuts down and joins
        assert!(host.threads.lock().unwrap().is_empty(), "round {i}: every host thread joined");
    }
}

/// A one-shot event a future awaits: set a flag, wake the stored waker.
#[derive(Default)]
struct Event {
    set: std::sync::atomic::AtomicBool,
    waker: Mutex<Option<core::task::Waker>>,
}

impl Event {
    fn fire(&self) {
        self.set.store(true, Ordering::Release);
        let waker = self.waker.lock().unwrap().take();
        if let Some(w) = waker {
            w.wake();
        }
    }

    async fn wait(&self) {
        core::future::poll_fn(|cx| {
            if self.set.load(Ordering::Acquire) {
                return core::task::Poll::Ready(());
            }
            *self.waker.lock().unwrap() = Some(cx.waker().clone());
            // Re-check after registering: a fire in between took no waker (or the old one).
            if self.set.load(Ordering::Acquire) { core::task::Poll::Ready(()) } else { core::task::Poll::Pending }
        })
        .await
    }
}

/// Issue 5's "done" program on the `#![no_std]` build: 100,000 futures spawned on a pool whose
/// threads and parker (`SpinParker`) come from the host, each firing its neighbour's event and
/// awaiting its own, so they wake each other across the host's threads; `block_on` (on the
/// host parker) awaits every `JoinHandle`.
#[test]
fn hundred_k_futures_wake_each_other() {
    let _g = SERIAL.lock().unwrap();
    const N: usize = 100_000;
    let host = Host { limit: 64, ..Host::default() };
    let pool = ThreadPool::with_spawner(Config::default().with_max_threads(2), HostSpawner::new(host_threads(&host, true)))
        .unwrap();
    let events: std::sync::Arc<Vec<Event>> = std::sync::Arc::new((0..N).map(|_| Event::default()).collect());
    let started = Instant::now();
    let total = pool.block_on(async {
        let handles: Vec<_> = (0..N)
            .map(|i| {
                let events = events.clone();
                pool.spawn_future(async move {
                    events[(i + 1) % N].fire();
                    events[i].wait().await;
                    i as u64
                })
                .unwrap()
            })
            .collect();
        let mut total = 0u64;
        for h in handles {
            total += h.await.unwrap();
        }
        total
    });
    assert_eq!(total, (N as u64) * (N as u64 - 1) / 2);
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
    assert_eq!(OFF_HOST.load(Ordering::Relaxed), 0);
    let stats = pool.stats();
    assert_eq!(stats.spawned, N);
    pool.shutdown().unwrap();
}
