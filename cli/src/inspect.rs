//! `inspect`, `list` and `force-unlock`.

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Write};
use std::time::Duration;

use redisson_lock::{Client, HolderProcess, HolderSide, LockInfo, LockKind, LockSummary, RwMode};

use crate::args::Output;
use crate::connect::{EX_USAGE, Failure};

/// The kind as the JSON names it (`kind`, and `mode` for a read/write lock).
pub fn kind_text(kind: LockKind) -> String {
    match kind {
        LockKind::Unknown => "unknown".into(),
        LockKind::Reentrant => "reentrant".into(),
        LockKind::Fair => "fair".into(),
        LockKind::Fenced => "fenced".into(),
        LockKind::ReadWrite { mode: RwMode::Read } => "read_write (read)".into(),
        LockKind::ReadWrite {
            mode: RwMode::Write,
        } => "read_write (write)".into(),
        LockKind::Counter { value } => format!("counter ({value})"),
        LockKind::PermitExpirableSemaphore { available } => {
            format!("permit_expirable_semaphore ({available} available)")
        }
        _ => "other".into(),
    }
}

fn ttl_text(ttl: Option<Duration>, persistent: bool) -> String {
    match ttl {
        Some(ttl) => format!("{} ms", ttl.as_millis()),
        None if persistent => "none (persistent)".into(),
        None => "-".into(),
    }
}

fn print_json(value: &impl serde::Serialize) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Failure::new(crate::connect::EX_SOFTWARE, e.to_string()))?;
    println!("{text}");
    Ok(())
}

/// `inspect NAME`.
pub fn inspect(client: &Client, name: &str, output: Output) -> Result<u8, Failure> {
    let info = client.inspect(name)?;
    // Best effort: an ACL without `client|list` leaves the holders unnamed.
    let processes = if info.holders.is_empty() && info.queue.is_empty() {
        Ok(BTreeMap::new())
    } else {
        client.identify_holders(&info)
    };
    if output == Output::Json {
        let mut json = serde_json::to_value(&info)
            .map_err(|e| Failure::new(crate::connect::EX_SOFTWARE, e.to_string()))?;
        if let (Ok(processes), Some(object)) = (&processes, json.as_object_mut()) {
            let processes: serde_json::Map<_, _> = processes
                .iter()
                .map(|(id, p)| {
                    let process = serde_json::json!({
                        "pid": p.pid,
                        "application": p.application,
                        "addresses": p.addresses,
                    });
                    (id.clone(), process)
                })
                .collect();
            object.insert("processes".into(), processes.into());
        }
        print_json(&json)?;
        return Ok(0);
    }
    print!("{}", text(&info));
    print!("{}", who_lines(&info, processes.as_ref().ok()));
    Ok(0)
}

/// One `who` line per holder: its process, application and addresses when
/// it is a client of this crate (`None`: `CLIENT LIST` was refused).
fn who_lines(info: &LockInfo, processes: Option<&BTreeMap<String, HolderProcess>>) -> String {
    let mut out = String::new();
    for holder in &info.holders {
        let who = match processes.map(|p| p.get(&holder.client_id)) {
            Some(Some(p)) => {
                let application = p
                    .application
                    .as_deref()
                    .map(|a| format!(", application {a}"))
                    .unwrap_or_default();
                format!("pid {}{application}, at {}", p.pid, p.addresses.join(" "))
            }
            Some(None) => "not a redisson-lock client with a named connection here (a Redisson \
                           client does not tie its id to its connections): unknown"
                .into(),
            None => "unknown (CLIENT LIST refused)".into(),
        };
        out.push_str(&format!("{:<10} {}: {who}\n", "who", holder.field()));
    }
    out
}

