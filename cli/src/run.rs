//! `redisson-lock run`: the job under a lock (or one permit of a
//! permit-expirable semaphore), killed when the lock is lost.

use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Kind, Lock, LockGuard, PermitExpirableSemaphore, PermitId};

use crate::args::{ConnArgs, KindArg, RunArgs};
use crate::child::{self, Event, Schedule};
use crate::connect::{self, EX_USAGE, Failure};

/// The environment variables the job gets.
pub const ENV_NAME: &str = "REDISSON_LOCK_NAME";
/// The owner field (`<client id>:<thread>`, `:write` for a writer) or, with
/// `--permits`, the permit id.
pub const ENV_OWNER: &str = "REDISSON_LOCK_OWNER";
/// A fenced lock's token.
pub const ENV_TOKEN: &str = "REDISSON_LOCK_TOKEN";
/// The job's environment: the hold, printable (`HoldToken`), for a process
/// to take it over with `Lock::adopt` (with `--hand-off`).
pub const ENV_HOLD: &str = "REDISSON_LOCK_HOLD";

/// The safety margin: SIGKILL goes out this long before the lease can have
/// expired. A tenth of the lease, at least 200 ms: it covers the clock-rate
/// difference between this host and Redis, the kill's delivery and a
/// scheduling delay of the wrapper.
pub fn margin(lease: Duration) -> Duration {
    (lease / 10).max(Duration::from_millis(200))
}

/// The default `--kill-after`: a sixth of the lease, at most 5 s.
pub fn default_kill_after(lease: Duration) -> Duration {
    (lease / 6).min(Duration::from_secs(5))
}

/// The schedule for `args`, or the usage failure when it cannot keep the
/// kill before the lease's end without signalling healthy jobs: the first
/// signal goes out `margin + kill_after` before the lease's end, which must
/// leave at least half the lease after each renewal (renewals run every
/// third of it, so a healthy renewal has a sixth of the lease to answer).
pub fn schedule(args: &RunArgs) -> Result<Schedule, Failure> {
    let lease = args.watchdog_timeout;
    if lease < Duration::from_millis(600) {
        return Err(Failure::new(
            EX_USAGE,
            "--watchdog-timeout must be at least 600ms",
        ));
    }
    let margin = margin(lease);
    let kill_after = args.kill_after.unwrap_or_else(|| default_kill_after(lease));
    if margin + kill_after > lease / 2 {
        return Err(Failure::new(
            EX_USAGE,
            format!(
                "--kill-after {kill_after:?} cannot be met: with a {lease:?} lease the job is \
                 signalled {margin:?} + the kill-after before the lease can run out, which must \
                 stay within half the lease; use --kill-after {:?} or less, or a longer \
                 --watchdog-timeout",
                (lease / 2).saturating_sub(margin)
            ),
        ));
    }
    Ok(Schedule {
        signal: args.signal,
        kill_after,
        margin,
    })
}

/// The job's program and arguments.
fn job(args: &RunArgs) -> Result<(OsString, Vec<OsString>), Failure> {
    match (&args.shell, args.job.split_first()) {
        (Some(shell), None) => Ok((
            OsString::from("/bin/sh"),
            vec![OsString::from("-c"), OsString::from(shell)],
        )),
        (None, Some((program, rest))) => Ok((program.clone(), rest.to_vec())),
        (Some(_), Some(_)) => Err(Failure::new(
            EX_USAGE,
            "give either -c or COMMAND, not both",
        )),
        (None, None) => Err(Failure::new(EX_USAGE, "no COMMAND to run (or -c)")),
    }
}

