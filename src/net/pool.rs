//! The client's pool of command connections.
//!
//! Written here rather than taken from r2d2, whose behaviour is wrong for a
//! lock library in three ways: it retries a refused connect in the
//! background until the checkout times out (a server that is down costs every
//! caller the whole connect timeout, 10 s by default, instead of an answer at
//! once), it logs every failed attempt at ERROR level, and its reaper thread
//! outlives the pool by up to 30 s. This pool opens connections on the
//! calling thread, reports the first failure to that caller, and has no
//! thread at all.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use redis::{ConnectionLike, RedisError, RedisResult, Value};

use crate::error::{Error, Result};
use crate::net::connection::{Connector, PooledConnection};
use crate::net::endpoint::Endpoint;
use crate::net::mux::{Mux, Shared};

/// How long a command keeps trying to connect while the server refuses:
/// long enough for a restarting server to listen again, short enough that a
/// server that is down is an answer.
pub(crate) const RECONNECT_GRACE: Duration = Duration::from_millis(100);

/// How a pool connects: connections of its own per checkout, or shared
/// multiplexed sockets (`ClientBuilder::multiplexed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Connections {
    /// At most this many connections, one per checkout.
    Pooled(u32),
    /// This many sockets shared by every checkout.
    Multiplexed(u32),
}

impl Connections {
    /// A pool of this kind through `connector`; opens nothing yet.
    pub fn pool(self, connector: Connector) -> Pool {
        match self {
            Connections::Pooled(max) => Pool::new(connector, max),
            Connections::Multiplexed(n) => Pool::multiplexed(connector, n),
        }
    }
}

/// At most `max` connections, opened on demand and kept while idle; or,
/// multiplexed, a few sockets that every checkout shares (see
/// [`crate::net::mux`]).
pub(crate) struct Pool {
    connector: Connector,
    max: u32,
    /// The shared sockets, when multiplexed (then nothing else is used).
    mux: Option<Mux>,
    state: Mutex<PoolState>,
    /// Signalled when a connection is returned or a slot frees up.
    returned: Condvar,
}

struct PoolState {
    idle: Vec<PooledConnection>,
    /// Connections in existence or being opened, idle ones included.
    open: u32,
}

/// A connection checked out of the [`Pool`]; returned to it on drop unless
/// it broke.
pub(crate) struct Checkout<'a> {
    pool: &'a Pool,
    con: Option<Held>,
}

/// What a checkout holds: a connection of its own, or a share of a
/// multiplexed socket.
enum Held {
    Pooled(PooledConnection),
    Shared(Shared),
}

impl Pool {
    pub fn new(connector: Connector, max: u32) -> Pool {
        Pool {
            connector,
            max,
            mux: None,
            state: Mutex::new(PoolState {
                idle: Vec::new(),
                open: 0,
            }),
            returned: Condvar::new(),
        }
    }

    /// A pool whose checkouts share `connections` multiplexed sockets.
    pub fn multiplexed(connector: Connector, connections: u32) -> Pool {
        let mut pool = Pool::new(connector, connections);
        pool.mux = Some(Mux::new(connections));
        pool
    }

