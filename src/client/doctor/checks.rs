//! The doctor's checks: what one master's channels, script cache and clock
//! say ([`per_master`]), what one `SCAN` page of keys says ([`page`]), and
//! the findings they add up to ([`Survey::finish`]). Reads only.

use std::collections::BTreeSet;
use std::time::{SystemTime, UNIX_EPOCH};

use redis::Value;

use super::scripts::REDISSON_SCRIPTS;
use super::{Finding, Severity, VersionRange, connection};
use crate::error::Result;
use crate::names;
use crate::net::pool::Pool;

/// A fair waiter's wait timeout up to Redisson 3.13.2, and after.
const OLD_FAIR_WAIT_MS: f64 = 5_000.0;
const NEW_FAIR_WAIT_MS: f64 = 300_000.0;
/// A clock this far from the server's is reported.
const CLOCK_SKEW_MS: i64 = 2_000;
/// At most this many holds of one reader are looked for markers.
const MAX_MARKERS: u64 = 64;

/// What the pages and masters read so far add up to.
#[derive(Default)]
pub(super) struct Survey {
    findings: Vec<Finding>,
    classic: BTreeSet<String>,
    sharded: BTreeSet<String>,
    /// Indexes into [`REDISSON_SCRIPTS`] the script caches have.
    scripts: BTreeSet<usize>,
    /// The last master's clock, ms since the epoch.
    server_ms: i64,
    skew_ms: i64,
}

fn local_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// One master's clock, Redisson channels of both flavours and script cache:
/// one pipelined round trip.
pub(super) fn per_master(pool: &Pool, state: &mut Survey) -> Result<()> {
    let mut con = connection(pool)?;
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    pipe.cmd("TIME")
        .cmd("PUBSUB")
        .arg("CHANNELS")
        .arg("redisson*")
        .cmd("PUBSUB")
        .arg("SHARDCHANNELS")
        .arg("redisson*");
    let exists = pipe.cmd("SCRIPT").arg("EXISTS");
    for (sha, _, _) in REDISSON_SCRIPTS {
        exists.arg(*sha);
    }
    let asked = local_ms();
    let replies: Vec<Value> = pipe.query(&mut con)?;
    let answered = local_ms();
    let mut replies = replies.into_iter();
    if let Some(Ok((secs, micros))) = replies.next().map(redis::from_redis_value::<(i64, i64)>) {
        state.server_ms = secs * 1000 + micros / 1000;
        let local = asked + (answered - asked) / 2;
        let skew = local - state.server_ms;
        if skew.abs() > state.skew_ms.abs() {
            state.skew_ms = skew;
        }
    }
    for set in [&mut state.classic, &mut state.sharded] {
        if let Some(Ok(channels)) = replies.next().map(redis::from_redis_value::<Vec<String>>) {
            set.extend(channels);
        }
    }
    // Without the table (REDISSON_SCRIPTS empty) the reply is an error.
    if let Some(Ok(found)) = replies.next().map(redis::from_redis_value::<Vec<bool>>) {
        let present = found.iter().enumerate().filter(|(_, yes)| **yes);
        state.scripts.extend(present.map(|(i, _)| i));
    }
    Ok(())
}

/// One `SCAN` page of keys of `key_type` (`hash` or `zset`): one
/// pipelined round trip, and one more for the markers of read locks.
pub(super) fn page(pool: &Pool, key_type: &str, keys: &[String], state: &mut Survey) -> Result<()> {
    match key_type {
        "hash" => hashes(pool, keys, state),
        _ => zsets(pool, keys, state),
    }
}

/// `<uuid>:<number>`, optionally `:write`: a Redisson owner field.
fn owner_field(field: &str) -> bool {
    let mut parts = field.split(':');
    let client = parts.next().unwrap_or_default();
    let thread = parts.next().unwrap_or_default();
    client.len() == 36 && !thread.is_empty() && thread.bytes().all(|b| b.is_ascii_digit())
}

