//! `ClientBuilder::redisson_compat`: the oldest Redisson version of a Java
//! fleet, parsed, and the compatibility settings it implies (docs/compat.md).

use std::fmt;
use std::time::Duration;

use super::{Config, PermitIdEncoding, ShardedSubscription};
use crate::error::{Error, Result};

/// The oldest version this crate knows the wire of (the interop tests' oldest
/// is 3.12.4; the 3.12 line's scripts are the same).
const OLDEST: Version = Version(3, 12, 0);
/// The newest version whose wire was surveyed; a later 4.x is taken as it.
const NEWEST_KNOWN: Version = Version(4, 7, 0);
/// The fair lock's default wait before Redisson 3.13.3.
const OLD_FAIR_WAIT: Duration = Duration::from_secs(5);

/// A Redisson release: major, minor, patch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Version(pub u32, pub u32, pub u32);

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// Parses a Redisson version: `MAJOR.MINOR` or `MAJOR.MINOR.PATCH` in
/// decimal digits, with surrounding whitespace and one leading `v` or `V`
/// allowed (`" 3.24.3"`, `"v3.24.3"`; `"3.12"` is 3.12.0). Anything else
/// (`""`, `"3"`, `"3.x"`, `"3.24.3-SNAPSHOT"`, `"3.24.3.1"`) is refused, as is
/// a version older than 3.12.0 or of a major above 4 (the wire of those is
/// not known here): [`Error::InvalidArgument`] naming the supported range.
pub(crate) fn parse(text: &str) -> Result<Version> {
    let trimmed = text.trim();
    let digits = trimmed
        .strip_prefix('v')
        .or_else(|| trimmed.strip_prefix('V'))
        .unwrap_or(trimmed);
    let bad = || {
        Error::invalid(format!(
            "Redisson version `{text}` is not MAJOR.MINOR[.PATCH] (e.g. \"3.16.8\"); \
             supported: 3.12.0 to 4.x"
        ))
    };
    let mut parts = [0_u32; 3];
    let mut count = 0;
    for part in digits.split('.') {
        if count == 3 || part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        parts[count] = part.parse().map_err(|_| bad())?;
        count += 1;
    }
    if count < 2 {
        return Err(bad());
    }
    let version = Version(parts[0], parts[1], parts[2]);
    if version < OLDEST {
        return Err(Error::invalid(format!(
            "Redisson {version} is older than this crate supports (3.12.0 to 4.x): its wire \
             format is not known here"
        )));
    }
    if version.0 > NEWEST_KNOWN.0 {
        return Err(Error::invalid(format!(
            "Redisson {version} is of a major version this crate does not know (supported: \
             3.12.0 to 4.x); a new major may change the wire format"
        )));
    }
    Ok(version)
}

/// The compatibility settings a fleet whose oldest Redisson is `version`
/// needs (each applies unless its own knob was set).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Compat {
    pub version: Version,
    /// Hex text up to 3.16.8, raw bytes from 3.17.0.
    pub permit_ids: PermitIdEncoding,
    /// 5 s up to 3.13.2, 300 s from 3.13.3.
    pub fair_lock_wait_timeout: Duration,
    /// From 3.13.3 a fair lock's timed acquire queues with its own wait;
    /// before, with the wait timeout.
    pub fair_lock_caller_wait: bool,
    /// `Some(Both)` up to 3.21.x (classic-only Java next to sharded Java);
    /// `None`: the builder's own choice stands.
    pub sharded: Option<ShardedSubscription>,
    /// Any 3.x: the read unlock never deletes a lock another reader counts
    /// holds in (the 3.44–3.52 renewal defect).
    pub read_unlock_keeps_unmarked: bool,
}

/// Which compatibility knobs the user set explicitly: those win over
/// [`Compat`], whatever the order of the builder's calls.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Explicit {
    pub sharded: bool,
    pub permit_ids: bool,
    pub fair_lock_wait_timeout: bool,
    pub read_unlock: bool,
}

