//! Async sockets on the pool (feature `net`): an I/O [`Driver`] on the OS poller (mio: epoll
//! on Linux) and readiness-based [`TcpListener`], [`TcpStream`] and [`UdpSocket`].
//!
//! ```
//! use pool::net::{Net, TcpListener, TcpStream};
//! use std::sync::Arc;
//!
//! let pool = Arc::new(pool::ThreadPool::new(pool::Config::default().with_max_threads(2)).unwrap());
//! let net = Net::install(&pool).unwrap();
//! let listener = TcpListener::bind(&net, "127.0.0.1:0".parse().unwrap()).unwrap();
//! let addr = listener.local_addr().unwrap();
//! // An echo server task: one connection.
//! pool.spawn_future(async move {
//!     let (stream, _) = listener.accept().await.unwrap();
//!     let mut buf = [0u8; 64];
//!     let n = stream.read(&mut buf).await.unwrap();
//!     stream.write_all(&buf[..n]).await.unwrap();
//! })
//! .unwrap();
//! let reply = pool.block_on(async {
//!     let stream = TcpStream::connect(&net, addr).await.unwrap();
//!     stream.write_all(b"ping").await.unwrap();
//!     let mut buf = [0u8; 4];
//!     stream.read_exact(&mut buf).await.unwrap();
//!     buf
//! });
//! assert_eq!(&reply, b"ping");
//! ```
//!
//! # Readiness
//! Each registered socket has a `ScheduledIo`: a readiness word (readable, writable, read
//! closed, write closed, shut down, and a count of events in the high bits) and the wakers of
//! the tasks waiting in each direction: usually one, but several tasks may wait on one socket
//! (acceptors sharing a listener, receivers sharing a UDP socket), and an event wakes them all.
//! The driver's dispatch sets the bits, bumps the count and wakes the wakers. An operation
//! waits until its direction is ready (or closed), tries the system call and, on `WouldBlock`,
//! clears the direction only if no event came since the readiness it saw (the count did not
//! move), so an edge-triggered event that lands between the call and the clear is never lost.
//!
//! A stream's read that returns less than it asked for drained the socket's receive buffer,
//! and a short write filled its send buffer: with an edge-triggered poller (epoll, kqueue) the
//! direction is then cleared the same way at once, which saves the system call that would only
//! return `WouldBlock` (tokio does the same). The closed bits stay set: a peer's close that
//! arrived with the last data, before such a clear, has no later event to announce it, so the
//! next read must still see it and return 0.
//!
//! # Shutdown
//! When its pool shuts down the driver is polled no more ([`Driver::shutdown`]): it sets a
//! shut-down bit in every socket's readiness and wakes both waiters, so the pool's tasks that
//! waited are cancelled and a wait from anywhere else ends; from then on every operation, and
//! every new socket, fails with an `ErrorKind::Other` error, "the pool's I/O driver is shut
//! down", instead of waiting for ever.

use std::boxed::Box;
use std::vec::Vec;
use std::collections::HashMap;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use mio::{Events, Interest, Token};

use crate::io::Driver;
use crate::sync::{AtomicUsize, Ordering};
use crate::{Spawner, ThreadPool};

const WAKER_TOKEN: Token = Token(usize::MAX);
const READABLE: usize = 1;
const WRITABLE: usize = 2;
/// `READABLE << CLOSED_SHIFT`: the peer closed its side, or an error is pending (reads return
/// at once). Likewise for `WRITABLE`.
const CLOSED_SHIFT: u32 = 2;
const READ_CLOSED: usize = READABLE << CLOSED_SHIFT;
const WRITE_CLOSED: usize = WRITABLE << CLOSED_SHIFT;
/// The pool shut down (module docs, "Shutdown"): every operation fails at once. Never cleared.
const SHUT_DOWN: usize = 16;
const EVENT_ONE: usize = 32;

