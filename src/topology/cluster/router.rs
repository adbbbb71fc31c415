//! Sending one command to the master of its key's slot, and what may be
//! sent again.
//!
//! A reply of `MOVED` or `ASK` (a redirect), or of `TRYAGAIN`,
//! `CLUSTERDOWN`, `LOADING`, `READONLY`, `MASTERDOWN` or `BUSY`, proves the
//! command did not run: it is sent again (to the new owner for `MOVED`,
//! after `ASKING` on the target for `ASK`), a bounded number of times. A
//! response timeout proves nothing and is returned as is; a dropped
//! connection gets one flagged resend (`resend = true`), exactly as on a
//! standalone server.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::RedisError;

use super::slot::key_slot;
use super::{Cluster, redirect};
use crate::error::{Error, Result, Verdict};
use crate::net::pool::Checkout;
use crate::net::resend::{Resent, once_more};

/// Retries after a reply that proves non-execution (or a node that
/// refuses connections), not counting redirects. With [`RETRY_DELAY`]
/// doubling up to [`RETRY_DELAY_MAX`], they span about 4.5 s: a slot
/// migration step (`TRYAGAIN`) costs a tenth of a second, and an automatic
/// failover after a master died (`cluster-node-timeout` plus an election,
/// about 4 s with a 2 s timeout) is ridden out, as Redisson's 4 attempts
/// 1.5 s apart do.
const RETRY_ATTEMPTS: u32 = 6;
/// Redirects followed for one command; more is a loop or a storm of slot
/// moves, and is reported.
const MAX_REDIRECTS: u32 = 5;
/// The first pause before a retry; doubled for each further one.
const RETRY_DELAY: Duration = Duration::from_millis(100);
/// The longest pause before a retry (Redisson's `retryInterval`).
const RETRY_DELAY_MAX: Duration = Duration::from_millis(1500);
/// No retry starts later than this after the first attempt: a node that
/// costs a whole connect timeout per attempt (silent, or a pool whose
/// connections all stay busy) is reported, not tried 6 times over.
const RETRY_WINDOW: Duration = Duration::from_secs(6);

/// What a failed attempt allows.
enum Next {
    /// Send again to this node (`MOVED`).
    Moved(u16, Arc<str>),
    /// Send `ASKING` and the command to this node, once.
    Ask(Arc<str>),
    /// Proof of non-execution: pause and send again to the slot's owner,
    /// reading the table again first when `refresh`.
    Retry { refresh: bool },
    /// Nothing may be sent again.
    Stop,
}

impl Cluster {
    /// Runs `command` on a connection to the master serving `key`'s slot;
    /// `command`'s second argument says whether an earlier attempt may have
    /// run (a resend after a dropped connection). See the module docs for
    /// what is sent again. Costs one round trip, plus one per redirect or
    /// retry and a `PING` now and then (see [`crate::pool::Pool`]).
    pub(crate) fn run<T>(
        &self,
        key: &str,
        mut command: impl FnMut(&mut Checkout<'_>, bool) -> Result<T>,
        reconnect_grace: Duration,
    ) -> Result<T> {
        let slot = key_slot(key.as_bytes());
        let mut resend = false;
        let mut retries = 0;
        let mut redirects = 0;
        let mut target: Option<(Arc<str>, bool)> = None;
        // The error of an attempt lost with its connection, when no new
        // connection could be had for its flagged resend.
        let mut maybe_ran: Option<Error> = None;
        let started = Instant::now();
        loop {
            let (addr, asking) = match target.take() {
                Some(target) => target,
                None => match self.owner(slot) {
                    Some(addr) => (addr, false),
                    None => {
                        self.schedule_refresh();
                        return Err(Error::Unavailable {
                            reason: format!("no cluster master is known for slot {slot}"),
                        });
                    }
                },
            };
            let pool = self.pool(&addr)?;
            let connect = || {
                let mut con = pool.get_within(reconnect_grace)?;
                if asking {
                    con.asking()?;
                }
                Ok(con)
            };
            let result = connect().and_then(|con| {
                let first_resend = resend;
                let fresh = || {
                    self.schedule_refresh();
                    resend = true;
                    connect()
                };
                match once_more(con, first_resend, fresh, &mut command) {
                    Resent::Done(result) => result,
                    Resent::NoFresh { dropped, fresh } => {
                        // The node is gone (a failover may follow): retried,
                        // flagged as a resend, at the slot's master; if that
                        // fails too, the caller still learns the first may
                        // have run.
                        maybe_ran = Some(dropped);
                        Err(fresh)
                    }
                }
            });
            let next = match &result {
                Ok(_) => return result,
                Err(e) => next_step(e, &addr),
            };
            match next {
                Next::Moved(moved_slot, to) if redirects < MAX_REDIRECTS => {
                    redirects += 1;
                    self.moved(moved_slot, &to);
                    target = Some((to, false));
                }
                Next::Ask(to) if redirects < MAX_REDIRECTS => {
                    redirects += 1;
                    target = Some((to, true));
                }
                Next::Retry { refresh }
                    if retries < RETRY_ATTEMPTS && started.elapsed() < RETRY_WINDOW =>
                {
                    if refresh {
                        self.schedule_refresh();
                    }
                    std::thread::sleep((RETRY_DELAY * 2u32.pow(retries)).min(RETRY_DELAY_MAX));
                    retries += 1;
                }
                _ => {
                    return match (result, maybe_ran) {
                        (Err(Error::Unavailable { .. }), Some(first)) => Err(first),
                        (result, _) => result,
                    };
                }
            }
        }
    }
}

impl Cluster {
    /// Where a failed command's error from the node at `replied` sends it
    /// after `ASKING`, by the rules [`Cluster::run`] follows: the target of
    /// an `ASK` redirect; `None` for any other error.
    pub(crate) fn ask_target(e: &Error, replied: &str) -> Option<Arc<str>> {
        match next_step(e, replied) {
            Next::Ask(to) => Some(to),
            _ => None,
        }
    }

