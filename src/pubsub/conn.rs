//! The subscriber's connection: the record of what was written to it, the
//! reconcile step that writes what the parking lot needs, and the thread that
//! reads it (what it reads is handled in [`super::replies`]).
//!
//! Lock order: the connection mutex ([`Conn`]), then briefly the lot's, never
//! the reverse, and socket writes only under the connection mutex: the lot's
//! mutex, which every final unlock takes, is never held during I/O. Every
//! write is bounded: by the writing waiter's own limit, and by the response
//! timeout. What a waiter could not write by its limit stays queued in the
//! record, for the next writer or the subscriber thread to finish; a
//! connection that accepts nothing for a response timeout counts as dropped.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, Write};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use super::entries::Name;
use super::{Flavour, RECORD_KEEP, SubscriberState, sparse};
use crate::net::direct::{SLACK_DIVISOR, Until};
use crate::net::resp;
use crate::net::stream::Stream;

/// How long the connection may stay silent before the thread checks it with
/// a PING, while no thread waits. While one does, it is the response timeout:
/// a waiter must learn of a frozen or vanished server within its timeouts.
const HEALTH_CHECK_INTERVAL: Duration = Duration::from_secs(10);
/// How long a cluster subscriber keeps its connection (and thread) with no
/// thread waiting: long enough for a lock's next waiter not to pay a
/// connect, short enough that a node nobody waits on holds nothing.
const IDLE_CLOSE: Duration = HEALTH_CHECK_INTERVAL;
/// The shortest health check interval, whatever the response timeout.
const HEALTH_CHECK_MIN: Duration = Duration::from_millis(100);
const RECONNECT_BACKOFF_MIN: Duration = Duration::from_millis(20);
const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// The shortest time a write may block: every write gets at least one try.
const WRITE_MIN: Duration = Duration::from_millis(1);
/// What the record's buffers keep once drained: a burst of ten thousand
/// subscriptions (a fair lock's waiters each have a channel) grows them to
/// megabytes, which would otherwise stay for the client's life.
const OUT_KEEP: usize = 16 * 1024;

/// The write side of the connection and the record of what was sent on it,
/// behind the connection mutex.
#[derive(Default)]
pub(super) struct Conn {
    /// The write side of the socket, when connected.
    writer: Option<Stream>,
    /// Commands committed to the connection; `out[written..]` is not yet
    /// written.
    out: Vec<u8>,
    written: usize,
    /// Channels whose last command sent was SUBSCRIBE.
    pub(super) subscribed: HashSet<Name>,
    /// Per channel, its commands whose reply has not come yet.
    in_flight: HashMap<Name, usize>,
    /// Every command whose reply has not come yet, oldest first: replies come
    /// in this order, so each confirmation or error answers the front one.
    pub(super) pending: VecDeque<Pending>,
}

/// A command written to the subscriber connection, awaiting its reply.
/// Each (un)subscribe names one channel, so that a refusal (the server
/// refuses a whole command when it may not have one of its channels) names
/// exactly one.
#[derive(Debug)]
pub(super) enum Pending {
    Subscribe(Name),
    Unsubscribe(Name),
    Ping,
}

impl Conn {
    /// Commits `command` to the connection (written by the next flush) and
    /// records it: once per flavour spoken (a (un)subscribe of
    /// [`Flavour::Both`] is two commands, each awaiting its reply; the
    /// channel settles with the last).
    pub(super) fn queue(&mut self, command: Pending, flavour: Flavour) {
        let pairs = match &command {
            Pending::Ping => {
                self.out
                    .extend_from_slice(&redis::cmd("PING").get_packed_command());
                self.pending.push_back(command);
                return;
            }
            Pending::Subscribe(_) | Pending::Unsubscribe(_) => flavour.commands(),
        };
        for &(subscribe, unsubscribe) in pairs {
            let (name, channel) = match &command {
                Pending::Subscribe(channel) => (subscribe, channel),
                Pending::Unsubscribe(channel) => (unsubscribe, channel),
                Pending::Ping => continue,
            };
            self.out
                .extend_from_slice(&redis::cmd(name).arg(&**channel).get_packed_command());
            *self.in_flight.entry(channel.clone()).or_default() += 1;
            self.pending.push_back(match &command {
                Pending::Subscribe(channel) => Pending::Subscribe(channel.clone()),
                _ => Pending::Unsubscribe(channel.clone()),
            });
        }
        match command {
            Pending::Subscribe(channel) => {
                self.subscribed.insert(channel);
            }
            Pending::Unsubscribe(channel) => {
                self.subscribed.remove(&channel);
                if sparse(self.subscribed.len(), self.subscribed.capacity()) {
                    self.subscribed
                        .shrink_to(RECORD_KEEP.max(2 * self.subscribed.len()));
                }
            }
            Pending::Ping => {}
        }
    }