fn hashes(pool: &Pool, keys: &[String], state: &mut Survey) -> Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    let mut con = connection(pool)?;
    let mut pipe = redis::pipe();
    for key in keys {
        pipe.cmd("HGETALL").arg(key);
    }
    let hashes: Vec<Vec<(String, String)>> = pipe.query(&mut con)?;
    // Each read lock's readers, with the marker keys each one's holds own.
    let mut readers: Vec<(&str, String, Vec<String>)> = Vec::new();
    for (name, fields) in keys.iter().zip(hashes) {
        if !fields.iter().any(|(f, v)| f == "mode" && v == "read") {
            continue;
        }
        for (field, count) in fields {
            let Ok(count) = count.parse::<u64>() else {
                continue;
            };
            if !owner_field(&field) || count == 0 {
                continue;
            }
            let prefix = names::rwlock_timeout_prefix(name, &field);
            let markers = (1..=count.min(MAX_MARKERS))
                .map(|n| format!("{prefix}:{n}"))
                .collect();
            readers.push((name, field, markers));
        }
    }
    if readers.is_empty() {
        return Ok(());
    }
    let mut pipe = redis::pipe();
    for marker in readers.iter().flat_map(|(_, _, markers)| markers) {
        pipe.cmd("PTTL").arg(marker);
    }
    let ttls: Vec<i64> = pipe.query(&mut con)?;
    let mut ttls = ttls.into_iter();
    for (name, field, markers) in readers {
        let gone: Vec<usize> = ttls
            .by_ref()
            .take(markers.len())
            .enumerate()
            .filter(|(_, ttl)| *ttl == -2)
            .map(|(i, _)| i + 1)
            .collect();
        // One gone is enough: once the holds above it are released, the
        // reader counts holds whose markers are all gone.
        if !gone.is_empty() {
            let gone: Vec<String> = gone.iter().map(usize::to_string).collect();
            state.findings.push(Finding::new(
                "reader-without-marker",
                Severity::Error,
                Some(name),
                format!(
                    "reader {field} counts {} hold(s) but its `rwlock_timeout` marker(s) {} are gone",
                    markers.len(),
                    gone.join(", ")
                ),
                "a Redisson 3.44-3.52 node renewed this read lock without its markers: the \
                 next read unlock by Redisson deletes the lock while this reader holds; \
                 upgrade those nodes to Redisson 4.x (Rust clients: redisson_compat with the \
                 fleet's 3.x version keeps such a lock)",
            ));
        }
    }
    Ok(())
}

fn zsets(pool: &Pool, keys: &[String], state: &mut Survey) -> Result<()> {
    let fair: Vec<&String> = keys
        .iter()
        .filter(|k| k.starts_with("redisson_lock_timeout:"))
        .collect();
    let permits: Vec<&String> = keys.iter().filter(|k| k.ends_with(":timeout")).collect();
    if fair.is_empty() && permits.is_empty() {
        return Ok(());
    }
    let mut con = connection(pool)?;
    let mut pipe = redis::pipe();
    for key in &fair {
        pipe.cmd("ZRANGE")
            .arg(*key)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES");
    }
    for key in &permits {
        pipe.cmd("ZRANGE").arg(*key).arg(0).arg(-1);
    }
    let replies: Vec<Value> = pipe.query(&mut con)?;
    let mut replies = replies.into_iter();
    for key in fair {
        let scores: Vec<(Vec<u8>, f64)> = replies
            .next()
            .map(redis::from_redis_value)
            .transpose()
            .map_err(|e| crate::error::Error::UnexpectedReply(e.to_string()))?
            .unwrap_or_default();
        fair_queue(key, &scores, state);
    }
    for key in permits {
        let members: Vec<Vec<u8>> = replies
            .next()
            .map(redis::from_redis_value)
            .transpose()
            .map_err(|e| crate::error::Error::UnexpectedReply(e.to_string()))?
            .unwrap_or_default();
        permit_ids(key, &members, state);
    }
    Ok(())
}

/// The lock name of `redisson_lock_timeout:{<name>}` (or `...:<name>` for
/// a name with braces).
fn fair_name(key: &str) -> &str {
    let rest = key.trim_start_matches("redisson_lock_timeout:");
    rest.strip_prefix('{')
        .and_then(|inner| inner.strip_suffix('}'))
        .unwrap_or(rest)
}