/// The text form of `info`.
pub fn text(info: &LockInfo) -> String {
    let mut out = String::new();
    let line = |out: &mut String, key: &str, value: &str| {
        out.push_str(&format!("{key:<10} {value}\n"));
    };
    line(&mut out, "name", &info.name);
    line(&mut out, "kind", &kind_text(info.kind));
    match info.kind {
        // A synchronizer is not "locked": its permits (or count) say how
        // busy it is.
        LockKind::PermitExpirableSemaphore { .. } => {
            if let Some(counts) = crate::permits::counts(info) {
                line(&mut out, "permits", &crate::permits::counts_text(counts));
            }
        }
        LockKind::Counter { value } => line(
            &mut out,
            "count",
            &format!("{value} (a semaphore's available permits, or a latch's count)"),
        ),
        _ => line(&mut out, "locked", if info.locked { "yes" } else { "no" }),
    }
    line(&mut out, "ttl", &ttl_text(info.ttl, info.persistent));
    if let Some(token) = info.token {
        line(&mut out, "token", &token.to_string());
    }
    for holder in &info.holders {
        let side = match holder.side {
            HolderSide::Read => " (reader)",
            HolderSide::Write => " (writer)",
            _ => "",
        };
        let mut text = format!(
            "{} x{}{side}  client {} thread {}",
            holder.field(),
            holder.count,
            holder.client_id,
            holder.thread_id
        );
        if !holder.marker_ttls.is_empty() {
            let markers: Vec<String> = holder
                .marker_ttls
                .iter()
                .map(|t| t.map_or("-".into(), |t| format!("{} ms", t.as_millis())))
                .collect();
            text.push_str(&format!("  markers [{}]", markers.join(", ")));
        }
        if holder.lacks_live_marker() {
            text.push_str("  (no live marker: a 4.x read unlock deletes the lock)");
        }
        line(&mut out, "holder", &text);
    }
    for (i, waiter) in info.queue.iter().enumerate() {
        let remaining = waiter
            .remaining_ms
            .map_or("-".into(), |ms| format!("{ms} ms left"));
        let deadline = waiter
            .deadline_ms
            .map_or("-".into(), crate::watch::utc_text);
        line(
            &mut out,
            "queued",
            &format!(
                "{}. {}  deadline {deadline} ({remaining})",
                i + 1,
                waiter.field()
            ),
        );
    }
    out.push_str(&permit_lines(info));
    out
}

/// One `permit` line per acquired permit of a permit-expirable semaphore:
/// its id and expiry (UTC, and what is left of its lease).
pub fn permit_lines(info: &LockInfo) -> String {
    let mut out = String::new();
    for permit in &info.permits {
        let expiry = match (permit.expiry_ms, permit.remaining_ms) {
            (Some(at), Some(left)) if left < 0 => {
                format!("expired {} (not yet reclaimed)", crate::watch::utc_text(at))
            }
            (Some(at), Some(left)) => {
                format!("expires {} ({left} ms left)", crate::watch::utc_text(at))
            }
            (Some(at), None) => format!("expires {}", crate::watch::utc_text(at)),
            _ => "permanent".into(),
        };
        let form = if permit.stored_as_hex {
            "  (stored as hex text, Redisson <= 3.16.8)"
        } else {
            ""
        };
        out.push_str(&format!("{:<10} {}  {expiry}{form}\n", "permit", permit.id));
    }
    out
}

/// What `run` says when NAME is busy: who holds it (one more snapshot), so
/// that `-v` (or any caller) can name the holder, as `inspect` would:
/// "`orders` is busy: held by <client id>:<thread> (x1), ttl 29512 ms". For
/// a semaphore, its permits. Falls back to "`NAME` is busy" when the
/// snapshot cannot be had.
///
/// For run.rs (not edited here): `Ctx::busy` can print
/// `crate::inspect::busy_message(client, &self.args.name)` instead of its
/// fixed line.
pub fn busy_message(client: &Client, name: &str) -> String {
    let Ok(info) = client.inspect(name) else {
        return format!("`{name}` is busy");
    };
    if let Some(counts) = crate::permits::counts(&info) {
        return format!("`{name}` is busy: {}", crate::permits::counts_text(counts));
    }
    let holders: Vec<String> = info
        .holders
        .iter()
        .map(|h| format!("{} (x{})", h.field(), h.count))
        .collect();
    if holders.is_empty() {
        return format!("`{name}` is busy (free again now)");
    }
    format!(
        "`{name}` is busy: held by {}, ttl {}",
        holders.join(", "),
        ttl_text(info.ttl, info.persistent)
    )
}

/// `list --pattern GLOB`.
pub fn list(client: &Client, pattern: &str, output: Output) -> Result<u8, Failure> {
    let mut found: Vec<LockSummary> = Vec::new();
    for summary in client.scan_locks(pattern).with_synchronizers() {
        let summary = summary?;
        if output == Output::Text {
            // A semaphore's busy-ness is its permits, not holders of a hash:
            // `permits=2/5` (taken of the total), one more snapshot each.
            let (state, who) = match summary.kind {
                LockKind::PermitExpirableSemaphore { .. } => {
                    let counts = crate::permits::counts(&client.inspect(&summary.name)?);
                    let who = counts.map_or_else(
                        || "permits=-".to_owned(),
                        |c| format!("permits={}/{}", c.acquired, c.total),
                    );
                    ("-", who)
                }
                LockKind::Counter { value } => ("-", format!("count={value}")),
                _ if summary.locked => ("locked", format!("holders={}", summary.holders)),
                _ => ("free", format!("holders={}", summary.holders)),
            };
            println!(
                "{}\t{}\t{state}\t{who}\tttl={}",
                summary.name,
                kind_text(summary.kind),
                ttl_text(summary.ttl, false)
            );
        }
        found.push(summary);
    }
    if output == Output::Json {
        print_json(&found)?;
    }
    Ok(0)
}

