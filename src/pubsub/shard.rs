//! Redis Cluster specifics of a subscriber connection: Redis dropping a
//! shard channel when its node loses the slot. (Which refusals mean the
//! slot is served elsewhere is `crate::error::Verdict::served_elsewhere`.)

use std::sync::atomic::Ordering;

use super::conn::{Conn, Pending};
use super::{Flavour, SubscriberState};

impl SubscriberState {
    /// Whether an `sunsubscribe` for `channel` answers the command at the
    /// front of the record (ours), rather than being Redis's unsolicited
    /// notice that the node no longer serves the channel's slot.
    pub(super) fn answers_front_unsubscribe(&self, channel: &str) -> bool {
        matches!(
            self.conn.lock().pending.front(),
            Some(Pending::Unsubscribe(front)) if **front == *channel
        )
    }

    /// Redis dropped the shard channel `channel` (after a failover or a slot
    /// migration): forget it here and wake its waiters, who subscribe again
    /// at the slot's new master. Under [`Flavour::Both`], the channel's
    /// classic subscription here is dropped too.
    pub(super) fn shard_lost(&self, channel: &str) {
        let mut conn = self.conn.lock();
        if conn.subscribed.contains(channel) {
            self.drop_classic_half(&mut conn, channel);
        }
        conn.subscribed.remove(channel);
        let woken = self.lot.lock().moved(channel);
        log::info!(
            "redisson-lock: the server dropped the shard subscription to {channel} (slot moved \
             or failed over): {woken} waiting thread(s) subscribe again at its new master"
        );
    }

    /// Under [`Flavour::Both`], when the shard half of `channel`'s
    /// subscription is gone or refused as served elsewhere: queues an
    /// `UNSUBSCRIBE` of its classic half (written by the next sync), so that
    /// the node keeps nothing for a channel it no longer serves. Nothing
    /// for the other flavours.
    pub(super) fn drop_classic_half(&self, conn: &mut Conn, channel: &str) {
        if self.flavour == Flavour::Both {
            conn.queue(
                Pending::Unsubscribe(channel.into()),
                Flavour::ClusterClassic,
            );
            self.dirty.store(true, Ordering::Release);
        }
    }
}
