//! The job: spawned in its own process group with a parent-death signal,
//! reaped by the wrapper (a child subreaper, so that orphaned grandchildren
//! are reaped too), its group signalled on the wrapper's signals and on a
//! loss of the lock, scheduled against the lease.
// The process calls (setpgid, prctl, kill, waitpid) have no safe wrapper in
// std; each `unsafe` block says why it is sound.
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread;
use std::time::{Duration, Instant};

/// The signals forwarded to the job's process group.
pub const FORWARDED: [i32; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// What the supervisor hears about.
#[derive(Debug)]
pub enum Event {
    /// The job (the direct child) ended with this wait status.
    Exited(i32),
    /// The wrapper received this signal.
    Signal(i32),
    /// The lock is known to be lost (a confirmed loss: signal at once).
    Lost(String),
}

/// A running job: its pid, which is also its process group id.
pub struct Job {
    pid: i32,
}

/// Makes this process a child subreaper (Linux): the job's orphaned
/// descendants are re-parented to the wrapper, which reaps them, so "no
/// process of the group is left" can be waited for.
pub fn become_subreaper() {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer argument
    // and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// Starts forwarding the wrapper's INT/TERM/HUP/QUIT/USR1/USR2 to `events`
/// (to be passed on to the job's group by the supervisor).
pub fn forward_signals(events: Sender<Event>) -> std::io::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new(FORWARDED)?;
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if events.send(Event::Signal(signal)).is_err() {
                    break;
                }
            }
        })?;
    Ok(())
}

/// Spawns `program args` with `env` added, in its own process group, with
/// SIGKILL as its parent-death signal; then reaps every child of the
/// wrapper on a thread, reporting the job's status to `events`.
pub fn spawn(
    program: &OsString,
    args: &[OsString],
    env: &[(String, String)],
    events: Sender<Event>,
) -> std::io::Result<Job> {
    let parent = std::process::id() as libc::pid_t;
    let mut command = Command::new(program);
    command.args(args).envs(env.iter().map(|(k, v)| (k, v)));
    // SAFETY: the closure runs in the forked child before exec and calls
    // only async-signal-safe functions (setpgid, prctl, getppid, kill), with
    // no allocation.
    unsafe {
        command.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The wrapper died between fork and prctl: die with it.
            if libc::getppid() != parent {
                libc::kill(0, libc::SIGKILL);
            }
            Ok(())
        });
    }
    let child = command.spawn()?;
    let pid = child.id() as i32;
    // SAFETY: setpgid takes plain integers. The child does the same before
    // exec; doing it here too closes the race with `give_terminal`.
    unsafe {
        libc::setpgid(pid, pid);
    }
    // `child` is never waited on through std: the reaper below owns waitpid.
    drop(child);
    thread::Builder::new()
        .name("reaper".into())
        .spawn(move || reap(pid, &events))?;
    Ok(Job { pid })
}

