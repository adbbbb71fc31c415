//! `redisson-lock run` and the job's processes: a permit's lease after a long
//! wait, background processes keeping the lock, job control (stops and
//! continues), signals while the lock is released. Real redis-server
//! processes (the library's tests/support harness), stopped by pid.

#[path = "../../tests/support/mod.rs"]
mod support;

mod common;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{Tmp, alive, bin, read_number, signal, spawn_run, state, wait_exit};
use support::RedisServer;

/// A wrapper the test may leave stopped when an assertion fails: SIGKILLed
/// and reaped on drop unless [`take`](Self::take)n (its job dies of its
/// parent-death signal).
struct Wrapper(Option<Child>);

impl Wrapper {
    fn pid(&self) -> i32 {
        self.0.as_ref().map_or(0, |c| c.id() as i32)
    }

    fn take(mut self) -> Child {
        self.0.take().expect("taken once")
    }
}

impl Drop for Wrapper {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

// The jobs below start their sleep in the background before they write
// their pid, then `wait`: a stop signal that reaches dash while it is inside
// vfork (blocked, in state D until its child execs) stops the child before
// its exec and never the shell, so the job's own process never stops (a
// shell's job control would not see that stop either). After the pid is
// written, the shell only waits.

/// Waits at most `within` for `file` to hold a pid; the pid.
fn pid_in(tmp: &Tmp, file: &str, within: Duration) -> i32 {
    let path = tmp.path(file);
    assert!(
        support::eventually(within, || {
            std::fs::read_to_string(&path).is_ok_and(|t| t.ends_with('\n'))
        }),
        "no pid in {file}"
    );
    read_number(&path)
}

#[test]
fn a_permit_waited_for_longer_than_half_its_lease_runs_its_job_to_the_end() {
    // Issue 29 item 8: the lease was counted from before a blocking acquire,
    // so a wait of more than lease - margin - kill-after (2.2 s of a 3 s
    // lease) killed the job as it started (exit 124).
    let server = RedisServer::start();
    let tmp = Tmp::new("permit-wait");
    let first = spawn_run(
        &server.url(),
        &[
            "run",
            "--permits",
            "1",
            "--watchdog-timeout",
            "3s",
            "pool8",
            "--",
            "sh",
            "-c",
            &format!("touch {}; sleep 3", tmp.path("first")),
        ],
    );
    assert!(support::eventually(Duration::from_secs(10), || tmp.exists("first")));
    let started = Instant::now();
    let second = spawn_run(
        &server.url(),
        &[
            "run",
            "--permits",
            "1",
            "--watchdog-timeout",
            "3s",
            "-w",
            "20",
            "pool8",
            "--",
            "sh",
            "-c",
            &format!("sleep 1; touch {}", tmp.path("second-done")),
        ],
    );
    assert_eq!(wait_exit(first, Duration::from_secs(15)), Some(0));
    assert_eq!(
        wait_exit(second, Duration::from_secs(20)),
        Some(0),
        "the second run's job was killed after waiting {:?} for the permit",
        started.elapsed()
    );
    assert!(tmp.exists("second-done"), "the second job did not finish");
    assert!(
        started.elapsed() > Duration::from_millis(3500),
        "the second job did not wait for the permit"
    );
}

#[test]
fn a_background_process_of_the_job_keeps_the_lock_until_it_ends() {
    // Issue 29 item 9: `-c 'sleep & exit 0'` released the lock while the
    // sleep ran on in the job's group.
    let server = RedisServer::start();
    let tmp = Tmp::new("background");
    let run = spawn_run(
        &server.url(),
        &[
            "run",
            "bg9",
            "-c",
            &format!("sleep 2 & echo $! > {}; exit 0", tmp.path("bg")),
        ],
    );
    let sleeper = pid_in(&tmp, "bg", Duration::from_secs(10));
    // The job's own process is gone at once; the sleep is not.
    std::thread::sleep(Duration::from_millis(500));
    assert!(alive(sleeper), "the background sleep ended early");
    let busy = bin(&server.url())
        .args(["run", "-n", "bg9", "--", "true"])
        .status()
        .expect("run -n");
    assert_eq!(
        busy.code(),
        Some(75),
        "a second run got the lock while the job's background process ran"
    );
    assert_eq!(server.cmd::<i64>(&["EXISTS", "bg9"]), 1);
    assert_eq!(wait_exit(run, Duration::from_secs(10)), Some(0));
    assert!(
        !alive(sleeper),
        "the wrapper exited before the background sleep"
    );
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", "bg9"]),
        0,
        "released at the end"
    );
}

