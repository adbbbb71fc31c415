//! What an operator meets around `run`: shell completions, the semaphore
//! mode's permits (shown, resized, reset, a mismatch warned about), and
//! errors that say what to fix, against real redis-server processes.

#[path = "../../tests/support/mod.rs"]
mod support;

mod common;

use std::process::{Command, Output};
use std::time::Duration;

use common::{Tmp, bin, spawn_run, wait_exit};
use support::RedisServer;

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `redisson-lock ARGS` against `url`, waited for.
fn cli(url: &str, args: &[&str]) -> Output {
    bin(url).args(args).output().expect("run redisson-lock")
}

/// The script `completions SHELL` prints, written to a file in `tmp`.
fn completion_script(tmp: &Tmp, shell: &str) -> String {
    let out = cli("redis://127.0.0.1:1", &["completions", shell]);
    assert!(
        out.status.success(),
        "completions {shell}: {}",
        stderr(&out)
    );
    assert!(!out.stdout.is_empty(), "an empty {shell} script");
    let path = tmp.path(&format!("completion.{shell}"));
    std::fs::write(&path, &out.stdout).expect("write the script");
    path
}

/// What bash's completion offers for the command line `words` (the last
/// one being completed), by sourcing the script and calling the function
/// it registered for `redisson-lock`, as bash does on TAB.
fn bash_complete(script: &str, words: &[&str]) -> Vec<String> {
    let cword = words.len() - 1;
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{script}'\n\
         spec=$(complete -p redisson-lock) || exit 3\n\
         function=${{spec##*-F }}; function=${{function%% *}}\n\
         COMP_WORDS=({words})\n\
         COMP_CWORD={cword}\n\
         COMP_LINE=\"${{COMP_WORDS[*]}}\"\n\
         COMP_POINT=${{#COMP_LINE}}\n\
         \"$function\" redisson-lock \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$((COMP_CWORD-1))]}}\"\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        words = quoted.join(" "),
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &program])
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "bash completion of {words:?} failed: {}",
        stderr(&out)
    );
    stdout(&out).lines().map(str::to_owned).collect()
}

#[test]
fn bash_completes_every_subcommand_and_its_own_flags() {
    let tmp = Tmp::new("completions-bash");
    let script = completion_script(&tmp, "bash");

    let top = bash_complete(&script, &["redisson-lock", ""]);
    for sub in [
        "run",
        "inspect",
        "list",
        "force-unlock",
        "watch",
        "permits",
        "completions",
    ] {
        assert!(top.iter().any(|w| w == sub), "no `{sub}` in {top:?}");
    }
    // Each subcommand's own flags (the part that was broken: none of them
    // completed), and the global connection options.
    let cases: [(&str, &[&str]); 6] = [
        (
            "run",
            &["--permits", "--hold-at-least", "--nonblock", "--url"],
        ),
        ("inspect", &["--url", "--output"]),
        ("list", &["--pattern", "--url"]),
        ("force-unlock", &["--if-owner", "--yes"]),
        ("watch", &["--until", "--timeout", "--interval"]),
        ("permits", &["--set", "--url"]),
    ];
    for (sub, flags) in cases {
        let offered = bash_complete(&script, &["redisson-lock", sub, "--"]);
        for flag in flags {
            assert!(
                offered.iter().any(|w| w == flag),
                "`redisson-lock {sub} --<TAB>` does not offer {flag}: {offered:?}"
            );
        }
    }
    // A value: `--kind <TAB>` lists the lock types, `completions <TAB>` the shells.
    let kinds = bash_complete(&script, &["redisson-lock", "run", "--kind", ""]);
    assert!(kinds.iter().any(|w| w == "fenced"), "{kinds:?}");
    let shells = bash_complete(&script, &["redisson-lock", "completions", ""]);
    for shell in ["bash", "zsh", "fish"] {
        assert!(shells.iter().any(|w| w == shell), "{shells:?}");
    }
}

