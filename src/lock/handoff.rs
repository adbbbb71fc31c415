//! A hold handed to another process: [`OwnedLockGuard::detach`] stops this
//! client's renewal without releasing and returns a [`HoldToken`];
//! [`Lock::adopt`] (in any client, any process) checks on the server that
//! the owner still holds the lock, then renews and releases it as its own.
//! The owner field never changes, so Java sees one holder throughout.

use std::fmt;
use std::str::FromStr;
use std::time::Instant;

use super::Lock;
use super::owned::OwnedLockGuard;
use crate::error::{Error, LostReason, Result};
use crate::protocol::Kind;
use crate::protocol::lease::{self, RenewChunk, Renewed};

/// The printable form's first part, and its version.
const PREFIX: &str = "redisson-lock-hold/1";

/// A hold that left its process: the lock's name and type, its owner field
/// and its fencing token (for a fenced lock). From
/// [`OwnedLockGuard::detach`], taken over with [`Lock::adopt`].
///
/// It prints (`Display`) as one line of printable ASCII without spaces, and
/// parses back (`FromStr`), so it can travel in an environment variable, a
/// command line or a message:
/// `redisson-lock-hold/1;<type>;<owner field>;<token or ->;<name>`, the name
/// percent-encoded where it is not printable ASCII or is `%`/`;`.
///
/// It is a description, not a capability: anyone who can write the owner
/// field can take the lock over, as anyone with the same Redis credentials
/// could release it. Keep it as private as those credentials.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HoldToken {
    name: String,
    kind: String,
    field: String,
    token: Option<u64>,
}

impl HoldToken {
    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lock's Redisson class (`RedissonLock`, `RedissonFencedLock`, ...).
    pub fn lock_type(&self) -> &str {
        &self.kind
    }

    /// The owner field the hold is written under (`<client id>:<id>`).
    pub fn owner_field(&self) -> &str {
        &self.field
    }

    /// The fencing token of the acquisition, for a fenced lock.
    pub fn fencing_token(&self) -> Option<u64> {
        self.token
    }
}

impl fmt::Display for HoldToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX};{};{};", self.kind, self.field)?;
        match self.token {
            Some(token) => write!(f, "{token};")?,
            None => f.write_str("-;")?,
        }
        for byte in self.name.bytes() {
            if byte.is_ascii_graphic() && byte != b'%' && byte != b';' {
                write!(f, "{}", char::from(byte))?;
            } else {
                write!(f, "%{byte:02X}")?;
            }
        }
        Ok(())
    }
}

impl FromStr for HoldToken {
    type Err = Error;

    /// Parses what `Display` printed; anything else is
    /// [`Error::InvalidArgument`] saying what is wrong.
    fn from_str(text: &str) -> Result<Self> {
        let bad = |what: &str| Error::invalid(format!("not a hold token ({what}): {text:?}"));
        let mut parts = text.trim().splitn(5, ';');
        if parts.next() != Some(PREFIX) {
            return Err(bad(&format!("it must start with `{PREFIX};`")));
        }
        let (Some(kind), Some(field), Some(token), Some(name)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad("it has fewer than five `;`-separated parts"));
        };
        if kind.is_empty() || !kind.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(bad("the lock type is not a class name"));
        }
        let owner = field.split(':').collect::<Vec<_>>();
        let thread_ok = owner.get(1).is_some_and(|id| id.parse::<u64>().is_ok());
        // Printable ASCII without spaces, as every owner field is (and as
        // `Display` promises to print it): a control character or a space
        // would otherwise be taken and printed back verbatim.
        let printable = field.bytes().all(|b| b.is_ascii_graphic());
        if owner.len() < 2 || owner[0].is_empty() || !thread_ok || !printable {
            return Err(bad("the owner field is not `<client id>:<id>`"));
        }
        let token = match token {
            "-" => None,
            digits => Some(
                digits
                    .parse::<u64>()
                    .map_err(|_| bad("the fencing token is not a number or `-`"))?,
            ),
        };
        Ok(HoldToken {
            name: percent_decode(name).ok_or_else(|| bad("the name's encoding is broken"))?,
            kind: kind.to_owned(),
            field: field.to_owned(),
            token,
        })
    }
}

fn percent_decode(text: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else if byte.is_ascii_graphic() && byte != b';' {
            bytes.push(byte);
            rest = tail;
        } else {
            return None;
        }
    }
    String::from_utf8(bytes).ok()
}

impl<K: Kind> crate::LockGuard<K> {
    /// The [`HoldToken`] of this hold, for another process to take it over
    /// with [`Lock::adopt`] (it then renews it too, under the same owner
    /// field) while this guard still holds it: hand it over for good with
    /// [`keep_for`](crate::LockGuard::keep_for) (this side stops renewing
    /// and leaves the lock one lease, for the adopter to renew) rather than
    /// a release, which would free the adopter's lock. No round trip.
    pub fn hold_token(&self) -> HoldToken {
        HoldToken {
            name: Self::lock_of(self).name.to_string(),
            kind: K::REDISSON.to_owned(),
            field: self.hold_field().to_owned(),
            token: self.fencing_token(),
        }
    }
}

