//! `pool::net` (feature `net`): TCP echo with many connections, UDP round trips, and a server
//! that waits idle in the driver between clients. Every test under a watchdog: a lost
//! readiness event or a lost wake of the worker blocked in the poller hangs, and fails.
#![cfg(feature = "net")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{watchdog, watchdog_secs};
use pool::net::{Net, TcpListener, TcpStream, UdpSocket};
use pool::{Config, ThreadPool};

fn pool_and_net(threads: usize) -> (Arc<ThreadPool<pool::ThreadSpawner>>, Net) {
    let pool = Arc::new(ThreadPool::new(Config::default().with_max_threads(threads)).unwrap());
    let net = Net::install(&pool).unwrap();
    (pool, net)
}

/// A server-side stream accepted by a pool task and its client (a std blocking socket).
fn connected_pair(pool: &ThreadPool<pool::ThreadSpawner>, net: &Net) -> (TcpStream, std::net::TcpStream) {
    let listener = TcpListener::bind(net, "127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = pool.spawn_future(async move { listener.accept().await.unwrap().0 }).unwrap();
    let client = std::net::TcpStream::connect(addr).unwrap();
    (accepted.join().unwrap(), client)
}

#[test]
fn tcp_echo_many_connections() {
    watchdog("tcp_echo_many_connections", watchdog_secs(60), |_| {
        let (pool, net) = pool_and_net(2);
        let listener = TcpListener::bind(&net, "127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let p = pool.clone();
        pool.spawn_future(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                p.spawn_future(async move {
                    let mut buf = [0u8; 64];
                    loop {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                if stream.write_all(&buf[..n]).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                })
                .unwrap();
            }
        })
        .unwrap();
        let clients: Vec<_> = (0..16u8)
            .map(|c| {
                let net = net.clone();
                pool.spawn_future(async move {
                    let s = TcpStream::connect(&net, addr).await.unwrap();
                    s.set_nodelay(true).unwrap();
                    for i in 0..100u8 {
                        let msg = [c ^ i; 64];
                        s.write_all(&msg).await.unwrap();
                        let mut back = [0u8; 64];
                        s.read_exact(&mut back).await.unwrap();
                        assert_eq!(back, msg);
                    }
                })
                .unwrap()
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
    });
}

#[test]
fn udp_round_trips() {
    watchdog("udp_round_trips", watchdog_secs(60), |_| {
        let (pool, net) = pool_and_net(2);
        let server = UdpSocket::bind(&net, "127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = server.local_addr().unwrap();
        pool.spawn_future(async move {
            let mut buf = [0u8; 512];
            for _ in 0..50 {
                let (n, from) = server.recv_from(&mut buf).await.unwrap();
                server.send_to(&buf[..n], from).await.unwrap();
            }
        })
        .unwrap();
        let client = UdpSocket::bind(&net, "127.0.0.1:0".parse().unwrap()).unwrap();
        pool.block_on(async {
            for i in 0..50u8 {
                client.send_to(&[i; 32], addr).await.unwrap();
                let mut buf = [0u8; 512];
                let (n, from) = client.recv_from(&mut buf).await.unwrap();
                assert_eq!((n, from, buf[0]), (32, addr, i));
            }
        });
    });
}

/// The server's worker blocks in the poller between clients that come from outside the pool
/// (std blocking sockets): each accept must wake it.
#[test]
fn idle_server_wakes_for_each_client() {
    watchdog("idle_server_wakes_for_each_client", watchdog_secs(60), |_| {
        let (pool, net) = pool_and_net(1);
        let listener = TcpListener::bind(&net, "127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        pool.spawn_future(async move {
            for _ in 0..10 {
                let (s, _) = listener.accept().await.unwrap();
                let mut b = [0u8; 1];
                s.read_exact(&mut b).await.unwrap();
                s.write_all(&b).await.unwrap();
            }
        })
        .unwrap();
        for i in 0..10u8 {
            std::thread::sleep(Duration::from_millis(5)); // the worker goes idle in the poller
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            std::io::Write::write_all(&mut s, &[i]).unwrap();
            let mut b = [0u8; 1];
            std::io::Read::read_exact(&mut s, &mut b).unwrap();
            assert_eq!(b[0], i);
        }
    });
}

/// A worker blocked in a join (help-until-complete, it cannot wait in the poller) while the
/// joined task waits for a connection: the other, idle worker must watch the poller. With a
/// timer pending too, so the joining worker would be tempted to take the timer-parker role.
#[test]
fn io_is_watched_while_a_worker_waits_in_a_join() {
    watchdog("io_is_watched_while_a_worker_waits_in_a_join", watchdog_secs(60), |_| {
        let (pool, net) = pool_and_net(2);
        let listener = TcpListener::bind(&net, "127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let p = pool.clone();
        let outer = pool
            .spawn_future(async move {
                let far = p.spawn_future(pool::time::sleep(Duration::from_secs(3600))).unwrap();
                let inner = p
                    .spawn_future(async move {
                        let (s, _) = listener.accept().await.unwrap();
                        let mut b = [0u8; 1];
                        s.read_exact(&mut b).await.unwrap();
                        b[0]
                    })
                    .unwrap();
                // A blocking join on a worker: help-until-complete.
                let got = inner.join().unwrap();
                far.abort();
                drop(p);
                got
            })
            .unwrap();
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        std::io::Write::write_all(&mut s, &[42]).unwrap();
        assert_eq!(outer.join().unwrap(), 42);
    });
}

/// A read shorter than its buffer clears readiness at once (no `WouldBlock` read to learn
/// it). The peer's data and its close arrive together, before the read: the close has no later
/// event, so the next read must still see it and return 0, not wait for ever. And a short
/// write (a full send buffer) clears writability: the rest goes out once the peer reads.
#[test]
fn short_transfers_clear_readiness_but_not_a_close() {
    watchdog("short_transfers_clear_readiness_but_not_a_close", watchdog_secs(60), |_| {
        let (pool, net) = pool_and_net(2);
        let (server, mut client) = connected_pair(&pool, &net);
        std::io::Write::write_all(&mut client, b"hello").unwrap();
        client.shutdown(std::net::Shutdown::Write).unwrap();
        std::thread::sleep(Duration::from_millis(20)); // data and FIN both queued first
        let (got, eof) = pool
            .block_on(async {
                let mut buf = [0u8; 64];
                let n = server.read(&mut buf).await.unwrap();
                (buf[..n].to_vec(), server.read(&mut buf).await.unwrap())
            });
        assert_eq!(got, b"hello");
        assert_eq!(eof, 0, "the close seen after a short read");

        // Short writes: more than the socket buffers hold, while the peer reads slowly.
        const TOTAL: usize = 8 << 20;
        let reader = std::thread::spawn(move || {
            let mut seen = 0;
            let mut buf = vec![0u8; 1 << 16];
            while seen < TOTAL {
                std::thread::sleep(Duration::from_micros(200));
                let n = std::io::Read::read(&mut client, &mut buf).unwrap();
                assert!(n > 0, "closed early");
                seen += n;
            }
            seen
        });
        let data = vec![7u8; TOTAL];
        pool.block_on(server.write_all(&data)).unwrap();
        assert_eq!(reader.join().unwrap(), TOTAL);
    });
}

/// Connecting to a port nobody listens on fails with the OS's error; it does not wait.
#[test]
fn connect_to_a_closed_port_fails() {
    watchdog("connect_to_a_closed_port_fails", watchdog_secs(30), |_| {
        let (pool, net) = pool_and_net(2);
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let r = pool.block_on(TcpStream::connect(&net, addr));
        assert_eq!(r.unwrap_err().kind(), std::io::ErrorKind::ConnectionRefused);
    });
}

/// A read abandoned by `timeout` leaves the socket usable: the next read gets the data that
/// came later (the dropped read's waker stays registered until that event, which wakes it for
/// nothing; no event is lost).
#[test]
fn a_read_that_timed_out_leaves_the_socket_usable() {
    watchdog("a_read_that_timed_out_leaves_the_socket_usable", watchdog_secs(30), |_| {
        let (pool, net) = pool_and_net(2);
        let (server, mut client) = connected_pair(&pool, &net);
        let server = Arc::new(server);
        let s = server.clone();
        let timed_out = pool
            .spawn_future(async move {
                let mut buf = [0u8; 8];
                pool::time::timeout(Duration::from_millis(20), s.read(&mut buf)).await.map(|r| r.map(|n| buf[..n].to_vec()))
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(timed_out.is_err(), "a silent peer's read completed: {timed_out:?}");
        std::io::Write::write_all(&mut client, b"late").unwrap();
        let got = pool.block_on(async {
            let mut buf = [0u8; 4];
            server.read_exact(&mut buf).await.unwrap();
            buf
        });
        assert_eq!(&got, b"late");
    });
}

/// Writing to a peer that went away reports an error (no SIGPIPE, no hang), within a bounded
/// number of writes.
#[test]
fn writing_to_a_closed_peer_fails() {
    watchdog("writing_to_a_closed_peer_fails", watchdog_secs(30), |_| {
        let (pool, net) = pool_and_net(2);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stream = pool.block_on(TcpStream::connect(&net, addr)).unwrap();
        drop(listener.accept().unwrap());
        drop(listener);
        let failed = pool.block_on(async {
            for _ in 0..1000 {
                if stream.write_all(&[1u8; 1024]).await.is_err() {
                    return true;
                }
                pool.sleep(Duration::from_millis(1)).await;
            }
            false
        });
        assert!(failed, "1,000 writes to a closed peer all succeeded");
    });
}

/// Tasks waiting on sockets when the pool shuts down are cancelled (their futures dropped,
/// their sockets deregistered), and shutdown does not wait for I/O that never comes. A socket
/// used from outside the pool afterwards fails at once instead of waiting for a driver nobody
/// polls any more.
#[test]
fn shutdown_cancels_io_waits_and_fails_later_io() {
    watchdog("shutdown_cancels_io_waits_and_fails_later_io", watchdog_secs(30), |progress| {
        let (pool, net) = pool_and_net(2);
        let (server, _client) = connected_pair(&pool, &net);
        let server = Arc::new(server);
        let waiting: Vec<_> = (0..4)
            .map(|_| {
                let listener = TcpListener::bind(&net, "127.0.0.1:0".parse().unwrap()).unwrap();
                pool.spawn_future(async move { listener.accept().await.map(|_| ()) }).unwrap()
            })
            .collect();
        let s = server.clone();
        let reader = pool
            .spawn_future(async move {
                let mut buf = [0u8; 8];
                s.read(&mut buf).await
            })
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        progress.stage("shutdown");
        pool.shutdown().unwrap();
        progress.stage("joins");
        for h in waiting {
            assert!(h.join().unwrap_err().is_cancelled());
        }
        assert!(reader.join().unwrap_err().is_cancelled());
        // After shutdown: an error, not a wait for ever.
        progress.stage("read after shutdown");
        let r = pool.block_on(async {
            let mut buf = [0u8; 8];
            server.read(&mut buf).await
        });
        assert!(r.is_err(), "a read after shutdown returned {r:?}");
        assert!(TcpListener::bind(&net, "127.0.0.1:0".parse().unwrap()).is_err(), "registered after shutdown");
        // A driver installed after shutdown would never be polled: refused.
        let late = ThreadPool::new(Config::default().with_max_threads(1)).unwrap();
        late.shutdown().unwrap();
        assert!(Net::install(&late).is_err(), "a driver installed after shutdown");
    });
}

/// Several tasks waiting on one socket in the same direction (receivers sharing a UDP socket,
/// acceptors sharing a listener) are all woken by its events: none is left waiting while data
/// sits unread. Each datagram is sent only once every receiver waits, so a waiter whose
/// registration a later one displaced would never wake.
#[test]
fn several_tasks_wait_on_one_socket() {
    watchdog("several_tasks_wait_on_one_socket", watchdog_secs(30), |progress| {
        const RECEIVERS: usize = 4;
        let (pool, net) = pool_and_net(2);
        let socket = Arc::new(UdpSocket::bind(&net, "127.0.0.1:0".parse().unwrap()).unwrap());
        let addr = socket.local_addr().unwrap();
        let waiting = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let receivers: Vec<_> = (0..RECEIVERS)
            .map(|_| {
                let (socket, waiting) = (socket.clone(), waiting.clone());
                pool.spawn_future(async move {
                    waiting.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let mut buf = [0u8; 16];
                    socket.recv_from(&mut buf).await.unwrap().0
                })
                .unwrap()
            })
            .collect();
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for i in 0..RECEIVERS {
            progress.stage(format!("datagram {i}"));
            while waiting.load(std::sync::atomic::Ordering::Relaxed) < RECEIVERS {
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(Duration::from_millis(10)); // every receiver registered
            sender.send_to(&[i as u8; 8], addr).unwrap();
        }
        progress.stage("joins");
        let got: usize = receivers.into_iter().map(|r| r.join().unwrap()).sum();
        assert_eq!(got, RECEIVERS * 8);

        // Acceptors sharing a listener: every one gets a connection.
        let listener = Arc::new(TcpListener::bind(&net, "127.0.0.1:0".parse().unwrap()).unwrap());
        let addr = listener.local_addr().unwrap();
        let acceptors: Vec<_> = (0..RECEIVERS)
            .map(|_| {
                let listener = listener.clone();
                pool.spawn_future(async move { listener.accept().await.map(|_| ()).is_ok() }).unwrap()
            })
            .collect();
        let mut clients = Vec::new();
        for i in 0..RECEIVERS {
            progress.stage(format!("connection {i}"));
            std::thread::sleep(Duration::from_millis(10));
            clients.push(std::net::TcpStream::connect(addr).unwrap());
        }
        progress.stage("acceptor joins");
        assert!(acceptors.into_iter().all(|a| a.join().unwrap()));
    });
}
