//! Replica sync (docs/wire-format.md, "Replica sync", Redisson's `checkLockSyncedSlaves`): every
//! lock script that writes is followed, on the same connection and in the
//! same round trip, by `WAIT <connected replicas> <timeout>`, so that a lock
//! is not reported taken (or released) while no replica has it.
//!
//! The number of connected replicas is read from `INFO replication` the
//! first time and cached; a `WAIT` that answers a different count drops the
//! cache. With no replica connected no `WAIT` is sent: like Redisson, a
//! replica that is already disconnected is not waited for, so a master that
//! lost its replicas keeps granting locks that a failover would lose.

use std::cell::Cell;
use std::time::Duration;

use redis::{ConnectionLike, RedisResult, Value};

use super::Engine;
use crate::error::{Error, Result};
use crate::net::endpoint::Endpoint;

/// The replica sync settings. The replica count is kept per master, on its
/// [`Endpoint`].
#[derive(Debug)]
pub(crate) struct ReplicaSync {
    /// `checkLockSyncedSlaves`: no acknowledgement while replicas are
    /// connected fails the operation (else it is only logged).
    pub check: bool,
    /// `slavesSyncTimeout`: the `WAIT` timeout.
    pub timeout: Duration,
}

/// What the replicas said about one write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Synced {
    /// Acknowledged by at least one replica, or no replica is connected.
    Yes,
    /// Replicas are connected and none acknowledged within the timeout.
    No { replicas: u32 },
}

impl ReplicaSync {
    pub fn new(check: bool, timeout: Duration) -> ReplicaSync {
        ReplicaSync { check, timeout }
    }

    /// The connected replicas of the master at `endpoint`, from its cache
    /// or `INFO replication` on `con` (one round trip).
    fn replicas(&self, endpoint: &Endpoint, con: &mut dyn ConnectionLike) -> Result<u32> {
        if let Some(n) = endpoint.replicas() {
            return Ok(n);
        }
        let info: String = redis::cmd("INFO").arg("replication").query(con)?;
        let n = info
            .lines()
            .find_map(|line| line.strip_prefix("connected_slaves:"))
            .and_then(|n| n.trim().parse::<u32>().ok())
            .unwrap_or(0);
        endpoint.set_replicas(n);
        Ok(n)
    }

    /// `WAIT <n> <timeout>` in RESP, or `None` with no replica connected.
    fn wait_command(&self, replicas: u32) -> Option<Vec<u8>> {
        (replicas > 0).then(|| {
            redis::cmd("WAIT")
                .arg(replicas)
                .arg(u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX))
                .get_packed_command()
        })
    }

    /// Judges a `WAIT` reply for `expected` replicas.
    fn judge(&self, endpoint: &Endpoint, expected: u32, acked: RedisResult<i64>) -> Result<Synced> {
        let acked = acked?;
        if acked != i64::from(expected) {
            endpoint.forget_replicas();
        }
        Ok(if acked > 0 {
            Synced::Yes
        } else {
            Synced::No { replicas: expected }
        })
    }

    /// Runs `command` (lock scripts that write) on `con` with a `WAIT`
    /// pipelined behind each request it sends; the last `WAIT`'s verdict
    /// comes with the command's result. No extra round trip, but for the
    /// first write (the replica count).
    pub fn run<T>(
        &self,
        endpoint: &Endpoint,
        con: &mut dyn ConnectionLike,
        command: impl FnOnce(&mut dyn ConnectionLike) -> Result<T>,
    ) -> Result<(T, Synced)> {
        let replicas = self.replicas(endpoint, con)?;
        let Some(wait) = self.wait_command(replicas) else {
            return Ok((command(con)?, Synced::Yes));
        };
        let acked = Cell::new(None);
        let value = command(&mut Waiting {
            con,
            wait: &wait,
            acked: &acked,
        })?;
        let synced = match acked.take() {
            Some(reply) => self.judge(endpoint, replicas, reply)?,
            None => Synced::Yes, // nothing was sent
        };
        Ok((value, synced))
    }

    /// A `WAIT` on its own, after writes already made on `con` (the
    /// watchdog's pipelined renewals) on the master at `endpoint`. One round
    /// trip, none without replicas.
    pub fn wait(&self, endpoint: &Endpoint, con: &mut dyn ConnectionLike) -> Result<Synced> {
        let replicas = self.replicas(endpoint, con)?;
        let Some(wait) = self.wait_command(replicas) else {
            return Ok(Synced::Yes);
        };
        let reply = con.req_packed_command(&wait).and_then(int);
        self.judge(endpoint, replicas, reply)
    }

    /// [`ReplicaSync::wait`] after a round of lease renewals: a missing
    /// acknowledgement is logged (the renewal itself stands).
    pub fn wait_after_renewal(&self, endpoint: &Endpoint, con: &mut dyn ConnectionLike) {
        match self.wait(endpoint, con) {
            Ok(Synced::Yes) => {}
            Ok(Synced::No { replicas }) => log::warn!(
                "redisson-lock: none of {replicas} replica(s) of {} acknowledged a lease renewal",
                endpoint.describe()
            ),
            Err(e) => log::warn!("redisson-lock: WAIT after a renewal failed: {e}"),
        }
    }
}