/// Whether mio's poller is edge-triggered on this OS (epoll, kqueue), so that a short read or
/// write shows the direction is no longer ready (module docs, "Readiness").
const EDGE_TRIGGERED: bool = cfg!(any(
    target_os = "android",
    target_os = "illumos",
    target_os = "linux",
    target_os = "redox",
    target_os = "dragonfly",
    target_os = "freebsd",
    target_os = "ios",
    target_os = "macos",
    target_os = "netbsd",
    target_os = "openbsd",
    target_os = "tvos",
    target_os = "visionos",
    target_os = "watchos",
));

/// The readiness of one registered socket (see the module docs).
#[derive(Debug, Default)]
struct ScheduledIo {
    readiness: AtomicUsize,
    /// The tasks waiting to read, and those waiting to write.
    wakers: Mutex<[Waiters; 2]>,
}

/// The tasks waiting on one direction of a socket; an event wakes them all. Usually one (a
/// stream's reader), kept without allocating; several tasks accepting on one listener or
/// receiving on one UDP socket go to `more`. A waiter whose future was dropped stays until
/// the next event, which wakes it for nothing.
#[derive(Debug, Default)]
struct Waiters {
    first: Option<Waker>,
    more: Vec<Waker>,
}

impl Waiters {
    /// Adds `waker` unless it (or one that wakes the same task) is there.
    fn register(&mut self, waker: &Waker) {
        match &self.first {
            None => self.first = Some(waker.clone()),
            Some(w) if w.will_wake(waker) => {}
            Some(_) if self.more.iter().any(|w| w.will_wake(waker)) => {}
            Some(_) => self.more.push(waker.clone()),
        }
    }

    /// Every waiter, to wake once the lock is released.
    fn take(&mut self) -> (Option<Waker>, Vec<Waker>) {
        (self.first.take(), core::mem::take(&mut self.more))
    }
}

impl ScheduledIo {
    /// The driver saw an event with `ready` bits (or the pool shut down: `SHUT_DOWN`).
    fn dispatch(&self, ready: usize) {
        // One RMW: the event count and the bits. Release: pairs with the Acquire loads of the
        // waiting operation.
        let _ = self.readiness.fetch_update(Ordering::Release, Ordering::Relaxed, |r| Some(r.wrapping_add(EVENT_ONE) | ready));
        let woken = {
            let mut wakers = self.wakers.lock().unwrap_or_else(PoisonError::into_inner);
            [
                if ready & (READABLE | READ_CLOSED | SHUT_DOWN) != 0 { wakers[0].take() } else { (None, Vec::new()) },
                if ready & (WRITABLE | WRITE_CLOSED | SHUT_DOWN) != 0 { wakers[1].take() } else { (None, Vec::new()) },
            ]
        };
        // Outside the lock: a waker may poll again at once (another executor's), and that
        // registers under the same lock.
        for (first, more) in woken {
            first.into_iter().chain(more).for_each(Waker::wake);
        }
    }

    /// Ready (or closed) in direction `dir` (READABLE or WRITABLE): the readiness word seen;
    /// an error once the pool shut down.
    fn poll_ready(&self, dir: usize, cx: &Context<'_>) -> Poll<io::Result<usize>> {
        let ready = dir | dir << CLOSED_SHIFT | SHUT_DOWN;
        let seen = |r: usize| if r & SHUT_DOWN != 0 { Err(shut_down()) } else { Ok(r) };
        let r = self.readiness.load(Ordering::Acquire);
        if r & ready != 0 {
            return Poll::Ready(seen(r));
        }
        self.wakers.lock().unwrap_or_else(PoisonError::into_inner)[usize::from(dir == WRITABLE)].register(cx.waker());
        // After the waker is in place: an event dispatched before it was is seen here.
        let r = self.readiness.load(Ordering::Acquire);
        if r & ready != 0 {
            Poll::Ready(seen(r))
        } else {
            Poll::Pending
        }
    }