/// Runs `args`; the exit code.
pub fn run(conn: &ConnArgs, args: &RunArgs, verbose: bool) -> Result<u8, Failure> {
    let schedule = schedule(args)?;
    let program = job(args)?;
    let client = connect::client(conn, Some(args.watchdog_timeout))?;
    let ctx = Ctx {
        args,
        client: &client,
        program,
        schedule,
        verbose,
    };
    if let Some(permits) = args.permits {
        return run_permit(&ctx, client.permit_expirable_semaphore(&args.name), permits);
    }
    let kind = match (args.shared, args.exclusive) {
        (true, _) => KindArg::Read,
        (_, true) => KindArg::Write,
        _ => args.kind,
    };
    let name = args.name.as_str();
    match kind {
        KindArg::Lock => run_lock(&ctx, &client, client.lock(name), "", |_| None),
        KindArg::Fair => run_lock(&ctx, &client, client.fair_lock(name), "", |_| None),
        KindArg::Fenced => run_lock(&ctx, &client, client.fenced_lock(name), "", |g| {
            Some(g.token())
        }),
        KindArg::Spin => run_lock(&ctx, &client, client.spin_lock(name), "", |_| None),
        KindArg::Read => {
            let lock = client.read_write_lock(name).read_lock();
            run_lock(&ctx, &client, lock, "", |_| None)
        }
        KindArg::Write => {
            let lock = client.read_write_lock(name).write_lock();
            run_lock(&ctx, &client, lock, ":write", |_| None)
        }
    }
}

struct Ctx<'a> {
    args: &'a RunArgs,
    client: &'a Client,
    program: (OsString, Vec<OsString>),
    schedule: Schedule,
    verbose: bool,
}

impl Ctx<'_> {
    fn busy(&self) -> Result<u8, Failure> {
        if self.verbose {
            // Who holds it: one more snapshot, worth it only when asked.
            let busy = crate::inspect::busy_message(self.client, &self.args.name);
            eprintln!("redisson-lock: {busy}");
        }
        Ok(self.args.conflict_exit_code)
    }

    /// Spawns the job with `env` and supervises it; the outcome.
    fn job(
        &self,
        env: Vec<(String, String)>,
        events: (
            std::sync::mpsc::Sender<Event>,
            std::sync::mpsc::Receiver<Event>,
        ),
        valid_until: &dyn Fn() -> Instant,
    ) -> Result<child::Outcome, Failure> {
        let (tx, rx) = events;
        child::become_subreaper();
        child::forward_signals(tx.clone())
            .map_err(|e| Failure::new(connect::EX_SOFTWARE, format!("signal handlers: {e}")))?;
        let (program, args) = &self.program;
        let job = child::spawn(program, args, &env, tx).map_err(|e| {
            let code = match e.kind() {
                std::io::ErrorKind::NotFound => 127,
                std::io::ErrorKind::PermissionDenied => 126,
                _ => connect::EX_SOFTWARE,
            };
            Failure::new(
                code,
                format!("cannot run {}: {e}", program.to_string_lossy()),
            )
        })?;
        if self.verbose {
            eprintln!("redisson-lock: job started, pid {}", job.pid());
        }
        if job.give_terminal() {
            // Not without the terminal: a stop that came first (SIGTSTP to
            // the job) must stay.
            job.signal_group(libc::SIGCONT);
        }
        let supervision = child::Supervision {
            valid_until,
            schedule: self.schedule,
            kill_group: self.args.kill_group,
            verbose: self.verbose,
        };
        let outcome = child::supervise(&job, &rx, &supervision);
        job.take_terminal();
        child::end_on_signals(rx, self.args.name.clone(), outcome.ending);
        Ok(outcome)
    }

    /// The exit code for `outcome`, with a diagnostic for a loss.
    fn exit(&self, outcome: &child::Outcome) -> u8 {
        match &outcome.lost {
            Some(reason) => {
                eprintln!(
                    "redisson-lock: the lock `{}` was lost while the job ran ({reason}): the job was stopped",
                    self.args.name
                );
                self.args.lost_exit_code
            }
            None => child::exit_code(outcome.status),
        }
    }

    /// How much of `--hold-at-least` is left after `since`.
    fn rest(&self, since: Instant) -> Option<Duration> {
        let min = self.args.hold_at_least?;
        let rest = min.checked_sub(since.elapsed())?;
        (rest >= Duration::from_millis(1)).then_some(rest)
    }
}

