//! A test-only TCP proxy between a client and a `redis-server` that can lose
//! or delay the request or the reply of one chosen command.
//!
//! It understands just enough RESP to cut the streams at command and reply
//! boundaries: each request is matched with its reply in order, so "the reply
//! to the next command containing `redisson_unlock_latch`" is exact whatever
//! the chunking of the TCP streams. Connections that enter subscriber mode are
//! passed through untouched, but can be frozen: the proxy then stops reading
//! what the client writes to them, as a server frozen with SIGSTOP would,
//! while the client's other connections keep working. Everything runs on
//! plain threads; dropping the proxy closes its listener and every connection.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

/// What happens to the next command that contains the armed marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The command reaches the server and runs; its reply is swallowed and
    /// the client's connection is closed: the client sees an I/O error and
    /// cannot know whether the command ran.
    DropReplyAndClose,
    /// The command never reaches the server; the client's connection is
    /// closed.
    DropRequestAndClose,
    /// The reply is held back this long, then delivered (later replies on the
    /// connection wait behind it): a response timeout, then a late reply.
    DelayReply(Duration),
    /// The command is held back this long before it is forwarded (the fault
    /// counts as injected as soon as the command is held): a test can act
    /// while the client believes the command is on its way.
    DelayRequest(Duration),
    /// The reply's first this many bytes are forwarded (the fault counts as
    /// injected then), the rest held until [`Proxy::release_tail`]: a reply
    /// cut mid-way by a response timeout, its tail arriving late.
    SplitReply(usize),
}

/// What to do with the reply to one forwarded request.
#[derive(Clone, Copy, Debug)]
enum Action {
    Forward,
    DropAndClose,
    Delay(Duration),
    Split(usize),
}

struct Shared {
    upstream: u16,
    armed: Mutex<Option<(Vec<u8>, Fault)>>,
    injected: AtomicUsize,
    requests: Mutex<Vec<Vec<u8>>>,
    stop: AtomicBool,
    /// Connections in subscriber mode are not read from while set.
    subscribers_frozen: AtomicBool,
    sockets: Mutex<Vec<TcpStream>>,
    /// A split reply's tail is held while set.
    tail_held: Mutex<bool>,
    tail_released: Condvar,
    /// Split replies whose tail was written since.
    tails: AtomicUsize,
}

/// A proxy listening on a free loopback port, forwarding to `127.0.0.1:<upstream>`.
pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
}

