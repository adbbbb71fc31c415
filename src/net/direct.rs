//! A command connection the crate writes and reads itself, one caller at a
//! time (a pooled connection, the watchdog's), and what it shares with the
//! multiplexed sockets: the handshake, and reads bounded by a deadline.
//!
//! Two things redis-rs's own connection cannot give: a response timeout
//! that bounds a whole reply (redis-rs's is the socket's, per `read`: a
//! server trickling a reply one byte at a time held a caller for as long as
//! it liked), and a read interrupted by a signal (`EINTR`, which a socket
//! with a read timeout returns on Linux for any handled signal, restartable
//! or not) that is simply read again: redis-rs returns it as an error, and
//! counts the reply it was reading as one to skip, so no retry above it is
//! possible either.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use redis::{ConnectionInfo, RedisError, RedisResult, Value};

use crate::error::Verdict;
use crate::net::endpoint::Endpoint;
use crate::net::resp;
use crate::net::stream::Stream;

/// A read's timeout is shortened only when it is longer than the time left
/// by more than the response timeout over this (so that the usual read
/// makes no `setsockopt`); a reply may outlast its deadline by that much.
pub(crate) const SLACK_DIVISOR: u32 = 8;
/// The shortest read timeout: a deadline that passed still gets one read
/// this short (the reply may be waiting in the socket).
const MIN_WAIT: Duration = Duration::from_millis(1);

/// `stream` read until `deadline`: each read waits at most the time left
/// (the socket's timeout changed only when it is off by more than `slack`),
/// a read interrupted by a signal is read again, and a read that timed out
/// before the deadline too. Only the deadline ends it with a timeout: once
/// it is `slack` past, no read is made (a server trickling a reply, each
/// read bringing a byte, does not hold the caller past it).
pub(crate) struct Until<'a> {
    /// The socket read.
    pub stream: &'a mut Stream,
    /// The socket's read timeout now, kept in step.
    pub timeout: &'a mut Duration,
    /// When the reply must be in.
    pub deadline: Instant,
    /// How much longer than the time left a read's timeout may stay, and
    /// how far past the deadline reads may go on.
    pub slack: Duration,
}

impl Read for Until<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let now = Instant::now();
            if now >= self.deadline + self.slack.max(MIN_WAIT) {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no whole reply before the deadline",
                ));
            }
            let left = self.deadline.saturating_duration_since(now).max(MIN_WAIT);
            if *self.timeout > left + self.slack || *self.timeout * 2 < left {
                self.stream.set_read_timeout(Some(left))?;
                *self.timeout = left;
            }
            match self.stream.read_once(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) && Instant::now() < self.deadline => {}
                done => return done,
            }
        }
    }
}

