//! One multiplexed socket: requests of many threads written as they come
//! and their replies read back in order, by whichever caller is waiting
//! when nobody reads (the leader, [`lead`]), who hands each reply that is
//! not its own to its caller.
//!
//! Every request is queued and its bytes appended to the outbox under one
//! mutex, so that the queue's order is the socket's; whoever finds nobody
//! writing writes the whole outbox in one `write` (again, until it is
//! empty), so that many threads' commands go out in few system calls. A
//! request made while callers handed a reply have not taken it yet leaves
//! its write to the last of them (`SocketState::woken`): the callers one read
//! woke send their next commands together. The leader reads replies, hands
//! those of a read out together, and stops reading once its own request is
//! answered, waking the first caller still waiting so that it reads next. A
//! lone thread is always its own leader: no hand-off, no other thread.
//!
//! The socket's timeouts: the leader reads at most until the queue's front
//! has waited the response timeout (give or take [`SLACK_DIVISOR`]); a
//! front not answered by then closes the socket and every request in flight
//! gets a timeout (its outcome is unknown; nothing is sent again). A socket
//! that breaks (or sends garbage) gives every request in flight a dropped
//! connection error, which the layers above treat as they treat a pooled
//! connection that dropped.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{RedisError, RedisResult, Value};

use crate::net::direct;
use crate::net::endpoint::Endpoint;
use crate::net::mux::Replies;
use crate::net::resp;
use crate::net::stream::Stream;
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::{Condvar, Mutex, MutexGuard};

mod lead;
#[cfg(all(test, feature = "shuttle"))]
mod schedules;
#[cfg(test)]
mod tests;

/// The socket's read timeout is changed only when it is off the time left
/// by more than the response timeout over this: a read may outlast its
/// front's deadline by that much (an eighth), and the fast path makes no
/// `setsockopt` per read.
const SLACK_DIVISOR: u32 = 8;

/// Why a socket was closed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum SocketFailure {
    /// A reply did not come within the response timeout (or a write did
    /// not go out within it).
    TimedOut,
    /// The connection broke or the server sent something unreadable.
    Dropped,
}

impl SocketFailure {
    /// The error a request in flight on the closed socket gets: a timeout
    /// (outcome unknown, never sent again) or a dropped connection (sent
    /// again once, flagged as a resend, as on a pooled connection).
    pub fn error(self) -> RedisError {
        match self {
            SocketFailure::TimedOut => RedisError::from(io::Error::new(
                io::ErrorKind::TimedOut,
                "no reply within the response timeout on a multiplexed connection \
                 (closed; the command's outcome is unknown)",
            )),
            SocketFailure::Dropped => RedisError::from(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "the multiplexed connection dropped with the command in flight",
            )),
        }
    }
}

/// How a leader's reading ended.
enum Led {
    /// Its own request was answered: the replies (the reading is given up).
    Answered(RedisResult<Replies>),
    /// Its request got its outcome otherwise (the socket failed).
    Failed,
    /// Its caller's `give_up` passed first.
    GaveUp,
}

/// A request in flight: how many replies it awaits and where they go.
pub(crate) struct Slot {
    expected: usize,
    sent_at: Instant,
    wake: Condvar,
    /// Guarded by the socket's state mutex (always locked inside it).
    inner: Mutex<SlotState>,
}

#[derive(Default)]
struct SlotState {
    outcome: Option<RedisResult<Replies>>,
    /// Its caller waits on `wake` (the one to hand the reading to).
    waiting: bool,
    /// Its caller gave up: the replies are read and dropped.
    abandoned: bool,
    /// Its outcome was handed over while its caller waited, and is
    /// counted in `SocketState::woken` until taken.
    counted: bool,
}

struct SocketState {
    /// Requests written (or being written), in the socket's order.
    queue: VecDeque<Arc<Slot>>,
    /// Bytes of queued requests not handed to a writer yet.
    outbox: Vec<u8>,
    /// How many of the queue's last requests those bytes are (certainly
    /// not sent: a failure gives them a dropped connection, not a timeout).
    unwritten: usize,
    /// The outbox's other buffer, reused.
    spare: Vec<u8>,
    /// A caller writes the outbox out.
    writing: bool,
    /// Replies read so far for the front (a pipeline's, of 2 or more).
    partial: Vec<Value>,
    /// A leader reads the socket.
    reading: bool,
    /// Replies handed to waiting callers that have not taken them yet:
    /// callers woken and certain to run soon. While there are any, a new
    /// request leaves its write to the last of them to take its reply, so
    /// that callers woken by one read send their next commands in one
    /// write (one system call, and one read of the server's, instead of one
    /// each).
    woken: usize,
    failed: Option<SocketFailure>,
}