impl Proxy {
    pub fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let shared = Arc::new(Shared {
            upstream,
            armed: Mutex::new(None),
            injected: AtomicUsize::new(0),
            requests: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            subscribers_frozen: AtomicBool::new(false),
            sockets: Mutex::new(Vec::new()),
            tail_held: Mutex::new(false),
            tail_released: Condvar::new(),
            tails: AtomicUsize::new(0),
        });
        {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                for client in listener.incoming() {
                    if shared.stop.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(client) = client else { continue };
                    let Ok(server) = TcpStream::connect(("127.0.0.1", shared.upstream)) else {
                        continue; // the client sees its connection closed
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    serve(Arc::clone(&shared), client, server);
                }
            });
        }
        Proxy { port, shared }
    }

    /// A fresh server with a proxy in front of it.
    pub fn with_server() -> (super::RedisServer, Proxy) {
        let server = super::RedisServer::start();
        let proxy = Proxy::start(server.port());
        (server, proxy)
    }

    /// [`with_server`](Self::with_server), and a client through the proxy
    /// ([`client`](Self::client)).
    pub fn with_client() -> (super::RedisServer, Proxy, redisson_lock::Client) {
        let (server, proxy) = Proxy::with_server();
        let client = proxy.client();
        (server, proxy, client)
    }

    /// `redis://127.0.0.1:<proxy port>/`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A client that reaches the server through the proxy, with the
    /// default settings.
    pub fn client(&self) -> redisson_lock::Client {
        super::connections(redisson_lock::Client::builder(self.url()))
            .build()
            .expect("client")
    }

    /// A client through the proxy that gives up on a reply after
    /// `response_timeout`.
    pub fn client_with_response_timeout(
        &self,
        response_timeout: Duration,
    ) -> redisson_lock::Client {
        super::connections(redisson_lock::Client::builder(self.url()))
            .response_timeout(response_timeout)
            .build()
            .expect("client through the proxy")
    }

    /// Runs `call` with `fault` on the next command containing `marker`: it
    /// must fail with [`redisson_lock::Error::OutcomeUnknown`] for
    /// `operation`, having sent that command exactly once, and nothing may
    /// resend it within `settle` (time for a delayed reply to land).
    /// Returns the error.
    pub fn outcome_unknown<T: std::fmt::Debug>(
        &self,
        (marker, fault): (&str, Fault),
        operation: &str,
        settle: Duration,
        call: impl FnOnce() -> redisson_lock::Result<T>,
    ) -> redisson_lock::Error {
        let sent = self.requests_containing(marker);
        self.arm(marker, fault);
        let e = call().expect_err("a lost reply or request");
        assert!(
            matches!(&e, redisson_lock::Error::OutcomeUnknown { operation: op, .. } if *op == operation),
            "{fault:?}: expected OutcomeUnknown of {operation}, got {e:?}"
        );
        assert!(!self.armed(), "{fault:?}: {operation} never went out");
        assert_eq!(
            self.requests_containing(marker),
            sent + 1,
            "{fault:?}: sent"
        );
        thread::sleep(settle);
        assert_eq!(
            self.requests_containing(marker),
            sent + 1,
            "{fault:?}: {operation} was sent again"
        );
        e
    }

    /// Runs `call` with the reply to the next command containing `marker`
    /// dropped and the connection closed (what a lost reply looks like),
    /// and asserts that the fault hit. Returns what `call` returned.
    pub fn losing_the_reply_to<R>(&self, marker: &str, call: impl FnOnce() -> R) -> R {
        let before = self.injected();
        self.arm(marker, Fault::DropReplyAndClose);
        let result = call();
        assert_eq!(
            self.injected(),
            before + 1,
            "the reply to {marker} was not dropped"
        );
        result
    }

    /// The next command whose bytes contain `marker` suffers `fault`.
    pub fn arm(&self, marker: &str, fault: Fault) {
        if let Fault::SplitReply(_) = fault {
            *self.shared.tail_held.lock().expect("tail") = true;
        }
        *self.shared.armed.lock().expect("armed") = Some((marker.as_bytes().to_vec(), fault));
    }

    /// While `frozen`, the proxy reads nothing more from connections in
    /// subscriber mode (at most one chunk already being read gets through):
    /// the client's writes to them pile up in the socket buffers and then
    /// block, as if the server were frozen. Other connections are untouched.
    pub fn freeze_subscribers(&self, frozen: bool) {
        self.shared
            .subscribers_frozen
            .store(frozen, Ordering::Release);
    }

    /// Lets a [`Fault::SplitReply`]'s tail go; returns once it was written
    /// (or its connection closed), at most after `within`.
    pub fn release_tail(&self, within: Duration) {
        let tails = self.shared.tails.load(Ordering::Acquire);
        *self.shared.tail_held.lock().expect("tail") = false;
        self.shared.tail_released.notify_all();
        super::eventually(within, || self.shared.tails.load(Ordering::Acquire) > tails);
    }

    /// Whether an armed fault is still waiting for its command.
    pub fn armed(&self) -> bool {
        self.shared.armed.lock().expect("armed").is_some()
    }

    /// How many faults were injected so far.
    pub fn injected(&self) -> usize {
        self.shared.injected.load(Ordering::Acquire)
    }

    /// How many requests seen so far contain `marker` (faulted ones included).
    pub fn requests_containing(&self, marker: &str) -> usize {
        let marker = marker.as_bytes();
        self.shared
            .requests
            .lock()
            .expect("requests")
            .iter()
            .filter(|request| contains(request, marker))
            .count()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        *self.shared.tail_held.lock().expect("tail") = false;
        self.shared.tail_released.notify_all();
        for socket in self.shared.sockets.lock().expect("sockets").drain(..) {
            let _ = socket.shutdown(Shutdown::Both);
        }
        // Wake the accept loop so it sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(shared: Arc<Shared>, client: TcpStream, server: TcpStream) {
    {
        let mut sockets = shared.sockets.lock().expect("sockets");
        for socket in [&client, &server] {
            if let Ok(clone) = socket.try_clone() {
                sockets.push(clone);
            }
        }
    }
    let pending: Arc<Mutex<VecDeque<Action>>> = Arc::default();
    let pubsub = Arc::new(AtomicBool::new(false));
    let closer = Arc::new(Closer {
        client: client.try_clone().expect("clone"),
        server: server.try_clone().expect("clone"),
    });

    // Client -> server: one request at a time.
    {
        let shared = Arc::clone(&shared);
        let pending = Arc::clone(&pending);
        let pubsub = Arc::clone(&pubsub);
        let mut from = client.try_clone().expect("clone");
        let mut to = server.try_clone().expect("clone");
        let closer = Arc::clone(&closer);
        thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 16 * 1024];
            loop {
                while pubsub.load(Ordering::Acquire)
                    && shared.subscribers_frozen.load(Ordering::Acquire)
                    && !shared.stop.load(Ordering::Acquire)
                {
                    thread::sleep(Duration::from_millis(5));
                }
                let n = match from.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                buf.extend_from_slice(&chunk[..n]);
                if pubsub.load(Ordering::Acquire) {
                    if to.write_all(&buf).is_err() {
                        break;
                    }
                    buf.clear();
                    continue;
                }
                while let Some(len) = resp_len(&buf) {
                    let request: Vec<u8> = buf.drain(..len).collect();
                    shared
                        .requests
                        .lock()
                        .expect("requests")
                        .push(request.clone());
                    if starts_subscriber_mode(&request) {
                        pubsub.store(true, Ordering::Release);
                    }
                    let fault = {
                        let mut armed = shared.armed.lock().expect("armed");
                        match armed.as_ref() {
                            Some((marker, fault)) if contains(&request, marker) => {
                                let fault = *fault;
                                *armed = None;
                                Some(fault)
                            }
                            _ => None,
                        }
                    };
                    let action = match fault {
                        None => Action::Forward,
                        Some(Fault::DropRequestAndClose) => {
                            shared.injected.fetch_add(1, Ordering::AcqRel);
                            closer.close();
                            return;
                        }
                        Some(Fault::DropReplyAndClose) => Action::DropAndClose,
                        Some(Fault::DelayReply(delay)) => Action::Delay(delay),
                        Some(Fault::SplitReply(first)) => Action::Split(first),
                        Some(Fault::DelayRequest(delay)) => {
                            shared.injected.fetch_add(1, Ordering::AcqRel);
                            thread::sleep(delay);
                            Action::Forward
                        }
                    };
                    pending.lock().expect("pending").push_back(action);
                    if to.write_all(&request).is_err() {
                        closer.close();
                        return;
                    }
                }
                if pubsub.load(Ordering::Acquire) && !buf.is_empty() {
                    if to.write_all(&buf).is_err() {
                        break;
                    }
                    buf.clear();
                }
            }
            closer.close();
        });
    }

    // Server -> client: one reply per request, in order.
    {
        let mut from = server;
        let mut to = client;
        thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 16 * 1024];
            loop {
                let n = match from.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                buf.extend_from_slice(&chunk[..n]);
                while !buf.is_empty() {
                    if pubsub.load(Ordering::Acquire) {
                        // Replies and messages no longer pair with requests.
                        if to.write_all(&buf).is_err() {
                            closer.close();
                            return;
                        }
                        buf.clear();
                        break;
                    }
                    let Some(len) = resp_len(&buf) else { break };
                    let reply: Vec<u8> = buf.drain(..len).collect();
                    let action = pending
                        .lock()
                        .expect("pending")
                        .pop_front()
                        .unwrap_or(Action::Forward);
                    match action {
                        Action::Forward => {}
                        Action::DropAndClose => {
                            shared.injected.fetch_add(1, Ordering::AcqRel);
                            closer.close();
                            return;
                        }
                        Action::Delay(delay) => {
                            shared.injected.fetch_add(1, Ordering::AcqRel);
                            thread::sleep(delay);
                        }
                        Action::Split(first) => {
                            let first = first.min(reply.len());
                            let cut = to.write_all(&reply[..first]).is_ok();
                            shared.injected.fetch_add(1, Ordering::AcqRel);
                            let mut held = shared.tail_held.lock().expect("tail");
                            while *held && !shared.stop.load(Ordering::Acquire) {
                                held = shared
                                    .tail_released
                                    .wait_timeout(held, Duration::from_millis(50))
                                    .expect("tail")
                                    .0;
                            }
                            drop(held);
                            let tail = cut && to.write_all(&reply[first..]).is_ok();
                            shared.tails.fetch_add(1, Ordering::AcqRel);
                            if !tail {
                                closer.close();
                                return;
                            }
                            continue;
                        }
                    }
                    if to.write_all(&reply).is_err() {
                        closer.close();
                        return;
                    }
                }
            }
            closer.close();
        });
    }
}

