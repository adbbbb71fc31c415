//! The text the crate parses itself: `HoldToken` and `PermitId`
//! (`FromStr`, with `Display` round trips), `redisson_compat`'s version
//! parser (what parses prints back and parses to the same), cluster redirects
//! (`-MOVED <slot> <host:port>`), URLs as an endpoint names them and moves
//! them, and the command-line tool's arguments (cli/src/args.rs, compiled
//! in: `parse_duration`, `parse_signal` and the whole `clap` command line).
//!
//! Input: `[which, text...]`. Asserts: no panic; whatever parses prints
//! back (`Display`) to text that parses to the same value; a hold token
//! prints as one line of printable ASCII without spaces (its documented
//! form); a duration is finite and not negative.

#![no_main]

use libfuzzer_sys::fuzz_target;
use redisson_lock::{HoldToken, PermitId};

#[allow(dead_code)]
#[path = "../../cli/src/args.rs"]
mod args;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    match which % 8 {
        0 => {
            if let Ok(token) = text.parse::<HoldToken>() {
                let printed = token.to_string();
                assert!(
                    printed.bytes().all(|b| b.is_ascii_graphic()),
                    "{text:?} parsed to a token that prints as {printed:?}"
                );
                let again = printed.parse::<HoldToken>();
                assert_eq!(again.ok().as_ref(), Some(&token), "{printed:?}");
            }
        }
        1 => {
            if let Ok(id) = text.parse::<PermitId>() {
                let printed = id.to_string();
                assert!(
                    printed.eq_ignore_ascii_case(&text),
                    "{text:?} -> {printed:?}"
                );
                assert_eq!(printed.parse::<PermitId>().ok(), Some(id));
            }
            if let Ok(bytes) = <[u8; 16]>::try_from(rest.get(..16).unwrap_or_default()) {
                let id = PermitId::from_bytes(bytes);
                assert_eq!(id.to_string().parse::<PermitId>().ok(), Some(id));
            }
        }
        2 => {
            let (line, replied) = text.split_once('\n').unwrap_or((&text, "10.0.0.1:7000"));
            if let Some((to, _slot)) = redisson_lock::__fuzzing::cluster_redirect(line, replied) {
                assert!(
                    to.contains(':'),
                    "{line:?} from {replied:?} redirects to {to:?}"
                );
            }
        }
        3 => {
            let port = u16::from_le_bytes([rest.first().copied().unwrap_or(0), 0x1b]);
            let (url, host) = text.split_once('\n').unwrap_or((&text, "10.0.0.2"));
            if let Some((_, _, at)) = redisson_lock::__fuzzing::endpoint(url, host, port) {
                assert!(at, "{url:?} moved to {host}:{port} is not there");
            }
        }
        4 => {
            if let Ok(duration) = args::parse_duration(&text) {
                // Whatever it is, it prints and reads back as seconds.
                let secs = format!("{}", duration.as_secs_f64());
                let again = args::parse_duration(&secs);
                assert!(
                    again.is_ok(),
                    "{text:?} -> {duration:?} -> {secs:?}: {again:?}"
                );
            }
        }
        5 => {
            if let Ok(signal) = args::parse_signal(&text) {
                assert!((1..=64).contains(&signal), "{text:?} -> {signal}");
            }
        }
        7 => {
            if let Ok((printed, _)) = redisson_lock::__fuzzing::redisson_version(&text) {
                let again = redisson_lock::__fuzzing::redisson_version(&printed);
                assert_eq!(
                    again.ok().map(|(v, _)| v).as_deref(),
                    Some(printed.as_str()),
                    "{text:?} -> {printed:?}"
                );
            }
        }
        _ => {
            use clap::Parser;
            let argv = std::iter::once("redisson-lock".to_owned())
                .chain(text.split('\0').map(str::to_owned));
            let _ = args::Cli::try_parse_from(argv);
        }
    }
});
