//! A channel's entries in the parking lot: a list while few, a map when many.

use std::hash::RandomState;
use std::sync::Arc;

use hashbrown::HashMap;

use super::{LockEntry, Name};

/// A channel's entries: a list while they are few (nearly always one: a
/// lock's name, a fair waiter's own channel, or `a` and `{a}`), which costs
/// a fraction of a map; a map once they are many (a synchronizer gives each
/// waiting call an entry of its own on the shared channel: ten thousand
/// threads awaiting one latch must not search a list).
pub(super) enum ChannelEntries {
    Few(Vec<(Name, Arc<LockEntry>)>),
    Many(HashMap<Name, Arc<LockEntry>, RandomState>),
}

/// The most entries kept as a list.
pub(super) const FEW: usize = 8;

impl Default for ChannelEntries {
    fn default() -> Self {
        ChannelEntries::Few(Vec::new())
    }
}

impl ChannelEntries {
    pub(super) fn get(&self, key: &str) -> Option<(&Name, &Arc<LockEntry>)> {
        match self {
            ChannelEntries::Few(list) => list
                .iter()
                .find(|(name, _)| **name == *key)
                .map(|(name, entry)| (name, entry)),
            ChannelEntries::Many(map) => map.get_key_value(key),
        }
    }

    /// Adds `key`'s entry (the caller found none).
    pub(super) fn insert(&mut self, key: Name, entry: Arc<LockEntry>) {
        match self {
            ChannelEntries::Few(list) if list.len() < FEW => list.push((key, entry)),
            ChannelEntries::Few(list) => {
                let mut map: HashMap<_, _, RandomState> = list.drain(..).collect();
                map.insert(key, entry);
                *self = ChannelEntries::Many(map);
            }
            ChannelEntries::Many(map) => {
                map.insert(key, entry);
            }
        }
    }

    /// Removes `key`'s entry if it is `entry`.
    pub(super) fn remove(&mut self, key: &str, entry: &Arc<LockEntry>) {
        match self {
            ChannelEntries::Few(list) => {
                let found = list
                    .iter()
                    .position(|(name, current)| **name == *key && Arc::ptr_eq(current, entry));
                if let Some(at) = found {
                    list.swap_remove(at);
                }
            }
            ChannelEntries::Many(map) => {
                if map
                    .get(key)
                    .is_some_and(|current| Arc::ptr_eq(current, entry))
                {
                    map.remove(key);
                }
            }
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        match self {
            ChannelEntries::Few(list) => list.is_empty(),
            ChannelEntries::Many(map) => map.is_empty(),
        }
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Arc<LockEntry>> {
        let (few, many) = match self {
            ChannelEntries::Few(list) => (Some(list.iter().map(|(_, entry)| entry)), None),
            ChannelEntries::Many(map) => (None, Some(map.values())),
        };
        few.into_iter().flatten().chain(many.into_iter().flatten())
    }
}
