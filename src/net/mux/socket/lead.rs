//! The leader's half of a multiplexed socket: reading replies in order and
//! handing them to their callers.
//!
//! The leader parses the replies a read brought in before it hands any out,
//! and hands them out together, right before it reads again (or when its
//! own request is answered): the callers woken by one read then take their
//! replies together, and their next commands go out together (see
//! `SocketState::woken`), instead of each caller being woken, and writing, while
//! the leader still parses.

use std::io::{self, Read};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;

use super::{Led, SLACK_DIVISOR, Slot, Socket, SocketFailure, SocketReader, SocketState};
use crate::error::Verdict;
use crate::net::mux::Replies;
use crate::net::stream::Stream;
use crate::sync::MutexGuard;

/// Why the leader stopped reading (its read fails, ending the parse).
#[derive(Clone, Copy)]
enum ReadStop {
    /// Its caller's `give_up` passed.
    GaveUp,
    /// Its request got its outcome otherwise (the socket failed).
    Failed,
    /// The queue's front was not answered by its deadline (give or take
    /// the slack), though bytes kept coming.
    TimedOut,
}

/// What handing out a batch of replies did.
enum Handed {
    /// It answered the leader's own request: its replies (the reading is
    /// given up).
    Own(Replies),
    /// It answered other requests only.
    Others,
    /// A reply came that no request awaits: the stream cannot be trusted.
    Stray,
}

/// The socket as the leader's reply reader reads it: before each read, the
/// replies parsed so far are handed out, the leader's own outcome and the
/// queue's deadline looked at, and the read timeout set.
struct Feed<'a> {
    socket: &'a Socket,
    own: &'a Arc<Slot>,
    give_up: Option<Instant>,
    deadline: Instant,
    /// When this leader first meant to read (set then: no clock read
    /// when no read is needed).
    began: Option<Instant>,
    stream: &'a mut Stream,
    timeout: &'a mut Duration,
    /// Replies parsed and not handed out yet, in the socket's order (the
    /// reader's vector, kept for its capacity).
    parsed: &'a mut Vec<Value>,
    /// The state was just looked at (by the caller): the first read needs
    /// no look. (A failure since then shuts the socket down: the read
    /// fails, or returns a reply left in the buffer that finds no front;
    /// either way the next look finds the outcome.)
    fresh: bool,
    stop: Option<ReadStop>,
}

impl Read for Feed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if let Err(stop) = self.before_read() {
                self.stop = Some(stop);
                // Never `Ok(0)`: the reader would take it for the end of the
                // stream. Its buffer and partial reply survive an error.
                return Err(io::Error::other("the leader stopped reading"));
            }
            // tests/failpoints.rs, the tests of `reply-lost`: the reply read as a reset.
            crate::failpoint::failpoint!("reply-lost", reset);
            match self.stream.read_once(buf) {
                // A signal (`EINTR`, see `Stream`'s `Read`): read again, the
                // deadline looked at first. Never a failed socket.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                done => return done,
            }
        }
    }
}

