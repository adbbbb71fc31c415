//! The command line: clap's derive API, with `env` fallbacks for the
//! connection options.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The README's "From the shell" section, in short: shown after `--help`.
const AFTER_HELP: &str = "\
Exit codes:
  0..     the job's own exit status (128+N when it was killed by signal N, or when
          signal N ended the wrapper while it released the lock)
  75      the lock was busy (-n, or -w ran out); change it with -E (-E 0: success)
  124     the lock was lost while the job ran: the job was signalled (--lost-exit-code)
  64      usage error, or options that cannot meet the kill-on-loss margin
  69      Redis unreachable      77  authentication or ACL refusal      78  configuration
  1       force-unlock changed nothing (free, or --if-owner no longer holds it);
          watch --timeout ran out; permits NAME found no such semaphore

Cron on several machines, run on one of them, never twice within 5 minutes:
  */5 * * * * redisson-lock run -n -E 0 --hold-at-least 4m nightly-report -- /opt/report.sh

The password comes from the URL (redis://:secret@host) or REDISSON_LOCK_URL /
REDIS_URL, never from a flag.

Shell completion: `redisson-lock completions bash > /etc/bash_completion.d/redisson-lock`
(zsh: a file `_redisson-lock` on $fpath; fish: ~/.config/fish/completions/redisson-lock.fish).";

/// Run a job under a Redisson lock (flock(1) across machines, with
/// kill-on-loss), and inspect, list, force-unlock and watch locks shared with
/// Java (Redisson) services.
#[derive(Debug, Parser)]
#[command(name = "redisson-lock", version, after_help = AFTER_HELP)]
pub struct Cli {
    /// How to reach Redis (shared by every subcommand).
    #[command(flatten)]
    pub conn: ConnArgs,

    /// Data on stdout as text (for people) or JSON (versioned, for scripts).
    #[arg(long, global = true, value_enum, default_value_t = Output::Text)]
    pub output: Output,

    /// Diagnostics on stderr: acquiring, renewals failing, signals sent.
    #[arg(short = 'v', long, global = true)]
    pub verbose: bool,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// `--output`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Aligned text.
    Text,
    /// JSON (one document, or one line per event for `watch`).
    Json,
}

/// The connection options, under their own heading in every subcommand's
/// help.
#[derive(Clone, Debug, Args)]
#[command(next_help_heading = "Connection options")]
pub struct ConnArgs {
    /// Redis URL (redis:// or rediss://, password inside); repeat it, or
    /// separate with commas, for cluster seeds or sentinels. Default: env
    /// REDISSON_LOCK_URL, then REDIS_URL, then redis://127.0.0.1:6379.
    #[arg(
        long,
        global = true,
        env = "REDISSON_LOCK_URL",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub url: Vec<String>,

    /// The URLs are seeds of a Redis Cluster.
    #[arg(long, global = true, conflicts_with = "sentinel")]
    pub cluster: bool,

    /// The URLs are sentinels; MASTER is the monitored master's name.
    #[arg(long, global = true, value_name = "MASTER")]
    pub sentinel: Option<String>,

    /// PEM file of the CA that signed the server's certificate (rediss://).
    #[arg(long, global = true, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,

    /// PEM client certificate chain for mutual TLS (with --tls-key).
    #[arg(long, global = true, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of --tls-cert.
    #[arg(long, global = true, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// How long a connect may take (e.g. 500ms, 2s).
    #[arg(long, global = true, value_name = "DUR", value_parser = parse_duration)]
    pub connect_timeout: Option<Duration>,

    /// How long a reply may take.
    #[arg(long, global = true, value_name = "DUR", value_parser = parse_duration)]
    pub response_timeout: Option<Duration>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run COMMAND while holding the lock NAME (or one permit of a semaphore).
    ///
    /// The job runs in a process group of its own. The lock is held until no
    /// process of that group is left: background processes the job started
    /// (`cmd &`) keep it held after the job's own process exits, unless
    /// --kill-group ends them. Processes that leave the group (setsid,
    /// setpgid: daemons) are not waited for. Job control works as with any
    /// command: when the job stops (Ctrl-Z, SIGTSTP to the job or to the
    /// wrapper, SIGTTIN), its whole group is stopped and the wrapper stops
    /// too; on SIGCONT (`fg`, `bg`) the job continues only if the lock is
    /// certainly still held (else its group is killed: --lost-exit-code). While
    /// stopped nothing renews the lease. INT, TERM, HUP or QUIT after the job
    /// is gone, while the lock is being released, end the wrapper at once
    /// (128+N); unless the release reached Redis, the lock expires with its lease.
    Run(RunArgs),
    /// Show who holds NAME: holders, TTL, kind, readers, fair queue, token,
    /// permits.
    Inspect {
        /// The lock's (or synchronizer's) name: its Redis key.
        name: String,
    },
    /// List the locks and synchronizers (semaphores, latches) matching a
    /// glob, on every master (SCAN, never KEYS).
    List {
        /// A Redis glob (`*`, `?`, `[...]`).
        #[arg(long, default_value = "*")]
        pattern: String,
    },
    /// Free NAME with its kind's own force unlock (waiters of every language
    /// wake at once; the holder learns it at its next renewal, within a
    /// third of its lease). A permit-expirable semaphore (`run --permits`) is
    /// deleted instead: the next `run --permits N` sets it up again with N.
    ForceUnlock {
        /// The lock's (or permit-expirable semaphore's) name.
        name: String,
        /// Only if this owner (`<client id>:<thread>`, as `inspect` shows it)
        /// still holds it; exit 1 and change nothing otherwise.
        #[arg(long, value_name = "OWNER")]
        if_owner: Option<String>,
        /// Do not ask for confirmation (needed when stdin is not a terminal).
        #[arg(short = 'y', long)]
        yes: bool,
    },
    /// Print NAME's events as they happen, one line each: by default text
    /// (`2026-11-28T04:15:03.120Z acquired holder=<client id>:<thread>
    /// count=1`, UTC), with `--output json` JSON lines (`time_ms` since the
    /// Unix epoch). Events: acquired, reentered, released, expired,
    /// holder_changed, queue_joined, queue_left.
    Watch(WatchArgs),
    /// Read the server (every master of a cluster) without writing anything
    /// and report what will break between its Java and Rust lock users:
    /// Redisson versions seen, split pub/sub flavours, hex permit ids,
    /// readers without markers, fair wait timeouts that differ. Exit 0 when
    /// nothing is a warning or an error, 1 when something is.
    Doctor {
        /// Stop once the server walked through about N keys (each SCAN
        /// page's COUNT, two passes: hashes, then sorted sets); the report
        /// then says it stopped early.
        #[arg(long, value_name = "N", default_value_t = redisson_lock::DEFAULT_DOCTOR_MAX_KEYS)]
        max_keys: u64,
    },
    /// Show or change the permits of the permit-expirable semaphore NAME
    /// (the one `run --permits N` takes from): total, available, acquired,
    /// and each acquired permit's expiry.
    Permits {
        /// The semaphore's name.
        name: String,
        /// Make the total N (Redisson's setPermits): permits are added or
        /// taken away from the available ones; permits out stay out.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        set: Option<u32>,
    },
    /// Print a shell completion script: bash, zsh, fish, elvish or
    /// powershell.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `run`'s options.
#[derive(Debug, Args)]
#[command(
    override_usage = "redisson-lock run [OPTIONS] NAME [--] COMMAND [ARGS]...\n       redisson-lock run [OPTIONS] NAME -c 'SHELL COMMAND'"
)]
pub struct RunArgs {
    /// Fail at once (exit with the conflict code) when the lock is busy.
    #[arg(short = 'n', long, conflicts_with = "wait")]
    pub nonblock: bool,

