//! `redisson-lock run` under an interactive bash on a pseudo-terminal: Ctrl-Z
//! gives the shell its prompt back, `fg` continues the job with the
//! terminal. A real redis-server (tests/support), stopped by pid.
#![allow(unsafe_code)] // the pseudo-terminal: posix_openpt, setsid, ioctl

#[path = "../../tests/support/mod.rs"]
mod support;

mod common;

use std::ffi::CStr;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Tmp, read_number, state};
use support::RedisServer;

/// An interactive bash on a fresh pseudo-terminal, its output collected.
struct Shell {
    bash: Child,
    master: File,
    output: Arc<Mutex<String>>,
}

impl Shell {
    fn start(url: &str) -> Shell {
        // SAFETY: plain libc calls on the descriptor opened here; the name
        // is copied out of ptsname's buffer at once.
        let (master, slave) = unsafe {
            let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
            assert!(master >= 0, "posix_openpt");
            assert_eq!(libc::grantpt(master), 0);
            assert_eq!(libc::unlockpt(master), 0);
            let name = CStr::from_ptr(libc::ptsname(master))
                .to_string_lossy()
                .into_owned();
            (File::from_raw_fd(master), name)
        };
        let open = || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&slave)
                .expect("open the terminal")
        };
        let mut command = Command::new("bash");
        command
            .args(["--norc", "--noprofile", "-i"])
            .env("REDISSON_LOCK_URL", url)
            .env_remove("REDIS_URL")
            .env("PS1", "$ ")
            .env("TERM", "dumb")
            .stdin(Stdio::from(open()))
            .stdout(Stdio::from(open()))
            .stderr(Stdio::from(open()));
        // SAFETY: setsid and ioctl are async-signal-safe; the terminal on
        // stdin becomes the new session's controlling terminal.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let bash = command.spawn().expect("start bash");
        let output = Arc::new(Mutex::new(String::new()));
        let mut reader = master.try_clone().expect("clone the master");
        let collected = Arc::clone(&output);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                collected.lock().expect("output").push_str(&text);
            }
        });
        Shell {
            bash,
            master,
            output,
        }
    }

    fn type_in(&mut self, text: &str) {
        self.master.write_all(text.as_bytes()).expect("type");
    }

    /// Waits at most `within` for `text` in the output after `from` bytes;
    /// where it ends.
    fn expect(&self, from: usize, text: &str, within: Duration) -> usize {
        let mut end = None;
        let found = support::eventually(within, || {
            let output = self.output.lock().expect("output");
            end = output
                .get(from..)
                .and_then(|rest| rest.find(text))
                .map(|at| from + at + text.len());
            end.is_some()
        });
        assert!(
            found,
            "no {text:?} from the shell; it printed: {:?}",
            self.output.lock().expect("output").get(from..)
        );
        end.unwrap_or(from)
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        let _ = self.bash.kill();
        let _ = self.bash.wait();
    }
}

/// Field 8 of /proc/PID/stat: the terminal's foreground process group.
fn tpgid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(5)?
        .parse()
        .ok()
}

#[test]
fn ctrl_z_gives_the_shell_its_prompt_back_and_fg_continues_the_job() {
    let server = RedisServer::start();
    let tmp = Tmp::new("terminal");
    let mut shell = Shell::start(&server.url());
    let at = shell.expect(0, "$ ", Duration::from_secs(10));
    let pidfile = tmp.path("pid");
    shell.type_in(&format!(
        "{} run --watchdog-timeout 10s tty10 -- sh -c 'echo $$ > {pidfile}; sleep 1; sleep 1; touch {}'\n",
        env!("CARGO_BIN_EXE_redisson-lock"),
        tmp.path("done")
    ));
    assert!(support::eventually(Duration::from_secs(10), || {
        std::fs::read_to_string(&pidfile).is_ok_and(|t| t.ends_with('\n'))
    }));
    let job: i32 = read_number(&pidfile);
    assert!(
        support::eventually(Duration::from_secs(3), || tpgid(job) == Some(job)),
        "the job's group is not the terminal's foreground group"
    );
    // The wrapper continues the group right after the handover (a process
    // of the job stopped on the terminal before it had it): a Ctrl-Z within
    // those microseconds is undone. A person cannot type that fast.
    std::thread::sleep(Duration::from_millis(300));
    shell.type_in("\x1a"); // Ctrl-Z
    let at = shell.expect(at, "Stopped", Duration::from_secs(5));
    let at = shell.expect(at, "$ ", Duration::from_secs(5));
    assert_eq!(state(job), Some('T'), "the job is not stopped");
    std::thread::sleep(Duration::from_millis(2000));
    assert!(!tmp.exists("done"), "the job ran on while stopped");
    assert_eq!(state(job), Some('T'), "the job continued by itself");
    // The first sleep's time ran out while stopped; the second one runs in
    // the foreground.
    shell.type_in("fg\n");
    assert!(
        support::eventually(Duration::from_secs(5), || tpgid(job) == Some(job)),
        "fg did not give the job the terminal again"
    );
    assert!(
        support::eventually(Duration::from_secs(10), || tmp.exists("done")),
        "the job did not complete after fg"
    );
    shell.type_in("echo rc=$?\n");
    shell.expect(at, "rc=0", Duration::from_secs(10));
    assert_eq!(server.cmd::<i64>(&["EXISTS", "tty10"]), 0, "released");
}
