//! [`Client::doctor`]: a read-only look over a server's Redisson keys,
//! channels and script cache for what silently breaks a fleet of Java and
//! Rust lock users (split pub/sub flavours, permit ids in two encodings, a
//! reader whose markers are gone, fair waiters queued with different wait
//! timeouts, ...). The checks of one key are in `checks`.

use std::fmt;
use std::sync::Arc;

use super::Client;
use crate::engine::Engine;
use crate::error::Result;
use crate::net::pool::{Pool, RECONNECT_GRACE};

mod checks;
mod scripts;

/// How bad a [`Finding`] is. Ordered: `Info < Warning < Error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Severity {
    /// Worth knowing; nothing breaks.
    Info,
    /// Something may break, or breaks under conditions the doctor cannot
    /// see (which versions write, which wait timeouts are used).
    Warning,
    /// Something is broken now: waiters that will not be woken, a lock a
    /// writer can take while a reader holds it, permits nobody can release.
    Error,
}

impl Severity {
    /// `info`, `warning` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A range of Redisson releases, both ends included.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VersionRange {
    /// The oldest release.
    pub from: String,
    /// The newest release.
    pub to: String,
}

/// One thing the doctor found. The `kind`s are stable names (docs/operating.md,
/// "redisson-lock doctor"): `redisson-versions`, `pubsub-flavour-split`,
/// `hex-permit-ids`, `reader-without-marker`, `fair-wait-timeout-mismatch`,
/// `stale-fair-waiter`, `clock-skew`, `scan-incomplete`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Finding {
    /// What was found (one of the names above).
    pub kind: &'static str,
    /// How bad it is.
    pub severity: Severity,
    /// The key (lock or synchronizer name) it concerns, if one.
    pub name: Option<String>,
    /// What was seen, for a person.
    pub detail: String,
    /// What to do about it.
    pub advice: String,
    /// For `redisson-versions`: the release ranges whose scripts the server
    /// ran.
    pub ranges: Vec<VersionRange>,
}

impl Finding {
    pub(crate) fn new(
        kind: &'static str,
        severity: Severity,
        name: Option<&str>,
        detail: String,
        advice: &str,
    ) -> Finding {
        Finding {
            kind,
            severity,
            name: name.map(str::to_owned),
            detail,
            advice: advice.to_owned(),
            ranges: Vec::new(),
        }
    }
}

/// What [`Doctor::run`] found.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DoctorReport {
    /// Every finding, errors first.
    pub findings: Vec<Finding>,
    /// The masters read (one outside a cluster).
    pub masters: usize,
    /// The keys of the types looked at (hashes and sorted sets) that `SCAN`
    /// returned.
    pub keys_scanned: u64,
    /// About how many keys the server walked through for it: each `SCAN`
    /// page's `COUNT`, over every pass (one per key type) and master. What
    /// [`Doctor::max_keys`] bounds.
    pub keys_examined: u64,
    /// `false` when the `--max-keys` budget ([`Doctor::max_keys`]) stopped
    /// the scan before every key was seen (a `scan-incomplete` finding
    /// says so too).
    pub complete: bool,
}

impl DoctorReport {
    /// The worst severity found, `None` when nothing was.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }
}

/// A doctor run being set up; from [`Client::doctor`].
pub struct Doctor {
    engine: Arc<Engine>,
    max_keys: u64,
    page_size: u32,
    progress: Option<Box<dyn FnMut(u64)>>,
}

impl fmt::Debug for Doctor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Doctor")
            .field("max_keys", &self.max_keys)
            .field("page_size", &self.page_size)
            .finish_non_exhaustive()
    }
}

/// The default key budget: ten million keys examined, that is five million
/// keys on a server (two `SCAN` passes, hashes then sorted sets; a million
/// took 3.4 s on loopback, docs/operating.md).
pub const DEFAULT_DOCTOR_MAX_KEYS: u64 = 10_000_000;

