//! `redisson-lock run` against real redis-server processes (the library's
//! tests/support harness: free loopback ports, servers stopped by pid).

#[path = "../../tests/support/mod.rs"]
mod support;

mod common;

use std::time::{Duration, Instant};

use common::{Tmp, alive, bin, epoch_ns, read_ns, read_number, spawn_run, wait_exit};
use support::RedisServer;
use support::proxy::Proxy;

#[test]
fn two_runs_at_once_one_runs_the_other_is_busy_or_runs_after() {
    let server = RedisServer::start();
    let tmp = Tmp::new("two-runs");
    let first = spawn_run(
        &server.url(),
        &[
            "job",
            "--",
            "sh",
            "-c",
            &format!("sleep 1.5; date +%s%N > {}", tmp.path("first-end")),
        ],
    );
    // The first one holds it once its job is running.
    assert!(support::eventually(Duration::from_secs(10), || {
        server.cmd::<i64>(&["EXISTS", "job"]) == 1
    }));
    let busy = bin(&server.url())
        .args(["run", "-n", "job", "--", "touch", &tmp.path("busy-ran")])
        .status()
        .expect("run -n");
    assert_eq!(busy.code(), Some(75), "-n on a busy lock exits 75");
    assert!(!tmp.exists("busy-ran"), "the busy run must not run its job");
    let zero = bin(&server.url())
        .args(["run", "-n", "-E", "0", "job", "--", "true"])
        .status()
        .expect("run -n -E 0");
    assert_eq!(zero.code(), Some(0), "-E 0 makes busy a success");
    let after = bin(&server.url())
        .args([
            "run",
            "-w",
            "10",
            "job",
            "--",
            "sh",
            "-c",
            &format!("date +%s%N > {}", tmp.path("second-start")),
        ])
        .status()
        .expect("run -w");
    assert_eq!(after.code(), Some(0));
    assert_eq!(wait_exit(first, Duration::from_secs(10)), Some(0));
    assert!(
        read_ns(&tmp.path("second-start")) >= read_ns(&tmp.path("first-end")),
        "the -w run started before the first job ended"
    );
    // The job's own status passes through.
    let status = bin(&server.url())
        .args(["run", "job", "--", "sh", "-c", "exit 7"])
        .status()
        .expect("run");
    assert_eq!(status.code(), Some(7));
}

#[test]
fn a_holder_cut_off_from_redis_kills_its_job_before_another_host_acquires() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port());
    let tmp = Tmp::new("cut-off");
    let pidfile = tmp.path("child-pid");
    let first = spawn_run(
        &proxy.url(),
        &[
            "--response-timeout",
            "500ms",
            "run",
            "--watchdog-timeout",
            "3s",
            "cut",
            "--",
            "sh",
            "-c",
            &format!("echo $$ > {pidfile}; exec sleep 1000"),
        ],
    );
    assert!(support::eventually(Duration::from_secs(10), || tmp.exists("child-pid")));
    let child: i32 = read_number(&pidfile);
    // Another "host" waits for the lock, directly on the server.
    let second_start = tmp.path("second-start");
    let second = spawn_run(
        &server.url(),
        &[
            "run",
            "-w",
            "30",
            "cut",
            "--",
            "sh",
            "-c",
            &format!("date +%s%N > {second_start}"),
        ],
    );
    std::thread::sleep(Duration::from_millis(300));
    let cut_at = Instant::now();
    drop(proxy); // every connection of the first wrapper dropped, new ones refused
    let mut died_ns = None;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if died_ns.is_none() && !alive(child) {
            died_ns = Some(epoch_ns());
        }
        if died_ns.is_some() && tmp.exists("second-start") {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let died_ns = died_ns.expect("the cut-off holder's job was never killed");
    let died_after = cut_at.elapsed();
    assert_eq!(
        wait_exit(first, Duration::from_secs(10)),
        Some(124),
        "the first exits 124"
    );
    assert_eq!(wait_exit(second, Duration::from_secs(30)), Some(0));
    let acquired_ns = read_ns(&second_start);
    assert!(
        died_ns < acquired_ns,
        "the first job died {} ms after the second acquired",
        (died_ns - acquired_ns) / 1_000_000
    );
    eprintln!(
        "job killed {died_after:?} after the cut; second acquired {} ms after the kill",
        (acquired_ns - died_ns) / 1_000_000
    );
}