/// Closes both sides of one proxied connection.
struct Closer {
    client: TcpStream,
    server: TcpStream,
}

impl Closer {
    fn close(&self) {
        let _ = self.client.shutdown(Shutdown::Both);
        let _ = self.server.shutdown(Shutdown::Both);
    }
}

fn starts_subscriber_mode(request: &[u8]) -> bool {
    let upper = request.to_ascii_uppercase();
    [&b"SUBSCRIBE"[..], b"PSUBSCRIBE", b"SSUBSCRIBE"]
        .iter()
        .any(|command| {
            // The first bulk string of the request is the command name.
            first_bulk(&upper).is_some_and(|name| name == *command)
        })
}

fn first_bulk(request: &[u8]) -> Option<&[u8]> {
    let after_count = find_crlf(request, 0)? + 2;
    if request.get(after_count) != Some(&b'$') {
        return None;
    }
    let len_end = find_crlf(request, after_count)?;
    let len: usize = std::str::from_utf8(&request[after_count + 1..len_end])
        .ok()?
        .parse()
        .ok()?;
    request.get(len_end + 2..len_end + 2 + len)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty()
        || haystack
            .windows(needle.len())
            .any(|window| window == needle)
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| from + p)
}

/// The length of the complete RESP value at the start of `buf`, or `None`
/// if more bytes are needed. Handles RESP2 and the RESP3 types redis-server
/// sends; inline commands end at their line.
pub fn resp_len(buf: &[u8]) -> Option<usize> {
    value_end(buf, 0)
}

fn value_end(buf: &[u8], at: usize) -> Option<usize> {
    let kind = *buf.get(at)?;
    let line_end = find_crlf(buf, at)?;
    let header = std::str::from_utf8(&buf[at + 1..line_end]).ok();
    let after = line_end + 2;
    match kind {
        b'+' | b'-' | b':' | b',' | b'#' | b'_' | b'(' => Some(after),
        b'$' | b'=' | b'!' => {
            let len: i64 = header?.parse().ok()?;
            if len < 0 {
                return Some(after);
            }
            let end = after + usize::try_from(len).ok()? + 2;
            (buf.len() >= end).then_some(end)
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let count: i64 = header?.parse().ok()?;
            let items = match kind {
                b'%' | b'|' => count.max(0) * 2,
                _ => count.max(0),
            };
            let mut end = after;
            for _ in 0..items {
                end = value_end(buf, end)?;
            }
            Some(end)
        }
        _ => Some(after), // an inline command
    }
}