impl Feed<'_> {
    /// Hands out what was parsed and prepares the next read of the socket.
    fn before_read(&mut self) -> Result<(), ReadStop> {
        let socket = self.socket;
        if !std::mem::take(&mut self.fresh) || !self.parsed.is_empty() {
            let (state, handed) = socket.hand_out(self.parsed, self.own);
            match handed {
                Handed::Others => {}
                // Cannot be: the leader reads only up to its own reply, and
                // hands that out itself (see the error path in `lead`).
                Handed::Own(_) => return Err(ReadStop::Failed),
                Handed::Stray => {
                    drop(state);
                    socket.fail(SocketFailure::Dropped);
                    return Err(ReadStop::Failed);
                }
            }
            if self.own.inner.lock().outcome.is_some() {
                return Err(ReadStop::Failed);
            }
            self.deadline = socket.front_deadline(&state);
            // Requests left for a woken caller to write (see
            // `SocketState::woken`) go out before this read waits for replies:
            // with callers on other cores, the leader may hand out more
            // before the last of them takes its reply.
            if !state.outbox.is_empty() {
                socket.write_out(state);
            }
        }
        let now = crate::sync::now();
        if self.give_up.is_some_and(|g| now >= g) {
            return Err(ReadStop::GaveUp);
        }
        // The response timeout bounds a whole reply, not each read: a
        // server trickling the front's reply (every read bringing a byte
        // or two) fails it here, the slack past its deadline. A leader that
        // began after that deadline gets the slack from its beginning, to
        // read what is waiting in the socket.
        let slack = socket.usual / SLACK_DIVISOR;
        let began = *self.began.get_or_insert(now);
        if now >= self.deadline.max(began) + slack.max(Duration::from_millis(1)) {
            return Err(ReadStop::TimedOut);
        }
        // A deadline passed while nobody read still gets one short read:
        // the reply may be waiting in the socket.
        let limit = self
            .give_up
            .map_or(self.deadline, |g| g.min(self.deadline))
            .saturating_duration_since(now)
            .max(Duration::from_millis(1));
        // Kept when a little longer than needed (no system call per read),
        // never when shorter: a short one would spin.
        if *self.timeout > limit + slack || *self.timeout < limit {
            if self.stream.set_read_timeout(Some(limit)).is_err() {
                socket.fail(SocketFailure::Dropped);
                return Err(ReadStop::Failed);
            }
            *self.timeout = limit;
        }
        Ok(())
    }
}

impl Socket {
    /// Reads replies (`needed` of them, the last one completing `slot`) and
    /// hands them out until `slot` is answered (by this leader:
    /// [`Led::Answered`], the reading given up; by a failure:
    /// [`Led::Failed`]) or `give_up` passed ([`Led::GaveUp`]). The caller
    /// has set `reading`; `deadline` is the queue front's when it did.
    pub(super) fn lead(
        &self,
        slot: &Arc<Slot>,
        mut needed: usize,
        give_up: Option<Instant>,
        deadline: Instant,
    ) -> Led {
        // Free: a leader lets it go before it gives the reading up (see
        // `Handed::Own`), so the next one never spins or yields here
        // behind a leader that has not returned yet.
        let mut reader = match self.reader.try_lock() {
            Some(reader) => reader,
            None => {
                #[cfg(test)]
                self.reader_waits
                    .fetch_add(1, crate::sync::atomic::Ordering::Relaxed);
                self.reader.lock()
            }
        };
        let SocketReader {
            stream,
            replies,
            timeout,
            parsed,
        } = &mut *reader;
        // Empty: every reading ends with what it parsed handed out.
        parsed.clear();
        let mut feed = Feed {
            socket: self,
            own: slot,
            give_up,
            deadline,
            began: None,
            stream,
            timeout,
            parsed,
            fresh: true,
            stop: None,
        };
        loop {
            match replies.next(&mut feed) {
                // RESP3 push data is not a reply.
                Ok(Value::Push { .. }) => {}
                Ok(reply) => {
                    feed.parsed.push(reply);
                    needed = needed.saturating_sub(1);
                    if needed > 0 {
                        continue;
                    }
                    let (mut state, handed) = self.hand_out(feed.parsed, slot);
                    return match handed {
                        Handed::Own(replies) => {
                            // The reader lock first: the caller the
                            // reading goes to may run as soon as the state
                            // is let go (on this CPU, before this thread).
                            drop(reader);
                            self.stop_reading(&mut state);
                            Led::Answered(Ok(replies))
                        }
                        // Answered otherwise (the socket failed).
                        Handed::Others => Led::Failed,
                        Handed::Stray => {
                            drop(state);
                            self.fail(SocketFailure::Dropped);
                            Led::Failed
                        }
                    };
                }
                Err(_) if feed.stop.is_some() => {
                    return match feed.stop {
                        Some(ReadStop::GaveUp) => Led::GaveUp,
                        Some(ReadStop::TimedOut) => {
                            // What was parsed was handed out before the stop.
                            self.fail(SocketFailure::TimedOut);
                            Led::Failed
                        }
                        _ => Led::Failed,
                    };
                }
                // Not yet the front's deadline: the next read checks
                // `give_up`.
                Err(e) if e.is_timeout() && crate::sync::now() < feed.deadline => {}
                Err(e) => {
                    // Replies parsed before the error keep their answers
                    // (an error that needed no read, at the end of the
                    // stream, comes with no look at the state).
                    //
                    // The leader's own reply is never among them (issue 29
                    // asked whether a leader erring here drops it): it
                    // stops at the reply that brings `needed` to 0 and
                    // hands it out at once, above. `needed` counts exactly
                    // the replies up to its own: computed with the state
                    // locked and `parsed` empty (every reading ends with
                    // what it parsed handed out), and the queue ahead of it
                    // only shrinks by replies this leader hands out (an
                    // abandoned request's reply is still read) or by
                    // `fail`, which answers every request, its own
                    // included. So `parsed` holds fewer replies than it
                    // needs, and its caller gets the socket's failure,
                    // never a hang or another caller's reply. Were it ever
                    // there, it is returned rather than dropped.
                    let mut own = None;
                    if !feed.parsed.is_empty() {
                        let (mut state, handed) = self.hand_out(feed.parsed, slot);
                        if let Handed::Own(replies) = handed {
                            own = Some(replies);
                            drop(reader);
                            self.stop_reading(&mut state);
                        }
                    }
                    // The front's time is up (nothing more may be waited
                    // for on this socket), or the stream broke.
                    self.fail(match e.is_timeout() {
                        true => SocketFailure::TimedOut,
                        false => SocketFailure::Dropped,
                    });
                    // The reading was given up with its own reply.
                    return own.map_or(Led::Failed, |replies| Led::Answered(Ok(replies)));
                }
            }
        }
    }