/// Whether `shell` is installed; says so on stderr when it is not.
fn installed(shell: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {shell}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("SKIPPED: {shell} is not installed; its completion script was not parsed");
    }
    found
}

#[test]
fn the_other_shells_scripts_name_the_binary_and_parse_where_installed() {
    let tmp = Tmp::new("completions-other");
    for (shell, check) in [
        ("zsh", "zsh -n"),
        ("fish", "fish --no-execute"),
        ("elvish", "elvish -compileonly"),
        ("powershell", "pwsh -NoProfile -Command Get-Command -Syntax"),
    ] {
        let script = completion_script(&tmp, shell);
        let text = std::fs::read_to_string(&script).expect("read the script");
        assert!(
            text.contains("redisson-lock"),
            "the {shell} script does not register `redisson-lock`"
        );
        assert!(
            !text.contains("redisson__subcmd__lock"),
            "the {shell} script has bash's broken state names"
        );
        let binary = check.split(' ').next().unwrap_or(check);
        if installed(binary) {
            let out = Command::new("sh")
                .args(["-c", &format!("{check} '{script}'")])
                .output()
                .expect("the shell");
            assert!(
                out.status.success(),
                "{shell} does not parse its completion script: {}",
                stderr(&out)
            );
        }
    }
}

#[test]
fn permits_are_shown_as_permits_resized_and_a_semaphore_is_reset_by_force_unlock() {
    let server = RedisServer::start();
    let url = server.url();
    let tmp = Tmp::new("permits-operator");
    let started = tmp.path("started");
    // Two jobs hold both permits of a 2-permit semaphore.
    let jobs: Vec<_> = (0..2)
        .map(|i| {
            spawn_run(
                &url,
                &[
                    "run",
                    "--permits",
                    "2",
                    "--watchdog-timeout",
                    "3s",
                    "pool",
                    "--",
                    "sh",
                    "-c",
                    &format!("touch {started}{i}; sleep 30"),
                ],
            )
        })
        .collect();
    assert!(support::eventually(Duration::from_secs(10), || {
        tmp.exists("started0") && tmp.exists("started1")
    }));

    let inspect = stdout(&cli(&url, &["inspect", "pool"]));
    assert!(
        inspect.contains("permits    2 of 2 taken, 0 available"),
        "{inspect}"
    );
    assert!(
        !inspect.contains("locked"),
        "a semaphore is not `locked`: {inspect}"
    );
    assert_eq!(inspect.matches("permit     ").count(), 2, "{inspect}");
    let list = stdout(&cli(&url, &["list"]));
    assert!(list.contains("permits=2/2"), "{list}");
    assert!(!list.contains("holders=0"), "{list}");

    // A later --permits 5 keeps 2 and says so, with the way out.
    let busy = cli(&url, &["run", "-n", "--permits", "5", "pool", "--", "true"]);
    assert_eq!(busy.status.code(), Some(75), "{}", stderr(&busy));
    let warning = stderr(&busy);
    assert!(
        warning.contains("already has 2 permits, not the 5")
            && warning.contains("permits pool --set 5"),
        "{warning}"
    );

    // Resized: 3 more available while the 2 stay out.
    let set = cli(&url, &["permits", "pool", "--set", "5"]);
    assert!(set.status.success(), "{}", stderr(&set));
    assert!(
        stdout(&set).contains("permits set to 5, was 2 (2 of 5 taken, 3 available)"),
        "{}",
        stdout(&set)
    );
    let json = cli(&url, &["--output", "json", "permits", "pool"]);
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(value["permits"]["total"], 5);
    assert_eq!(value["permits"]["acquired"], 2);
    let fits = cli(&url, &["run", "-n", "--permits", "5", "pool", "--", "true"]);
    assert_eq!(fits.status.code(), Some(0), "{}", stderr(&fits));
    assert!(!stderr(&fits).contains("warning"), "{}", stderr(&fits));

    // Reset: force-unlock deletes it; the next run sets it up afresh.
    let reset = cli(&url, &["force-unlock", "--yes", "pool"]);
    assert_eq!(reset.status.code(), Some(0), "{}", stderr(&reset));
    assert!(
        stdout(&reset).contains("semaphore deleted"),
        "{}",
        stdout(&reset)
    );
    assert_eq!(server.cmd::<i64>(&["EXISTS", "pool"]), 0);
    let gone = cli(&url, &["permits", "pool"]);
    assert_eq!(gone.status.code(), Some(1));
    let fresh = cli(&url, &["run", "-n", "--permits", "3", "pool", "--", "true"]);
    assert_eq!(fresh.status.code(), Some(0), "{}", stderr(&fresh));
    assert!(!stderr(&fresh).contains("warning"), "{}", stderr(&fresh));
    assert!(
        stdout(&cli(&url, &["permits", "pool"])).contains("0 of 3 taken, 3 available"),
        "the next run set it up with its own total"
    );

    for job in jobs {
        // Their permits are gone: stopped at their next renewal (every
        // third of their 3 s lease).
        let code = wait_exit(job, Duration::from_secs(10));
        assert_eq!(code, Some(124), "a job whose permit was deleted is stopped");
    }
}