#[test]
fn kill_9_of_the_wrapper_kills_the_job_and_the_next_run_acquires_within_a_lease() {
    let server = RedisServer::start();
    let tmp = Tmp::new("kill9");
    let pidfile = tmp.path("child-pid");
    let mut first = spawn_run(
        &server.url(),
        &[
            "run",
            "--watchdog-timeout",
            "3s",
            "k9",
            "--",
            "sh",
            "-c",
            &format!("echo $$ > {pidfile}; exec sleep 1000"),
        ],
    );
    assert!(support::eventually(Duration::from_secs(10), || tmp.exists("child-pid")));
    let child: i32 = read_number(&pidfile);
    first.kill().expect("kill -9 the wrapper");
    let killed = Instant::now();
    // Nothing renews it now: it expires within one lease.
    let pttl: i64 = server.cmd(&["PTTL", "k9"]);
    assert!(pttl > 0 && pttl <= 3000, "PTTL {pttl} ms after the kill");
    let _ = first.wait();
    assert!(
        support::eventually(Duration::from_secs(2), || !alive(child)),
        "the job outlived its wrapper"
    );
    let status = bin(&server.url())
        .args(["run", "-w", "10", "k9", "--", "true"])
        .status()
        .expect("next run");
    assert_eq!(status.code(), Some(0));
    let took = killed.elapsed();
    eprintln!("the next run acquired and ran its job {took:?} after the kill -9");
    // One lease, plus the next run's own start and wake-up (a loaded
    // machine's allowance).
    assert!(
        took < Duration::from_millis(4000),
        "the next run acquired {took:?} after the kill, more than one lease (3 s)"
    );
}

#[test]
fn a_job_that_backgrounds_leaves_no_process_of_its_group_after_a_loss() {
    let server = RedisServer::start();
    let tmp = Tmp::new("group");
    let pg = tmp.path("pgid");
    let bg = tmp.path("bg");
    let run = spawn_run(
        &server.url(),
        &[
            "run",
            "--watchdog-timeout",
            "3s",
            "grp",
            "--",
            "sh",
            "-c",
            &format!("echo $$ > {pg}; sleep 1000 & echo $! > {bg}; wait"),
        ],
    );
    assert!(support::eventually(Duration::from_secs(10), || {
        tmp.exists("bg")
            && !std::fs::read_to_string(&bg)
                .unwrap_or_default()
                .trim()
                .is_empty()
    }));
    let pgid: i32 = read_number(&pg);
    let sleeper: i32 = read_number(&bg);
    // A confirmed loss: the key is deleted behind the holder's back.
    server.cmd::<i64>(&["DEL", "grp"]);
    assert_eq!(wait_exit(run, Duration::from_secs(10)), Some(124));
    assert!(!alive(sleeper), "the background sleep survived the loss");
    assert!(
        !common::group_alive(pgid),
        "a process of the job's group is left"
    );
}

#[test]
fn permits_2_with_five_concurrent_runs_never_runs_more_than_two() {
    let server = RedisServer::start();
    let tmp = Tmp::new("permits");
    let log = tmp.path("log");
    let runs: Vec<_> = (0..5)
        .map(|_| {
            spawn_run(
                &server.url(),
                &[
                    "run",
                    "--permits",
                    "2",
                    "-w",
                    "30",
                    "pool",
                    "--",
                    "sh",
                    "-c",
                    &format!("echo + >> {log}; sleep 0.4; echo - >> {log}"),
                ],
            )
        })
        .collect();
    for run in runs {
        assert_eq!(wait_exit(run, Duration::from_secs(30)), Some(0));
    }
    let text = std::fs::read_to_string(&log).expect("log");
    let (mut now, mut max, mut ran) = (0i32, 0i32, 0);
    for line in text.lines() {
        match line {
            "+" => {
                now += 1;
                ran += 1;
            }
            "-" => now -= 1,
            _ => {}
        }
        max = max.max(now);
    }
    assert_eq!(ran, 5, "every run ran its job once");
    assert!(max <= 2, "{max} jobs ran at once with --permits 2");
    assert_eq!(max, 2, "two permits should let two jobs overlap");
}