    /// Direction `dir` is not ready any more: clear the bits `mask` unless an event came since
    /// `seen`. `WouldBlock` clears the direction and its closed bit (a socket that would block
    /// is not closed that way: a UDP socket's reported error was consumed by the call that
    /// returned it); a short transfer only the direction (module docs).
    fn clear(&self, seen: usize, mask: usize) {
        let _ = self.readiness.compare_exchange(seen, seen & !mask, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// The error of every operation on a socket whose pool shut down (module docs, "Shutdown").
fn shut_down() -> io::Error {
    io::Error::other("the pool's I/O driver is shut down")
}

/// The driver: the OS poller, its waker, and the registered sockets by token.
/// The poller, its event buffer, and the batch being dispatched (kept for its capacity).
type Poller = (mio::Poll, Events, Vec<(Arc<ScheduledIo>, usize)>);

struct NetInner {
    poll: Mutex<Poller>,
    registry: mio::Registry,
    waker: mio::Waker,
    /// The registered sockets; `None` once the pool shut down (nothing registers after that).
    ios: Mutex<Option<HashMap<usize, Arc<ScheduledIo>>>>,
    next_token: AtomicUsize,
}

impl NetInner {
    /// Forgets socket `token` (nothing to do after shutdown: the table is gone).
    fn remove(&self, token: usize) {
        if let Some(ios) = self.ios.lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
            ios.remove(&token);
        }
    }

    fn turn(&self, timeout: Option<Duration>) {
        let mut guard = self.poll.lock().unwrap_or_else(PoisonError::into_inner);
        let (poll, events, batch) = &mut *guard;
        if poll.poll(events, timeout).is_err() {
            // EINTR (or a poller error, which the next turn meets again): nothing dispatched;
            // the pool's loop comes back here.
            return;
        }
        {
            // One lock of the socket table per turn. Dispatch (which wakes tasks) runs after it
            // is released: a woken task refused by a closing pool is dropped on this thread,
            // and its socket's drop takes the table's lock.
            let ios = self.ios.lock().unwrap_or_else(PoisonError::into_inner);
            for event in events.iter() {
                if event.token() == WAKER_TOKEN {
                    continue;
                }
                let mut ready = 0;
                if event.is_readable() {
                    ready |= READABLE;
                }
                if event.is_writable() {
                    ready |= WRITABLE;
                }
                if event.is_read_closed() || event.is_error() {
                    ready |= READ_CLOSED;
                }
                if event.is_write_closed() || event.is_error() {
                    ready |= WRITE_CLOSED;
                }
                if let Some(io) = ios.as_ref().and_then(|ios| ios.get(&event.token().0)) {
                    batch.push((io.clone(), ready));
                }
            }
        }
        for (io, ready) in batch.drain(..) {
            io.dispatch(ready);
        }
    }
}

impl Driver for NetInner {
    fn poll(&self) {
        self.turn(Some(Duration::ZERO));
    }
    fn park(&self, timeout: Option<Duration>) {
        self.turn(timeout);
    }
    fn unpark(&self) {
        // An eventfd write: kept until the next poll if nobody is blocked yet.
        let _ = self.waker.wake();
    }
    fn shutdown(&self) {
        // The table goes, so nothing registers any more; the wakes run after its lock is
        // released (a cancelled task's socket takes it when dropped).
        let ios = self.ios.lock().unwrap_or_else(PoisonError::into_inner).take();
        for io in ios.into_iter().flat_map(HashMap::into_values) {
            io.dispatch(SHUT_DOWN);
        }
    }
}

/// A pool's network driver; sockets are created on it. Cheap to clone.
#[derive(Clone)]
pub struct Net(Arc<NetInner>);

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Net").finish_non_exhaustive()
    }
}

impl Net {
    /// Creates the driver and installs it as `pool`'s I/O driver
    /// ([`ThreadPool::set_driver`]).
    ///
    /// # Errors
    /// The OS poller could not be created, the pool already has a driver
    /// (`ErrorKind::AlreadyExists`), or it was shut down (module docs, "Shutdown").
    pub fn install<S: Spawner>(pool: &ThreadPool<S>) -> io::Result<Net> {
        let poll = mio::Poll::new()?;
        let registry = poll.registry().try_clone()?;
        let waker = mio::Waker::new(poll.registry(), WAKER_TOKEN)?;
        let inner = Arc::new(NetInner {
            poll: Mutex::new((poll, Events::with_capacity(1024), Vec::with_capacity(1024))),
            registry,
            waker,
            ios: Mutex::new(Some(HashMap::new())),
            next_token: AtomicUsize::new(0),
        });
        pool.set_driver(Box::new(inner.clone())).map_err(|e| match e {
            crate::Error::Shutdown => shut_down(),
            _ => io::Error::new(io::ErrorKind::AlreadyExists, "the pool already has an I/O driver"),
        })?;
        Ok(Net(inner))
    }