fn fair_queue(key: &str, scores: &[(Vec<u8>, f64)], state: &mut Survey) {
    let name = fair_name(key);
    let mut sorted: Vec<f64> = scores.iter().map(|(_, s)| *s).collect();
    sorted.sort_by(f64::total_cmp);
    let gaps: Vec<f64> = sorted.windows(2).map(|w| w[1] - w[0]).collect();
    let near = |gap: f64, wait: f64| (gap - wait).abs() <= wait / 10.0;
    let old = gaps.iter().filter(|g| near(**g, OLD_FAIR_WAIT_MS)).count();
    let new = gaps.iter().filter(|g| near(**g, NEW_FAIR_WAIT_MS)).count();
    if old > 0 && new > 0 {
        state.findings.push(Finding::new(
            "fair-wait-timeout-mismatch",
            Severity::Warning,
            Some(name),
            format!(
                "{} waiters queued {old} time(s) 5 s apart and {new} time(s) 300 s apart",
                sorted.len()
            ),
            "Redisson up to 3.13.2 queues fair waiters with a 5 s wait timeout, later \
             versions with 300 s: mixed, FIFO order breaks and short-timeout waiters are \
             purged; set the same fairLockWaitTimeout everywhere (Rust: redisson_compat \
             with the fleet's oldest version)",
        ));
    }
    let stale = sorted
        .iter()
        .filter(|&&s| state.server_ms > 0 && s < state.server_ms as f64)
        .count();
    if stale > 0 {
        state.findings.push(Finding::new(
            "stale-fair-waiter",
            Severity::Warning,
            Some(name),
            format!("{stale} fair waiter(s) past their deadline are still queued"),
            "a waiter that died without giving up: it is purged by the next acquire \
             attempt; until then it may hold the queue",
        ));
    }
}

/// The semaphore name of `{<name>}:timeout` (or `<name>:timeout` for a
/// name with braces).
fn permits_name(key: &str) -> &str {
    let rest = key.trim_end_matches(":timeout");
    rest.strip_prefix('{')
        .and_then(|inner| inner.strip_suffix('}'))
        .unwrap_or(rest)
}

fn permit_ids(key: &str, members: &[Vec<u8>], state: &mut Survey) {
    let hex = members
        .iter()
        .filter(|m| m.len() == 32 && m.iter().all(u8::is_ascii_hexdigit))
        .count();
    let raw = members.iter().filter(|m| m.len() == 16).count();
    if hex == 0 {
        return;
    }
    let name = permits_name(key);
    let (severity, detail) = if raw > 0 {
        (
            Severity::Error,
            format!("{hex} permit id(s) as hex text and {raw} as raw bytes in one semaphore"),
        )
    } else {
        (
            Severity::Warning,
            format!("{hex} permit id(s) written as hex text (Redisson up to 3.16.8)"),
        )
    };
    state.findings.push(Finding::new(
        "hex-permit-ids",
        severity,
        Some(name),
        detail,
        "Redisson up to 3.16.8 writes permit ids as hex text, 3.17.0 and later as raw \
         bytes: neither can release or update the other's permits; upgrade the old \
         nodes (Rust clients: redisson_compat(\"3.16.8\") writes hex text and reads both)",
    ));
}

impl Survey {
    /// The findings of every master and page, and those that need all of
    /// them (the pub/sub flavours, the script versions, the clock).
    pub(super) fn finish(mut self, masters: usize) -> Vec<Finding> {
        let mut findings = std::mem::take(&mut self.findings);
        if !self.classic.is_empty() && !self.sharded.is_empty() && masters > 1 {
            let sample =
                |set: &BTreeSet<String>| set.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
            findings.push(Finding::new(
                "pubsub-flavour-split",
                Severity::Error,
                None,
                format!(
                    "{} Redisson channel(s) with classic subscribers ({}) and {} with sharded ones ({})",
                    self.classic.len(),
                    sample(&self.classic),
                    self.sharded.len(),
                    sample(&self.sharded)
                ),
                "Redisson up to 3.21 publishes and subscribes with PUBLISH/SUBSCRIBE in a \
                 cluster, 3.22 and later with SPUBLISH/SSUBSCRIBE: each side's waiters miss \
                 the other's releases; upgrade the old nodes, or run Rust clients with \
                 ShardedSubscription::Both (it publishes both)",
            ));
        }
        if !self.scripts.is_empty() {
            findings.push(versions_finding(&self.scripts));
        }
        if self.skew_ms.abs() > CLOCK_SKEW_MS {
            findings.push(Finding::new(
                "clock-skew",
                Severity::Warning,
                None,
                format!(
                    "this host's clock is {} ms {} the server's",
                    self.skew_ms.abs(),
                    if self.skew_ms > 0 {
                        "ahead of"
                    } else {
                        "behind"
                    }
                ),
                "fair-lock deadlines and permit leases are written in client clocks: keep \
                 every client's clock synchronised (NTP)",
            ));
        }
        findings
    }
}

