//! How a type's unlock scripts are called: [`UnlockScripts`] and the
//! [`Unlocking`] descriptor every type hands the default release, latched
//! unlock and force unlock.

use std::borrow::Cow;
use std::sync::LazyLock;

use super::{ReleaseRequest, epoch_millis};
use crate::lua::{Invocation, Lua};
use crate::names;

/// A type's three unlock scripts.
pub struct UnlockScripts {
    /// A guard's release (`request.remaining` holds kept).
    pub(super) release: LazyLock<Lua>,
    /// Redisson's unlock with an unlock latch.
    pub(super) unlock: LazyLock<Lua>,
    /// The force unlock.
    pub(super) force: LazyLock<Lua>,
    /// The force unlock guarded by an owner (this crate's own).
    pub(super) force_owned: LazyLock<Lua>,
}

/// How a type's unlock scripts are called (docs/wire-format.md, "Release (a guard's unlock)").
/// A release or a
/// latched unlock sends KEYS `[name, queue?, timeout?, channel?, reader
/// keys?, latch?]` and ARGV `[message?, lease (not a reader's), field,
/// now?, publish?, remaining | latch TTL]`; a force unlock sends KEYS `[name,
/// queue?, timeout?, channel?]` and ARGV `[message?, now?, publish?,
/// mode?]`.
pub struct Unlocking<'a> {
    pub(super) scripts: &'static UnlockScripts,
    /// A fair lock's queue and timeout zset: KEYS after the name, and the
    /// client's clock (ms) in ARGV before `publish`.
    queue: Option<(&'a str, &'a str)>,
    /// The channel and the message a release publishes there, with the
    /// `publish` flag; `None`: no pub/sub at all (the spin lock).
    channel: Option<(Cow<'a, str>, &'a str)>,
    /// A reader's release and latched unlock: KEYS add the thread's marker
    /// prefix and the lock's key prefix (this) after the channel, ARGV has
    /// no lease, and a release with holds left replies `{0, ttl}`.
    pub(super) reader: Option<&'a str>,
    /// A read/write lock's force unlock deletes it only in this mode.
    mode: Option<&'a str>,
}

impl<'a> Unlocking<'a> {
    /// Scripts that take the lock's name alone (and the field's arguments).
    pub(super) fn new(scripts: &'static UnlockScripts) -> Self {
        Unlocking {
            scripts,
            queue: None,
            channel: None,
            reader: None,
            mode: None,
        }
    }

    /// A release publishes `message` on `channel`.
    pub(super) fn publishing(self, channel: impl Into<Cow<'a, str>>, message: &'a str) -> Self {
        Unlocking {
            channel: Some((channel.into(), message)),
            ..self
        }
    }

    /// A fair lock's `queue` and `timeout` keys.
    pub(super) fn queued(self, queue: &'a str, timeout: &'a str) -> Self {
        Unlocking {
            queue: Some((queue, timeout)),
            ..self
        }
    }

    /// A reader of the lock whose key prefix is `key_prefix`.
    pub(super) fn reader(self, key_prefix: &'a str) -> Self {
        Unlocking {
            reader: Some(key_prefix),
            ..self
        }
    }

    /// A read/write lock force-unlocked only in `mode`.
    pub(super) fn in_mode(self, mode: &'a str) -> Self {
        Unlocking {
            mode: Some(mode),
            ..self
        }
    }

    /// A release (`last`: the holds kept) or, with `latch`, a latched
    /// unlock (`last`: the latch's TTL).
    pub(super) fn invocation<'s>(
        &self,
        script: &'s Lua,
        request: &ReleaseRequest<'_>,
        latch: Option<&str>,
        last: u64,
    ) -> Invocation<'s> {
        let mut invocation = self.keys(script, request.name);
        if let Some(key_prefix) = self.reader {
            invocation
                .key(names::rwlock_timeout_prefix(request.name, request.field))
                .key(key_prefix);
        }
        if let Some(latch) = latch {
            invocation.key(latch);
        }
        if let Some((_, message)) = &self.channel {
            invocation.arg(*message);
        }
        if self.reader.is_none() {
            invocation.arg(request.lease_ms);
        }
        invocation.arg(request.field);
        self.clock_and_publish(&mut invocation, request.publish);
        invocation.arg(last);
        invocation
    }

    /// A force unlock's call of `script`: KEYS `[name, queue?, timeout?,
    /// channel?]`, ARGV `[message?, now?, publish?, mode?]`.
    pub(super) fn force_invocation<'s>(
        &self,
        script: &'s Lua,
        name: &str,
        publish: &str,
    ) -> Invocation<'s> {
        let mut invocation = self.keys(script, name);
        if let Some((_, message)) = &self.channel {
            invocation.arg(*message);
        }
        self.clock_and_publish(&mut invocation, publish);
        if let Some(mode) = self.mode {
            invocation.arg(mode);
        }
        invocation
    }

    /// KEYS `[name, queue?, timeout?, channel?]`.
    pub(super) fn keys<'s>(&self, script: &'s Lua, name: &str) -> Invocation<'s> {
        let mut invocation = script.key(name);
        if let Some((queue, timeout)) = self.queue {
            invocation.key(queue).key(timeout);
        }
        if let Some((channel, _)) = &self.channel {
            invocation.key(&**channel);
        }
        invocation
    }

    /// ARGV `now?` (a fair lock's) and `publish?` (a type with a channel's).
    pub(super) fn clock_and_publish(&self, invocation: &mut Invocation<'_>, publish: &str) {
        if self.queue.is_some() {
            invocation.arg(epoch_millis());
        }
        if self.channel.is_some() {
            invocation.arg(publish);
        }
    }
}
