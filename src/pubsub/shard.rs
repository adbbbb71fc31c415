//! Redis Cluster specifics of a subscriber connection: Redis dropping a
//! shard channel when its node loses the slot, and refusals that mean the
//! slot is served elsewhere.

use redis::ServerError;

use super::Shared;
use super::conn::Pending;

/// A refusal that means the channel's slot is served elsewhere now, or for
/// a moment by nobody.
pub(super) fn moved_away(e: &ServerError) -> bool {
    matches!(e.code(), "MOVED" | "ASK" | "CLUSTERDOWN" | "TRYAGAIN")
}
impl Shared {
    /// Whether an `sunsubscribe` for `channel` answers the command at the
    /// front of the record (ours), rather than being Redis's unsolicited
    /// notice that the node no longer serves the channel's slot.
    pub(super) fn answers_front_unsubscribe(&self, channel: &str) -> bool {
        matches!(
            self.conn.lock().pending.front(),
            Some(Pending::Unsubscribe(front)) if front == channel
        )
    }

    /// Redis dropped the shard channel `channel` (after a failover or a slot
    /// migration): forget it here and wake its waiters, who subscribe again
    /// at the slot's new master.
    pub(super) fn shard_lost(&self, channel: &str) {
        let mut conn = self.conn.lock();
        conn.subscribed.remove(channel);
        let woken = self.lot.lock().moved(channel);
        log::info!(
            "redisson-lock: the server dropped the shard subscription to {channel} (slot moved \
             or failed over): {woken} waiting thread(s) subscribe again at its new master"
        );
    }
}