    /// An idle connection, or a new one while fewer than `max` exist, or the
    /// first one returned within the connect timeout.
    ///
    /// Opening a connection happens on the calling thread: a refused
    /// connection or a rejected password is reported at once (a wrong
    /// password as a permanent [`Error::Redis`]), only a silent server costs
    /// the connect timeout. Costs no round trip when an idle connection is
    /// known good; one `PING` when it was idle while another connection was
    /// found dropped.
    pub fn get(&self) -> Result<Checkout<'_>> {
        self.get_within(Duration::ZERO)
    }

    /// [`Pool::get`], but a refused connect is tried again for up to
    /// `grace`: for a command whose connection just dropped, as when the
    /// server restarts, which takes it a moment to listen again. (A connect
    /// the server resets, as one at `maxclients` does, is an answer: it is
    /// reported at once.)
    pub fn get_within(&self, grace: Duration) -> Result<Checkout<'_>> {
        // Taken only when a refusal may be retried: no clock read per
        // command.
        let mut until = None;
        let mut pause = Duration::from_millis(5);
        loop {
            match self.checkout_or_open(true) {
                Err(e)
                    if !grace.is_zero()
                        && e.is_connection_refusal()
                        && Instant::now() + pause
                            < *until.get_or_insert_with(|| Instant::now() + grace) =>
                {
                    std::thread::sleep(pause);
                    pause *= 2;
                }
                Err(e) => return Err(self.connector.connect_error(e)),
                Ok(Ok(Some(con))) => return Ok(con),
                // Only a call that does not wait gets no connection.
                Ok(Ok(None)) => {}
                Ok(Err(e)) => return Err(e),
            }
        }
    }

    /// A connection, the connect error (`Err`), or the pool's own error;
    /// `None` (only when `wait` is false) instead of waiting for a busy
    /// pool's next returned connection.
    fn checkout_or_open(&self, wait: bool) -> RedisResult<Result<Option<Checkout<'_>>>> {
        if let Some(mux) = &self.mux {
            // A shared socket never waits for another checkout.
            return Ok(Ok(mux.get(&self.connector, true)?.map(|s| self.share(s))));
        }
        let mut deadline: Option<Instant> = None;
        let mut state = self.state.lock();
        loop {
            if let Some(mut con) = state.idle.pop() {
                drop(state);
                if self.connector.validate(&mut con).is_ok() {
                    return Ok(Ok(Some(self.checkout(con))));
                }
                // Dead while idle: forget it and look again.
                state = self.state.lock();
                state.open -= 1;
                continue;
            }
            if state.open < self.max {
                state.open += 1;
                drop(state);
                return match self.connector.open_pooled() {
                    Ok(con) => Ok(Ok(Some(self.checkout(con)))),
                    Err(e) => {
                        self.forget();
                        Err(e)
                    }
                };
            }
            if !wait {
                return Ok(Ok(None));
            }
            let deadline =
                *deadline.get_or_insert_with(|| Instant::now() + self.connector.connect_timeout);
            if self.returned.wait_until(&mut state, deadline).timed_out() && state.idle.is_empty() {
                return Ok(Err(Error::Unavailable {
                    reason: format!(
                        "all {} pooled connections stayed busy for {:?}",
                        self.max, self.connector.connect_timeout
                    ),
                }));
            }
        }
    }

    /// [`Pool::get`] without waiting: `None` when every connection is busy
    /// and no more may be opened, and a refused connect reported at once.
    /// For scatter/gather, where the caller may itself hold the busy ones.
    pub fn get_no_wait(&self) -> Option<Result<Checkout<'_>>> {
        match self.checkout_or_open(false) {
            Err(e) => Some(Err(self.connector.connect_error(e))),
            Ok(Ok(Some(con))) => Some(Ok(con)),
            Ok(Ok(None)) => None,
            Ok(Err(e)) => Some(Err(e)),
        }
    }

    /// An idle connection if there is one; never opens one or waits.
    pub fn try_get_idle(&self) -> Option<Checkout<'_>> {
        if let Some(mux) = &self.mux {
            return mux
                .get(&self.connector, false)
                .ok()
                .flatten()
                .map(|s| self.share(s));
        }
        let con = self.state.lock().idle.pop()?;
        Some(self.checkout(con))
    }

    /// Connections that exist, and of those how many are idle.
    pub fn state(&self) -> (u32, u32) {
        if let Some(mux) = &self.mux {
            return mux.state();
        }
        let state = self.state.lock();
        (
            state.open,
            u32::try_from(state.idle.len()).unwrap_or(u32::MAX),
        )
    }

    pub fn connector(&self) -> &Connector {
        &self.connector
    }

    fn checkout(&self, con: PooledConnection) -> Checkout<'_> {
        Checkout {
            pool: self,
            con: Some(Held::Pooled(con)),
        }
    }

    fn share(&self, shared: Shared) -> Checkout<'_> {
        Checkout {
            pool: self,
            con: Some(Held::Shared(shared)),
        }
    }

    /// One connection less exists (closed or never opened).
    fn forget(&self) {
        self.state.lock().open -= 1;
        self.returned.notify_one();
    }

    fn put_back(&self, con: PooledConnection) {
        self.state.lock().idle.push(con);
        self.returned.notify_one();
    }
}