    /// A `READONLY` error from a watched master means a failover made it a
    /// replica (Sentinel): the socket takes no new request, and the
    /// endpoint is looked up again.
    fn note_readonly(&self, replies: &[Value]) {
        let former = |reply: &Value| self.endpoint.is_former_master(Verdict::of_reply(reply));
        if replies.iter().any(former) {
            self.retire();
        }
    }

    /// Gives `replies` (read in order; left empty) to the requests at the
    /// queue's front, waking their callers, and returns the state still
    /// locked. When they complete `own` (the leader's request), its replies
    /// are returned instead (no wake-up); the leader then lets its reader
    /// lock go and gives up the reading ([`Socket::stop_reading`]).
    fn hand_out(
        &self,
        replies: &mut Vec<Value>,
        own: &Arc<Slot>,
    ) -> (MutexGuard<'_, SocketState>, Handed) {
        // Outside the state lock: the endpoint takes its own.
        self.note_readonly(replies);
        let mut state = self.state.lock();
        let handed = self.hand_out_locked(&mut state, replies, own);
        (state, handed)
    }

    fn hand_out_locked(
        &self,
        state: &mut SocketState,
        replies: &mut Vec<Value>,
        own: &Arc<Slot>,
    ) -> Handed {
        let mut handed = Handed::Others;
        for reply in replies.drain(..) {
            let Some(front) = state.queue.front() else {
                return Handed::Stray;
            };
            let answer = if front.expected == 1 && state.partial.is_empty() {
                Replies::One(reply)
            } else {
                let expected = front.expected;
                state.partial.push(reply);
                if state.partial.len() < expected {
                    continue;
                }
                Replies::Many(std::mem::take(&mut state.partial))
            };
            let Some(front) = state.queue.pop_front() else {
                return Handed::Stray;
            };
            if Arc::ptr_eq(&front, own) {
                handed = Handed::Own(answer);
                continue;
            }
            let mut inner = front.inner.lock();
            if !inner.abandoned {
                inner.outcome = Some(Ok(answer));
                if inner.waiting {
                    // Certain to come and take it (see `SocketState::woken`).
                    inner.counted = true;
                    state.woken += 1;
                }
                front.wake.notify_one();
            }
        }
        handed
    }
}