fn run_lock<K: Kind>(
    ctx: &Ctx<'_>,
    client: &Client,
    lock: Lock<K>,
    field_suffix: &str,
    token: impl Fn(&LockGuard<K>) -> Option<u64>,
) -> Result<u8, Failure> {
    let args = ctx.args;
    let guard = if args.nonblock {
        lock.try_lock()?
    } else if let Some(wait) = args.wait {
        lock.try_lock_for(wait)?
    } else {
        Some(lock.lock()?)
    };
    let Some(guard) = guard else {
        return ctx.busy();
    };
    let taken = Instant::now();
    let owner = format!("{}{field_suffix}", client.owner_field());
    if ctx.verbose {
        eprintln!("redisson-lock: `{}` taken as {owner}", args.name);
    }
    let mut env = vec![
        (ENV_NAME.to_owned(), args.name.clone()),
        (ENV_OWNER.to_owned(), owner),
    ];
    if let Some(token) = token(&guard) {
        env.push((ENV_TOKEN.to_owned(), token.to_string()));
    }
    env.push((ENV_HOLD.to_owned(), guard.hold_token().to_string()));
    let events = child::events();
    let lost = guard.lost_signal();
    {
        let tx = events.0.clone();
        let lost = lost.clone();
        thread::Builder::new()
            .name("lost".into())
            .spawn(move || {
                if let Some(reason) = lost.wait() {
                    let _ = tx.send(Event::Lost(reason.to_string()));
                }
            })
            .map_err(|e| Failure::new(connect::EX_SOFTWARE, e.to_string()))?;
    }
    let outcome = ctx.job(env, events, &|| lost.valid_until())?;
    let code = ctx.exit(&outcome);
    if outcome.lost.is_none() && args.hand_off {
        // Handed over: one lease left for whoever adopted it, and no
        // release (which would free the adopter's lock).
        let name = args.name.clone();
        if let Err(e) = guard.keep_for(args.watchdog_timeout) {
            eprintln!("redisson-lock: handing `{name}` over failed: {e}");
        } else if ctx.verbose {
            eprintln!("redisson-lock: `{name}` handed over (held one lease unless adopted)");
        }
        return Ok(code);
    }
    if outcome.lost.is_none()
        && let Some(rest) = ctx.rest(taken)
    {
        // The watchdog stops renewing, the key's TTL is set to the rest of
        // the minimum (again if a renewal already on the wire lands after
        // it), and the guard is forgotten without a release: the lock is
        // kept exactly that long (`LockGuard::keep_for`).
        let name = args.name.clone();
        match guard.keep_for(rest) {
            Ok(()) => {
                if ctx.verbose {
                    eprintln!("redisson-lock: `{name}` kept for {rest:?}");
                }
            }
            Err(e) => eprintln!("redisson-lock: keeping `{name}` failed: {e}"),
        }
        return Ok(code);
    }
    if let Err(e) = guard.unlock()
        && outcome.lost.is_none()
    {
        eprintln!("redisson-lock: releasing `{}` failed: {e}", args.name);
    }
    Ok(code)
}

/// The permit's renewal: every third of the lease, `update_lease_time`;
/// `valid_until` is the last successful renewal's send time plus the lease.
struct Renewal {
    valid_until: Mutex<Instant>,
    stop: AtomicBool,
}

