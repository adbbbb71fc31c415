//! `doctor`: the library's read-only fleet check, printed.

use std::io::{IsTerminal, Write};

use redisson_lock::{Client, DoctorReport, Severity};
use serde_json::json;

use crate::args::Output;
use crate::connect::Failure;

/// The version of `doctor --output json`'s shape (docs/cli.md, "doctor").
const DOCTOR_JSON_VERSION: u32 = 1;

/// `doctor [--max-keys N]`: exit 0 when nothing is a warning or an error,
/// 1 when something is.
pub fn doctor(client: &Client, max_keys: u64, output: Output) -> Result<u8, Failure> {
    let mut check = client.doctor().max_keys(max_keys);
    let terminal = std::io::stderr().is_terminal();
    if terminal {
        check = check.on_progress(|keys| {
            eprint!("\rredisson-lock doctor: about {keys} keys examined");
            let _ = std::io::stderr().flush();
        });
    }
    let report = check.run();
    if terminal {
        eprint!("\r\x1b[K");
    }
    let report = report?;
    match output {
        Output::Json => println!("{}", to_json(&report)),
        Output::Text => print!("{}", text(&report)),
    }
    Ok(u8::from(report.worst() >= Some(Severity::Warning)))
}

fn to_json(report: &DoctorReport) -> serde_json::Value {
    let findings: Vec<_> = report
        .findings
        .iter()
        .map(|f| {
            let mut finding = json!({
                "kind": f.kind,
                "severity": f.severity.as_str(),
                "name": f.name,
                "detail": f.detail,
                "advice": f.advice,
            });
            if !f.ranges.is_empty() {
                finding["ranges"] = f
                    .ranges
                    .iter()
                    .map(|r| json!({"from": r.from, "to": r.to}))
                    .collect();
            }
            finding
        })
        .collect();
    json!({
        "version": DOCTOR_JSON_VERSION,
        "masters": report.masters,
        "keys_scanned": report.keys_scanned,
        "keys_examined": report.keys_examined,
        "complete": report.complete,
        "findings": findings,
    })
}

fn text(report: &DoctorReport) -> String {
    let mut out = format!(
        "examined about {} keys on {} master(s), {} of them hashes or sorted sets{}\n",
        report.keys_examined,
        report.masters,
        report.keys_scanned,
        if report.complete {
            ""
        } else {
            " (stopped early: the key budget)"
        }
    );
    if report.findings.is_empty() {
        out.push_str("no findings\n");
    }
    for f in &report.findings {
        let name = f
            .name
            .as_deref()
            .map(|n| format!(" `{n}`"))
            .unwrap_or_default();
        out.push_str(&format!(
            "{:<7} {}{name}: {}\n",
            f.severity, f.kind, f.detail
        ));
        out.push_str(&format!("        {}\n", f.advice));
    }
    out
}
