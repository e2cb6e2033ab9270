//! BENCH.md's `echo` workload, bounded: a loopback TCP echo server on our runtime
//! (`pool::net`) and on tokio's, each with `--threads` workers, driven by the same client: one
//! thread running a tokio current-thread runtime with 64 connections, each doing
//! [`ROUND_TRIPS`] round trips of a 64-byte message (write, then read the echo back). Per run:
//! microseconds per request over the whole run (the lower the better) and, as the extra
//! figure, requests per second. `ECHO_SPINS=n` sets our pool's `Config::idle_spins` (the
//! default otherwise), to see what the idle spin costs the client on a 2-core machine.

use std::net::SocketAddr;

use crate::common::{Contender, Sample};
use crate::echo_serve::{serve_ours, serve_tokio, CONNECTIONS};

const ROUND_TRIPS: usize = 1_000;

pub fn workloads() -> Vec<crate::Workload> {
    vec![crate::Workload {
        name: "echo",
        unit: "µs/request",
        what: "loopback TCP echo, 64 connections x 1,000 round trips of 64 bytes (same client)",
        warmup: true,
        extra: Some("requests/s"),
        baseline: None,
        interleave: false,
        contenders,
    }]
}

/// One run of the client (`echo_serve::drive`): µs per request, and requests per second.
fn drive(addr: SocketAddr) -> Sample {
    let secs = crate::echo_serve::drive(addr, ROUND_TRIPS);
    let requests = (CONNECTIONS * ROUND_TRIPS) as f64;
    Sample { value: secs * 1e6 / requests, extra: Some(requests / secs) }
}

fn contenders() -> Vec<Contender> {
    vec![
        Contender::new("pool", "pool::net on ThreadPool::spawn_future tasks (mio driver)", |threads| {
            let (pool, net, addr) = serve_ours(threads);
            Box::new(move || {
                let _keep = (&pool, &net);
                drive(addr)
            })
        }),
        Contender::new("tokio", "tokio::net on a multi-thread Runtime (enable_io)", |threads| {
            let (rt, addr) = serve_tokio(threads);
            Box::new(move || {
                let _keep = &rt;
                drive(addr)
            })
        }),
    ]
}
