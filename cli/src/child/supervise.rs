//! The supervisor: the job's group watched against the lease until no
//! process of it is left (signals forwarded, the group stopped with the
//! job and continued only while the lease is certainly held, signalled and
//! killed on a loss), and the signals that end the wrapper once the job is
//! gone.

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use super::{ENDING, Event, Job};

/// The kill-on-loss schedule: the job's group gets `signal`, then SIGKILL
/// `kill_after` later, and SIGKILL no later than `margin` before the lease
/// can have expired (counted from the last successful renewal's send time).
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    /// The signal sent first.
    pub signal: i32,
    /// From the first signal to SIGKILL.
    pub kill_after: Duration,
    /// SIGKILL is sent this long before the lease can have expired.
    pub margin: Duration,
}

/// What [`supervise`] works with.
pub struct Supervision<'a> {
    /// The moment before which the lock cannot have expired.
    pub valid_until: &'a dyn Fn() -> Instant,
    /// The kill-on-loss schedule.
    pub schedule: Schedule,
    /// `--kill-group`: when the job's own process exits, the rest of its
    /// group gets the schedule's signal, then SIGKILL `kill_after` later
    /// (instead of the lock being kept until the group is empty).
    pub kill_group: bool,
    /// Diagnostics on stderr.
    pub verbose: bool,
}

/// How a supervised job ended.
#[derive(Debug)]
pub struct Outcome {
    /// The job's wait status.
    pub status: i32,
    /// Why the lock was lost while it ran, if it was.
    pub lost: Option<String>,
    /// An ending signal (INT, TERM, HUP, QUIT) that came once the job's
    /// own process had exited and its group was gone, before the
    /// supervisor saw it: the release's to act on (see [`end_on_signals`]).
    pub ending: Option<i32>,
}

