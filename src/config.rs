//! The plain settings every layer reads ([`Config`]), checked once by the
//! builder, and the few setting types and checks they share; the Redisson
//! version parser behind `ClientBuilder::redisson_compat` is [`compat`].

pub(crate) mod compat;

use std::time::Duration;

use crate::error::{Error, Result};
use crate::names;

/// Settings fixed when the client is built. (`pub` only so that the sealed
/// lock protocol can take it: the module is private, so no user can name
/// it.)
#[derive(Clone, Debug)]
pub struct Config {
    pub watchdog_timeout: Duration,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    pub retry_attempts: u32,
    pub retry_delay: Duration,
    pub subscription_timeout: Duration,
    pub fair_lock_wait_timeout: Duration,
    /// `WAIT` after lock writes, and what a write no replica acknowledged
    /// does (see `crate::engine::replicas`).
    pub replica_wait: ReplicaWait,
    /// The `WAIT` timeout; `None`: 1 s, or half the response timeout if
    /// that is shorter (see [`Config::replicas_sync_timeout`]).
    pub replicas_sync_timeout: Option<Duration>,
    /// The command connections' mode as built: `Some(n)` shared
    /// multiplexed sockets per server, `None` pooled (for diagnostics).
    pub multiplexed: Option<u32>,
    /// How a permit-expirable semaphore writes its permit ids (both are
    /// always read).
    pub permit_ids: PermitIdEncoding,
    /// Redisson 3.x's read unlock: a read lock with another holder whose
    /// `rwlock_timeout` markers are gone is left to its TTL, never deleted
    /// or shortened (see `lua/read_3x_unlock.lua`, `lua/read_3x_release.lua`).
    pub read_unlock_keeps_unmarked: bool,
    /// A fair lock's timed acquire sends its own wait as the queue's
    /// thread wait time (Redisson 3.13.3+); off, always the wait timeout
    /// (before 3.13.3; set by `redisson_compat`).
    pub fair_lock_caller_wait: bool,
}

/// Whether the lock writes are followed by `WAIT` for the replicas
/// (Redisson's `checkLockSyncedSlaves`, set by
/// `ClientBuilder::check_lock_synced_replicas`), and what a write no
/// replica acknowledged does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaWait {
    /// No `WAIT` (the default for a standalone server).
    Off,
    /// `WAIT` after every lock write; a write no replica acknowledged is
    /// logged only (`check_lock_synced_replicas(false)`).
    Logged,
    /// `WAIT` after every lock write; an acquire no replica acknowledged is
    /// undone and retried, then `Error::NotReplicated` (the default for
    /// Sentinel and Redis Cluster, as Redisson's;
    /// `check_lock_synced_replicas(true)`).
    Checked,
}

impl ReplicaWait {
    /// What `check_lock_synced_replicas(check)` sets.
    pub fn from_check(check: bool) -> ReplicaWait {
        if check {
            ReplicaWait::Checked
        } else {
            ReplicaWait::Logged
        }
    }
}

impl Config {
    /// How long an unlock latch must outlive the unlock call: every retry
    /// of the call fits inside it.
    pub fn latch_ttl_ms(&self) -> u64 {
        let per_attempt = self.response_timeout.saturating_add(self.retry_delay);
        let total = per_attempt.saturating_mul(self.retry_attempts.saturating_add(1));
        u64::try_from(total.as_millis()).unwrap_or(u64::MAX).max(1)
    }
}

impl Default for Config {
    /// Redisson's defaults (see [`names`]).
    fn default() -> Self {
        Config {
            watchdog_timeout: names::DEFAULT_WATCHDOG_TIMEOUT,
            connect_timeout: names::DEFAULT_CONNECT_TIMEOUT,
            response_timeout: names::DEFAULT_RESPONSE_TIMEOUT,
            retry_attempts: names::DEFAULT_RETRY_ATTEMPTS,
            retry_delay: names::DEFAULT_RETRY_DELAY,
            subscription_timeout: names::DEFAULT_SUBSCRIPTION_TIMEOUT,
            fair_lock_wait_timeout: names::FAIR_LOCK_WAIT_TIMEOUT,
            replica_wait: ReplicaWait::Off,
            replicas_sync_timeout: None,
            multiplexed: None,
            permit_ids: PermitIdEncoding::Raw,
            read_unlock_keeps_unmarked: false,
            fair_lock_caller_wait: true,
        }
    }
}

impl Config {
    /// Checks every setting; the builder's `build` calls this once.
    pub fn check(&self) -> Result<()> {
        millis("watchdog timeout", self.watchdog_timeout)?;
        millis("fair lock wait timeout", self.fair_lock_wait_timeout)?;
        if self.watchdog_timeout < Duration::from_millis(30) {
            return Err(Error::invalid(format!(
                "watchdog timeout must be at least 30 ms, got {:?}",
                self.watchdog_timeout
            )));
        }
        for (what, value) in [
            ("connect timeout", self.connect_timeout),
            ("response timeout", self.response_timeout),
            ("subscription timeout", self.subscription_timeout),
        ] {
            if value.is_zero() || value > Duration::from_secs(24 * 3600) {
                return Err(Error::invalid(format!(
                    "{what} must be between 1 ns and 24 h, got {value:?}"
                )));
            }
        }
        if self.retry_delay > Duration::from_secs(3600) || self.retry_attempts > 100 {
            return Err(Error::invalid(
                "unlock retries are limited to 100 attempts of at most 1 h delay",
            ));
        }
        if let Some(timeout) = self.replicas_sync_timeout
            && self.replica_wait != ReplicaWait::Off
            && timeout >= self.response_timeout
        {
            return Err(Error::invalid(format!(
                "the replicas sync timeout ({timeout:?}) must be shorter than the response \
                 timeout ({:?}): a lock command's reply waits for its WAIT",
                self.response_timeout
            )));
        }
        Ok(())
    }