impl<K: Kind> OwnedLockGuard<K> {
    /// Hands the hold over: this client stops renewing it and forgets it
    /// without releasing it, and the returned token lets another client
    /// (in this process or another) take it over with [`Lock::adopt`]. No
    /// round trip.
    ///
    /// Until someone adopts it, the lock stays held for what is left of its
    /// lease (at most the watchdog timeout since the last renewal, 30 s by
    /// default; the handle's lease if it was taken with one), then expires;
    /// adopt it within that time. This guard's [`LostSignal`](crate::LostSignal)s
    /// stop as after a release (their waiters return `None`).
    pub fn detach(self) -> HoldToken {
        let (lock, hold, token, renew) = self.into_parts();
        lock.engine.registry.released(&hold, renew);
        hold.hand_off();
        HoldToken {
            name: lock.name.to_string(),
            kind: K::REDISSON.to_owned(),
            field: hold.field.to_string(),
            token,
        }
    }
}

impl<K: Kind> Lock<K> {
    /// Takes over a hold another client [detached](OwnedLockGuard::detach):
    /// checks on the server that its owner field still holds this lock and,
    /// in the same script call, resets the key's TTL to this handle's lease
    /// (the client's watchdog timeout without one, renewed from then on by
    /// this client's watchdog, as a hold of its own). One round trip.
    ///
    /// The guard releases the lock on drop like any owned guard, under the
    /// original owner field: Java sees the same holder throughout.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when the token names another lock or
    /// another lock type, or a hold this client already has;
    /// [`Error::NotHeld`] when the owner no longer holds the lock (it was
    /// released, expired or force-unlocked: the token is stale);
    /// [`Error::Lost`] when the key now holds something else.
    pub fn adopt(&self, hold: &HoldToken) -> Result<OwnedLockGuard<K>> {
        self.check()?;
        if *hold.name != *self.name || hold.kind != K::REDISSON {
            return Err(Error::invalid(format!(
                "the hold token is for {} `{}`, not {} `{}`",
                hold.kind,
                hold.name,
                K::REDISSON,
                self.name
            )));
        }
        let registry = &self.engine.registry;
        if registry.live(&self.name, &hold.field).is_some() {
            return Err(Error::invalid(format!(
                "this client already holds `{}` as {}",
                self.name, hold.field
            )));
        }
        let (lease, lease_ms) = self.lease()?;
        let renewal = self.kind.renewal(&hold.field);
        let chunk = RenewChunk {
            items: vec![(&*self.name, &*hold.field, &renewal)],
        };
        let sent = Instant::now();
        let found = self.engine.with_connection(&self.name, "adopt", |con, _| {
            lease::renew_chunks(con, std::slice::from_ref(&chunk), lease_ms)?
                .pop()
                .unwrap_or_else(|| Err(Error::UnexpectedReply("no renewal reply".into())))
        })?;
        match found.first() {
            Some(Renewed::Held) => {}
            Some(Renewed::WrongType) => return Err(self.lost(LostReason::Overwritten)),
            Some(Renewed::Gone) | None => {
                let mut owner = hold.field.split(':');
                return Err(Error::NotHeld {
                    name: self.name.to_string(),
                    client_id: owner.next().unwrap_or_default().to_owned(),
                    thread_id: owner.next().and_then(|id| id.parse().ok()).unwrap_or(0),
                });
            }
        }
        let renew = self.lease.is_none();
        let taken = registry.acquired(
            &self.name,
            &hold.field,
            Self::HOLD_KIND,
            renewal,
            lease,
            renew,
            sent,
            None,
        );
        Ok(OwnedLockGuard::from_parts(
            self.clone(),
            taken,
            hold.token,
            renew,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(name: &str, token: Option<u64>) -> HoldToken {
        HoldToken {
            name: name.to_owned(),
            kind: "RedissonFencedLock".to_owned(),
            field: "2f1e0c4a-6a53-4f0e-9d55-8a3c3bd8c001:42".to_owned(),
            token,
        }
    }

    #[test]
    fn a_token_prints_as_one_word_and_parses_back() {
        for name in ["job", "a;b%c d", "{orders}:42", "ünï\ncode", ""] {
            for fencing in [None, Some(7)] {
                let held = token(name, fencing);
                let text = held.to_string();
                assert!(text.bytes().all(|b| b.is_ascii_graphic()), "{text}");
                assert_eq!(text.parse::<HoldToken>().expect(&text), held);
            }
        }
        let write = HoldToken {
            field: "2f1e0c4a-6a53-4f0e-9d55-8a3c3bd8c001:42:write".to_owned(),
            ..token("rw", None)
        };
        assert_eq!(
            write.to_string().parse::<HoldToken>().expect("write"),
            write
        );
    }

    #[test]
    fn what_is_not_a_token_says_why() {
        let good = token("job", Some(3)).to_string();
        for bad in [
            String::new(),
            "job".to_owned(),
            good.replace("hold/1", "hold/2"),
            good.replace(";3;", ";x;"),
            good.replace(":42", ""),
            good.replace(":42", ":x"),
            good.replace("RedissonFencedLock", "Redisson Lock"),
            format!("{good}%4"),
            format!("{good}%zz"),
            format!("{good} x"),
            // Found by fuzz/ (target parsers): these parsed, and printed
            // back a control character or a space.
            good.replace("2f1e0c4a-", "2f1e\u{5}0c4a-"),
            good.replace("2f1e0c4a-", "2f1e 0c4a-"),
            good.replace("2f1e0c4a-", "2f1e\n0c4a-"),
        ] {
            let e = bad.parse::<HoldToken>().expect_err(&bad);
            assert!(matches!(e, Error::InvalidArgument(_)), "{bad}: {e:?}");
        }
    }
}