    fn register(&self, source: &mut impl mio::event::Source, interest: Interest) -> io::Result<Registration> {
        let token = self.0.next_token.fetch_add(1, Ordering::Relaxed);
        let io = Arc::new(ScheduledIo::default());
        self.0.ios.lock().unwrap_or_else(PoisonError::into_inner).as_mut().ok_or_else(shut_down)?.insert(token, io.clone());
        if let Err(e) = self.0.registry.register(source, Token(token), interest) {
            self.0.remove(token);
            return Err(e);
        }
        Ok(Registration { net: self.clone(), token, io })
    }
}

/// A socket's registration with the driver.
struct Registration {
    net: Net,
    token: usize,
    io: Arc<ScheduledIo>,
}

impl Registration {
    /// Runs `op` when direction `dir` is ready, until it does not block.
    async fn io<R>(&self, dir: usize, mut op: impl FnMut() -> io::Result<R>) -> io::Result<R> {
        poll_fn(|cx| loop {
            let seen = match self.io.poll_ready(dir, cx) {
                Poll::Ready(Ok(r)) => r,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            match op() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.io.clear(seen, dir | dir << CLOSED_SHIFT),
                result => return Poll::Ready(result),
            }
        })
        .await
    }

    /// As [`io`](Self::io) for a stream's read or write of `len` bytes: a shorter transfer
    /// clears the direction (module docs, "Readiness").
    async fn io_stream(&self, dir: usize, len: usize, mut op: impl FnMut() -> io::Result<usize>) -> io::Result<usize> {
        poll_fn(|cx| loop {
            let seen = match self.io.poll_ready(dir, cx) {
                Poll::Ready(Ok(r)) => r,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            match op() {
                Ok(n) => {
                    if EDGE_TRIGGERED && 0 < n && n < len {
                        self.io.clear(seen, dir);
                    }
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.io.clear(seen, dir | dir << CLOSED_SHIFT),
                Err(e) => return Poll::Ready(Err(e)),
            }
        })
        .await
    }

    fn deregister(&self, source: &mut impl mio::event::Source) {
        let _ = self.net.0.registry.deregister(source);
        self.net.0.remove(self.token);
    }
}

/// An async TCP listener.
pub struct TcpListener {
    io: mio::net::TcpListener,
    reg: Registration,
}

impl std::fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpListener").field("io", &self.io).finish_non_exhaustive()
    }
}

impl TcpListener {
    /// Binds to `addr` (non-blocking, registered with `net`).
    ///
    /// # Errors
    /// As `bind(2)` / `listen(2)`.
    pub fn bind(net: &Net, addr: SocketAddr) -> io::Result<TcpListener> {
        let mut io = mio::net::TcpListener::bind(addr)?;
        let reg = net.register(&mut io, Interest::READABLE)?;
        Ok(TcpListener { io, reg })
    }

    /// The bound address.
    ///
    /// # Errors
    /// As `getsockname(2)`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// Waits for a connection.
    ///
    /// # Errors
    /// As `accept(2)`, or registering the new socket.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (mut io, addr) = self.reg.io(READABLE, || self.io.accept()).await?;
        let reg = self.reg.net.register(&mut io, Interest::READABLE | Interest::WRITABLE)?;
        Ok((TcpStream { io, reg }, addr))
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        self.reg.deregister(&mut self.io);
    }
}

/// An async TCP stream. Reads and writes take `&self`, so one task may read while another
/// writes (several tasks may wait on either side: module docs, "Readiness").
pub struct TcpStream {
    io: mio::net::TcpStream,
    reg: Registration,
}

