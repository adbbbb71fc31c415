//! Multiplexed command connections (`ClientBuilder::multiplexed`): a few
//! sockets per server that the commands of every thread share, each written
//! as it comes and its reply read back in order ([`socket`]), so that many
//! round trips overlap on one socket and one `read` serves many callers.
//!
//! A checkout ([`Shared`]) takes the first socket with fewer than [`DEPTH`]
//! checkouts (so that a lone thread keeps to one socket and batches stay
//! deep), else the least loaded one, opened on the
//! calling thread when it is missing or was closed. Nothing is ever sent
//! twice by this layer: a socket that times out or breaks fails every
//! request in flight on it (see [`socket`]) and is replaced for later ones.

mod socket;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::{RedisError, RedisResult, Value};

use crate::net::connection::Connector;
use socket::{Slot, Socket};

/// Checkouts a socket takes before the next one is used: a deeper queue
/// means fewer system calls per command on both sides (one `read` of the
/// server's serves the whole batch), more sockets less head-of-line
/// blocking behind a slow script.
const DEPTH: usize = 32;

/// The shared sockets of one server.
pub(crate) struct Mux {
    sockets: Vec<Mutex<Entry>>,
    /// Checkouts using each socket: a checkout picks one without a lock.
    load: Vec<AtomicUsize>,
    /// Failed attempts to open each socket, so far (counted with its
    /// entry locked): a caller that saw a count change while it waited for
    /// the entry takes that failure as its answer.
    failed_opens: Vec<AtomicUsize>,
}

/// One socket's place: the socket, and the error of the last failed
/// attempt to open it.
#[derive(Default)]
struct Entry {
    socket: Option<Arc<Socket>>,
    failed: Option<RedisError>,
}

/// The packed `ASKING`, sent ahead of a command in the same write.
fn asking_packed() -> Vec<u8> {
    redis::cmd("ASKING").get_packed_command()
}

impl Mux {
    /// `connections` sockets (at least one), none opened yet.
    pub fn new(connections: u32) -> Mux {
        let n = usize::try_from(connections.max(1)).unwrap_or(1);
        Mux {
            sockets: (0..n).map(|_| Mutex::new(Entry::default())).collect(),
            load: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            failed_opens: (0..n).map(|_| AtomicUsize::new(0)).collect(),
        }
    }

    /// A share of the least loaded socket, opened (on this thread, within
    /// the connect timeout) if it is missing or closed, unless `open` is
    /// false: then `None` instead.
    pub fn get(&self, connector: &Connector, open: bool) -> RedisResult<Option<Shared>> {
        // The first socket with room, else the least loaded.
        let mut index = 0;
        let mut least = usize::MAX;
        for (i, load) in self.load.iter().enumerate() {
            let load = load.load(Ordering::Relaxed);
            if load < DEPTH {
                index = i;
                break;
            }
            if load < least {
                index = i;
                least = load;
            }
        }
        let failed_before = self.failed_opens[index].load(Ordering::Acquire);
        let mut entry = self.sockets[index].lock();
        let socket = match entry.socket.as_ref() {
            Some(socket) if socket.is_usable() => Arc::clone(socket),
            _ if !open => return Ok(None),
            _ => {
                // An open that failed while this caller waited for the
                // entry is its answer too: callers do not queue up one
                // connect timeout each behind a silent server.
                if let Some(e) = &entry.failed
                    && self.failed_opens[index].load(Ordering::Acquire) != failed_before
                {
                    return Err(e.clone());
                }
                entry.socket = None;
                match Socket::open(
                    connector.endpoint(),
                    connector.connect_timeout,
                    connector.response_timeout,
                ) {
                    Ok(socket) => {
                        let socket = Arc::new(socket);
                        entry.socket = Some(Arc::clone(&socket));
                        entry.failed = None;
                        socket
                    }
                    Err(e) => {
                        entry.failed = Some(e.clone());
                        self.failed_opens[index].fetch_add(1, Ordering::Release);
                        return Err(e);
                    }
                }
            }
        };
        drop(entry);
        self.load[index].fetch_add(1, Ordering::Relaxed);
        Ok(Some(Shared {
            socket,
            index,
            asking: false,
            sent: None,
        }))
    }

    /// A checkout's share returned.
    pub fn release(&self, shared: &Shared) {
        self.load[shared.index].fetch_sub(1, Ordering::Relaxed);
    }