impl Compat {
    /// Writes these settings into `config` and `sharded`, but for the knobs
    /// set explicitly.
    pub fn apply(
        &self,
        config: &mut Config,
        sharded: &mut ShardedSubscription,
        explicit: Explicit,
    ) {
        if !explicit.permit_ids {
            config.permit_ids = self.permit_ids;
        }
        if !explicit.fair_lock_wait_timeout {
            config.fair_lock_wait_timeout = self.fair_lock_wait_timeout;
        }
        // No knob of its own: the version decides.
        config.fair_lock_caller_wait = self.fair_lock_caller_wait;
        if !explicit.read_unlock {
            config.read_unlock_keeps_unmarked = self.read_unlock_keeps_unmarked;
        }
        if let Some(mode) = self.sharded
            && !explicit.sharded
        {
            *sharded = mode;
        }
    }

    /// The settings for `version`; logs a warning for a 4.x newer than the
    /// newest surveyed (taken as that one).
    pub fn for_version(version: Version) -> Compat {
        if version > Version(NEWEST_KNOWN.0, NEWEST_KNOWN.1, u32::MAX) {
            log::warn!(
                "redisson-lock: Redisson {version} is newer than the newest surveyed \
                 ({NEWEST_KNOWN}); assuming its wire format"
            );
        }
        Compat {
            version,
            permit_ids: if version < Version(3, 17, 0) {
                PermitIdEncoding::Hex
            } else {
                PermitIdEncoding::Raw
            },
            fair_lock_wait_timeout: if version < Version(3, 13, 3) {
                OLD_FAIR_WAIT
            } else {
                crate::names::FAIR_LOCK_WAIT_TIMEOUT
            },
            fair_lock_caller_wait: version >= Version(3, 13, 3),
            sharded: (version < Version(3, 22, 0)).then_some(ShardedSubscription::Both),
            read_unlock_keeps_unmarked: version.0 == 3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_or_are_refused() {
        let ok = [
            ("3.16.8", Version(3, 16, 8)),
            ("4.7.0", Version(4, 7, 0)),
            ("3.12", Version(3, 12, 0)),
            ("3.12.4", Version(3, 12, 4)),
            (" 3.24.3", Version(3, 24, 3)),
            ("3.24.3\n", Version(3, 24, 3)),
            ("v3.24.3", Version(3, 24, 3)),
            ("V3.52.0", Version(3, 52, 0)),
            ("4.99.1", Version(4, 99, 1)),
            ("3.012.0", Version(3, 12, 0)),
        ];
        for (text, version) in ok {
            assert_eq!(parse(text).ok(), Some(version), "{text:?}");
        }
        let refused = [
            "",
            " ",
            "3",
            "3.x",
            "3.9.9",
            "3.11.6",
            "2.15.2",
            "99.0.0",
            "5.0",
            "3.24.3-SNAPSHOT",
            "3.24.3.1",
            "3..1",
            "3.24.",
            ".3.24",
            "vv3.24.3",
            "3.24.3 x",
            "-3.24.3",
            "+3.24.3",
            "3.24.99999999999",
            "３.24.3",
        ];
        for text in refused {
            match parse(text) {
                Err(Error::InvalidArgument(message)) => {
                    assert!(message.contains("3.12.0 to 4.x"), "{text:?}: {message}");
                }
                other => panic!("{text:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn each_boundary_sets_its_behaviour() {
        let at = |text: &str| Compat::for_version(parse(text).expect("a supported version"));
        assert_eq!(at("3.16.8").permit_ids, PermitIdEncoding::Hex);
        assert_eq!(at("3.17.0").permit_ids, PermitIdEncoding::Raw);
        assert_eq!(at("3.13.2").fair_lock_wait_timeout, OLD_FAIR_WAIT);
        assert!(!at("3.13.2").fair_lock_caller_wait);
        assert!(at("3.13.3").fair_lock_caller_wait);
        assert_eq!(
            at("3.13.3").fair_lock_wait_timeout,
            Duration::from_secs(300)
        );
        assert_eq!(at("3.21.3").sharded, Some(ShardedSubscription::Both));
        assert_eq!(at("3.22.0").sharded, None);
        assert!(at("3.12.4").read_unlock_keeps_unmarked);
        assert!(at("3.52.0").read_unlock_keeps_unmarked);
        assert!(!at("4.0.0").read_unlock_keeps_unmarked);
        let newest = at("4.7.0");
        assert_eq!(newest.permit_ids, PermitIdEncoding::Raw);
        assert_eq!(newest.sharded, None);
        assert_eq!(
            newest.fair_lock_wait_timeout,
            crate::names::FAIR_LOCK_WAIT_TIMEOUT
        );
    }
}