#[test]
fn a_password_to_a_server_without_one_is_refused_for_good_77() {
    let server = RedisServer::start();
    let url = server.url().replace("redis://", "redis://:secret@");
    let out = cli(&url, &["inspect", "x"]);
    assert_eq!(out.status.code(), Some(77), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("without any password configured"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_bad_url_says_what_is_wrong_with_it() {
    for (url, says) in [
        ("http://127.0.0.1:6379", "scheme `http`"),
        ("redis://127.0.0.1:99999", "port `99999`"),
        ("redis://127.0.0.1:6379/x", "database `x`"),
        ("not a redis url", "no scheme"),
        ("redis://", "no host"),
    ] {
        let out = cli(url, &["inspect", "k"]);
        assert_eq!(out.status.code(), Some(78), "{url}: {}", stderr(&out));
        let message = stderr(&out);
        assert!(message.contains(says), "{url}: {message}");
        assert!(!message.contains("did not parse -"), "{url}: {message}");
    }
}

#[test]
fn run_help_groups_the_connection_options_and_watch_help_says_what_it_prints() {
    let run = cli("redis://127.0.0.1:1", &["run", "--help"]);
    let help = stdout(&run);
    let heading = help
        .find("Connection options:")
        .expect("a connection heading");
    let url = help.find("--url").expect("--url");
    let permits = help.find("--permits").expect("--permits");
    assert!(url > heading && permits < heading, "{help}");
    let watch = stdout(&cli("redis://127.0.0.1:1", &["watch", "--help"]));
    assert!(watch.contains("by default text"), "{watch}");
    let top = stdout(&cli("redis://127.0.0.1:1", &["--help"]));
    assert!(
        top.contains(
            "1       force-unlock changed nothing (free, or --if-owner no longer holds it)"
        ),
        "{top}"
    );
}

#[test]
fn watch_prints_utc_times_by_default() {
    let server = RedisServer::start();
    let url = server.url();
    let watch = bin(&url)
        .args(["watch", "w", "--timeout", "3s"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("watch");
    std::thread::sleep(Duration::from_millis(300));
    let job = spawn_run(&url, &["run", "w", "--", "sleep", "0.5"]);
    assert_eq!(wait_exit(job, Duration::from_secs(10)), Some(0));
    let out = watch.wait_with_output().expect("watch output");
    let text = stdout(&out);
    let first = text.lines().next().expect("an event line");
    // 2026-11-28T04:15:03.120Z acquired count=1 holder=<uuid>:<thread>
    let (time, rest) = first.split_once(' ').expect("time, then the event");
    assert_eq!(time.len(), 24, "{first}");
    assert!(
        time.ends_with('Z') && time.as_bytes()[10] == b'T',
        "{first}"
    );
    assert!(rest.starts_with("acquired "), "{first}");
    assert!(!rest.contains('"'), "values are not JSON-quoted: {first}");
}