/// `3.24.3` as `[3, 24, 3]`, for ordering releases.
fn release(version: &str) -> Vec<u32> {
    version.split('.').map(|n| n.parse().unwrap_or(0)).collect()
}

/// The release ranges of the scripts found: each script's range, except
/// those that strictly contain another found script's range (a 4.7.0
/// client also runs scripts unchanged since 3.24.3: the narrower range says
/// more).
fn versions_finding(found: &BTreeSet<usize>) -> Finding {
    let ranges: BTreeSet<(Vec<u32>, Vec<u32>, &str, &str)> = found
        .iter()
        .filter_map(|&i| REDISSON_SCRIPTS.get(i))
        .map(|(_, from, to)| (release(from), release(to), *from, *to))
        .collect();
    let narrowest: Vec<VersionRange> = ranges
        .iter()
        .filter(|(from, to, ..)| {
            !ranges
                .iter()
                .any(|(f, t, ..)| f >= from && t <= to && (f, t) != (from, to))
        })
        .map(|(.., from, to)| VersionRange {
            from: (*from).to_owned(),
            to: (*to).to_owned(),
        })
        .collect();
    let listed: Vec<String> = narrowest
        .iter()
        .map(|r| {
            if r.from == r.to {
                r.from.clone()
            } else {
                format!("{} to {}", r.from, r.to)
            }
        })
        .collect();
    let mut finding = Finding::new(
        "redisson-versions",
        Severity::Info,
        None,
        format!(
            "the script cache has lock or synchronizer scripts of Redisson {}",
            listed.join(", ")
        ),
        "see which compatibility settings these versions need (docs/versions.md)",
    );
    finding.ranges = narrowest;
    finding
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_back_from_their_keys() {
        assert_eq!(fair_name("redisson_lock_timeout:{orders}"), "orders");
        assert_eq!(fair_name("redisson_lock_timeout:{a}b"), "{a}b");
        assert_eq!(permits_name("{jobs}:timeout"), "jobs");
        assert_eq!(permits_name("{a}b:timeout"), "{a}b");
    }

    #[test]
    fn owner_fields_are_told_from_other_hash_fields() {
        assert!(owner_field("2f1e0c4a-6a53-4f0e-9d55-8a3c3bd8c001:42"));
        assert!(owner_field("2f1e0c4a-6a53-4f0e-9d55-8a3c3bd8c001:42:write"));
        assert!(!owner_field("mode"));
        assert!(!owner_field("user:42"));
    }

    #[test]
    fn fair_gaps_of_both_wait_timeouts_are_a_mismatch() {
        let mut state = Survey::default();
        let at = |s: f64| (Vec::new(), s);
        fair_queue(
            "redisson_lock_timeout:{q}",
            &[at(1e12), at(1e12 + 5_000.0), at(1e12 + 305_000.0)],
            &mut state,
        );
        assert_eq!(state.findings.len(), 1);
        assert_eq!(state.findings[0].kind, "fair-wait-timeout-mismatch");
        let mut state = Survey::default();
        fair_queue(
            "redisson_lock_timeout:{q}",
            &[at(1e12), at(1e12 + 300_000.0), at(1e12 + 600_000.0)],
            &mut state,
        );
        assert!(state.findings.is_empty());
    }

    #[test]
    fn hex_permit_ids_warn_and_both_encodings_are_an_error() {
        let hex = b"0123456789abcdef0123456789abcdef".to_vec();
        let raw = vec![0xffu8; 16];
        let mut state = Survey::default();
        permit_ids("{s}:timeout", std::slice::from_ref(&raw), &mut state);
        assert!(state.findings.is_empty());
        permit_ids("{s}:timeout", std::slice::from_ref(&hex), &mut state);
        permit_ids("{s}:timeout", &[hex, raw], &mut state);
        let severities: Vec<_> = state.findings.iter().map(|f| f.severity).collect();
        assert_eq!(severities, [Severity::Warning, Severity::Error]);
    }
}