fn run_permit(ctx: &Ctx<'_>, sem: PermitExpirableSemaphore, permits: u32) -> Result<u8, Failure> {
    let args = ctx.args;
    let lease = args.watchdog_timeout;
    // Only the first caller sets the pool's size (Redisson's trySetPermits).
    sem.try_set_permits(permits)?;
    let sent = Instant::now();
    let acquired = if args.nonblock {
        sem.try_acquire(Some(lease))?
    } else if let Some(wait) = args.wait {
        sem.try_acquire_for(wait, Some(lease))?
    } else {
        Some(sem.acquire(Some(lease))?)
    };
    let Some(acquired) = acquired else {
        return ctx.busy();
    };
    let id: PermitId = acquired.ids()[0];
    let taken = Instant::now();
    // The lease runs from the attempt that succeeded, whose send time only
    // a single attempt (-n) knows: a blocking acquire may have waited for
    // most of a lease (or longer) before it. A renewal sent now gives the
    // job a whole lease from here; if it fails, the conservative count from
    // before the acquire stands (renewals may still catch up).
    let valid_from = if args.nonblock {
        sent
    } else {
        match sem.update_lease_time(id, Some(lease)) {
            Ok(true) => taken,
            Ok(false) => {
                eprintln!(
                    "redisson-lock: permit {id} of `{}` expired before the job started",
                    args.name
                );
                return Ok(args.lost_exit_code);
            }
            Err(e) => {
                if ctx.verbose {
                    eprintln!("redisson-lock: renewing permit {id} failed: {e}");
                }
                sent
            }
        }
    };
    if ctx.verbose {
        eprintln!("redisson-lock: permit {id} of `{}` taken", args.name);
    }
    let env = vec![
        (ENV_NAME.to_owned(), args.name.clone()),
        (ENV_OWNER.to_owned(), id.to_string()),
    ];
    let events = child::events();
    let renewal = Arc::new(Renewal {
        valid_until: Mutex::new(valid_from + lease),
        stop: AtomicBool::new(false),
    });
    let renewer = {
        let renewal = Arc::clone(&renewal);
        let sem = sem.clone();
        let tx = events.0.clone();
        let verbose = ctx.verbose;
        thread::Builder::new()
            .name("permit-renewal".into())
            .spawn(move || renew_permit(&sem, id, lease, &renewal, &tx, verbose))
            .map_err(|e| Failure::new(connect::EX_SOFTWARE, e.to_string()))?
    };
    let valid_until = || {
        *renewal
            .valid_until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    let outcome = ctx.job(env, events, &valid_until)?;
    renewal.stop.store(true, Ordering::Release);
    // A renewal on the wire now would set the lease back to the whole lease
    // after --hold-at-least's shorter one: wait for it (at most one reply;
    // INT/TERM end the wrapper meanwhile).
    let _ = renewer.join();
    let code = ctx.exit(&outcome);
    if outcome.lost.is_none()
        && let Some(rest) = ctx.rest(taken)
    {
        match sem.update_lease_time(id, Some(rest)) {
            Ok(true) => {
                let _ = acquired.forget();
                return Ok(code);
            }
            Ok(false) => {}
            Err(e) => eprintln!("redisson-lock: keeping permit {id} failed: {e}"),
        }
    }
    if let Err(e) = acquired.release()
        && outcome.lost.is_none()
    {
        eprintln!("redisson-lock: releasing permit {id} failed: {e}");
    }
    Ok(code)
}

fn renew_permit(
    sem: &PermitExpirableSemaphore,
    id: PermitId,
    lease: Duration,
    renewal: &Renewal,
    events: &std::sync::mpsc::Sender<Event>,
    verbose: bool,
) {
    let every = lease / 3;
    let retry = (lease / 10).min(Duration::from_secs(1));
    let mut next = Instant::now() + every;
    while !renewal.stop.load(Ordering::Acquire) {
        let now = Instant::now();
        if now < next {
            thread::sleep((next - now).min(Duration::from_millis(50)));
            continue;
        }
        let sent = Instant::now();
        match sem.update_lease_time(id, Some(lease)) {
            Ok(true) => {
                *renewal
                    .valid_until
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = sent + lease;
                next = sent + every;
            }
            Ok(false) => {
                let _ = events.send(Event::Lost(format!("permit {id} is gone")));
                return;
            }
            Err(e) => {
                if verbose {
                    eprintln!("redisson-lock: renewing permit {id} failed: {e}");
                }
                next = Instant::now() + retry;
            }
        }
    }
}