/// Supervises `job` until no process of its group is left: forwards
/// signals; on a loss (or when `valid_until()` comes within the schedule's
/// reach because renewals stop succeeding) signals the group per the
/// schedule; follows the job's stops (job control). The job's own process
/// exiting does not end it: its background processes, in its group, keep the
/// lock held (renewed) until they are gone too (polled with `kill(-pgid,
/// 0)`), unless `kill_group` kills them first. After a loss, every process
/// left in the group is killed and waited for before returning.
pub fn supervise(job: &Job, events: &Receiver<Event>, sup: &Supervision<'_>) -> Outcome {
    let schedule = sup.schedule;
    let mut lost: Option<String> = None;
    // When the first signal went out, and the SIGKILL deadline fixed then.
    let mut kill_at: Option<Instant> = None;
    let mut killed = false;
    // The job's own process's wait status, once it exited.
    let mut exited: Option<i32> = None;
    // `--kill-group`: when the rest of the group gets SIGKILL.
    let mut rest_kill_at: Option<Instant> = None;
    // The wrapper was continued after a stop: the group stays stopped until
    // the lease is certainly held (or is killed if it may not be).
    let mut held_stopped = false;
    let mut ending = None;
    let status = loop {
        let now = Instant::now();
        let expiry_guard = (sup.valid_until)()
            .checked_sub(schedule.margin)
            .unwrap_or(now);
        let term_at = expiry_guard.checked_sub(schedule.kill_after).unwrap_or(now);
        if held_stopped {
            if lost.is_some() || now >= expiry_guard {
                // The lease may have run out while the wrapper was stopped
                // (its renewals with it): the job must not run on.
                if sup.verbose {
                    eprintln!(
                        "redisson-lock: the lock may be gone after the stop: killing the job"
                    );
                }
                lost.get_or_insert_with(|| {
                    "the lease ran out while the job was stopped".to_owned()
                });
                job.signal_group(libc::SIGKILL);
                kill_at = Some(now);
                killed = true;
                held_stopped = false;
            } else if now < term_at {
                // Renewed since (or never near its end): continue the job.
                if sup.verbose {
                    eprintln!("redisson-lock: continuing the job");
                }
                job.resume();
                held_stopped = false;
            }
            // Else: the watchdog, continued too, is renewing; wait for it.
        } else if kill_at.is_none() && now >= term_at {
            let reason = "renewals stopped succeeding: the lease may run out".to_owned();
            if sup.verbose {
                eprintln!("redisson-lock: {reason}; signalling the job");
            }
            lost.get_or_insert(reason);
            job.signal_group(schedule.signal);
            kill_at = Some(expiry_guard.min(now + schedule.kill_after));
        }
        if let Some(at) = kill_at
            && !killed
            && now >= at
        {
            if sup.verbose {
                eprintln!("redisson-lock: killing the job's process group");
            }
            job.signal_group(libc::SIGKILL);
            killed = true;
        }
        if let Some(status) = exited {
            if !job.group_alive() {
                break status;
            }
            if sup.kill_group && rest_kill_at.is_none() {
                if sup.verbose {
                    eprintln!("redisson-lock: the job exited: signalling the rest of its group");
                }
                job.signal_group(schedule.signal);
                rest_kill_at = Some(now + schedule.kill_after);
            }
            if rest_kill_at.is_some_and(|at| now >= at) {
                job.signal_group(libc::SIGKILL);
            }
        }
        let next = match kill_at {
            Some(at) if !killed => at,
            Some(_) => now + POLL,
            None => term_at,
        };
        let mut wait = next.saturating_duration_since(now).min(POLL);
        if held_stopped || exited.is_some() {
            wait = wait.min(GROUP_POLL);
        }
        match events.recv_timeout(wait) {
            Ok(Event::Exited(status)) => exited = Some(status),
            // The job is gone (the supervisor would see it at its next
            // look): the signal ends the wrapper, not the job.
            Ok(Event::Signal(signal))
                if exited.is_some() && ENDING.contains(&signal) && !job.group_alive() =>
            {
                ending = Some(signal);
            }
            Ok(Event::Signal(signal)) => job.signal_group(signal),
            Ok(Event::Stopped(pid, signal)) => {
                // Stale reports (a process the wrapper has continued since)
                // are skipped: only a process stopped now counts.
                if held_stopped || killed || !is_stopped(pid) {
                } else if (signal == libc::SIGTTIN || signal == libc::SIGTTOU)
                    && job.owns_terminal()
                {
                    // It touched the terminal before it was given it.
                    job.signal_group(libc::SIGCONT);
                } else if kill_at.is_some() {
                    // Being killed for a loss: no stop, the SIGKILL now.
                    job.signal_group(libc::SIGKILL);
                    killed = true;
                } else {
                    if sup.verbose {
                        eprintln!("redisson-lock: the job stopped: stopping too");
                    }
                    job.stop_with();
                    held_stopped = true;
                }
            }
            Ok(Event::Lost(reason)) => {
                if kill_at.is_none() && !held_stopped {
                    if sup.verbose {
                        eprintln!("redisson-lock: lock lost ({reason}); signalling the job");
                    }
                    let now = Instant::now();
                    job.signal_group(schedule.signal);
                    kill_at = Some(expiry_guard.min(now + schedule.kill_after));
                }
                lost.get_or_insert(reason);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break exited.unwrap_or(0),
        }
    };
    if lost.is_some() {
        job.kill_group(Duration::from_secs(2));
    }
    Outcome {
        status,
        lost,
        ending,
    }
}

/// The supervisor's longest sleep.
const POLL: Duration = Duration::from_millis(100);

/// How often the group is looked at once the job's own process exited, or
/// while it is held stopped.
const GROUP_POLL: Duration = Duration::from_millis(50);

/// Whether process `pid` is stopped now (state `T` in /proc/PID/stat).
fn is_stopped(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('T'))
    })
}

/// Once the job's group is gone, while the lock is released (or kept):
/// INT, TERM, HUP or QUIT end the wrapper at once (128+N), saying on stderr
/// that `name` was left to expire; a release blocked on a server that does
/// not answer must not swallow them. `pending`: one that came before
/// (the supervisor's [`Outcome::ending`]), acted on first.
pub fn end_on_signals(events: Receiver<Event>, name: String, pending: Option<i32>) {
    let spawned = thread::Builder::new()
        .name("signals-after".into())
        .spawn(move || {
            let pending = pending.map(Event::Signal).into_iter();
            for event in pending.chain(events.iter()) {
                if let Event::Signal(signal) = event
                    && ENDING.contains(&signal)
                {
                    let sig = match signal {
                        libc::SIGINT => "SIGINT",
                        libc::SIGTERM => "SIGTERM",
                        libc::SIGHUP => "SIGHUP",
                        _ => "SIGQUIT",
                    };
                    eprintln!(
                        "redisson-lock: {sig} before Redis answered the release of `{name}`: \
                         exiting; unless the release reached Redis, the lock stays until its \
                         lease runs out"
                    );
                    std::process::exit(128 + signal);
                }
            }
        });
    if let Err(e) = spawned {
        eprintln!("redisson-lock: signals are not followed during the release: {e}");
    }
}
