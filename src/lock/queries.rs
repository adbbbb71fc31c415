//! A lock's queries and force unlocks: what Redisson's `isLocked`,
//! `isHeldByCurrentThread`, `getHoldCount`, `remainTimeToLive` and
//! `forceUnlock` are for every type, one round trip each.

use std::time::Duration;

use redis::Commands;

use super::Lock;
use crate::error::{Error, LostReason, Result};
use crate::protocol::Kind;

impl<K: Kind> Lock<K> {
    /// Deletes the lock whoever holds it and wakes one waiter; `true` if there
    /// was a lock to delete. Guards of this client on it become lost
    /// ([`LostReason::ForceUnlocked`](crate::LostReason::ForceUnlocked)) at
    /// once; a holder in another client (or process, or Java) learns it at
    /// its next renewal, within a third of its watchdog timeout (10 s with
    /// the defaults), as [`LostReason::KeyGone`](crate::LostReason::KeyGone).
    pub fn force_unlock(&self) -> Result<bool> {
        self.check()?;
        let registry = &self.engine.registry;
        // Only holds taken before the delete are lost; one taken by another
        // thread right after it is not.
        let before = registry.holds_on(&self.name);
        let deleted = self
            .engine
            .with_logged_sync("force unlock", &self.name, |con, _| {
                self.kind.force_unlock(con, &self.name, self.engine.publish)
            })?;
        for hold in &before {
            registry.lose(hold, LostReason::ForceUnlocked);
        }
        Ok(deleted)
    }

    /// Deletes the lock only if it is still held by `owner_field` (a hash
    /// field `<client id>:<thread>`, or a writer's
    /// `<client id>:<thread>:write`, as [`Holder::field`](crate::Holder::field)
    /// gives it from [`Client::inspect`](crate::Client::inspect)), then wakes
    /// waiters, Java's included, exactly as [`Lock::force_unlock`] does for
    /// this kind (its own channel and message; the fair lock wakes its queue
    /// head on the head's own channel; a spin lock publishes nothing).
    ///
    /// The check and the delete are one script, so a lock that changed
    /// hands since it was inspected is left alone: `Ok(false)` and nothing
    /// changed when the lock is free, held by someone else, or (for the
    /// read or write side of a read/write lock) in the other mode.
    /// Deleting a read lock frees every reader, as Redisson's force unlock
    /// does. On `true`, guards of this client on the lock become lost
    /// ([`LostReason::ForceUnlocked`]). One round trip (plus a `WAIT` with
    /// replica sync on).
    pub fn force_unlock_owned_by(&self, owner_field: &str) -> Result<bool> {
        self.check()?;
        if owner_field.is_empty() {
            return Err(Error::invalid("owner field must not be empty"));
        }
        let registry = &self.engine.registry;
        let before = registry.holds_on(&self.name);
        let deleted = self
            .engine
            .with_logged_sync("force unlock", &self.name, |con, _| {
                self.kind
                    .force_unlock_owned(con, &self.name, owner_field, self.engine.publish)
            })?;
        if deleted {
            for hold in &before {
                registry.lose(hold, LostReason::ForceUnlocked);
            }
        }
        Ok(deleted)
    }

    /// Whether anyone holds the lock, as Redisson's `isLocked` says for
    /// this type (`EXISTS` for the reentrant lock). One round trip.
    pub fn is_locked(&self) -> Result<bool> {
        self.check()?;
        self.engine
            .with_connection(&self.name, "is_locked", |con, _| {
                self.kind.is_locked(con, &self.name)
            })
    }

    /// Whether the calling thread holds the lock (`HEXISTS`).
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        self.check()?;
        let field = self.owner_field();
        self.engine
            .with_connection(&self.name, "is_held_by_current_thread", |con, _| {
                Ok(con.hexists(&*self.name, &field)?)
            })
    }

    /// The calling thread's reentrancy count, 0 when it does not hold the lock.
    pub fn hold_count(&self) -> Result<u64> {
        self.check()?;
        let field = self.owner_field();
        let count: Option<u64> =
            self.engine
                .with_connection(&self.name, "hold_count", |con, _| {
                    Ok(con.hget(&*self.name, &field)?)
                })?;
        Ok(count.unwrap_or(0))
    }

    /// The lock's remaining lease (`PTTL`); `None` when it is not locked or
    /// has no expiry.
    pub fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.check()?;
        let ttl: i64 = self
            .engine
            .with_connection(&self.name, "remaining_ttl", |con, _| {
                Ok(con.pttl(&*self.name)?)
            })?;
        Ok(u64::try_from(ttl).ok().map(Duration::from_millis))
    }
}
