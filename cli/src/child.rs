//! The job: spawned in its own process group with a parent-death signal,
//! reaped by the wrapper (a child subreaper, so that orphaned grandchildren
//! are reaped too), its group signalled on the wrapper's signals and on a
//! loss of the lock, scheduled against the lease. The lock is kept until no
//! process of the group is left (or, with `--kill-group`, the rest of the
//! group is killed when the job's own process exits); when the job stops
//! (Ctrl-Z), the whole group is stopped and the wrapper stops itself, and on
//! SIGCONT it continues the group only while the lease is certainly held.
//! The wrapper stays in its caller's group (the shell's job, which `fg`
//! continues) and the job has its own, so the job's group can be signalled
//! (and stopped) without the wrapper, whose renewals must go on.
// The process calls (setpgid, prctl, kill, waitpid) have no safe wrapper in
// std; each `unsafe` block says why it is sound.
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread;
use std::time::{Duration, Instant};

mod supervise;
pub use supervise::{Outcome, Schedule, Supervision, end_on_signals, supervise};

/// The signals forwarded to the job's process group.
pub const FORWARDED: [i32; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// The signals that end the wrapper once the job's group is gone (while it
/// releases or keeps the lock): 128+N, as if it had been killed by them.
pub const ENDING: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// What the supervisor hears about.
#[derive(Debug)]
pub enum Event {
    /// The job (the direct child) ended with this wait status.
    Exited(i32),
    /// A child of the wrapper in the job's process group (the job, or an
    /// orphan of it) was stopped: this pid, by this signal.
    Stopped(i32, i32),
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

/// Starts forwarding the wrapper's INT/TERM/HUP/QUIT/USR1/USR2 and TSTP to
/// `events` (to be passed on to the job's group by the supervisor; TSTP
/// stops the wrapper only once the job has stopped).
pub fn forward_signals(events: Sender<Event>) -> std::io::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new(FORWARDED)?;
    signals.add_signal(libc::SIGTSTP)?;
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
/// wrapper is their subreaper); reports the job's status, and the stops of
/// the children in the job's group.
fn reap(job: i32, events: &Sender<Event>) {
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer for the call's duration.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WUNTRACED) };
        if pid > 0 && libc::WIFSTOPPED(status) {
            // SAFETY: getpgid takes a plain integer.
            if pid == job || unsafe { libc::getpgid(pid) } == job {
                let _ = events.send(Event::Stopped(pid, libc::WSTOPSIG(status)));
            }
        } else if pid == job {
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
    /// terminal, and Ctrl-C and Ctrl-Z reach it directly); `true` if it
    /// did. A process of the job that touched the terminal before it was
    /// given one was stopped (SIGTTIN/SIGTTOU): the caller continues the
    /// group (and the supervisor continues the job's own process when it
    /// reports such a stop later).
    pub fn give_terminal(&self) -> bool {
        // SAFETY: isatty/tcgetpgrp/getpgrp/signal/tcsetpgrp take plain
        // integers; SIGTTOU is ignored after the job was spawned, so the
        // job does not inherit the disposition.
        unsafe {
            if libc::isatty(0) == 1 && libc::tcgetpgrp(0) == libc::getpgrp() {
                libc::signal(libc::SIGTTOU, libc::SIG_IGN);
                return libc::tcsetpgrp(0, self.pid) == 0;
            }
        }
        false
    }

    /// Whether the job's group is the foreground group of the terminal on
    /// stdin.
    fn owns_terminal(&self) -> bool {
        // SAFETY: isatty/tcgetpgrp take plain integers.
        unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) == self.pid }
    }

    /// Continues the job's group after a stop, with the terminal when the
    /// wrapper has it (`fg`), without it otherwise (`bg`).
    pub fn resume(&self) {
        let _ = self.give_terminal();
        self.signal_group(libc::SIGCONT);
    }

    /// Takes the terminal back for the wrapper's group when the job's group
    /// has it (never from anyone else: a wrapper in the background leaves it
    /// where it is).
    pub fn take_terminal(&self) {
        // SAFETY: as in `give_terminal`.
        unsafe {
            if self.owns_terminal() {
                libc::signal(libc::SIGTTOU, libc::SIG_IGN);
                libc::tcsetpgrp(0, libc::getpgrp());
            }
        }
    }

    /// Job control: the job stopped (Ctrl-Z, SIGTSTP/SIGSTOP, SIGTTIN), so
    /// every process of its group is stopped (none may run on while the
    /// wrapper, its renewals with it, is stopped), the terminal goes back to
    /// the wrapper's group and the wrapper stops itself (SIGSTOP, which
    /// cannot be caught): the shell gets its prompt back. Returns once the
    /// wrapper was continued (`fg`, `bg`, SIGCONT); the group is still
    /// stopped then.
    pub fn stop_with(&self) {
        self.signal_group(libc::SIGSTOP);
        self.take_terminal();
        // SAFETY: raise takes a plain integer. It directs SIGSTOP at the
        // calling thread, which therefore stops before the call returns;
        // a stop signal stops every thread of the process.
        unsafe {
            libc::raise(libc::SIGSTOP);
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