struct SocketReader {
    stream: Stream,
    replies: resp::Reader,
    timeout: Duration,
    /// The leader's parsed replies not handed out yet (kept for its capacity).
    parsed: Vec<Value>,
}

/// One shared command socket (see the module docs).
pub(crate) struct Socket {
    /// Only the caller that set `writing` takes it.
    writer: Mutex<Stream>,
    /// Only the leader takes it, and lets it go before it gives up the
    /// reading (`lead`): the next leader never waits for it.
    reader: Mutex<SocketReader>,
    /// Leaders that found `reader` still taken (tests: never).
    #[cfg(test)]
    reader_waits: crate::sync::atomic::AtomicUsize,
    /// A clone kept to shut the socket down whoever holds the others.
    closer: Stream,
    state: Mutex<SocketState>,
    /// No new request may use it (closed, or a former master's).
    retired: AtomicBool,
    usual: Duration,
    /// The endpoint generation it was opened at.
    pub generation: u64,
    endpoint: Arc<Endpoint>,
}

/// How many replies the socket must still read until `slot` is answered
/// (those of the requests ahead of it, and its own); `None` when it is not
/// queued.
fn replies_until(state: &SocketState, slot: &Arc<Slot>) -> Option<usize> {
    let mut replies = 0;
    for queued in &state.queue {
        replies += queued.expected;
        if Arc::ptr_eq(queued, slot) {
            return Some(replies.saturating_sub(state.partial.len()));
        }
    }
    None
}

fn redis_io(e: io::Error) -> RedisError {
    RedisError::from(e)
}