#[test]
fn kill_group_ends_the_background_processes_when_the_job_exits_then_releases() {
    let server = RedisServer::start();
    let tmp = Tmp::new("kill-group");
    let started = Instant::now();
    let run = spawn_run(
        &server.url(),
        &[
            "run",
            "--kill-group",
            "kg9",
            "-c",
            &format!("sleep 100 & echo $! > {}; exit 3", tmp.path("bg")),
        ],
    );
    let sleeper = pid_in(&tmp, "bg", Duration::from_secs(10));
    assert_eq!(
        wait_exit(run, Duration::from_secs(10)),
        Some(3),
        "the job's status"
    );
    assert!(!alive(sleeper), "--kill-group left the background sleep");
    assert!(started.elapsed() < Duration::from_secs(8));
    assert_eq!(server.cmd::<i64>(&["EXISTS", "kg9"]), 0, "released");
}

#[test]
fn a_stopped_job_stops_the_wrapper_and_sigcont_continues_both() {
    // Issue 29 item 10: Ctrl-Z stopped the job's group only; the wrapper ran
    // on (renewing) and the shell never got its prompt back.
    let server = RedisServer::start();
    let tmp = Tmp::new("ctrl-z");
    let run = Wrapper(Some(spawn_run(
        &server.url(),
        &[
            "run",
            "--watchdog-timeout",
            "3s",
            "tz10",
            "--",
            "sh",
            "-c",
            &format!(
                "sleep 1 & echo $$ > {}; wait; touch {}",
                tmp.path("pid"),
                tmp.path("done")
            ),
        ],
    )));
    let wrapper = run.pid();
    let job = pid_in(&tmp, "pid", Duration::from_secs(10));
    // What the terminal sends the foreground group on Ctrl-Z.
    signal(-job, libc::SIGTSTP);
    assert!(
        support::eventually(Duration::from_secs(3), || state(wrapper) == Some('T')),
        "the wrapper did not stop with its job (state {:?})",
        state(wrapper)
    );
    assert_eq!(state(job), Some('T'), "the job is not stopped");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(state(wrapper), Some('T'), "the wrapper continued by itself");
    assert!(!tmp.exists("done"), "the job ran on while stopped");
    // `fg`: the shell continues the wrapper, which continues the job.
    signal(wrapper, libc::SIGCONT);
    assert_eq!(wait_exit(run.take(), Duration::from_secs(10)), Some(0));
    assert!(tmp.exists("done"), "the job did not complete");
    assert_eq!(server.cmd::<i64>(&["EXISTS", "tz10"]), 0, "released");
}

