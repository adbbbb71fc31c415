//! `permits NAME [--set N]`, and the warning when `run --permits N` meets a
//! semaphore set up with another total.

use redisson_lock::{Client, LockInfo, LockKind};

use crate::args::Output;
use crate::connect::{EX_USAGE, Failure};

/// A permit-expirable semaphore's permits as an operator reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    /// Available + acquired (expired permits not yet reclaimed included).
    pub total: i64,
    /// Free to take.
    pub available: i64,
    /// Taken (by a `run --permits` or anyone else).
    pub acquired: i64,
}

/// The counts of `info`, a snapshot of a permit-expirable semaphore; `None`
/// for any other kind. A semaphore with no permit out is a bare counter
/// (its timeout set is gone), which `inspect` cannot tell from a latch or
/// an `RSemaphore`: counted as all available.
pub fn counts(info: &LockInfo) -> Option<Counts> {
    match info.kind {
        LockKind::Counter { value } => Some(Counts {
            total: value,
            available: value,
            acquired: 0,
        }),
        LockKind::PermitExpirableSemaphore { available } => {
            let acquired = i64::try_from(info.permits.len()).unwrap_or(i64::MAX);
            Some(Counts {
                total: available.saturating_add(acquired),
                available,
                acquired,
            })
        }
        _ => None,
    }
}

/// The one-line form: `2 of 5 taken, 3 available`.
pub fn counts_text(counts: Counts) -> String {
    format!(
        "{} of {} taken, {} available",
        counts.acquired, counts.total, counts.available
    )
}

/// `permits NAME [--set N]`.
pub fn permits(
    client: &Client,
    name: &str,
    set: Option<u32>,
    output: Output,
) -> Result<u8, Failure> {
    let info = client.inspect(name)?;
    let exists = match info.kind {
        LockKind::PermitExpirableSemaphore { .. } | LockKind::Counter { .. } => true,
        // No key at all: `--set` creates it.
        LockKind::Unknown if !info.locked && info.permits.is_empty() => false,
        kind => {
            return Err(Failure::new(
                EX_USAGE,
                format!(
                    "`{name}` is a {}, not a permit-expirable semaphore (`run --permits`)",
                    crate::inspect::kind_text(kind)
                ),
            ));
        }
    };
    let before = counts(&info);
    let sem = client.permit_expirable_semaphore(name);
    if let Some(n) = set {
        sem.set_permits(n)?;
    }
    let after = if set.is_some() {
        counts(&client.inspect(name)?)
    } else {
        before
    };
    if output == Output::Json {
        let json = |c: Option<Counts>| {
            c.map(|c| {
                serde_json::json!({"total": c.total, "available": c.available, "acquired": c.acquired})
            })
        };
        println!(
            "{}",
            serde_json::json!({"name": name, "exists": exists || set.is_some(), "permits": json(after), "before": json(before), "set": set})
        );
        return Ok(0);
    }
    match (set, before, after) {
        (Some(n), Some(before), _) if before.total == i64::from(n) => {
            println!("{name}: already {n} permits ({})", counts_text(before));
        }
        (Some(n), Some(before), Some(after)) => println!(
            "{name}: permits set to {n}, was {} ({})",
            before.total,
            counts_text(after)
        ),
        (Some(n), None, after) => println!(
            "{name}: created with {n} permits ({})",
            after.map_or_else(|| "-".into(), counts_text)
        ),
        (None, Some(now), _) => {
            println!("{name}: {}", counts_text(now));
            print!("{}", crate::inspect::permit_lines(&info));
        }
        (None, None, _) => {
            println!(
                "{name}: no such semaphore (the first `run --permits N {name}` sets it up with N)"
            );
            return Ok(1);
        }
        (Some(_), Some(_), None) => println!("{name}: gone meanwhile"),
    }
    Ok(0)
}

/// The warning for `run --permits asked` when the semaphore `name` exists
/// with another total: it keeps its own (only the first caller sets it up,
/// and the key has no TTL), so say so and how to change it. Best effort:
/// `None` when it matches, does not exist yet, or cannot be read (the run
/// itself then reports the failure).
pub fn mismatch(client: &Client, name: &str, asked: u32) -> Option<String> {
    let total = counts(&client.inspect(name).ok()?)?.total;
    (total != i64::from(asked)).then(|| {
        format!(
            "redisson-lock: warning: the semaphore `{name}` already has {total} permits, not the \
             {asked} of --permits; it keeps {total} (only the first run sets the total). Change \
             it with `redisson-lock permits {name} --set {asked}`"
        )
    })
}