impl Synced {
    /// The error for an operation whose write no replica acknowledged.
    pub fn error(self, operation: &'static str, name: &str) -> Option<Error> {
        match self {
            Synced::Yes => None,
            Synced::No { replicas } => Some(Error::NotReplicated {
                operation,
                name: name.to_owned(),
                replicas,
            }),
        }
    }
}

fn int(value: Value) -> RedisResult<i64> {
    Ok(redis::from_redis_value(value.extract_error()?)?)
}

/// A connection that sends `wait` behind every request, in one write, and
/// keeps the last `WAIT` reply.
struct Waiting<'a> {
    con: &'a mut dyn ConnectionLike,
    wait: &'a [u8],
    acked: &'a Cell<Option<RedisResult<i64>>>,
}

/// Whether the packed command is a `SCRIPT` subcommand (a `SCRIPT LOAD`
/// after `NOSCRIPT`): it writes nothing to wait for.
fn is_script_command(cmd: &[u8]) -> bool {
    // `*<n>\r\n$<len>\r\n<name>\r\n...`: the name starts after the second line.
    let mut lines = cmd.splitn(3, |&b| b == b'\n');
    let (Some(_), Some(_), Some(rest)) = (lines.next(), lines.next(), lines.next()) else {
        return false;
    };
    rest.get(..7)
        .is_some_and(|name| name.eq_ignore_ascii_case(b"SCRIPT\r"))
}

impl ConnectionLike for Waiting<'_> {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        if is_script_command(cmd) {
            return self.con.req_packed_command(cmd);
        }
        let mut both = Vec::with_capacity(cmd.len() + self.wait.len());
        both.extend_from_slice(cmd);
        both.extend_from_slice(self.wait);
        let mut replies = self.con.req_packed_commands(&both, 0, 2)?.into_iter();
        let (Some(reply), Some(acked)) = (replies.next(), replies.next()) else {
            return Err(redis::RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "a command and its WAIT got fewer than two replies",
            )));
        };
        self.acked.set(Some(int(acked)));
        Ok(reply)
    }

    crate::net::pass_through_connection!(con);
}

impl Engine {
    /// [`Engine::with_connection`] for lock writes: with replica sync on,
    /// each lock script `command` sends is followed by a `WAIT` on the same
    /// connection, and the verdict on the last one comes with the result.
    pub(crate) fn with_synced_connection<T>(
        &self,
        key: &str,
        operation: &'static str,
        mut command: impl FnMut(&mut dyn ConnectionLike, bool) -> Result<T>,
    ) -> Result<(T, Synced)> {
        match &self.sync {
            None => self
                .with_connection(key, operation, |con, resend| command(con, resend))
                .map(|value| (value, Synced::Yes)),
            Some(sync) => self.with_connection(key, operation, |con, resend| {
                // The master this connection reaches: in a cluster, the
                // slot's owner (or the node an `ASK` named).
                let endpoint = con.endpoint();
                sync.run(endpoint, con, |con| command(con, resend))
            }),
        }
    }

    /// [`Engine::with_synced_connection`] for writes whose operation has no
    /// retry of its own (force unlock, a fair lock's give-up, a MultiLock's
    /// lease): a missing acknowledgement is logged.
    pub(crate) fn with_logged_sync<T>(
        &self,
        operation: &'static str,
        name: &str,
        command: impl FnMut(&mut dyn ConnectionLike, bool) -> Result<T>,
    ) -> Result<T> {
        let (value, synced) = self.with_synced_connection(name, operation, command)?;
        if let Some(e) = synced.error(operation, name) {
            log::warn!("redisson-lock: {e}");
        }
        Ok(value)
    }

    /// Whether an unacknowledged write fails its operation.
    pub(crate) fn checks_replicas(&self) -> bool {
        self.sync.as_ref().is_some_and(|sync| sync.check)
    }
}

#[cfg(test)]
mod tests {
    use super::is_script_command;

    #[test]
    fn script_load_is_told_from_lock_scripts() {
        let load = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg("return 1")
            .get_packed_command();
        assert!(is_script_command(&load));
        let eval = redis::cmd("EVALSHA").arg("abc").arg(0).get_packed_command();
        assert!(!is_script_command(&eval));
        let key = redis::cmd("EVALSHA")
            .arg("SCRIPT")
            .arg(0)
            .get_packed_command();
        assert!(!is_script_command(&key));
        assert!(!is_script_command(b"*1\r\n"));
    }
}
