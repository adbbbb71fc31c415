//! Helpers of the CLI's tests: the binary, temporary files, process checks.
#![allow(dead_code)]
#![allow(unsafe_code)] // kill(pid, 0): whether a process (group) exists

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The binary, with `url` as its Redis (and no other URL from the
/// environment).
pub fn bin(url: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_redisson-lock"));
    command
        .env("REDISSON_LOCK_URL", url)
        .env_remove("REDIS_URL")
        .stdin(Stdio::null());
    command
}

/// Starts `redisson-lock ARGS` (a `run` unless the args say otherwise).
pub fn spawn_run(url: &str, args: &[&str]) -> Child {
    let args: Vec<&str> = if args
        .first()
        .is_some_and(|a| *a == "run" || a.starts_with("--"))
    {
        args.to_vec()
    } else {
        std::iter::once("run").chain(args.iter().copied()).collect()
    };
    bin(url).args(args).spawn().expect("spawn redisson-lock")
}

/// Waits at most `within` for `child`; its exit code (killed if it is still
/// running then).
pub fn wait_exit(mut child: Child, within: Duration) -> Option<i32> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status.code();
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("redisson-lock did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether process `pid` exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Whether any process of group `pgid` exists.
pub fn group_alive(pgid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

/// Now, in ns since the Unix epoch (as `date +%s%N` prints it).
pub fn epoch_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_nanos()
}

/// A `date +%s%N` written to `path`.
pub fn read_ns(path: &str) -> u128 {
    read_number(path)
}

/// The number (a pid, a time) a job wrote to `path`.
pub fn read_number<T: std::str::FromStr>(path: &str) -> T
where
    T::Err: std::fmt::Display,
{
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {path}: {e}"))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A temporary directory, removed on drop.
pub struct Tmp(PathBuf);

impl Tmp {
    /// A fresh directory for test `name`.
    pub fn new(name: &str) -> Tmp {
        let dir = std::env::temp_dir().join(format!(
            "redisson-lock-cli-{name}-{}-{}",
            std::process::id(),
            epoch_ns()
        ));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        Tmp(dir)
    }

    /// A file's path in it.
    pub fn path(&self, file: &str) -> String {
        self.0.join(file).to_string_lossy().into_owned()
    }

    /// Whether that file exists.
    pub fn exists(&self, file: &str) -> bool {
        self.0.join(file).exists()
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Process `pid`'s state letter from /proc/PID/stat (`T` stopped, `S`
/// sleeping, `Z` zombie...); `None` when it is gone.
pub fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.trim_start().chars().next()
}

/// Sends `signal` to `pid` (a negative `pid`: to that process group); only
/// ever to processes the test started.
pub fn signal(pid: i32, signal: i32) {
    // SAFETY: kill takes plain integers.
    let sent = unsafe { libc::kill(pid, signal) };
    assert_eq!(sent, 0, "kill({pid}, {signal})");
}
