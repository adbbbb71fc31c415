//! The supervisor's command line: the usage line, `--kind`, the options
//! that exclude each other, the run's length and its log directory
//! (`Args::parse`), checked before anything starts; `main.rs` starts the
//! run from them. Also `arg_value`, which the worker's and the other
//! commands' arguments use too.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::LockKind;

impl LockKind {
    /// `--kind` from the arguments (`reentrant` when absent); `None` when unknown.
    pub fn from_args(args: &[String]) -> Option<LockKind> {
        match arg_value(args, "--kind").unwrap_or("reentrant") {
            "reentrant" => Some(LockKind::Reentrant),
            "rw" => Some(LockKind::Rw),
            "fair" => Some(LockKind::Fair),
            "semaphore" => Some(LockKind::Semaphore),
            "fenced" => Some(LockKind::Fenced),
            _ => None,
        }
    }
}

pub fn arg_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

/// The supervisor's arguments, checked.
pub struct Args {
    pub url: String,
    pub kind: LockKind,
    pub redis_pid: Option<u32>,
    pub cluster_dir: Option<PathBuf>,
    pub beyond_lease: bool,
    pub java_jars: Vec<PathBuf>,
    /// `--history <file>`, if given.
    pub history: Option<PathBuf>,
    /// How long the chaos lasts.
    pub chaos_for: Duration,
    pub log_dir: PathBuf,
}

impl Args {
    /// The supervisor's arguments; on a bad one, says why on stderr and
    /// returns the exit code (2).
    pub fn parse(args: &[String]) -> Result<Args, ExitCode> {
        let (Some(url), Some(kind)) = (
            arg_value(args, "--url").map(str::to_owned),
            LockKind::from_args(args),
        ) else {
            eprintln!(
                "usage: torture --url redis://127.0.0.1:<port>/ [--redis-pid <pid>] [--quick | --minutes <n>] [--beyond-lease | --cluster-dir <dir>] [--kind reentrant|rw|fair|semaphore|fenced [--java-jar <driver jar>]...] [--history <file>]\n\
                 torture check-history <file>...\n\
                 (scripts/torture.sh starts a throwaway server and passes these)"
            );
            return Err(ExitCode::from(2));
        };
        let redis_pid = arg_value(args, "--redis-pid").and_then(|p| p.parse::<u32>().ok());
        let cluster_dir = arg_value(args, "--cluster-dir").map(PathBuf::from);
        let beyond_lease = args.iter().any(|a| a == "--beyond-lease");
        if cluster_dir.is_some() && beyond_lease {
            eprintln!("torture: --beyond-lease is not supported with a cluster");
            return Err(ExitCode::from(2));
        }
        if kind == LockKind::Semaphore && (cluster_dir.is_some() || beyond_lease) {
            eprintln!("torture: --kind semaphore runs on a single server, within the lease only");
            return Err(ExitCode::from(2));
        }
        let java_jars: Vec<PathBuf> = args
            .windows(2)
            .filter(|w| w[0] == "--java-jar")
            .map(|w| PathBuf::from(&w[1]))
            .collect();
        if !matches!(kind, LockKind::Semaphore | LockKind::Fenced) && !java_jars.is_empty() {
            eprintln!("torture: --java-jar is for --kind semaphore or fenced");
            return Err(ExitCode::from(2));
        }
        let history_arg = arg_value(args, "--history").map(PathBuf::from);
        if kind == LockKind::Semaphore && history_arg.is_some() {
            eprintln!("torture: --history is for the locks, not --kind semaphore");
            return Err(ExitCode::from(2));
        }
        let chaos_for = if args.iter().any(|a| a == "--quick") {
            // A cluster run needs a few failovers of each kind.
            Duration::from_secs(if cluster_dir.is_some() { 75 } else { 30 })
        } else {
            let minutes = arg_value(args, "--minutes")
                .and_then(|m| m.parse::<f64>().ok())
                .unwrap_or(10.0);
            Duration::from_secs_f64(minutes.max(0.05) * 60.0)
        };
        let log_dir = arg_value(args, "--log-dir").map_or_else(
            || std::env::temp_dir().join(format!("redisson-lock-torture-{}", std::process::id())),
            PathBuf::from,
        );
        Ok(Args {
            url,
            kind,
            redis_pid,
            cluster_dir,
            beyond_lease,
            java_jars,
            history: history_arg,
            chaos_for,
            log_dir,
        })
    }
}