    /// The `WAIT` timeout: the one set, else 1 s (Redisson's
    /// `slavesSyncTimeout`), or half the response timeout when that is
    /// shorter (a lock command's reply waits for its `WAIT`, so the wait
    /// must end well within the response timeout).
    pub fn replicas_sync_timeout(&self) -> Duration {
        self.replicas_sync_timeout
            .unwrap_or_else(|| names::DEFAULT_SYNC_TIMEOUT.min(self.response_timeout / 2))
    }
}

/// Whether a cluster client uses Redis 7's sharded pub/sub (`SPUBLISH`,
/// `SSUBSCRIBE`) for unlock messages, chosen exactly as Redisson 4.7.0's
/// `ClusterServersConfig.shardedSubscriptionMode` chooses it. Java and Rust
/// clients sharing locks must end up with the same choice: a waiter that
/// `SSUBSCRIBE`s never hears a `PUBLISH`, and one that `SUBSCRIBE`s never
/// hears an `SPUBLISH`. Redisson before 3.22 always publishes classically;
/// 3.22 to 3.28 use sharded pub/sub whenever the server has it and cannot
/// be switched off; a fleet mixing both needs [`ShardedSubscription::Both`]
/// (which `ClientBuilder::redisson_compat` picks for a version before
/// 3.22). Ignored outside a cluster (Redisson then always uses classic
/// pub/sub).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardedSubscription {
    /// Sharded when the first seed that answers accepts
    /// `PUBSUB SHARDNUMSUB 0` (Redis 7+); classic otherwise. Redisson's
    /// default. Costs one round trip when the client is built.
    #[default]
    Auto,
    /// Always sharded (the server must support it).
    On,
    /// Always classic `PUBLISH`/`SUBSCRIBE`, on the channel slot's master.
    Off,
    /// Both flavours at once, for a fleet that mixes Redisson before 3.22
    /// (classic only) with later Redisson on sharded pub/sub: every unlock,
    /// release, count-down or permit message is published with `PUBLISH`
    /// and with `SPUBLISH` in the same script (still one round trip), and
    /// every waited channel is subscribed with `SUBSCRIBE` and `SSUBSCRIBE`
    /// on the one subscriber connection of the channel slot's master, so
    /// that a Java waiter of either flavour hears this client, and this
    /// client hears a Java holder of either flavour.
    ///
    /// What it costs: one more publish per release (the server delivers it
    /// to the other flavour's subscribers), one more subscribe and
    /// unsubscribe command per waited channel (and the server keeps both
    /// subscriptions), and a waiter of this crate hears each of its own
    /// client's messages twice: a second wake-up that finds the lock taken
    /// costs one more acquire attempt (a round trip), never a missed one.
    /// Chosen when the client is built like `Auto`: a cluster whose first
    /// answering seed has no sharded pub/sub (before Redis 7) gets classic
    /// pub/sub alone (no Redisson can be on sharded pub/sub there). On a
    /// single server or under Sentinel, the same as classic.
    Both,
}

/// How a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore)
/// stores the ids of the permits it acquires, as the ZSET members of
/// `{<name>}:timeout` (docs/wire-format.md, "Permit-expirable semaphore"; docs/compat.md). Whatever the
/// choice, this crate's release, lease update and lease query find a
/// permit stored either way (each such call sends both forms of the id; no
/// extra round trip). A Java client finds only its own form (Redisson up to
/// 3.16.8 hex text, from 3.17.0 raw bytes), so the crate must write the
/// form of the Java clients that release or renew the permits it takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PermitIdEncoding {
    /// The 16 raw bytes, as Redisson 3.17.0 and later (the default).
    #[default]
    Raw,
    /// The 32-character lowercase hex text, as Redisson up to 3.16.8.
    Hex,
}

/// Milliseconds for the wire, rejecting what Redis cannot represent.
pub(crate) fn millis(what: &str, lease: Duration) -> Result<u64> {
    /// A century: anything longer is a unit mistake, not a lease.
    const MAX: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    if lease > MAX {
        return Err(Error::invalid(format!(
            "{what} of {lease:?} is longer than the maximum of 100 years"
        )));
    }
    let ms = lease.as_millis();
    if ms == 0 {
        return Err(Error::invalid(format!(
            "{what} must be at least 1 ms, got {lease:?}"
        )));
    }
    u64::try_from(ms).map_err(|_| Error::invalid(format!("{what} of {lease:?} is out of range")))
}
