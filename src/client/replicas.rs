//! The replica sync knobs of [`ClientBuilder`]; the mechanism is the
//! engine's (`crate::engine::replicas`).

use std::time::Duration;

use crate::client::ClientBuilder;
use crate::config::ReplicaWait;

impl ClientBuilder {
    /// Follows every lock script that writes (acquire, unlock, force
    /// unlock, a fair lock's give-up, renewals) with `WAIT <connected
    /// replicas> <timeout>` in the same round trip, as Redisson does outside
    /// single-server mode (`checkLockSyncedSlaves`). With `check` true, an
    /// acquire that no replica acknowledged is undone and retried (the
    /// [`unlock_retries`](Self::unlock_retries) settings, while the caller's
    /// wait lasts: a `try_lock` makes one attempt), then fails with
    /// [`Error::NotReplicated`](crate::Error::NotReplicated); an unlock is retried the same way (it is
    /// idempotent). The semaphores' writes are synced too: an acquire is
    /// given back (a release, which publishes) and retried the same way;
    /// their other writes are never sent twice when not idempotent (see
    /// [`Semaphore`](crate::Semaphore) and
    /// [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore)). A
    /// count-down latch sends no `WAIT` (Redisson's does not either). With
    /// `check` false the `WAIT` is still sent and a missing acknowledgement
    /// only logged.
    ///
    /// Off by default for a standalone server; on, with `check` true, for
    /// Sentinel and Redis Cluster, as in Redisson. It costs one `INFO
    /// replication` round trip for the first write to each master (its
    /// replica count is cached per master), then nothing extra unless
    /// replicas lag: the reply waits for the acknowledgement, at most the
    /// [timeout](Self::replicas_sync_timeout).
    /// Replicas that are disconnected when the lock is written are not
    /// waited for (Redisson's rule): a master that lost its replicas still
    /// grants locks a failover would lose.
    pub fn check_lock_synced_replicas(mut self, check: bool) -> Self {
        self.config.replica_wait = ReplicaWait::from_check(check);
        self
    }

    /// How long a lock write waits for its replicas' acknowledgement
    /// (Redisson's `slavesSyncTimeout`); must be shorter than the response
    /// timeout. Unset, it is 1 s, or half the
    /// [response timeout](Self::response_timeout) when that is shorter.
    pub fn replicas_sync_timeout(mut self, timeout: Duration) -> Self {
        self.config.replicas_sync_timeout = Some(timeout);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Client;

    #[test]
    fn replica_wait_is_off_alone_checked_for_sentinel_and_cluster_and_as_set() {
        let single = Client::builder("redis://127.0.0.1");
        assert_eq!(single.config.replica_wait, ReplicaWait::Off);
        let sentinel = Client::sentinel_builder("mymaster", ["redis://127.0.0.1:26379"]);
        assert_eq!(sentinel.config.replica_wait, ReplicaWait::Checked);
        let cluster = Client::cluster_builder(["redis://127.0.0.1:7000"]);
        assert_eq!(cluster.config.replica_wait, ReplicaWait::Checked);
        let logged = Client::builder("redis://127.0.0.1").check_lock_synced_replicas(false);
        assert_eq!(logged.config.replica_wait, ReplicaWait::Logged);
        let checked = logged.check_lock_synced_replicas(true);
        assert_eq!(checked.config.replica_wait, ReplicaWait::Checked);
        let relaxed =
            Client::cluster_builder(["redis://127.0.0.1:7000"]).check_lock_synced_replicas(false);
        assert_eq!(relaxed.config.replica_wait, ReplicaWait::Logged);
    }
}