    /// Sockets open, and of those how many no checkout uses.
    pub fn state(&self) -> (u32, u32) {
        let (mut open, mut idle) = (0, 0);
        for (socket, load) in self.sockets.iter().zip(&self.load) {
            if socket.lock().socket.as_ref().is_some_and(|s| s.is_usable()) {
                open += 1;
                if load.load(Ordering::Relaxed) == 0 {
                    idle += 1;
                }
            }
        }
        (open, idle)
    }
}

/// The replies to one request: a lone reply (the usual request, one
/// command) needs no vector of its own.
pub(crate) enum Replies {
    One(Value),
    Many(Vec<Value>),
}

impl Replies {
    pub fn into_vec(self) -> Vec<Value> {
        match self {
            Replies::One(reply) => vec![reply],
            Replies::Many(replies) => replies,
        }
    }

    /// The last reply (a command's, behind an `ASKING`).
    pub fn last(self) -> RedisResult<Value> {
        match self {
            Replies::One(reply) => Some(reply),
            Replies::Many(replies) => replies.into_iter().next_back(),
        }
        .ok_or_else(|| RedisError::from((redis::ErrorKind::Client, "no reply")))
    }
}

/// One checkout's use of a shared socket.
pub(crate) struct Shared {
    socket: Arc<Socket>,
    index: usize,
    /// Send `ASKING` ahead of the next request, in the same write (so that
    /// nothing of another caller comes between them).
    asking: bool,
    /// A request written by [`Shared::send_packed`], not received yet.
    sent: Option<Arc<Slot>>,
}

impl Shared {
    /// Writes `packed` (`count` commands whose first `offset` replies are
    /// dropped), with a pending `ASKING` ahead of it, and waits for the
    /// replies. One write; no other thread's command comes in between.
    pub fn request(
        &mut self,
        packed: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        if offset + count == 0 {
            // Nothing to read back: a request awaiting no reply would hold
            // the queue's front until the socket times out.
            return match packed.is_empty() {
                true => Ok(Vec::new()),
                false => Err(RedisError::from((
                    redis::ErrorKind::Client,
                    "a multiplexed request must await at least one reply",
                ))),
            };
        }
        let (slot, skip) = self.send(packed, offset + count)?;
        let mut replies = self.socket.receive(&slot, None)?.into_vec();
        replies.drain(..(skip + offset).min(replies.len()));
        Ok(replies)
    }

    /// [`Shared::request`] of one command: its reply.
    pub fn request_one(&mut self, packed: &[u8]) -> RedisResult<Value> {
        let (slot, _) = self.send(packed, 1)?;
        // Behind an `ASKING`, the command's reply is the last one.
        self.socket.receive(&slot, None)?.last()
    }

    fn send(&mut self, packed: &[u8], expected: usize) -> RedisResult<(Arc<Slot>, usize)> {
        if std::mem::take(&mut self.asking) {
            let mut both = asking_packed();
            both.extend_from_slice(packed);
            return Ok((self.socket.send(&both, expected + 1)?, 1));
        }
        Ok((self.socket.send(packed, expected)?, 0))
    }

    /// `ASKING` goes ahead of the next command, in the same write; its
    /// reply is dropped (a command it did not enable is redirected again).
    pub fn ask_next(&mut self) {
        self.asking = true;
    }

    /// Writes one command without reading its reply (scatter/gather).
    pub fn send_packed(&mut self, packed: &[u8]) -> RedisResult<()> {
        self.discard();
        // With `ASKING` ahead, the command's reply is the last one.
        let (slot, _) = self.send(packed, 1)?;
        self.sent = Some(slot);
        Ok(())
    }

    /// The reply to what [`Shared::send_packed`] wrote, waiting at most
    /// `within` when that is shorter than the response timeout (then the
    /// request is abandoned, the socket kept).
    pub fn recv_within(&mut self, within: Duration, usual: Duration) -> RedisResult<Value> {
        let Some(slot) = self.sent.take() else {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "no command in flight",
            )));
        };
        let give_up = (within < usual).then(|| Instant::now() + within);
        self.socket.receive(&slot, give_up)?.last()
    }

    /// Drops a request written but not received (its reply is read and
    /// dropped); the socket stays.
    pub fn discard(&mut self) {
        if let Some(slot) = self.sent.take() {
            self.socket.forget(&slot);
        }
    }

    /// Whether the socket still takes requests.
    pub fn is_open(&self) -> bool {
        self.socket.is_usable()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.discard();
    }
}

#[cfg(test)]
mod tests;