/// `force-unlock NAME [--if-owner OWNER] [--yes]`: 0 when freed, 1 when
/// there was nothing to free (or another owner holds it).
pub fn force_unlock(
    client: &Client,
    name: &str,
    if_owner: Option<&str>,
    yes: bool,
    output: Output,
) -> Result<u8, Failure> {
    let info = client.inspect(name)?;
    if !yes {
        if !std::io::stdin().is_terminal() {
            return Err(Failure::new(
                EX_USAGE,
                "force-unlock asks for confirmation on a terminal; pass --yes otherwise",
            ));
        }
        eprint!("{}", text(&info));
        eprint!("force-unlock `{name}`? [y/N] ");
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            eprintln!("redisson-lock: not unlocked");
            return Ok(1);
        }
    }
    let write_owner = if_owner.is_some_and(|o| o.ends_with(":write"));
    let freed = match info.kind {
        LockKind::PermitExpirableSemaphore { .. } => {
            return force_delete_semaphore(client, &info, if_owner, output);
        }
        LockKind::Counter { value } => {
            return Err(Failure::new(
                EX_USAGE,
                format!(
                    "`{name}` is a counter ({value}) with nothing out: a semaphore's available \
                     permits or a latch's count, not a lock, so there is nothing to force-unlock; \
                     `redisson-lock permits {name} --set N` resizes a semaphore"
                ),
            ));
        }
        LockKind::Fair => unlock(&client.fair_lock(name), if_owner)?,
        LockKind::Fenced => unlock(&client.fenced_lock(name), if_owner)?,
        LockKind::ReadWrite { mode } => {
            let rw = client.read_write_lock(name);
            if write_owner || (if_owner.is_none() && mode == RwMode::Write) {
                unlock(&rw.write_lock(), if_owner)?
            } else {
                unlock(&rw.read_lock(), if_owner)?
            }
        }
        _ => unlock(&client.lock(name), if_owner)?,
    };
    if output == Output::Json {
        println!(
            "{}",
            serde_json::json!({"name": name, "unlocked": freed, "if_owner": if_owner})
        );
    } else if freed {
        println!("{name}: unlocked");
    } else {
        println!(
            "{name}: not unlocked ({})",
            if if_owner.is_some() {
                "free, or held by another owner"
            } else {
                "not locked"
            }
        );
    }
    Ok(if freed { 0 } else { 1 })
}

/// `force-unlock` of a permit-expirable semaphore (what `run --permits`
/// takes): deletes it, counter and acquired permits alike. The jobs holding
/// permits learn it at their next renewal (within a third of their lease)
/// and are stopped; the next `run --permits N` sets it up again with N.
fn force_delete_semaphore(
    client: &Client,
    info: &LockInfo,
    if_owner: Option<&str>,
    output: Output,
) -> Result<u8, Failure> {
    let name = info.name.as_str();
    if if_owner.is_some() {
        return Err(Failure::new(
            EX_USAGE,
            format!(
                "`{name}` is a permit-expirable semaphore: --if-owner applies to locks only \
                 (force-unlock without it deletes the semaphore; `permits {name} --set N` resizes it)"
            ),
        ));
    }
    let before = crate::permits::counts(info);
    let deleted = client.permit_expirable_semaphore(name).delete()?;
    if output == Output::Json {
        println!(
            "{}",
            serde_json::json!({"name": name, "unlocked": deleted, "deleted_semaphore": deleted})
        );
    } else if deleted {
        println!(
            "{name}: semaphore deleted ({}); the next `run --permits N {name}` sets it up with N",
            before.map_or_else(|| "-".into(), crate::permits::counts_text)
        );
    } else {
        println!("{name}: not unlocked (no such semaphore)");
    }
    Ok(if deleted { 0 } else { 1 })
}

fn unlock<K: redisson_lock::Kind>(
    lock: &redisson_lock::Lock<K>,
    if_owner: Option<&str>,
) -> Result<bool, Failure> {
    Ok(match if_owner {
        Some(owner) => lock.force_unlock_owned_by(owner)?,
        None => lock.force_unlock()?,
    })
}
