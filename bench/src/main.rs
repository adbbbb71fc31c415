//! `rlock-bench`: the benchmark driver behind `scripts/bench.sh`.
//!
//! ```text
//! rlock-bench run --contender floor|crate|rslock --scenario S --url U [--key value ...]
//! rlock-bench analyze --contender C [--rep N ...] EVENT_FILES...
//! rlock-bench observe --url U --run-id ID --contender C [--rep N]
//! rlock-bench report --raw RAW.jsonl --json OUT.json --md OUT.md --svg OUT.svg [--machine M.json]
//! rlock-bench free-port
//! ```

mod analyze;
mod common;
mod contenders;
mod observe;
mod report;
mod scenarios;

fn main() {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let result = common::Args::parse(raw.get(1..).unwrap_or(&[])).and_then(|args| {
        match raw.first().map(String::as_str) {
            Some("run") => scenarios::run(&args),
            Some("analyze") => analyze::run(&args),
            Some("observe") => observe::run(&args),
            Some("report") => report::run(&args),
            Some("free-port") => {
                println!("{}", common::free_port()?);
                Ok(())
            }
            _ => Err(anyhow::anyhow!(
                "usage: rlock-bench run|analyze|observe|report|free-port [--key value ...]"
            )),
        }
    });
    if let Err(e) = result {
        eprintln!("rlock-bench: {e:#}");
        std::process::exit(1);
    }
}
