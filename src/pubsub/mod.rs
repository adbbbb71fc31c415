//! The shared subscriber: one connection and one thread per client, whatever
//! the number of waiting threads and lock names (PROTOCOL §1.6, §2.5).
//!
//! A waiting thread takes a [`Subscription`] to the lock's channel before its
//! second acquire attempt and parks on it for at most the holder's TTL. The
//! subscriber thread reads the connection and turns each unlock message into
//! permits, Redisson's semaphore semantics: `0` wakes one local waiter, `1`
//! wakes all of them, and a permit nobody is waiting for makes the next wait
//! return at once. Subscribe and unsubscribe commands are written straight from
//! the waiting thread, so subscribing costs one round trip, not a poll interval.
//!
//! When the connection drops, the thread wakes every waiter at once (the
//! server may be gone: they find out within their own timeouts instead of
//! sleeping out the holder's TTL), reconnects, subscribes to every channel that
//! still has waiters, and wakes all of them again, since a message may have
//! been missed meanwhile. While threads wait, a connection silent for a
//! response timeout is checked with a `PING`, and one that does not answer
//! within another counts as dropped: a frozen server is noticed too. Waiters
//! never depend on a message alone: each wait is capped by the holder's TTL.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use redis::{ConnectionAddr, ConnectionInfo, Value};

use crate::scripts::{READ_UNLOCK_MESSAGE, UNLOCK_MESSAGE};

/// How long the connection may stay silent before the thread checks it with
/// a PING, while no thread waits. While one does, it is the response timeout:
/// a waiter must learn of a frozen or vanished server within its timeouts.
const HEALTH_CHECK_INTERVAL: Duration = Duration::from_secs(10);
/// The shortest health check interval, whatever the response timeout.
const HEALTH_CHECK_MIN: Duration = Duration::from_millis(100);
const RECONNECT_BACKOFF_MIN: Duration = Duration::from_millis(20);
const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The client's subscriber. Dropping it closes the connection and ends the thread.
pub(crate) struct Subscriber {
    shared: Arc<Shared>,
}

struct Shared {
    info: ConnectionInfo,
    connect_timeout: Duration,
    response_timeout: Duration,
    closed: AtomicBool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Channels with at least one local waiter.
    channels: HashMap<String, Arc<Channel>>,
    /// Subscribe/unsubscribe confirmations still expected, per channel, and
    /// whether the last command sent for it was a subscribe.
    inflight: HashMap<String, (u32, bool)>,
    /// The write side of the connection, when connected.
    writer: Option<Stream>,
    thread_started: bool,
}

struct Channel {
    state: Mutex<ChannelState>,
    activated: Condvar,
    released: Condvar,
}

#[derive(Default)]
struct ChannelState {
    waiters: usize,
    permits: usize,
    /// The server confirmed the subscription on the current connection.
    active: bool,
    /// Subscribed again after a reconnect: wake every waiter once confirmed.
    resync: bool,
}

/// One waiting thread's interest in a channel. Dropping it unsubscribes when
/// it was the channel's last local waiter.
pub(crate) struct Subscription {
    shared: Arc<Shared>,
    name: String,
    channel: Arc<Channel>,
}

