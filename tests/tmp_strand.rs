//! TEMP reproducer: 8 blockers into 8 prestarted idle workers must all run at once.
use pool::{Config, ThreadPool};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn eight_blockers_on_eight_workers() {
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(200);
    let min: usize = std::env::var("MINT").ok().and_then(|s| s.parse().ok()).unwrap_or(8);
    for round in 0..rounds {
        let pool = ThreadPool::new(Config::default().with_max_threads(8).with_min_threads(min)).unwrap();
        let active = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(AtomicBool::new(false));
        for _ in 0..8 {
            let (a, o) = (active.clone(), open.clone());
            pool.spawn(move || {
                a.fetch_add(1, Ordering::SeqCst);
                while !o.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_micros(200));
                }
            })
            .unwrap();
        }
        let until = Instant::now() + Duration::from_secs(3);
        while active.load(Ordering::SeqCst) < 8 {
            if Instant::now() > until {
                let s = pool.stats();
                eprintln!("round {round}: active {} stats {s:?}", active.load(Ordering::SeqCst));
                for i in 0..8 {
                    eprintln!("  worker {i}: {:?}", pool.worker_stats(i));
                }
                open.store(true, Ordering::SeqCst);
                panic!("stranded");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        open.store(true, Ordering::SeqCst);
        drop(pool);
    }
}