impl Socket {
    /// Connects to `endpoint`'s server, authenticates, selects the
    /// database, and checks that the server took the connection (one that
    /// turns it away, at `maxclients`, answers the first command with an
    /// error): by the `AUTH` or `SELECT` reply, else with a `PING`. Costs a
    /// connect and one or two round trips.
    pub fn open(
        endpoint: &Arc<Endpoint>,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> RedisResult<Socket> {
        let generation = endpoint.generation();
        let info = endpoint.info();
        let mut stream = Stream::open(endpoint, connect_timeout).map_err(redis_io)?;
        let mut replies = resp::Reader::default();
        let mut timeout = connect_timeout;
        direct::handshake(
            &mut stream,
            &mut replies,
            &mut timeout,
            &info,
            endpoint.name.as_deref(),
            connect_timeout,
        )?;
        stream
            .set_read_timeout(Some(response_timeout))
            .map_err(redis_io)?;
        stream
            .set_write_timeout(Some(response_timeout))
            .map_err(redis_io)?;
        Socket::over(stream, replies, response_timeout, generation, endpoint)
    }

    /// A socket over `stream`, connected and set up (its timeouts set),
    /// opened at the endpoint's `generation`.
    fn over(
        stream: Stream,
        replies: resp::Reader,
        response_timeout: Duration,
        generation: u64,
        endpoint: &Arc<Endpoint>,
    ) -> RedisResult<Socket> {
        Ok(Socket {
            writer: Mutex::new(stream.try_clone().map_err(redis_io)?),
            closer: stream.try_clone().map_err(redis_io)?,
            reader: Mutex::new(SocketReader {
                stream,
                replies,
                timeout: response_timeout,
                parsed: Vec::new(),
            }),
            #[cfg(test)]
            reader_waits: crate::sync::atomic::AtomicUsize::new(0),
            state: Mutex::new(SocketState {
                queue: VecDeque::new(),
                outbox: Vec::new(),
                unwritten: 0,
                spare: Vec::new(),
                writing: false,
                partial: Vec::new(),
                reading: false,
                woken: 0,
                failed: None,
            }),
            retired: AtomicBool::new(false),
            usual: response_timeout,
            generation,
            endpoint: Arc::clone(endpoint),
        })
    }

    /// Whether new requests may use it: not closed, not a former master's.
    pub fn is_usable(&self) -> bool {
        !self.retired.load(Ordering::Acquire) && self.generation == self.endpoint.generation()
    }

    /// No new request uses it; those in flight are still answered.
    pub fn retire(&self) {
        self.retired.store(true, Ordering::Release);
    }

    /// Queues a request awaiting `expected` replies and writes `packed`
    /// (or leaves it to the caller already writing, who writes it next).
    /// `Err`: nothing was sent (the socket had failed). A failed write
    /// closes the socket: the slot then holds the error.
    pub fn send(&self, packed: &[u8], expected: usize) -> RedisResult<Arc<Slot>> {
        let slot = Arc::new(Slot {
            expected,
            sent_at: crate::sync::now(),
            wake: Condvar::new(),
            inner: Mutex::new(SlotState::default()),
        });
        let mut state = self.state.lock();
        if state.failed.is_none()
            && !state.reading
            && state
                .queue
                .front()
                .is_some_and(|front| front.sent_at + self.usual < slot.sent_at)
        {
            // An abandoned request's reply never came and nobody reads:
            // the socket is past its deadline. Not for this request to
            // find out (it would be failed as a timeout at once).
            drop(state);
            self.fail(SocketFailure::TimedOut);
            state = self.state.lock();
        }
        if state.failed.is_some() {
            // Nothing sent: a dropped connection, which may be sent
            // again (as a pooled connection found dropped).
            return Err(SocketFailure::Dropped.error());
        }
        state.queue.push_back(Arc::clone(&slot));
        state.outbox.extend_from_slice(packed);
        state.unwritten += 1;
        // Someone writes it soon: the caller writing, or the last caller
        // handed a reply that has not taken it yet (they are runnable; see
        // `SocketState::woken`), so that the commands of callers woken together
        // go out in one write.
        if state.writing || state.woken > 0 {
            return Ok(slot);
        }
        self.write_out(state);
        Ok(slot)
    }

    /// Writes the outbox out (again, until it is empty), unless someone
    /// writes already. A failed write closes the socket.
    fn write_out<'a>(&'a self, mut state: MutexGuard<'a, SocketState>) {
        if state.writing {
            return;
        }
        state.writing = true;
        loop {
            let spare = std::mem::take(&mut state.spare);
            let mut batch = std::mem::replace(&mut state.outbox, spare);
            state.unwritten = 0;
            drop(state);
            let written = self.writer.lock().write_all(&batch);
            batch.clear();
            state = self.state.lock();
            state.spare = batch;
            if let Err(e) = written {
                let timed_out = matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                );
                let failure = if timed_out {
                    SocketFailure::TimedOut
                } else {
                    SocketFailure::Dropped
                };
                // Failed before the state is let go (and `writing` stays
                // set): nobody may write after a batch cut short, whose
                // last argument the server would complete with the next
                // request's bytes.
                self.mark_failed(&mut state, failure);
                drop(state);
                self.fail(failure);
                return;
            }
            if state.outbox.is_empty() || state.failed.is_some() {
                state.writing = false;
                return;
            }
        }
    }

    /// The replies to `slot`, read by this caller when nobody else reads.
    /// With `give_up` (earlier than the response timeout), a caller not
    /// answered by then abandons its request (its replies will be read and
    /// dropped; the socket stays open) and gets a timeout.
    pub fn receive(&self, slot: &Arc<Slot>, give_up: Option<Instant>) -> RedisResult<Replies> {
        // The waiting caller's own limit, should the leader not keep the
        // deadline: from when it began to wait (a scatter's caller may
        // come for a reply long after sending). Taken when it first waits:
        // a lone thread, always its own leader, never does.
        let mut backstop = None;
        let mut state = self.state.lock();
        loop {
            let (outcome, counted) = {
                let mut inner = slot.inner.lock();
                let outcome = inner.outcome.take();
                (outcome, std::mem::take(&mut inner.counted))
            };
            if let Some(outcome) = outcome {
                self.pass_on(&state);
                if counted {
                    state.woken = state.woken.saturating_sub(1);
                    if state.woken == 0 && !state.outbox.is_empty() {
                        // The last one woken writes what the others left.
                        self.write_out(state);
                    }
                }
                return outcome;
            }
            if !state.reading {
                let Some(needed) = replies_until(&state, slot) else {
                    // Cannot be: a request leaves the queue with its outcome.
                    return Err(SocketFailure::Dropped.error());
                };
                state.reading = true;
                let deadline = self.front_deadline(&state);
                drop(state);
                let led = self.lead(slot, needed, give_up, deadline);
                if let Led::Answered(outcome) = led {
                    // `lead` gave up the reading.
                    return outcome;
                }
                state = self.state.lock();
                state.reading = false;
                if let Led::GaveUp = led {
                    return Err(self.abandon(slot, &state));
                }
                continue;
            }
            // Someone reads: wait to be handed a reply or the reading.
            slot.inner.lock().waiting = true;
            let backstop = *backstop.get_or_insert_with(|| {
                crate::sync::now().max(slot.sent_at) + self.usual * 2 + Duration::from_millis(100)
            });
            let until = give_up.map_or(backstop, |g| g.min(backstop));
            let timed_out = slot.wake.wait_until(&mut state, until).timed_out();
            slot.inner.lock().waiting = false;
            if timed_out && slot.inner.lock().outcome.is_none() {
                if give_up.is_some_and(|g| crate::sync::now() >= g) {
                    return Err(self.abandon(slot, &state));
                }
                // The leader enforces the deadline; never wait past it
                // should it not.
                drop(state);
                self.fail(SocketFailure::TimedOut);
                state = self.state.lock();
            }
        }
    }

    /// Gives up on `slot` (see [`Socket::receive`]) and returns the
    /// timeout its caller gets.
    fn abandon(&self, slot: &Arc<Slot>, state: &SocketState) -> RedisError {
        slot.inner.lock().abandoned = true;
        self.pass_on(state);
        SocketFailure::TimedOut.error()
    }

    /// Drops `slot`, sent but never to be received (its replies are read
    /// and dropped).
    pub fn forget(&self, slot: &Arc<Slot>) {
        let state = self.state.lock();
        slot.inner.lock().abandoned = true;
        self.pass_on(&state);
    }

    /// Gives up the reading (the leader, its reader lock already let go):
    /// the first caller waiting for a reply reads next.
    fn stop_reading(&self, state: &mut SocketState) {
        state.reading = false;
        self.pass_on(state);
    }

    /// When nobody reads, wakes the first caller waiting for a reply so
    /// that it reads next.
    fn pass_on(&self, state: &SocketState) {
        if state.reading {
            return;
        }
        for slot in &state.queue {
            if slot.inner.lock().waiting {
                slot.wake.notify_one();
                return;
            }
        }
    }

    /// When the queue's front must be answered: the response timeout after
    /// it was sent.
    fn front_deadline(&self, state: &SocketState) -> Instant {
        match state.queue.front() {
            Some(front) => front.sent_at + self.usual,
            // Cannot be: the leader's own request is queued until answered.
            None => crate::sync::now() + self.usual,
        }
    }

    /// Records the socket's failure (the first one counts).
    fn mark_failed(&self, state: &mut SocketState, failure: SocketFailure) {
        if state.failed.is_none() {
            state.failed = Some(failure);
            if failure == SocketFailure::Dropped {
                self.endpoint.suspect();
            }
        }
    }

    /// Closes the socket: every request in flight gets `failure`'s error,
    /// and no new request uses it.
    pub fn fail(&self, failure: SocketFailure) {
        self.retire();
        let mut state = self.state.lock();
        self.mark_failed(&mut state, failure);
        state.partial.clear();
        state.outbox.clear();
        // The last `unwritten` requests never left: safe to send again.
        let sent = state.queue.len().saturating_sub(state.unwritten);
        state.unwritten = 0;
        for (i, slot) in state.queue.drain(..).enumerate() {
            let error = if i < sent {
                failure
            } else {
                SocketFailure::Dropped
            };
            let mut inner = slot.inner.lock();
            inner.outcome = Some(Err(error.error()));
            slot.wake.notify_one();
        }
        drop(state);
        let _ = self.closer.shutdown();
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        let _ = self.closer.shutdown();
    }
}