#[test]
fn options_that_cannot_meet_the_kill_margin_are_refused() {
    let server = RedisServer::start();
    let status = bin(&server.url())
        .args([
            "run",
            "--watchdog-timeout",
            "3s",
            "--kill-after",
            "5s",
            "m",
            "--",
            "true",
        ])
        .status()
        .expect("run");
    assert_eq!(status.code(), Some(64));
    assert_eq!(server.cmd::<i64>(&["EXISTS", "m"]), 0, "nothing taken");
    let unreachable = bin("redis://127.0.0.1:1")
        .args(["inspect", "m"])
        .status()
        .expect("inspect");
    assert_eq!(unreachable.code(), Some(69));
}

#[test]
fn the_job_gets_its_lock_in_the_environment_and_the_wrapper_s_signals() {
    let server = RedisServer::start();
    let out = bin(&server.url())
        .args([
            "run",
            "--kind",
            "fenced",
            "env",
            "--",
            "sh",
            "-c",
            "echo $REDISSON_LOCK_NAME $REDISSON_LOCK_OWNER $REDISSON_LOCK_TOKEN",
        ])
        .output()
        .expect("run");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let words: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(words.len(), 3, "{text}");
    assert_eq!(words[0], "env");
    assert!(words[1].contains(':'), "owner field {}", words[1]);
    assert_eq!(words[2], "1", "the first fenced token");

    // TERM to the wrapper reaches the job, whose status is passed on.
    let tmp = Tmp::new("signals");
    let run = spawn_run(
        &server.url(),
        &[
            "sig",
            "--",
            "sh",
            "-c",
            &format!(
                "trap 'echo got > {}; exit 9' TERM; touch {}; while :; do sleep 0.05; done",
                tmp.path("got"),
                tmp.path("up")
            ),
        ],
    );
    assert!(support::eventually(Duration::from_secs(10), || tmp.exists("up")));
    let pid = run.id() as i32;
    // SAFETY: kill(2) on the wrapper this test started.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    assert_eq!(wait_exit(run, Duration::from_secs(10)), Some(9));
    assert!(tmp.exists("got"), "the job did not get the TERM");
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", "sig"]),
        0,
        "released after the job"
    );

    // A job killed by a signal: 128+N.
    let killed = bin(&server.url())
        .args(["run", "k", "--", "sh", "-c", "kill -KILL $$"])
        .status()
        .expect("run");
    assert_eq!(killed.code(), Some(137));
    let missing = bin(&server.url())
        .args(["run", "k", "--", "/nonexistent/job"])
        .status()
        .expect("run");
    assert_eq!(missing.code(), Some(127));
}

#[test]
fn a_refused_password_is_77_and_list_shows_synchronizers() {
    let secured = RedisServer::start_with(&["--requirepass", "s3cret"]);
    let refused = bin(&secured.url())
        .args(["inspect", "x"])
        .status()
        .expect("inspect");
    assert_eq!(refused.code(), Some(77));
    let wrong = secured.url().replace("redis://", "redis://:wrong@");
    let wrong = bin(&wrong)
        .args(["inspect", "x"])
        .status()
        .expect("inspect");
    assert_eq!(wrong.code(), Some(77), "a wrong password");

    let server = RedisServer::start();
    let held = spawn_run(&server.url(), &["batch:lock", "--", "sleep", "1"]);
    assert!(support::eventually(Duration::from_secs(10), || {
        server.cmd::<i64>(&["EXISTS", "batch:lock"]) == 1
    }));
    let _: () = server.cmd(&["SET", "batch:sem", "3"]);
    let out = bin(&server.url())
        .args(["--output", "json", "list", "--pattern", "batch:*"])
        .output()
        .expect("list");
    assert!(out.status.success());
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let mut names: Vec<(&str, &str)> = list
        .as_array()
        .expect("array")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().expect("name"),
                s["kind"].as_str().expect("kind"),
            )
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        [("batch:lock", "reentrant"), ("batch:sem", "counter")]
    );
    assert_eq!(wait_exit(held, Duration::from_secs(10)), Some(0));
}

