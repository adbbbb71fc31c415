//! `completions SHELL`: clap_complete's script for each shell, with the
//! bash script's defect for a hyphenated binary name repaired.

use std::io::Write;

use clap::CommandFactory;
use clap_complete::Shell;

use crate::args::Cli;
use crate::connect::{EX_SOFTWARE, Failure};

/// The binary's name, as the scripts register it.
const BIN: &str = "redisson-lock";

/// The completion script for `shell`.
pub fn script(shell: Shell) -> Result<String, Failure> {
    let mut command = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, BIN, &mut out);
    let text = String::from_utf8(out).map_err(|e| {
        Failure::new(
            EX_SOFTWARE,
            format!("the {shell} completion script is not UTF-8: {e}"),
        )
    })?;
    Ok(match shell {
        Shell::Bash => repair_bash(&text),
        _ => text,
    })
}

/// clap_complete's bash script names the state of the top-level command
/// `redisson__lock` (the binary name, `-` turned into `__`) where it walks
/// the words, but labels the subcommands' branches
/// `redisson__subcmd__lock__subcmd__...` (the `-` turned into `__subcmd__`),
/// so no subcommand ever completes its options. One spelling for both
/// (a no-op once clap_complete spells them alike).
fn repair_bash(text: &str) -> String {
    text.replace(
        "redisson__subcmd__lock__subcmd__",
        "redisson__lock__subcmd__",
    )
}

/// Prints `shell`'s script on stdout.
pub fn print(shell: Shell) -> Result<u8, Failure> {
    let text = script(shell)?;
    std::io::stdout()
        .write_all(text.as_bytes())
        .map_err(|e| Failure::new(EX_SOFTWARE, format!("cannot write the script: {e}")))?;
    Ok(0)
}
