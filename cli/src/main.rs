//! `redisson-lock`: run a job under a Redisson lock (flock(1) across
//! machines, with kill-on-loss scheduled against the lease), and inspect,
//! list, force-unlock and watch locks shared with Java services. Uses the
//! library's public API only. Data goes to stdout, diagnostics to stderr.

mod args;
mod child;
mod completions;
mod connect;
mod doctor;
mod inspect;
mod permits;
mod run;
mod watch;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};
use connect::{EX_USAGE, Failure};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let usage = e.use_stderr();
            let _ = e.print();
            // --help and --version are successes; every other parse error is
            // a usage error (sysexits' 64, not clap's 2).
            return ExitCode::from(if usage { EX_USAGE } else { 0 });
        }
    };
    match dispatch(&cli) {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            eprintln!("redisson-lock: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

fn dispatch(cli: &Cli) -> Result<u8, Failure> {
    match &cli.command {
        Command::Run(args) => {
            if let Some(asked) = args.permits {
                warn_on_permits_mismatch(cli, &args.name, asked);
            }
            run::run(&cli.conn, args, cli.verbose)
        }
        Command::Inspect { name } => {
            inspect::inspect(&connect::client(&cli.conn, None)?, name, cli.output)
        }
        Command::List { pattern } => {
            inspect::list(&connect::client(&cli.conn, None)?, pattern, cli.output)
        }
        Command::ForceUnlock {
            name,
            if_owner,
            yes,
        } => inspect::force_unlock(
            &connect::client(&cli.conn, None)?,
            name,
            if_owner.as_deref(),
            *yes,
            cli.output,
        ),
        Command::Watch(args) => watch::watch(&connect::client(&cli.conn, None)?, args, cli.output),
        Command::Doctor { max_keys } => {
            doctor::doctor(&connect::client(&cli.conn, None)?, *max_keys, cli.output)
        }
        Command::Permits { name, set } => {
            permits::permits(&connect::client(&cli.conn, None)?, name, *set, cli.output)
        }
        Command::Completions { shell } => completions::print(*shell),
    }
}

/// `run --permits N` on a semaphore set up earlier with another total: a
/// warning on stderr (the run goes on with the existing total). Its own
/// short-lived client, before `run` builds the job's, with at most 1 s to
/// connect and to answer, so that a silent host delays the run by that
/// much only: best effort, silent when Redis cannot be read (the run
/// reports that itself). (run.rs could call `permits::mismatch` with its
/// own client once `try_set_permits` returns `false`, saving the connect.)
fn warn_on_permits_mismatch(cli: &Cli, name: &str, asked: u32) {
    const AT_MOST: std::time::Duration = std::time::Duration::from_secs(1);
    let mut quick = cli.conn.clone();
    quick.connect_timeout = Some(quick.connect_timeout.map_or(AT_MOST, |t| t.min(AT_MOST)));
    quick.response_timeout = Some(quick.response_timeout.map_or(AT_MOST, |t| t.min(AT_MOST)));
    if let Ok(client) = connect::client(&quick, None)
        && let Some(warning) = permits::mismatch(&client, name, asked)
    {
        eprintln!("{warning}");
    }
}