impl Checkout<'_> {
    fn inner(&mut self) -> RedisResult<&mut Held> {
        // `con` is only taken by `drop`.
        self.con
            .as_mut()
            .ok_or_else(|| RedisError::from((redis::ErrorKind::Io, "connection returned")))
    }
}

impl<'a> Checkout<'a> {
    /// The server this connection's pool connects to.
    pub fn endpoint(&self) -> &'a Arc<Endpoint> {
        self.pool.connector.endpoint()
    }

    /// See [`PooledConnection::send_packed`].
    pub fn send_packed(&mut self, cmd: &[u8]) -> RedisResult<()> {
        match self.inner()? {
            Held::Pooled(con) => con.send_packed(cmd),
            Held::Shared(shared) => shared.send_packed(cmd),
        }
    }

    /// See [`PooledConnection::recv_within`]: the reply to what
    /// [`Checkout::send_packed`] sent, read within `within` at most (on a
    /// shared socket, a reply not read in time is abandoned, not the
    /// socket).
    pub fn recv_within(&mut self, within: Duration) -> RedisResult<Value> {
        let usual = self.pool.connector.response_timeout;
        match self.inner()? {
            Held::Pooled(con) => con.recv_within(within),
            Held::Shared(shared) => shared.recv_within(within, usual),
        }
    }

    /// Closes the connection instead of returning it to the pool; on a
    /// shared socket, drops the reply of what [`Checkout::send_packed`]
    /// sent instead.
    pub fn discard(&mut self) {
        match self.con.as_mut() {
            Some(Held::Pooled(con)) => con.discard(),
            Some(Held::Shared(shared)) => shared.discard(),
            None => {}
        }
    }

    /// `ASKING` (a cluster's `ASK` redirect) for the next command: sent now
    /// on a connection of its own; on a shared socket, written together
    /// with that command so that no other caller's command comes between.
    pub fn asking(&mut self) -> RedisResult<()> {
        match self.inner()? {
            Held::Pooled(con) => redis::cmd("ASKING").exec(con),
            Held::Shared(shared) => {
                shared.ask_next();
                Ok(())
            }
        }
    }
}

impl ConnectionLike for Checkout<'_> {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        match self.inner()? {
            Held::Pooled(con) => con.req_packed_command(cmd),
            Held::Shared(shared) => shared.request_one(cmd),
        }
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        match self.inner()? {
            Held::Pooled(con) => con.req_packed_commands(cmd, offset, count),
            Held::Shared(shared) => shared.request(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self.con.as_ref() {
            Some(Held::Pooled(con)) => con.get_db(),
            _ => self.pool.connector.endpoint().info().redis_settings().db(),
        }
    }

    fn check_connection(&mut self) -> bool {
        if let Some(Held::Pooled(con)) = self.con.as_mut() {
            return con.check_connection();
        }
        self.req_packed_command(&redis::cmd("PING").get_packed_command())
            .is_ok_and(|reply| !matches!(reply, Value::ServerError(_)))
    }

    fn is_open(&self) -> bool {
        match self.con.as_ref() {
            Some(Held::Pooled(con)) => con.is_open(),
            Some(Held::Shared(shared)) => shared.is_open(),
            None => false,
        }
    }
}

impl Drop for Checkout<'_> {
    fn drop(&mut self) {
        match self.con.take() {
            Some(Held::Pooled(con)) if con.is_open() => self.pool.put_back(con),
            Some(Held::Pooled(_)) => self.pool.forget(),
            Some(Held::Shared(shared)) => {
                if let Some(mux) = &self.pool.mux {
                    mux.release(&shared);
                }
            }
            None => {}
        }
    }
}