    /// `ASKING`, then `command`, on a pooled connection to the node at
    /// `addr` (which an `ASK` redirect named), once.
    pub(crate) fn asking<T>(
        &self,
        addr: &Arc<str>,
        command: impl FnOnce(&mut Checkout<'_>) -> Result<T>,
    ) -> Result<T> {
        let pool = self.pool(addr)?;
        let mut con = pool.get()?;
        con.asking()?;
        command(&mut con)
    }
}

/// Reads a failed attempt's error.
fn next_step(e: &Error, replied: &str) -> Next {
    match e {
        Error::Redis(e) => redis_next_step(e, replied),
        // Nothing was sent: the node refused the connection or is gone. Its
        // slots may have a new master by now.
        Error::Unavailable { .. } => Next::Retry { refresh: true },
        _ => Next::Stop,
    }
}

/// `replied`: the node that sent `e`, whose host a redirect with an empty
/// one means.
fn redis_next_step(e: &RedisError, replied: &str) -> Next {
    match Verdict::of_redis(e) {
        verdict @ (Verdict::Moved | Verdict::Ask) => match redirect(e, replied) {
            Some((to, slot)) if verdict == Verdict::Moved => Next::Moved(slot, to),
            Some((to, _)) => Next::Ask(to),
            None => Next::Stop,
        },
        verdict if verdict.passes() => Next::Retry {
            refresh: verdict.topology_changed(),
        },
        _ => Next::Stop,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(reply: &str) -> RedisError {
        match redis::parse_redis_value(reply.as_bytes()) {
            Ok(redis::Value::ServerError(e)) => RedisError::from(e),
            other => panic!("not a server error: {other:?}"),
        }
    }

    #[test]
    fn a_redirect_without_a_host_goes_to_the_replying_nodes_host() {
        let moved = server_error("-MOVED 3999 :6381\r\n");
        match redis_next_step(&moved, "10.0.0.7:6380") {
            Next::Moved(3999, to) => assert_eq!(&*to, "10.0.0.7:6381"),
            _ => panic!("not followed"),
        }
        let ask = server_error("-ASK 12 ?:7000\r\n");
        match redis_next_step(&ask, "h:1") {
            Next::Ask(to) => assert_eq!(&*to, "h:7000"),
            _ => panic!("not followed"),
        }
        let named = server_error("-MOVED 1 10.0.0.8:6379\r\n");
        match redis_next_step(&named, "10.0.0.7:6380") {
            Next::Moved(1, to) => assert_eq!(&*to, "10.0.0.8:6379"),
            _ => panic!("not followed"),
        }
    }
}
