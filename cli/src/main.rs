//! `redisson-lock`: run a job under a Redisson lock (flock(1) across
//! machines, with kill-on-loss scheduled against the lease), and inspect,
//! list, force-unlock and watch locks shared with Java services. Uses the
//! library's public API only. Data goes to stdout, diagnostics to stderr.

mod args;
mod child;
mod connect;
mod doctor;
mod inspect;
mod run;
mod watch;

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

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
        Command::Run(args) => run::run(&cli.conn, args, cli.verbose),
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
        Command::Watch(args) => watch::watch(
            &connect::client(&cli.conn, None)?,
            &connect::urls(&cli.conn),
            cli.conn.sentinel.is_some(),
            args,
            cli.output,
        ),
        Command::Doctor { max_keys } => {
            doctor::doctor(&connect::client(&cli.conn, None)?, *max_keys, cli.output)
        }
        Command::Completions { shell } => {
            let mut command = Cli::command();
            clap_complete::generate(
                *shell,
                &mut command,
                "redisson-lock",
                &mut std::io::stdout(),
            );
            Ok(0)
        }
    }
}