#[test]
fn a_lease_that_ran_out_while_stopped_kills_the_job_when_continued() {
    let server = RedisServer::start();
    let tmp = Tmp::new("ctrl-z-lapse");
    let run = Wrapper(Some(
        bin(&server.url())
            .args([
                "run",
                "--watchdog-timeout",
                "1s",
                "tl10",
                "--",
                "sh",
                "-c",
                &format!(
                    "sleep 2 & echo $$ > {}; wait; touch {}",
                    tmp.path("pid"),
                    tmp.path("after")
                ),
            ])
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn"),
    ));
    let wrapper = run.pid();
    let job = pid_in(&tmp, "pid", Duration::from_secs(10));
    signal(-job, libc::SIGTSTP);
    if !support::eventually(Duration::from_secs(3), || state(wrapper) == Some('T')) {
        let mut child = run.take();
        let _ = child.kill();
        let out = child.wait_with_output().expect("wait");
        panic!(
            "the wrapper did not stop with its job: {:?}, {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Nothing renews the 1 s lease now: it runs out in Redis.
    assert!(
        support::eventually(Duration::from_secs(3), || {
            server.cmd::<i64>(&["EXISTS", "tl10"]) == 0
        }),
        "the lease did not run out while the wrapper was stopped"
    );
    signal(wrapper, libc::SIGCONT);
    let out = run.take().wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(124), "the job must not run on");
    assert!(!alive(job), "the job outlived the lost lock");
    assert!(
        !common::group_alive(job),
        "a process of the job's group is left"
    );
    assert!(
        !tmp.exists("after"),
        "the job ran on after its lease ran out"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("tl10"), "{stderr}");
}

#[test]
fn sigtstp_to_the_wrapper_stops_the_job_too() {
    // Before, the wrapper stopped (default action) and its job ran on, its
    // lease no longer renewed.
    let server = RedisServer::start();
    let tmp = Tmp::new("tstp-wrapper");
    let run = Wrapper(Some(spawn_run(
        &server.url(),
        &[
            "run",
            "--watchdog-timeout",
            "3s",
            "tw10",
            "--",
            "sh",
            "-c",
            &format!(
                "sleep 1 & echo $$ > {}; wait; touch {}",
                tmp.path("pid"),
                tmp.path("done")
            ),
        ],
    )));
    let wrapper = run.pid();
    let job = pid_in(&tmp, "pid", Duration::from_secs(10));
    signal(wrapper, libc::SIGTSTP);
    assert!(
        support::eventually(Duration::from_secs(3), || {
            state(wrapper) == Some('T') && state(job) == Some('T')
        }),
        "wrapper {:?}, job {:?}: both should be stopped",
        state(wrapper),
        state(job)
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !tmp.exists("done"),
        "the job ran on while the wrapper was stopped"
    );
    signal(wrapper, libc::SIGCONT);
    assert_eq!(wait_exit(run.take(), Duration::from_secs(10)), Some(0));
    assert!(tmp.exists("done"));
}

#[test]
fn term_while_the_release_waits_on_a_paused_server_ends_the_wrapper_at_once() {
    // Issue 29 item 11: INT/TERM after the job exited were swallowed while
    // the release waited for a server that did not answer.
    let server = RedisServer::start();
    let tmp = Tmp::new("term-release");
    let run = bin(&server.url())
        .args([
            "--response-timeout",
            "20s",
            "run",
            "rl11",
            "--",
            "sh",
            "-c",
            &format!(
                "touch {}; while [ ! -e {} ]; do sleep 0.02; done",
                tmp.path("up"),
                tmp.path("go")
            ),
        ])
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let wrapper = run.id() as i32;
    assert!(support::eventually(Duration::from_secs(10), || tmp.exists("up")));
    server.pause();
    std::fs::write(tmp.path("go"), "").expect("go");
    // The job ends; the wrapper's release now waits for the paused server.
    std::thread::sleep(Duration::from_millis(500));
    signal(wrapper, libc::SIGTERM);
    let sent = Instant::now();
    let mut run = run;
    let status = loop {
        if let Some(status) = run.try_wait().expect("try_wait") {
            break Some(status);
        }
        if sent.elapsed() > Duration::from_secs(2) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = sent.elapsed();
    if status.is_none() {
        let _ = run.kill();
    }
    let out = run.wait_with_output().expect("wait");
    server.resume();
    assert!(
        status.is_some(),
        "the wrapper did not end within 2 s of SIGTERM"
    );
    eprintln!("the wrapper ended {took:?} after SIGTERM");
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("release of `rl11`") && stderr.contains("lease runs out"),
        "stderr: {stderr}"
    );
    // It was left to expire, not released.
    assert_eq!(server.cmd::<i64>(&["EXISTS", "rl11"]), 1);
}

#[test]
fn hold_at_least_with_renewals_due_keeps_exactly_the_minimum() {
    // The suspicion: a watchdog renewal on the wire when --hold-at-least
    // exits. A renewal every 200 ms (600 ms lease) and jobs ending at
    // different points of that period: the lock must never be freed before
    // the minimum (counted from the take, which is after the spawn), and a
    // late renewal must not keep it longer (`keep_for` stops the renewals
    // and waits for one in flight): freed within a generous 350 ms (less
    // than the 600 ms lease a late renewal would add) of the minimum after
    // the lock was first seen taken.
    let server = RedisServer::start();
    let min = Duration::from_millis(1500);
    let lease = Duration::from_millis(600);
    let runs: Vec<(String, Instant, std::process::Child)> = (0..4)
        .map(|i| {
            let name = format!("hold{i}");
            let spawned = Instant::now();
            let child = spawn_run(
                &server.url(),
                &[
                    "run",
                    "--watchdog-timeout",
                    "600ms",
                    "--hold-at-least",
                    "1500ms",
                    &name,
                    "--",
                    "sleep",
                    &format!("0.{}", 2 + i * 2),
                ],
            );
            (name, spawned, child)
        })
        .collect();
    let mut gone: Vec<Option<Instant>> = vec![None; runs.len()];
    let mut taken: Vec<Option<Instant>> = vec![None; runs.len()];
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = vec![false; runs.len()];
    while gone.iter().any(Option::is_none) && Instant::now() < deadline {
        for (i, (name, _, _)) in runs.iter().enumerate() {
            let exists = server.cmd::<i64>(&["EXISTS", name]) == 1;
            if exists && taken[i].is_none() {
                taken[i] = Some(Instant::now());
            }
            seen[i] |= exists;
            if seen[i] && !exists && gone[i].is_none() {
                gone[i] = Some(Instant::now());
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    for (i, (name, spawned, child)) in runs.into_iter().enumerate() {
        assert_eq!(wait_exit(child, Duration::from_secs(10)), Some(0));
        let gone = gone[i].unwrap_or_else(|| panic!("`{name}` was never freed"));
        let held = gone - spawned;
        eprintln!("`{name}` freed {held:?} after the spawn");
        assert!(
            held >= min,
            "`{name}` freed {held:?} after the spawn, before {min:?}"
        );
        // The take comes after the spawn, and before it was first seen.
        let kept = gone - taken[i].expect("seen taken");
        assert!(
            kept <= min + Duration::from_millis(350),
            "`{name}` kept {kept:?} after it was taken: past {min:?} (a lease is {lease:?})"
        );
    }
}