/// Whether a socket error is a timeout.
pub(crate) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Sends `packed` on `stream` and reads one reply within `within` (the
/// socket's read timeout is `timeout`, kept in step).
fn ask(
    stream: &mut Stream,
    replies: &mut resp::Reader,
    timeout: &mut Duration,
    packed: &[u8],
    within: Duration,
) -> RedisResult<Value> {
    stream.write_all(packed).map_err(RedisError::from)?;
    let mut until = Until {
        stream,
        timeout,
        deadline: Instant::now() + within,
        slack: within / SLACK_DIVISOR,
    };
    match replies.next(&mut until)? {
        Value::ServerError(e) => Err(e.into()),
        reply => Ok(reply),
    }
}

/// Authenticates, selects the database, names the connection (`CLIENT
/// SETNAME name`, when there is one; a refusal under an ACL that lacks
/// `client|setname` is ignored), and checks that the server took the
/// connection (one that turns it away, at `maxclients`, answers the first
/// command with an error): by the `AUTH`, `SELECT` or `SETNAME` reply, else
/// with a `PING`. Each reply within `within`. Costs one to three round
/// trips.
pub(crate) fn handshake(
    stream: &mut Stream,
    replies: &mut resp::Reader,
    timeout: &mut Duration,
    info: &ConnectionInfo,
    name: Option<&str>,
    within: Duration,
) -> RedisResult<()> {
    let settings = info.redis_settings();
    let mut answered = false;
    if let Some(password) = settings.password() {
        let mut auth = redis::cmd("AUTH");
        if let Some(username) = settings.username() {
            auth.arg(username);
        }
        auth.arg(password);
        ask(stream, replies, timeout, &auth.get_packed_command(), within)?;
        answered = true;
    }
    if settings.db() != 0 {
        let select = redis::cmd("SELECT").arg(settings.db()).get_packed_command();
        ask(stream, replies, timeout, &select, within)?;
        answered = true;
    }
    if let Some(name) = name {
        let setname = redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg(name)
            .get_packed_command();
        match ask(stream, replies, timeout, &setname, within) {
            Ok(_) => answered = true,
            // A refusal of the name alone: the server took the connection.
            Err(e) if Verdict::of_redis(&e) == Verdict::Forbidden => answered = true,
            Err(e) => return Err(e),
        }
    }
    if !answered {
        // Nothing asked yet: a server at `maxclients` would only tell the
        // first command. (An ACL user always authenticates, so its recipe
        // needs no `PING`.)
        let ping = redis::cmd("PING").get_packed_command();
        ask(stream, replies, timeout, &ping, within)?;
    }
    Ok(())
}

/// One caller's command connection (see the module docs). Any error
/// leaves it closed: a reply that timed out may still come, and a stream
/// that broke or sent garbage cannot be trusted.
pub(crate) struct Direct {
    stream: Stream,
    replies: resp::Reader,
    /// The socket's read timeout now.
    timeout: Duration,
    usual: Duration,
    db: i64,
    open: bool,
}

impl Direct {
    /// Connects to `endpoint`'s server (within `connect_timeout`, and each
    /// handshake reply within it too), authenticates and selects the
    /// database; commands then get `response_timeout`.
    pub fn open(
        endpoint: &Endpoint,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> RedisResult<Direct> {
        let info = endpoint.info();
        let mut stream = Stream::open(endpoint, connect_timeout).map_err(RedisError::from)?;
        let mut replies = resp::Reader::default();
        let mut timeout = connect_timeout;
        handshake(
            &mut stream,
            &mut replies,
            &mut timeout,
            &info,
            endpoint.name.as_deref(),
            connect_timeout,
        )?;
        stream
            .set_write_timeout(Some(response_timeout))
            .map_err(RedisError::from)?;
        Ok(Direct {
            stream,
            replies,
            timeout,
            usual: response_timeout,
            db: info.redis_settings().db(),
            open: true,
        })
    }

    /// Writes `packed` (one or more commands) without reading a reply.
    pub fn send(&mut self, packed: &[u8]) -> RedisResult<()> {
        let written = self.stream.write_all(packed);
        self.open &= written.is_ok();
        written.map_err(RedisError::from)
    }

    /// The next reply (RESP3 push data skipped), read until `deadline`
    /// (give or take an eighth of the time left: a short bound stays short).
    pub fn recv_until(&mut self, deadline: Instant) -> RedisResult<Value> {
        let slack = deadline.saturating_duration_since(Instant::now()) / SLACK_DIVISOR;
        loop {
            let mut until = Until {
                stream: &mut self.stream,
                timeout: &mut self.timeout,
                deadline,
                slack,
            };
            match self.replies.next(&mut until) {
                Ok(Value::Push { .. }) => {}
                Ok(reply) => return Ok(reply),
                Err(e) => {
                    self.open = false;
                    return Err(e);
                }
            }
        }
    }

    /// The response timeout.
    pub fn usual(&self) -> Duration {
        self.usual
    }

    /// Sends `packed` (one command) and reads its reply within the response
    /// timeout. An error reply is a value, as in redis-rs.
    pub fn request(&mut self, packed: &[u8]) -> RedisResult<Value> {
        self.send(packed)?;
        // tests/failpoints.rs, the tests of `reply-lost`: the command ran, its reply is lost.
        crate::failpoint::failpoint!("reply-lost", reset);
        self.recv_until(Instant::now() + self.usual)
    }

    /// The database it selected.
    pub fn db(&self) -> i64 {
        self.db
    }

    /// Whether it may still be used (no error so far).
    pub fn is_open(&self) -> bool {
        self.open
    }
}