    /// One command for `channel` got its reply; `true` when none is left in
    /// flight, so that the reply settles the channel's state.
    pub(super) fn settled(&mut self, channel: &str) -> bool {
        match self.in_flight.get_mut(channel) {
            Some(count) if *count > 1 => {
                *count -= 1;
                false
            }
            _ => {
                self.in_flight.remove(channel);
                if sparse(self.in_flight.len(), self.in_flight.capacity()) {
                    self.in_flight
                        .shrink_to(RECORD_KEEP.max(2 * self.in_flight.len()));
                }
                true
            }
        }
    }

    /// The oldest command awaiting its reply, taken off the record.
    pub(super) fn answered(&mut self) -> Option<Pending> {
        let front = self.pending.pop_front();
        if sparse(self.pending.len(), self.pending.capacity()) {
            self.pending
                .shrink_to(RECORD_KEEP.max(2 * self.pending.len()));
        }
        front
    }

    /// Subscribed, and the server confirmed it.
    pub(super) fn confirmed(&self, channel: &str) -> bool {
        self.subscribed.contains(channel) && !self.in_flight.contains_key(channel)
    }

    /// Bytes committed but not written yet.
    fn unwritten(&self) -> usize {
        self.out.len() - self.written
    }

    /// Writes what is queued until done or `deadline` passes (a `TimedOut`
    /// error leaves the rest queued); tries at least once. Blocks until
    /// `deadline` at most (but at least [`WRITE_MIN`]).
    fn flush(&mut self, deadline: Instant) -> io::Result<()> {
        let Some(writer) = self.writer.as_mut() else {
            return Ok(());
        };
        while self.written < self.out.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            writer.set_write_timeout(Some(left.max(WRITE_MIN)))?;
            match writer.write(&self.out[self.written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, e));
                }
                Err(e) => return Err(e),
            }
            if self.written < self.out.len() && Instant::now() >= deadline {
                return Err(io::ErrorKind::TimedOut.into());
            }
        }
        self.all_written();
        Ok(())
    }

    /// Everything committed was written: the buffer starts over, given back
    /// down to [`OUT_KEEP`].
    fn all_written(&mut self) {
        self.out.clear();
        self.out.shrink_to(OUT_KEEP);
        self.written = 0;
    }

    /// Closes the connection for good: the subscriber thread sees the
    /// shutdown.
    pub(super) fn close(&mut self) {
        if let Some(writer) = self.writer.take() {
            let _ = writer.shutdown();
        }
    }

    /// Starts over on a new connection (or none): nothing is subscribed,
    /// queued or in flight. Returns the previous writer.
    fn reset(&mut self, writer: Option<Stream>) -> Option<Stream> {
        let previous = std::mem::take(self).writer;
        self.writer = writer;
        previous
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

impl SubscriberState {
    /// Writes the difference between the channels the lot wants and those
    /// subscribed on the connection, as one caller among possibly several:
    /// whoever holds the connection mutex does the work marked by `dirty`,
    /// and whoever releases it checks for more. With a `limit` (a waiting
    /// thread), waits for the connection mutex and writes until `limit` at
    /// most (and at most a response timeout); what is left unwritten stays
    /// queued, and a write error closes the connection (the subscriber thread
    /// reconnects); past `limit` it does no more rounds for others, which
    /// the subscriber thread then does after its next read. Without one (the
    /// subscriber thread), a write that makes no progress for a response
    /// timeout is an error, returned.
    pub(super) fn sync(&self, limit: Option<Instant>) -> io::Result<()> {
        while self.dirty.load(Ordering::Acquire) {
            let mut conn = match limit {
                Some(limit) => match self.conn.try_lock_until(limit) {
                    Some(conn) => conn,
                    // Its holder syncs again when it lets go.
                    None => return Ok(()),
                },
                None => self.conn.lock(),
            };
            if !self.dirty.swap(false, Ordering::AcqRel) {
                return Ok(());
            }
            if conn.writer.is_none() {
                // The next connection subscribes everything wanted by then.
                continue;
            }
            self.write_difference(&mut conn, false);
            match limit {
                None => self.flush_patiently(&mut conn)?,
                Some(limit) => {
                    let by = limit.min(Instant::now() + self.response_timeout);
                    match conn.flush(by) {
                        Ok(()) => {}
                        Err(e) if is_timeout(&e) => {
                            // The rest goes out with the next write, or the
                            // subscriber thread's, which also notices a
                            // connection that accepts nothing.
                            self.dirty.store(true, Ordering::Release);
                            return Ok(());
                        }
                        Err(e) => {
                            log::debug!("redisson-lock: subscriber write failed: {e}");
                            // The reader sees the shutdown and reconnects.
                            if let Some(writer) = conn.writer.take() {
                                let _ = writer.shutdown();
                            }
                        }
                    }
                    if Instant::now() >= limit {
                        // Past its limit a waiter does no more work for
                        // others; what they marked is left to the subscriber
                        // thread.
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    /// Queues a (un)subscribe for each channel whose wanted state differs
    /// from what was sent (`full`: every wanted channel, on a fresh
    /// connection; otherwise the touched ones), and activates channels wanted
    /// again while their subscription, confirmed, was still in place. Takes
    /// the lot's mutex briefly (the commands are encoded after letting it
    /// go); no I/O.
    fn write_difference(&self, conn: &mut Conn, full: bool) {
        let mut commands = Vec::new();
        {
            let mut lot = self.lot.lock();
            let mut channels = if full {
                lot.take_all()
            } else {
                lot.take_touched()
            };
            // A channel that left and came back was touched twice.
            channels.sort_unstable();
            channels.dedup();
            for channel in channels {
                let wanted = lot.wants(&channel);
                let sent = conn.subscribed.contains(&*channel);
                if wanted && !sent {
                    commands.push(Pending::Subscribe(channel));
                } else if !wanted && sent {
                    commands.push(Pending::Unsubscribe(channel));
                } else if wanted && conn.confirmed(&channel) {
                    lot.activate(&channel);
                }
            }
        }
        for command in commands {
            conn.queue(command, self.flavour);
        }
    }

    /// Writes everything queued, as long as each write makes progress within
    /// a response timeout. For the subscriber thread only.
    fn flush_patiently(&self, conn: &mut Conn) -> io::Result<()> {
        loop {
            let before = conn.unwritten();
            match conn.flush(Instant::now() + self.response_timeout) {
                Err(e) if is_timeout(&e) && conn.unwritten() < before => {}
                done => return done,
            }
        }
    }

    /// The subscriber thread: connects, serves the connection until it
    /// fails, wakes waiters as needed, and reconnects with backoff, until the
    /// client is dropped.
    ///
    /// In a cluster the thread ends (and the next waiter starts another)
    /// whenever no thread waits and the connection is down or idle for
    /// [`IDLE_CLOSE`]: it never connects for nobody, and a node that
    /// failed or was demoted while nobody waited keeps neither connection
    /// nor thread.
    pub(super) fn run(&self) {
        let mut backoff = RECONNECT_BACKOFF_MIN;
        let mut reported = false;
        while !self.closed.load(Ordering::Acquire) {
            if self.flavour.in_cluster() && self.stop_if_idle() {
                return;
            }
            let generation = self.endpoint.generation();
            let stream = match Stream::connect(&self.endpoint, self.connect_timeout) {
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
            let mut stopped = false;
            let served = self.serve(stream, generation, &mut answered, &mut stopped);
            if stopped {
                return;
            }
            if let Err(e) = &served
                && !self.closed.load(Ordering::Acquire)
            {
                log::debug!("redisson-lock: subscriber connection lost: {e}");
                // Under Sentinel the master may have moved.
                self.endpoint.suspect();
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
            let mut conn = self.conn.lock();
            if let Some(writer) = conn.reset(None) {
                let _ = writer.shutdown();
            }
            // Only when a working connection is lost: failed reconnects must
            // not keep waking the waiters. (The next connection's
            // confirmations wake them again.) In a cluster the node may be
            // gone for good: the waiters subscribe again where their slot
            // lives now.
            if self.flavour.in_cluster() && answered {
                self.lot.lock().all_moved();
            } else {
                self.lot.lock().connection_lost(answered);
            }
        }
    }

    /// Subscribes everything wanted on a fresh connection, then dispatches
    /// what it reads until the connection fails or the client closes.
    /// `generation` is the endpoint's when the connect began: a connection
    /// to a master that moved meanwhile is dropped at once.
    /// A cluster subscriber whose connection stays idle for [`IDLE_CLOSE`]
    /// closes it and sets `stopped`: the thread ends.
    fn serve(
        &self,
        stream: Stream,
        generation: u64,
        answered: &mut bool,
        stopped: &mut bool,
    ) -> io::Result<()> {
        let mut reader = stream.try_clone()?;
        {
            let mut conn = self.conn.lock();
            if self.closed.load(Ordering::Acquire) {
                return Ok(());
            }
            if self.endpoint.generation() != generation {
                return Err(io::Error::other("the master moved while connecting"));
            }
            conn.reset(Some(stream));
            self.write_difference(&mut conn, true);
            self.flush_patiently(&mut conn)?;
        }
        let mut incoming = resp::Reader::default();
        let mut ping_sent = false;
        // The socket's read timeout (the connect timeout until changed).
        let mut read_timeout = self.connect_timeout;
        let mut idle_since = None;
        loop {
            // Work a waiter left: a subscription it could not take the
            // connection mutex for, or a write it could not finish in time.
            self.sync(None)?;
            let idle = self.lot.lock().is_empty();
            if !idle {
                idle_since = None;
            } else if idle_since.is_none() {
                idle_since = Some(Instant::now());
            }
            let silence = if ping_sent || !idle {
                self.response_timeout.max(HEALTH_CHECK_MIN)
            } else {
                HEALTH_CHECK_INTERVAL
            };
            // A signal does not restart the silence (see `Until`).
            let mut until = Until {
                stream: &mut reader,
                timeout: &mut read_timeout,
                deadline: Instant::now() + silence,
                slack: silence / SLACK_DIVISOR,
            };
            match incoming.next(&mut until) {
                Ok(value) => {
                    ping_sent = false;
                    self.dispatch(value, answered)?;
                }
                Err(e)
                    if e.is_timeout()
                        && self.flavour.in_cluster()
                        && idle_since.is_some_and(|since| since.elapsed() >= IDLE_CLOSE)
                        && self.stop_if_idle() =>
                {
                    *stopped = true;
                    return Ok(());
                }
                Err(e) if e.is_timeout() && !ping_sent => {
                    let mut conn = self.conn.lock();
                    conn.queue(Pending::Ping, self.flavour);
                    self.flush_patiently(&mut conn)?;
                    ping_sent = true;
                }
                Err(e) => return Err(io::Error::other(e)),
            }
            if self.closed.load(Ordering::Acquire) {
                return Ok(());
            }
        }
    }

    /// When no thread waits and no command awaits its reply: closes the
    /// connection (if any) and marks the thread as not running, both under
    /// the lot's mutex, so that a waiter joining later starts a new thread
    /// (see [`Subscriber::subscribe`](super::Subscriber::subscribe)); `true`
    /// then, and the calling thread must end. Takes the connection mutex
    /// (bounded by a response timeout) and the lot's briefly; no other I/O.
    fn stop_if_idle(&self) -> bool {
        let mut conn = self.conn.lock();
        let lot = self.lot.lock();
        if !lot.is_empty() || !conn.pending.is_empty() {
            return false;
        }
        if let Some(writer) = conn.reset(None) {
            let _ = writer.shutdown();
        }
        self.thread_started.store(false, Ordering::Release);
        drop(lot);
        log::debug!("redisson-lock: cluster subscriber idle: connection and thread closed");
        true
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn both_flavours_subscribe_each_channel_twice_and_settle_on_the_last_reply() {
        let mut conn = Conn::default();
        conn.queue(Pending::Subscribe("c".into()), Flavour::Both);
        let written = String::from_utf8_lossy(&conn.out).into_owned();
        let (classic, sharded) = (
            written.find("SUBSCRIBE\r\n$1\r\nc").expect("SUBSCRIBE c"),
            written.find("SSUBSCRIBE\r\n$1\r\nc").expect("SSUBSCRIBE c"),
        );
        assert!(classic < sharded, "{written:?}");
        assert_eq!(conn.pending.len(), 2);
        assert!(!conn.confirmed("c"));
        assert!(!conn.settled("c"), "the first reply does not settle");
        assert!(conn.settled("c"), "the second does");
        assert!(conn.confirmed("c"));

        conn.out.clear();
        conn.pending.clear();
        conn.queue(Pending::Unsubscribe("c".into()), Flavour::Both);
        let written = String::from_utf8_lossy(&conn.out).into_owned();
        assert!(written.contains("UNSUBSCRIBE\r\n$1\r\nc"), "{written:?}");
        assert!(written.contains("SUNSUBSCRIBE\r\n$1\r\nc"), "{written:?}");
        assert!(matches!(
            conn.pending.iter().collect::<Vec<_>>().as_slice(),
            [Pending::Unsubscribe(a), Pending::Unsubscribe(b)] if &**a == "c" && &**b == "c"
        ));
        assert!(!conn.subscribed.contains("c"));

        let mut classic = Conn::default();
        classic.queue(Pending::Subscribe("c".into()), Flavour::ClusterClassic);
        assert_eq!(classic.pending.len(), 1);
        assert!(!String::from_utf8_lossy(&classic.out).contains("SSUBSCRIBE"));
    }

    #[test]
    fn the_record_gives_back_what_a_burst_of_subscriptions_grew() {
        let mut conn = Conn::default();
        let channels: Vec<Name> = (0..10_000)
            .map(|i| Name::from(format!("redisson_lock__channel:{{f}}:uuid:{i}")))
            .collect();
        for channel in &channels {
            conn.queue(Pending::Subscribe(Arc::clone(channel)), Flavour::Standalone);
        }
        assert!(conn.out.len() > 500_000, "{}", conn.out.len());
        // Written, then every reply comes.
        conn.all_written();
        for channel in &channels {
            assert!(
                matches!(conn.answered(), Some(Pending::Subscribe(c)) if Arc::ptr_eq(&c, channel))
            );
            assert!(conn.settled(channel));
        }
        assert!(conn.answered().is_none());
        assert!(conn.out.capacity() <= OUT_KEEP, "{}", conn.out.capacity());
        assert!(
            conn.pending.capacity() <= 4 * RECORD_KEEP,
            "{}",
            conn.pending.capacity()
        );
        assert!(
            conn.in_flight.capacity() <= 4 * RECORD_KEEP,
            "{}",
            conn.in_flight.capacity()
        );
        assert!(conn.confirmed(&channels[0]));
        // The waiters leave: every channel unsubscribed.
        for channel in &channels {
            conn.queue(
                Pending::Unsubscribe(Arc::clone(channel)),
                Flavour::Standalone,
            );
        }
        assert!(conn.subscribed.is_empty());
        let kept = conn.subscribed.capacity();
        assert!(kept <= 4 * RECORD_KEEP, "{kept}");
    }
}