/// Reaps every child of the wrapper (the job, and its orphans once the
/// wrapper is their subreaper); reports the job's status.
fn reap(job: i32, events: &Sender<Event>) {
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer for the call's duration.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == job {
            let _ = events.send(Event::Exited(status));
        } else if pid < 0 {
            let errno = std::io::Error::last_os_error().raw_os_error();
            if errno != Some(libc::EINTR) {
                thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

impl Job {
    /// When the wrapper is the foreground job of a terminal on stdin, makes
    /// the job's group the foreground one (so that it may read the
    /// terminal, and Ctrl-C reaches it directly); `true` if it did.
    pub fn give_terminal(&self) -> bool {
        // SAFETY: isatty/tcgetpgrp/getpgrp/signal/tcsetpgrp take plain
        // integers; SIGTTOU is ignored after the job was spawned, so the
        // job does not inherit the disposition.
        unsafe {
            if libc::isatty(0) != 1 || libc::tcgetpgrp(0) != libc::getpgrp() {
                return false;
            }
            libc::signal(libc::SIGTTOU, libc::SIG_IGN);
            let given = libc::tcsetpgrp(0, self.pid) == 0;
            // A job that touched the terminal before it was given one was
            // stopped (SIGTTIN/SIGTTOU): continue it.
            libc::kill(-self.pid, libc::SIGCONT);
            given
        }
    }

    /// Takes the terminal back after [`give_terminal`](Self::give_terminal).
    pub fn take_terminal(&self) {
        // SAFETY: as in `give_terminal`.
        unsafe {
            libc::tcsetpgrp(0, libc::getpgrp());
        }
    }

    /// The job's pid (its process group id too).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Sends `signal` to the job's whole process group.
    pub fn signal_group(&self, signal: i32) {
        // SAFETY: kill takes plain integers.
        unsafe {
            libc::kill(-self.pid, signal);
        }
    }

    /// Whether any process of the job's group is left (zombies included,
    /// until the reaper collects them).
    pub fn group_alive(&self) -> bool {
        // SAFETY: kill with signal 0 only checks for existence.
        unsafe { libc::kill(-self.pid, 0) == 0 }
    }

    /// SIGKILLs the group and waits (at most `within`) until no process of
    /// it is left.
    pub fn kill_group(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            self.signal_group(libc::SIGKILL);
            if !self.group_alive() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }
}

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

/// How a supervised job ended.
#[derive(Debug)]
pub struct Outcome {
    /// The job's wait status.
    pub status: i32,
    /// Why the lock was lost while it ran, if it was.
    pub lost: Option<String>,
}

/// Supervises `job` until it exits: forwards signals, and on a loss (or when
/// `valid_until()` comes within the schedule's reach because renewals stop
/// succeeding) signals its group per `schedule`. After a loss, every process
/// left in the group is killed and waited for before returning.
pub fn supervise(
    job: &Job,
    events: &Receiver<Event>,
    valid_until: &dyn Fn() -> Instant,
    schedule: Schedule,
    verbose: bool,
) -> Outcome {
    let mut lost: Option<String> = None;
    // When the first signal went out, and the SIGKILL deadline fixed then.
    let mut kill_at: Option<Instant> = None;
    let mut killed = false;
    let status = loop {
        let now = Instant::now();
        let expiry_guard = valid_until().checked_sub(schedule.margin).unwrap_or(now);
        if kill_at.is_none() {
            let term_at = expiry_guard.checked_sub(schedule.kill_after).unwrap_or(now);
            if now >= term_at {
                let reason = "renewals stopped succeeding: the lease may run out".to_owned();
                if verbose {
                    eprintln!("redisson-lock: {reason}; signalling the job");
                }
                lost.get_or_insert(reason);
                job.signal_group(schedule.signal);
                kill_at = Some(expiry_guard.min(now + schedule.kill_after));
            }
        }
        if let Some(at) = kill_at
            && !killed
            && now >= at
        {
            if verbose {
                eprintln!("redisson-lock: killing the job's process group");
            }
            job.signal_group(libc::SIGKILL);
            killed = true;
        }
        let next = match kill_at {
            Some(at) if !killed => at,
            Some(_) => now + Duration::from_millis(100),
            None => expiry_guard.checked_sub(schedule.kill_after).unwrap_or(now),
        };
        let wait = next
            .saturating_duration_since(now)
            .min(Duration::from_millis(100));
        match events.recv_timeout(wait) {
            Ok(Event::Exited(status)) => break status,
            Ok(Event::Signal(signal)) => job.signal_group(signal),
            Ok(Event::Lost(reason)) => {
                if kill_at.is_none() {
                    if verbose {
                        eprintln!("redisson-lock: lock lost ({reason}); signalling the job");
                    }
                    let now = Instant::now();
                    job.signal_group(schedule.signal);
                    kill_at = Some(expiry_guard.min(now + schedule.kill_after));
                }
                lost.get_or_insert(reason);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break 0,
        }
    };
    if lost.is_some() {
        job.kill_group(Duration::from_secs(2));
    }
    Outcome { status, lost }
}

/// The exit code for a wait status: the job's code, or 128+N when signal N
/// killed it (as shells report it).
pub fn exit_code(status: i32) -> u8 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status) as u8
    } else if libc::WIFSIGNALED(status) {
        (128 + libc::WTERMSIG(status)) as u8
    } else {
        1
    }
}

/// A channel for [`Event`]s.
pub fn events() -> (Sender<Event>, Receiver<Event>) {
    channel()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_shell_exit_codes() {
        // exit(3): status 3 << 8; killed by SIGTERM: status 15.
        assert_eq!(exit_code(3 << 8), 3);
        assert_eq!(exit_code(libc::SIGTERM), 128 + 15);
        assert_eq!(exit_code(libc::SIGKILL), 137);
    }
}
