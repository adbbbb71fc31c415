//! `watch NAME`: a lock's events as JSON lines (or text), from snapshots
//! (`Client::inspect`, every `--interval`) and the lock's release messages
//! (pub/sub), which tell a release from an expiry.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redisson_lock::{Client, LockInfo, WatchEvent};

use crate::args::{Output, Until, WatchArgs};
use crate::connect::Failure;

/// What a watch reports; the JSON line's `event`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EventKind {
    Acquired,
    Reentered,
    Released,
    Expired,
    HolderChanged,
    QueueJoined,
    QueueLeft,
}

impl EventKind {
    fn name(self) -> &'static str {
        match self {
            EventKind::Acquired => "acquired",
            EventKind::Reentered => "reentered",
            EventKind::Released => "released",
            EventKind::Expired => "expired",
            EventKind::HolderChanged => "holder_changed",
            EventKind::QueueJoined => "queue_joined",
            EventKind::QueueLeft => "queue_left",
        }
    }
}

/// Counts the release messages of `name` (its lock channel's and its
/// read/write channel's), heard on the client's own subscriber through the
/// library's watches, so in every topology, flavour and over TLS; `None`
/// when no watch could be started. The watches live as long as the count's
/// threads, that is as long as the process.
fn release_messages(client: &Client, name: &str) -> Option<Arc<AtomicU64>> {
    let count = Arc::new(AtomicU64::new(0));
    for watch in [client.watch_lock(name), client.watch_read_write_lock(name)] {
        let watch = watch.ok()?;
        let seen = Arc::clone(&count);
        thread::Builder::new()
            .name("watch-releases".into())
            .spawn(move || {
                for event in watch.events() {
                    if event == WatchEvent::Released {
                        seen.fetch_add(1, Ordering::AcqRel);
                    }
                }
            })
            .ok()?;
    }
    Some(count)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `ms` since the Unix epoch as UTC, to the millisecond:
/// `2026-11-28T04:15:03.120Z` (RFC 3339), what a person reads in `watch`'s
/// and `inspect`'s text. Before 1970 it is the number itself.
pub fn utc_text(ms: i64) -> String {
    if ms < 0 {
        return format!("{ms} ms");
    }
    let (days, rest) = (ms / 86_400_000, ms % 86_400_000);
    let (hour, minute) = (rest / 3_600_000, rest % 3_600_000 / 60_000);
    let (second, milli) = (rest % 60_000 / 1000, rest % 1000);
    // Howard Hinnant's civil_from_days: the proleptic Gregorian date of a
    // day count since 1970-01-01.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z")
}

fn holders(info: &LockInfo) -> BTreeMap<String, u64> {
    info.holders.iter().map(|h| (h.field(), h.count)).collect()
}

fn queue(info: &LockInfo) -> Vec<String> {
    info.queue.iter().map(|w| w.field()).collect()
}

struct Printer {
    output: Output,
    name: String,
}

impl Printer {
    fn emit(&self, kind: EventKind, fields: serde_json::Value) {
        let mut line = serde_json::json!({
            "event": kind.name(),
            "name": self.name,
            "time_ms": now_ms(),
        });
        if let (Some(line), Some(fields)) = (line.as_object_mut(), fields.as_object()) {
            for (k, v) in fields {
                line.insert(k.clone(), v.clone());
            }
        }
        match self.output {
            Output::Json => println!("{line}"),
            Output::Text => {
                let value = |v: &serde_json::Value| match v {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Array(items) => items
                        .iter()
                        .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
                        .collect::<Vec<_>>()
                        .join(","),
                    other => other.to_string(),
                };
                let detail: Vec<String> = fields
                    .as_object()
                    .map(|o| o.iter().map(|(k, v)| format!("{k}={}", value(v))).collect())
                    .unwrap_or_default();
                let at = i64::try_from(now_ms()).unwrap_or(i64::MAX);
                println!("{} {} {}", utc_text(at), kind.name(), detail.join(" "));
            }
        }
    }
}

/// `watch`; 0 when `--until` was met (or never asked), 1 on `--timeout`.
pub fn watch(client: &Client, args: &WatchArgs, output: Output) -> Result<u8, Failure> {
    let started = Instant::now();
    let deadline = args.timeout.map(|t| started + t);
    let messages = release_messages(client, &args.name);
    let printer = Printer {
        output,
        name: args.name.clone(),
    };
    let mut prev = client.inspect(&args.name)?;
    let mut prev_at = Instant::now();
    match args.until {
        Some(Until::Free) if !prev.locked => return Ok(0),
        Some(Until::Locked) if prev.locked => return Ok(0),
        _ => {}
    }
    let mut seen = messages.as_ref().map_or(0, |m| m.load(Ordering::Acquire));
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(1);
        }
        thread::sleep(args.interval);
        let cur = client.inspect(&args.name)?;
        let cur_at = Instant::now();
        let released = |seen: &mut u64| {
            let Some(m) = &messages else { return false };
            let mut now = m.load(Ordering::Acquire);
            if now == *seen {
                // A release message is on its way before the snapshot's
                // reply; give the subscriber thread a moment to count it.
                thread::sleep(Duration::from_millis(30));
                now = m.load(Ordering::Acquire);
            }
            let any = now != *seen;
            *seen = now;
            any
        };
        let mut events = 0;
        let before = holders(&prev);
        let after = holders(&cur);
        let gone: Vec<&String> = before.keys().filter(|f| !after.contains_key(*f)).collect();
        let came: Vec<&String> = after.keys().filter(|f| !before.contains_key(*f)).collect();
        // No message and a lease that still had time: released anyway (a
        // fair lock without waiters and a spin lock publish nothing).
        let ttl_left = prev
            .ttl
            .map(|t| t.saturating_sub(cur_at - prev_at))
            .unwrap_or(Duration::MAX);
        let early = ttl_left > args.interval + Duration::from_millis(500);
        if !gone.is_empty() && !came.is_empty() && !released(&mut seen) && !early {
            printer.emit(
                EventKind::HolderChanged,
                serde_json::json!({"from": gone, "to": came}),
            );
            events += 1;
        } else {
            for field in &gone {
                let kind = if released(&mut seen) || early {
                    EventKind::Released
                } else {
                    EventKind::Expired
                };
                printer.emit(kind, serde_json::json!({"holder": field}));
                events += 1;
            }
            for field in &came {
                printer.emit(
                    EventKind::Acquired,
                    serde_json::json!({"holder": field, "count": after[*field]}),
                );
                events += 1;
            }
        }
        for (field, count) in &after {
            match before.get(field) {
                Some(old) if count > old => {
                    printer.emit(
                        EventKind::Reentered,
                        serde_json::json!({"holder": field, "count": count}),
                    );
                    events += 1;
                }
                Some(old) if count < old => {
                    printer.emit(
                        EventKind::Released,
                        serde_json::json!({"holder": field, "count": count}),
                    );
                    events += 1;
                }
                _ => {}
            }
        }
        let (q_before, q_after) = (queue(&prev), queue(&cur));
        for field in q_after.iter().filter(|f| !q_before.contains(f)) {
            let position = q_after.iter().position(|f| f == field).unwrap_or(0) + 1;
            printer.emit(
                EventKind::QueueJoined,
                serde_json::json!({"waiter": field, "position": position}),
            );
            events += 1;
        }
        for field in q_before.iter().filter(|f| !q_after.contains(f)) {
            printer.emit(EventKind::QueueLeft, serde_json::json!({"waiter": field}));
            events += 1;
        }
        // Messages of this round are accounted for.
        if let Some(m) = &messages {
            seen = m.load(Ordering::Acquire);
        }
        match args.until {
            Some(Until::Free) if !cur.locked => return Ok(0),
            Some(Until::Locked) if cur.locked => return Ok(0),
            Some(Until::Changed) if events > 0 => return Ok(0),
            _ => {}
        }
        prev = cur;
        prev_at = cur_at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_utc_rfc3339() {
        assert_eq!(utc_text(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_text(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(utc_text(1_795_839_303_120), "2026-11-28T04:15:03.120Z");
        assert_eq!(utc_text(-5), "-5 ms");
    }
}
