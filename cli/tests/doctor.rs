//! `redisson-lock doctor` against a real redis-server: exit 0 on a healthy
//! server, 1 with a finding of warning or error severity, its JSON shape
//! (version 1), and 69 when the server is unreachable.

#[path = "../../tests/support/mod.rs"]
mod support;

mod common;

use common::bin;
use support::RedisServer;

#[test]
fn doctor_exits_0_on_a_healthy_server_1_on_a_hazard_and_69_unreachable() {
    let (server, client) = RedisServer::start_with_client();
    let _held = client.lock("healthy").lock().expect("lock");
    let clean = bin(&server.url()).arg("doctor").output().expect("doctor");
    assert_eq!(clean.status.code(), Some(0), "{clean:?}");
    assert!(String::from_utf8_lossy(&clean.stdout).contains("no findings"));

    let reader = "5f0d3c1e-2b7a-4e55-9a3c-0c1d2e3f4a5b:7";
    server.cmd::<i64>(&["HSET", "rw", "mode", "read", reader, "1"]);
    let found = bin(&server.url())
        .args(["doctor", "--output", "json"])
        .output()
        .expect("doctor");
    assert_eq!(found.status.code(), Some(1), "{found:?}");
    let json: serde_json::Value = serde_json::from_slice(&found.stdout).expect("JSON");
    assert_eq!(json["version"], 1);
    assert_eq!(json["complete"], true);
    assert_eq!(json["masters"], 1);
    let finding = &json["findings"][0];
    assert_eq!(finding["kind"], "reader-without-marker");
    assert_eq!(finding["severity"], "error");
    assert_eq!(finding["name"], "rw");
    assert!(
        finding["detail"]
            .as_str()
            .is_some_and(|d| d.contains(reader))
    );
    assert!(finding["advice"].as_str().is_some_and(|a| !a.is_empty()));

    let text = bin(&server.url()).arg("doctor").output().expect("doctor");
    assert_eq!(text.status.code(), Some(1));
    let out = String::from_utf8_lossy(&text.stdout);
    assert!(out.contains("error   reader-without-marker `rw`"), "{out}");

    let port = server.port();
    drop(server);
    let gone = bin(&format!("redis://127.0.0.1:{port}/"))
        .arg("doctor")
        .output()
        .expect("doctor");
    assert_eq!(gone.status.code(), Some(69), "{gone:?}");
}

/// Issue 34: `inspect` says who a holder is when it is a client of this
/// crate (its pid, application and address), and never guesses otherwise.
#[test]
fn inspect_names_a_rust_holders_process_and_not_an_unnamed_one() {
    let server = RedisServer::start();
    let holder = redisson_lock::Client::builder(server.url())
        .application_name("nightly-report")
        .build()
        .expect("client");
    let guard = holder.lock("who").lock().expect("lock");
    let out = bin(&server.url())
        .args(["inspect", "who"])
        .output()
        .expect("inspect");
    let text = String::from_utf8_lossy(&out.stdout);
    let expected = format!(
        "who        {}: pid {}, application nightly-report, at 127.0.0.1:",
        holder.owner_field(),
        std::process::id()
    );
    assert!(text.contains(&expected), "{text}");
    let json = bin(&server.url())
        .args(["inspect", "who", "--output", "json"])
        .output()
        .expect("inspect");
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(json["processes"][holder.id()]["pid"], std::process::id());
    drop(guard);
    let stranger = "5f0d3c1e-2b7a-4e55-9a3c-0c1d2e3f4a5b:7";
    server.cmd::<i64>(&["HSET", "who", stranger, "1"]);
    let out = bin(&server.url())
        .args(["inspect", "who"])
        .output()
        .expect("inspect");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "who        {stranger}: not a redisson-lock client"
        )),
        "{text}"
    );
}