    /// Wait at most DUR for the lock (e.g. 10, 10s, 500ms, 2m), then fail
    /// with the conflict code. Default: wait as long as it takes.
    #[arg(short = 'w', long, value_name = "DUR", value_parser = parse_duration)]
    pub wait: Option<Duration>,

    /// Exit code when the lock is busy (sysexits' EX_TEMPFAIL); 0 makes
    /// "someone else ran it" a success.
    #[arg(short = 'E', long, value_name = "N", default_value_t = 75)]
    pub conflict_exit_code: u8,

    /// The lock type (Redisson's getLock, getFairLock, getFencedLock,
    /// getSpinLock, getReadWriteLock's readLock/writeLock).
    #[arg(long, value_enum, default_value_t = KindArg::Lock)]
    pub kind: KindArg,

    /// Shared: the read side of the read/write lock NAME (flock -s).
    #[arg(short = 's', long, conflicts_with_all = ["exclusive", "kind", "permits"])]
    pub shared: bool,

    /// Exclusive: the write side of the read/write lock NAME (flock -x).
    #[arg(short = 'x', long, conflicts_with_all = ["kind", "permits"])]
    pub exclusive: bool,

    /// Take one permit of the permit-expirable semaphore NAME of N permits
    /// instead of a lock: at most N copies of the job at once. The permit's
    /// lease is renewed while the job runs. N sets the semaphore up only
    /// when it does not exist yet (it has no TTL); a different existing
    /// total is kept, with a warning: `permits NAME --set N` changes it.
    #[arg(long, value_name = "N", conflicts_with = "kind", value_parser = clap::value_parser!(u32).range(1..))]
    pub permits: Option<u32>,