impl std::fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpStream").field("io", &self.io).finish_non_exhaustive()
    }
}

impl TcpStream {
    /// Connects to `addr`.
    ///
    /// # Errors
    /// As `connect(2)`.
    pub async fn connect(net: &Net, addr: SocketAddr) -> io::Result<TcpStream> {
        let mut io = mio::net::TcpStream::connect(addr)?;
        let reg = net.register(&mut io, Interest::READABLE | Interest::WRITABLE)?;
        let stream = TcpStream { io, reg };
        // Connected once writable (mio's documented way): then the outcome is in SO_ERROR.
        stream
            .reg
            .io(WRITABLE, || match stream.io.take_error()? {
                Some(e) => Err(e),
                None => match stream.io.peer_addr() {
                    Ok(_) => Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => Err(io::ErrorKind::WouldBlock.into()),
                    Err(e) => Err(e),
                },
            })
            .await?;
        Ok(stream)
    }

    /// Disables Nagle's algorithm (`TCP_NODELAY`).
    ///
    /// # Errors
    /// As `setsockopt(2)`.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.io.set_nodelay(nodelay)
    }

    /// Reads into `buf`; 0 means the peer closed.
    ///
    /// # Errors
    /// As `read(2)`.
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let len = buf.len();
        self.reg.io_stream(READABLE, len, || io::Read::read(&mut &self.io, buf)).await
    }

    /// Fills `buf` exactly.
    ///
    /// # Errors
    /// As `read(2)`; `UnexpectedEof` if the peer closed first.
    pub async fn read_exact(&self, mut buf: &mut [u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let n = self.read(buf).await?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            buf = &mut buf[n..];
        }
        Ok(())
    }

    /// Writes some of `buf`.
    ///
    /// # Errors
    /// As `write(2)`.
    pub async fn write(&self, buf: &[u8]) -> io::Result<usize> {
        self.reg.io_stream(WRITABLE, buf.len(), || io::Write::write(&mut &self.io, buf)).await
    }

    /// Writes all of `buf`.
    ///
    /// # Errors
    /// As `write(2)`; `WriteZero` if the socket accepts nothing.
    pub async fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let n = self.write(buf).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            buf = &buf[n..];
        }
        Ok(())
    }

    /// The peer's address.
    ///
    /// # Errors
    /// As `getpeername(2)`.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.peer_addr()
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        self.reg.deregister(&mut self.io);
    }
}

/// An async UDP socket.
pub struct UdpSocket {
    io: mio::net::UdpSocket,
    reg: Registration,
}

impl std::fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpSocket").field("io", &self.io).finish_non_exhaustive()
    }
}

impl UdpSocket {
    /// Binds to `addr`.
    ///
    /// # Errors
    /// As `bind(2)`.
    pub fn bind(net: &Net, addr: SocketAddr) -> io::Result<UdpSocket> {
        let mut io = mio::net::UdpSocket::bind(addr)?;
        let reg = net.register(&mut io, Interest::READABLE | Interest::WRITABLE)?;
        Ok(UdpSocket { io, reg })
    }

    /// The bound address.
    ///
    /// # Errors
    /// As `getsockname(2)`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// Sends one datagram to `target`.
    ///
    /// # Errors
    /// As `sendto(2)`.
    pub async fn send_to(&self, buf: &[u8], target: SocketAddr) -> io::Result<usize> {
        self.reg.io(WRITABLE, || self.io.send_to(buf, target)).await
    }

    /// Receives one datagram.
    ///
    /// # Errors
    /// As `recvfrom(2)`.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.reg.io(READABLE, || self.io.recv_from(buf)).await
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        self.reg.deregister(&mut self.io);
    }
}

// The futures above borrow the socket; they are Send when the socket is.
const _: () = {
    fn assert_send<T: Send>(_: &T) {}
    #[allow(dead_code)]
    fn check(s: &TcpStream, l: &TcpListener, u: &UdpSocket, buf: &mut [u8]) {
        assert_send(&s.read(buf));
        assert_send(&l.accept());
        assert_send(&u.recv_from(buf));
    }
};