#[test]
fn watch_reports_a_fair_queue_and_the_hand_off() {
    let server = RedisServer::start();
    let url = server.url();
    let watch = bin(&url)
        .args(["--output", "json", "watch", "fq", "--timeout", "5s"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("watch");
    std::thread::sleep(Duration::from_millis(300));
    let first = spawn_run(&url, &["run", "--kind", "fair", "fq", "--", "sleep", "1.5"]);
    std::thread::sleep(Duration::from_millis(500));
    let second = spawn_run(
        &url,
        &[
            "run", "--kind", "fair", "-w", "10", "fq", "--", "sleep", "0.3",
        ],
    );
    assert_eq!(wait_exit(first, Duration::from_secs(10)), Some(0));
    assert_eq!(wait_exit(second, Duration::from_secs(10)), Some(0));
    let out = watch.wait_with_output().expect("watch output");
    assert_eq!(out.status.code(), Some(1), "--timeout ran out");
    let events: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            v["event"].as_str().expect("event").to_owned()
        })
        .collect();
    // The second run queues, is handed the lock (released, then acquired:
    // the fair lock's unlock message goes to the queue head), leaves the
    // queue, and releases.
    for wanted in ["acquired", "queue_joined", "queue_left", "released"] {
        assert!(
            events.iter().any(|e| e == wanted),
            "no {wanted} in {events:?}"
        );
    }
    assert_eq!(
        events.iter().filter(|e| *e == "acquired").count(),
        2,
        "{events:?}"
    );
    assert!(!events.iter().any(|e| e == "expired"), "{events:?}");
}

#[test]
fn a_job_that_is_not_executable_is_126_and_an_unparsable_url_is_78() {
    let server = RedisServer::start();
    let tmp = Tmp::new("exit-codes");
    // A file without the execute bit: found, not runnable.
    let job = tmp.path("not-executable");
    std::fs::write(&job, "#!/bin/sh\nexit 0\n").expect("write the job");
    let status = bin(&server.url())
        .args(["run", "k", "--", &job])
        .status()
        .expect("run");
    assert_eq!(status.code(), Some(126));
    let status = bin("not a redis url")
        .args(["inspect", "k"])
        .status()
        .expect("inspect");
    assert_eq!(status.code(), Some(78));
}

#[test]
fn inspect_notes_a_reader_without_a_live_marker_and_a_hex_permit() {
    let server = RedisServer::start();
    let (gone, marked) = (
        "7f0c2a4e-8d1b-4c39-9e55-2b6f1d3a9c11:42",
        "7f0c2a4e-8d1b-4c39-9e55-2b6f1d3a9c11:43",
    );
    let _: i64 = server.cmd(&["HSET", "rw", "mode", "read", gone, "1", marked, "1"]);
    let _: i64 = server.cmd(&["PEXPIRE", "rw", "30000"]);
    let marker = format!("{{rw}}:{marked}:rwlock_timeout:1");
    let _: () = server.cmd(&["SET", &marker, "1", "PX", "30000"]);
    let out = bin(&server.url())
        .args(["inspect", "rw"])
        .output()
        .expect("inspect");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let noted: Vec<&str> = text
        .lines()
        .filter(|line| line.contains("no live marker"))
        .collect();
    assert_eq!(noted.len(), 1, "{text}");
    assert!(noted[0].contains(gone), "{text}");

    let id = "0123456789abcdef0123456789abcdef";
    let _: () = server.cmd(&["SET", "pes", "1"]);
    let _: i64 = server.cmd(&["ZADD", "{pes}:timeout", "922337203685477", id]);
    let out = bin(&server.url())
        .args(["inspect", "pes"])
        .output()
        .expect("inspect");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|line| line.contains(id) && line.contains("stored as hex text")),
        "{text}"
    );
}