impl Subscriber {
    pub fn new(
        info: ConnectionInfo,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Self {
        Subscriber {
            shared: Arc::new(Shared {
                info,
                connect_timeout,
                response_timeout,
                closed: AtomicBool::new(false),
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// Registers interest in `channel` and waits until the server confirms
    /// the subscription or `limit` passes, whichever is first. A subscription
    /// that is not confirmed in time still wakes on reconnect; its waiter polls
    /// at the holder's TTL meanwhile.
    pub fn subscribe(&self, name: &str, limit: Instant) -> Subscription {
        let channel = {
            let mut state = self.shared.state.lock();
            if !state.thread_started {
                state.thread_started = self.start_thread();
            }
            let channel = match state.channels.get(name) {
                Some(channel) => Arc::clone(channel),
                None => {
                    let channel = Arc::new(Channel {
                        state: Mutex::new(ChannelState::default()),
                        activated: Condvar::new(),
                        released: Condvar::new(),
                    });
                    state.channels.insert(name.to_owned(), Arc::clone(&channel));
                    state.send("SUBSCRIBE", &[name]);
                    channel
                }
            };
            channel.state.lock().waiters += 1;
            channel
        };
        {
            let mut channel_state = channel.state.lock();
            while !channel_state.active {
                if channel
                    .activated
                    .wait_until(&mut channel_state, limit)
                    .timed_out()
                {
                    // This waiter goes on without the confirmation: a release
                    // before the server subscribes is missed, so the
                    // confirmation must wake it.
                    channel_state.resync = true;
                    break;
                }
            }
        }
        Subscription {
            shared: Arc::clone(&self.shared),
            name: name.to_owned(),
            channel,
        }
    }

    /// Whether some thread of this client is waiting on `name`.
    pub fn has_waiters(&self, name: &str) -> bool {
        let state = self.shared.state.lock();
        state
            .channels
            .get(name)
            .is_some_and(|channel| channel.state.lock().waiters > 0)
    }

    /// Channels subscribed to (or being subscribed to) and their waiters.
    pub fn stats(&self) -> (usize, usize) {
        let state = self.shared.state.lock();
        let waiters = state
            .channels
            .values()
            .map(|channel| channel.state.lock().waiters)
            .sum();
        (state.channels.len(), waiters)
    }

    fn start_thread(&self) -> bool {
        let shared = Arc::clone(&self.shared);
        match thread::Builder::new()
            .name("rlock-pubsub".into())
            .spawn(move || shared.run())
        {
            Ok(_) => true,
            Err(e) => {
                log::warn!("redisson-lock: cannot start the subscriber thread: {e}");
                false
            }
        }
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        if let Some(writer) = self.shared.state.lock().writer.take() {
            let _ = writer.shutdown();
        }
    }
}

impl Subscription {
    /// Parks until an unlock message for this channel arrives or `timeout`
    /// passes; `true` if woken by a message.
    pub fn wait(&self, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        let mut state = self.channel.state.lock();
        while state.permits == 0 {
            let timed_out = match deadline {
                Some(deadline) => self
                    .channel
                    .released
                    .wait_until(&mut state, deadline)
                    .timed_out(),
                None => {
                    self.channel.released.wait(&mut state);
                    false
                }
            };
            if timed_out {
                return false;
            }
        }
        state.permits -= 1;
        true
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock();
        let mut channel_state = self.channel.state.lock();
        channel_state.waiters -= 1;
        if channel_state.waiters > 0 {
            return;
        }
        drop(channel_state);
        let current = state
            .channels
            .get(&self.name)
            .is_some_and(|channel| Arc::ptr_eq(channel, &self.channel));
        if current {
            state.channels.remove(&self.name);
            state.send("UNSUBSCRIBE", &[&self.name]);
        }
    }
}

impl State {
    /// Writes a (un)subscribe command if connected; when not, the reconnect
    /// subscribes whatever `channels` holds by then.
    fn send(&mut self, command: &str, names: &[&str]) {
        let Some(writer) = self.writer.as_mut() else {
            return;
        };
        let packed = redis::cmd(command).arg(names).get_packed_command();
        if let Err(e) = writer.write_all(&packed) {
            log::debug!("redisson-lock: subscriber write failed: {e}");
            // The reader sees the shutdown and reconnects.
            let _ = writer.shutdown();
            self.writer = None;
            return;
        }
        let subscribe = command == "SUBSCRIBE";
        for name in names {
            let entry = self.inflight.entry((*name).to_owned()).or_insert((0, true));
            entry.0 += 1;
            entry.1 = subscribe;
        }
    }
}

impl Channel {
    fn release(&self, all: bool) {
        let mut state = self.state.lock();
        if all {
            state.permits += state.waiters.max(1);
            self.released.notify_all();
        } else {
            state.permits += 1;
            self.released.notify_one();
        }
    }
}

impl Shared {
    fn run(self: Arc<Self>) {
        let mut backoff = RECONNECT_BACKOFF_MIN;
        let mut reported = false;
        while !self.closed.load(Ordering::Acquire) {
            let stream = match self.connect() {
                Ok(stream) => stream,
                Err(e) => {
                    if !reported {
                        log::warn!("redisson-lock: subscriber cannot connect, retrying: {e}");
                        reported = true;
                    }
                    thread::sleep(backoff);
                    backoff = (backoff * 2).min(RECONNECT_BACKOFF_MAX);
                    continue;
                }
            };
            // Whether the server ever answered on this connection: one that
            // accepts and then drops us at once (maxclients, a proxy without
            // a backend) is a failed connect, not a reconnect.
            let mut answered = false;
            let served = self.serve(stream, &mut answered);
            if let Err(e) = &served
                && !self.closed.load(Ordering::Acquire)
            {
                log::debug!("redisson-lock: subscriber connection lost: {e}");
            }
            if answered {
                if reported {
                    log::info!("redisson-lock: subscriber reconnected");
                }
                backoff = RECONNECT_BACKOFF_MIN;
                reported = false;
            } else if !self.closed.load(Ordering::Acquire) {
                if !reported {
                    log::warn!(
                        "redisson-lock: subscriber connection closed before any reply, retrying: {}",
                        served
                            .err()
                            .map_or_else(|| "closed".to_owned(), |e| e.to_string())
                    );
                    reported = true;
                }
                thread::sleep(backoff);
                backoff = (backoff * 2).min(RECONNECT_BACKOFF_MAX);
            }
            let mut state = self.state.lock();
            if let Some(writer) = state.writer.take() {
                let _ = writer.shutdown();
            }
            for channel in state.channels.values() {
                let mut channel_state = channel.state.lock();
                // Messages may be missed until the next connection subscribes
                // again: its confirmation wakes every waiter.
                channel_state.resync |= channel_state.active;
                channel_state.active = false;
                // The server may be gone: every waiter tries again now, and
                // fails within its timeouts if so, instead of sleeping out the
                // holder's TTL. (A reconnect wakes them again.) Only when a
                // working connection is lost: failed reconnects must not keep
                // waking them.
                if answered && channel_state.waiters > 0 {
                    channel_state.permits += channel_state.waiters;
                    channel.released.notify_all();
                }
            }
        }
    }

    fn connect(&self) -> io::Result<Stream> {
        let timeout = self.connect_timeout;
        let mut stream = match self.info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                let mut last = None;
                let mut connected = None;
                for addr in (host.as_str(), *port).to_socket_addrs()? {
                    match TcpStream::connect_timeout(&addr, timeout) {
                        Ok(tcp) => {
                            connected = Some(tcp);
                            break;
                        }
                        Err(e) => last = Some(e),
                    }
                }
                let tcp = connected.ok_or_else(|| {
                    last.unwrap_or_else(|| io::Error::other("address resolved to nothing"))
                })?;
                tcp.set_nodelay(true)?;
                Stream::Tcp(tcp)
            }
            #[cfg(unix)]
            ConnectionAddr::Unix(path) => Stream::Unix(UnixStream::connect(path)?),
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("the subscriber does not support {other:?} connections"),
                ));
            }
        };
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        let settings = self.info.redis_settings();
        if let Some(password) = settings.password() {
            let mut auth = redis::cmd("AUTH");
            if let Some(username) = settings.username() {
                auth.arg(username);
            }
            auth.arg(password);
            stream.write_all(&auth.get_packed_command())?;
            let reply = redis::Parser::new()
                .parse_value(&mut stream)
                .map_err(io::Error::other)?;
            if let Value::ServerError(e) = reply {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("AUTH failed: {}", e.code()),
                ));
            }
        }
        Ok(stream)
    }

    /// Subscribes everything wanted on a fresh connection, then dispatches
    /// what it reads until the connection fails or the client closes.
    fn serve(&self, stream: Stream, answered: &mut bool) -> io::Result<()> {
        let mut reader = stream.try_clone()?;
        {
            let mut state = self.state.lock();
            if self.closed.load(Ordering::Acquire) {
                return Ok(());
            }
            state.inflight.clear();
            state.writer = Some(stream);
            let names: Vec<String> = state.channels.keys().cloned().collect();
            if !names.is_empty() {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                state.send("SUBSCRIBE", &names);
            }
        }
        let mut parser = redis::Parser::new();
        let mut ping_sent = false;
        let mut read_timeout = None;
        loop {
            let silence = if ping_sent || !self.state.lock().channels.is_empty() {
                self.response_timeout.max(HEALTH_CHECK_MIN)
            } else {
                HEALTH_CHECK_INTERVAL
            };
            if read_timeout != Some(silence) {
                reader.set_read_timeout(Some(silence))?;
                read_timeout = Some(silence);
            }
            match parser.parse_value(&mut reader) {
                Ok(value) => {
                    ping_sent = false;
                    *answered |= !matches!(value, Value::ServerError(_));
                    self.dispatch(value);
                }
                Err(e) if e.is_timeout() && !ping_sent => {
                    let mut state = self.state.lock();
                    let Some(writer) = state.writer.as_mut() else {
                        return Err(io::Error::other("writer closed"));
                    };
                    writer.write_all(&redis::cmd("PING").get_packed_command())?;
                    ping_sent = true;
                }
                Err(e) => return Err(io::Error::other(e)),
            }
            if self.closed.load(Ordering::Acquire) {
                return Ok(());
            }
        }
    }

    fn dispatch(&self, value: Value) {
        let items = match value {
            Value::Array(items) => items,
            Value::ServerError(e) => {
                // E.g. NOPERM for a channel the ACL user may not subscribe
                // to: its waiters fall back to polling at the holder's TTL.
                log::warn!("redisson-lock: the subscriber's command was refused: {e}");
                return;
            }
            _ => return,
        };
        let [Value::BulkString(kind), Value::BulkString(name), payload] = items.as_slice() else {
            return; // a PING reply: ["pong", ""]
        };
        let Ok(name) = std::str::from_utf8(name) else {
            return;
        };
        match kind.as_slice() {
            b"message" => {
                let channel = self.state.lock().channels.get(name).cloned();
                let Some(channel) = channel else { return };
                match payload {
                    Value::BulkString(message) if message == UNLOCK_MESSAGE.as_bytes() => {
                        channel.release(false);
                    }
                    Value::BulkString(message) if message == READ_UNLOCK_MESSAGE.as_bytes() => {
                        channel.release(true);
                    }
                    _ => log::debug!("redisson-lock: ignoring unknown message on {name}"),
                }
            }
            b"subscribe" | b"unsubscribe" => self.confirmed(name),
            _ => {}
        }
    }

    fn confirmed(&self, name: &str) {
        let mut state = self.state.lock();
        let Some((pending, subscribed)) = state.inflight.get_mut(name) else {
            return;
        };
        *pending -= 1;
        if *pending > 0 {
            return;
        }
        let subscribed = *subscribed;
        state.inflight.remove(name);
        if !subscribed {
            return;
        }
        if let Some(channel) = state.channels.get(name) {
            let mut channel_state = channel.state.lock();
            channel_state.active = true;
            channel.activated.notify_all();
            if std::mem::take(&mut channel_state.resync) {
                channel_state.permits += channel_state.waiters;
                channel.released.notify_all();
            }
        }
    }
}

/// The subscriber's socket. Reads happen on the subscriber thread, writes on
/// the waiting threads, each through its own clone of the socket.
enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
}

impl Stream {
    fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            #[cfg(unix)]
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }

    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(timeout),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_read_timeout(timeout),
        }
    }

    fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(timeout),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_write_timeout(timeout),
        }
    }

    fn shutdown(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            #[cfg(unix)]
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            #[cfg(unix)]
            Stream::Unix(s) => s.flush(),
        }
    }
}