impl Doctor {
    /// Stops scanning once the server walked through about `keys` keys
    /// (each `SCAN` page counts its `COUNT`, over every master and both key
    /// types); the report then says it is incomplete. Default
    /// [`DEFAULT_DOCTOR_MAX_KEYS`].
    #[must_use = "this returns the changed doctor"]
    pub fn max_keys(mut self, keys: u64) -> Doctor {
        self.max_keys = keys;
        self
    }

    /// The `COUNT` hint of each `SCAN` page (at least 1; default 1000).
    #[must_use = "this returns the changed doctor"]
    pub fn page_size(mut self, count: u32) -> Doctor {
        self.page_size = count.max(1);
        self
    }

    /// Calls `progress` with the keys examined so far after each `SCAN` page
    /// (for a progress line on a terminal).
    #[must_use = "this returns the changed doctor"]
    pub fn on_progress(mut self, progress: impl FnMut(u64) + 'static) -> Doctor {
        self.progress = Some(Box::new(progress));
        self
    }

    /// Reads every master and reports. Writes nothing: `SCAN` with `TYPE`
    /// filters, and per page of keys one pipelined round trip of reads
    /// (`HGETALL`, `PTTL`, `ZRANGE`, `STRLEN`); then `PUBSUB CHANNELS` and
    /// `SHARDCHANNELS`, `SCRIPT EXISTS` over the table of Redisson's script
    /// hashes, and `TIME`, once per master. No `KEYS`, no `SCRIPT LOAD`, no
    /// script.
    pub fn run(mut self) -> Result<DoctorReport> {
        self.engine.check_process()?;
        let pools = self.engine.topology.master_pools()?;
        let mut state = checks::Survey::default();
        let mut scanned = 0u64;
        let mut examined = 0u64;
        let mut complete = true;
        'masters: for pool in &pools {
            checks::per_master(pool, &mut state)?;
            for key_type in ["hash", "zset"] {
                let mut cursor = 0;
                loop {
                    if examined >= self.max_keys {
                        complete = false;
                        break 'masters;
                    }
                    let (next, keys) =
                        self.engine
                            .scan_page(pool, cursor, "*", self.page_size, Some(key_type))?;
                    scanned += u64::try_from(keys.len()).unwrap_or(u64::MAX);
                    examined += u64::from(self.page_size);
                    checks::page(pool, key_type, &keys, &mut state)?;
                    if let Some(progress) = &mut self.progress {
                        progress(examined);
                    }
                    if next == 0 {
                        break;
                    }
                    cursor = next;
                }
            }
        }
        let mut findings = state.finish(pools.len());
        if !complete {
            findings.push(Finding::new(
                "scan-incomplete",
                Severity::Info,
                None,
                format!("stopped after examining about {examined} keys (the key budget)"),
                "raise the budget (--max-keys) to look at every key",
            ));
        }
        findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
        Ok(DoctorReport {
            findings,
            masters: pools.len(),
            keys_scanned: scanned,
            keys_examined: examined,
            complete,
        })
    }
}

/// A pooled connection of `pool`, waiting for a restarting server as
/// reads elsewhere do.
fn connection(pool: &Pool) -> Result<crate::net::pool::Checkout<'_>> {
    pool.get_within(RECONNECT_GRACE)
}

impl Client {
    /// A read-only check of this server (every master of a cluster) for
    /// what breaks between Java and Rust lock users: see [`Doctor::run`]
    /// for what it reads and [`Finding`] for what it reports. Cheap on a
    /// server with millions of keys (`SCAN` by type, pipelined reads, a key
    /// budget). No I/O until [`Doctor::run`].
    ///
    /// ```no_run
    /// # fn main() -> redisson_lock::Result<()> {
    /// let client = redisson_lock::Client::open("redis://127.0.0.1:6379")?;
    /// let report = client.doctor().max_keys(100_000).run()?;
    /// for finding in &report.findings {
    ///     println!("{} {} {:?}: {}", finding.severity, finding.kind, finding.name, finding.detail);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn doctor(&self) -> Doctor {
        Doctor {
            engine: Arc::clone(&self.engine),
            max_keys: DEFAULT_DOCTOR_MAX_KEYS,
            page_size: 1000,
            progress: None,
        }
    }
}