    /// The lease, renewed every third of it while the job runs (Redisson's
    /// lockWatchdogTimeout).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "30s")]
    pub watchdog_timeout: Duration,

    /// Keep the lock until DUR after it was taken even when the job ends
    /// sooner (its lease set to the rest), so that a late cron elsewhere
    /// does not run the job again (ShedLock's lockAtLeastFor).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub hold_at_least: Option<Duration>,

    /// When the job ends, hand the lock over instead of releasing it: stop
    /// renewing and leave it held for one lease (--watchdog-timeout), for
    /// a process that adopted it from $REDISSON_LOCK_HOLD to renew and
    /// release (Lock::adopt); nobody adopting, it expires then.
    #[arg(long, conflicts_with_all = ["hold_at_least", "permits"])]
    pub hand_off: bool,

    /// The signal sent to the job's process group when the lock is lost or
    /// its renewals stop (a name like TERM or SIGINT, or a number).
    #[arg(long, value_name = "SIG", default_value = "TERM", value_parser = parse_signal)]
    pub signal: i32,

    /// After --signal, SIGKILL the group this much later; always before
    /// the lease can have expired. Default: the lease's sixth, at most 5 s.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub kill_after: Option<Duration>,

    /// Exit code when the lock was lost while the job ran.
    #[arg(long, value_name = "N", default_value_t = 124)]
    pub lost_exit_code: u8,

    /// When the job's own process exits, end what is left of its process
    /// group (background processes): --signal, then SIGKILL --kill-after
    /// later, and release once none is left. Without it the lock is kept
    /// (renewed) until no process of the group is left, as flock(1) keeps
    /// its lock while any process holding the descriptor lives.
    #[arg(long)]
    pub kill_group: bool,

    /// Run this string with `sh -c` instead of COMMAND.
    #[arg(short = 'c', long = "command", value_name = "SHELL COMMAND")]
    pub shell: Option<String>,

    /// The lock's name (its Redis key), as Java's getLock(NAME) names it.
    pub name: String,

    /// The job and its arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub job: Vec<OsString>,
}

/// `--kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KindArg {
    /// The reentrant lock (RLock).
    Lock,
    /// The fair lock: first come, first served.
    Fair,
    /// The fenced lock: the token is in REDISSON_LOCK_TOKEN.
    Fenced,
    /// The spin lock (no pub/sub).
    Spin,
    /// The read side of a read/write lock (shared).
    Read,
    /// The write side of a read/write lock (exclusive).
    Write,
}

/// `watch`'s options.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The lock's name.
    pub name: String,
    /// Stop (exit 0) at the first time the lock is free, locked, or changes.
    #[arg(long, value_enum)]
    pub until: Option<Until>,
    /// Give up after DUR (exit 1).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// How often the lock is looked at.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "100ms")]
    pub interval: Duration,
}

/// `watch --until`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Until {
    /// Nobody holds it (at once if nobody does).
    Free,
    /// Someone holds it (at once if someone does).
    Locked,
    /// The first event.
    Changed,
}

/// A duration: `10` or `1.5` (seconds, as flock's -w), or with a unit:
/// `ms`, `s`, `m`, `h`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (e.g. 500ms, 10s, 2m, 1h, 10)"))?;
    let scale = match unit.trim() {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => return Err(format!("unknown unit `{other}` (ms, s, m, h)")),
    };
    Duration::try_from_secs_f64(value * scale).map_err(|e| format!("`{text}`: {e}"))
}

/// A signal by name (`TERM`, `SIGTERM`, `term`) or number.
pub fn parse_signal(text: &str) -> Result<i32, String> {
    if let Ok(number) = text.parse::<i32>() {
        return if (1..=64).contains(&number) {
            Ok(number)
        } else {
            Err(format!("no signal {number}"))
        };
    }
    let upper = text.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    SIGNALS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| *s)
        .ok_or_else(|| format!("unknown signal `{text}`"))
}

/// The signals worth naming.
const SIGNALS: [(&str, i32); 9] = [
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("USR2", libc::SIGUSR2),
    ("TERM", libc::SIGTERM),
    ("ALRM", libc::SIGALRM),
    ("CONT", libc::SIGCONT),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_flock_seconds_and_units() {
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("s").is_err());
    }

    #[test]
    fn signals_by_name_or_number() {
        assert_eq!(parse_signal("TERM"), Ok(libc::SIGTERM));
        assert_eq!(parse_signal("sigint"), Ok(libc::SIGINT));
        assert_eq!(parse_signal("9"), Ok(9));
        assert!(parse_signal("NOPE").is_err());
        assert!(parse_signal("0").is_err());
    }

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
