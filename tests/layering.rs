//! The crate's layers, checked: every `crate::` path in `src/` (in `use`
//! items and inline, `$crate::` in macros too) must name a module of its
//! own layer or one below. The table is CONTRIBUTING.md's "Architecture":
//!
//! | layer | top-level modules |
//! |---|---|
//! | L0 base | `cancel`, `config`, `error`, `failpoint`, `fork`, `lua`, `names`, `owner`, `spawn`, `sync` |
//! | L1 protocol | `protocol` |
//! | L2 transport | `net`, `pubsub` |
//! | L3 topology | `topology` |
//! | L4 engine | `engine` |
//! | L5 api | `client`, `lock`, `multi`, `synchronizers`, `fuzzing` (feature `fuzzing` only) |
//!
//! A new top-level module must be added to the table (an unknown one
//! fails), so that the picture stays true after the next split.
//!
//! Also checked here, over the same files: no two types of `src/` share a
//! name (a reader who meets `State` or `Entry` should not have to ask
//! which), and every public type whose drop releases something over the
//! network (a guard, permits, a leadership) carries
//! `#[clippy::has_significant_drop]`, as `lock_api`'s guards do.

use std::fs;
use std::path::{Path, PathBuf};

const LAYERS: &[(&str, &[&str])] = &[
    (
        "L0 base",
        &[
            "cancel",
            "config",
            "error",
            "failpoint",
            "fork",
            "lua",
            "names",
            "owner",
            "spawn",
            "sync",
        ],
    ),
    ("L1 protocol", &["protocol"]),
    ("L2 transport", &["net", "pubsub"]),
    ("L3 topology", &["topology"]),
    ("L4 engine", &["engine"]),
    (
        "L5 api",
        &["client", "lock", "multi", "synchronizers", "fuzzing"],
    ),
];

/// The layer of top-level module `module`, `None` if the table lacks it.
fn layer(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&module))
}

/// The top-level module a file of `src/` belongs to (`None`: `lib.rs`).
fn module_of(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    let module = first.strip_suffix(".rs").unwrap_or(first);
    (module != "lib").then(|| module.to_owned())
}

/// `source` without comments (line comments and doc comments; block
/// comments are not used in this crate) and without string literals, so
/// that a `crate::` in prose or in a message is not an import.
fn code_only(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    for line in source.lines() {
        let mut in_string = false;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if in_string => {
                    chars.next();
                }
                '"' => in_string = !in_string,
                '/' if !in_string && chars.peek() == Some(&'/') => break,
                _ if in_string => {}
                _ => out.push(c),
            }
        }
        out.push('\n');
    }
    out
}

/// The first path segment of every item named after `crate::` in `code`:
/// `crate::a::b` gives `a`, `crate::{a::b, c}` gives `a` and `c`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let preceded_by_ident = rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        rest = &rest[at + "crate::".len()..];
        if preceded_by_ident {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group, nested groups skipped.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.push(first_segment(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            found.push(first_segment(&item));
        } else {
            found.push(first_segment(rest));
        }
    }
    found.retain(|segment| !segment.is_empty());
    found
}

fn first_segment(path: &str) -> String {
    path.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Every upward import in the file `relative` (to `src/`) with `source`,
/// and every module the table lacks.
fn violations(relative: &Path, source: &str) -> Vec<String> {
    let Some(module) = module_of(relative) else {
        return Vec::new();
    };
    let Some(own) = layer(&module) else {
        return vec![format!(
            "{}: module `{module}` is in no layer of the table",
            relative.display()
        )];
    };
    let mut problems = Vec::new();
    for target in crate_paths(&code_only(source)) {
        match layer(&target) {
            // Re-exports at the crate root (`crate::Error`, `crate::Lock`)
            // are the api's names: only the api may use them.
            None if target.starts_with(|c: char| c.is_uppercase()) => {
                if own < LAYERS.len() - 1 {
                    problems.push(format!(
                        "{}: `crate::{target}` (a root re-export) used below the api layer",
                        relative.display()
                    ));
                }
            }
            None => problems.push(format!(
                "{}: `crate::{target}` is in no layer of the table",
                relative.display()
            )),
            Some(theirs) if theirs > own => problems.push(format!(
                "{}: `crate::{target}` ({}) imported from `{module}` ({}): an import must not point up",
                relative.display(),
                LAYERS[theirs].0,
                LAYERS[own].0
            )),
            Some(_) => {}
        }
    }
    problems
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .expect("read src/")
        .map(|entry| entry.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// Every `.rs` file of `src/`, and `src/` itself.
fn src_files() -> (PathBuf, Vec<PathBuf>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 20, "found only {} files", files.len());
    (src, files)
}

/// The types `code` declares: structs, enums, unions, traits, and type
/// aliases at the top level of a file (an indented `type` is an associated
/// type or a function's own alias, such as `type Err` of every `FromStr`).
fn declared_types(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in code.lines() {
        let indented = line.starts_with(char::is_whitespace);
        let mut rest = line.trim_start();
        if let Some(after) = rest.strip_prefix("pub") {
            rest = match after.strip_prefix('(') {
                Some(scoped) => scoped.split_once(')').map_or("", |(_, r)| r),
                None => after,
            }
            .trim_start();
        }
        for keyword in ["struct ", "enum ", "union ", "trait ", "type "] {
            if keyword == "type " && indented {
                continue;
            }
            if let Some(after) = rest.strip_prefix(keyword) {
                let name = first_segment(after);
                if name.starts_with(|c: char| c.is_uppercase()) {
                    found.push(name);
                }
            }
        }
    }
    found
}

#[test]
fn no_import_in_src_points_up_the_layer_table() {
    let (src, files) = src_files();
    let problems: Vec<String> = files
        .iter()
        .flat_map(|path| {
            let source = fs::read_to_string(path).expect("read");
            violations(path.strip_prefix(&src).expect("below src"), &source)
        })
        .collect();
    assert!(
        problems.is_empty(),
        "{} layering problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn a_planted_upward_import_is_caught() {
    let planted = "use crate::error::Result;\nuse crate::{lua::Lua, engine::Engine};\n";
    let problems = violations(Path::new("protocol/reentrant.rs"), planted);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("crate::engine"), "{problems:?}");
    let inline = "fn f() { let _ = crate::client::Client::open(\"x\"); }";
    assert_eq!(violations(Path::new("net/pool.rs"), inline).len(), 1);
    let macro_path = "$crate::topology::Topology";
    assert_eq!(violations(Path::new("engine/x.rs"), macro_path).len(), 0);
    assert_eq!(violations(Path::new("pubsub/x.rs"), macro_path).len(), 1);
    let root_reexport = "fn f() -> crate::Result<()> { Ok(()) }";
    assert_eq!(violations(Path::new("engine/x.rs"), root_reexport).len(), 1);
    assert_eq!(violations(Path::new("client/x.rs"), root_reexport).len(), 0);
}

#[test]
fn prose_and_strings_are_not_imports() {
    let text = "/// see [`crate::client::Client`]\nlet s = \"crate::engine\"; // crate::lock\n";
    assert!(violations(Path::new("protocol/x.rs"), text).is_empty());
    assert!(!violations(Path::new("newmodule/x.rs"), "").is_empty());
}

#[test]
fn no_two_types_of_src_share_a_name() {
    let (src, files) = src_files();
    let mut seen: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for path in &files {
        let source = fs::read_to_string(path).expect("read");
        let relative = path.strip_prefix(&src).expect("below src").display();
        for name in declared_types(&code_only(&source)) {
            seen.entry(name).or_default().push(relative.to_string());
        }
    }
    let shared: Vec<String> = seen
        .iter()
        .filter(|(_, places)| places.len() > 1)
        .map(|(name, places)| format!("`{name}`: {}", places.join(", ")))
        .collect();
    assert!(
        seen.len() > 100,
        "found only {} type names: is the scan broken?",
        seen.len()
    );
    assert!(
        shared.is_empty(),
        "{} type name(s) declared more than once in src/ (rename the internal ones after what they are):\n{}",
        shared.len(),
        shared.join("\n")
    );
}

#[test]
fn declared_types_are_found_and_associated_types_are_not() {
    let code = "pub(crate) struct A {\n}\nenum B { X }\npub trait C {}\ntype D = u8;\nimpl FromStr for A {\n    type Err = E;\n}\nmod tests {\n    struct F;\n}\n";
    assert_eq!(declared_types(code), ["A", "B", "C", "D", "F"]);
}

/// A public type whose `Drop` holds nothing and sends nothing, with why.
const INSIGNIFICANT_DROPS: &[(&str, &str)] = &[(
    "LockWatch",
    "its drop stops its own thread; the watch holds nothing",
)];

/// The types of `code` with a `Drop` of their own: an `impl ... Drop for
/// Name`, or the guards' shared macro (`guard_common!(Name, ...)`).
fn dropping_types(code: &str) -> Vec<String> {
    ["Drop for ", "guard_common!("]
        .iter()
        .flat_map(|marker| code.split(marker).skip(1).map(first_segment))
        .filter(|name| !name.is_empty() && name != "$guard")
        .collect()
}

/// The plain `pub` structs of `code`: name, whether
/// `#[clippy::has_significant_drop]` is among the attributes right above
/// it, and its body (its fields).
fn public_structs(code: &str) -> Vec<(String, bool, String)> {
    let mut found = Vec::new();
    let mut significant = false;
    let mut lines = code.lines();
    while let Some(line) = lines.next() {
        if line.starts_with("#[") {
            significant |= line.contains("clippy::has_significant_drop");
            continue;
        }
        if let Some(rest) = line.strip_prefix("pub struct ") {
            let mut body = rest.to_owned();
            if !rest.trim_end().ends_with(';') {
                for field in lines.by_ref() {
                    body.push_str(field);
                    if field.starts_with('}') {
                        break;
                    }
                }
            }
            found.push((first_segment(rest), significant, body));
        }
        significant = false;
    }
    found
}

#[test]
fn every_public_type_dropped_over_the_network_has_a_significant_drop() {
    let (_, files) = src_files();
    let mut dropping = Vec::new();
    let mut public = Vec::new();
    for path in &files {
        let code = code_only(&fs::read_to_string(path).expect("read"));
        dropping.extend(dropping_types(&code));
        public.extend(public_structs(&code));
    }
    // A public type holding one of them (a leadership holds a guard) drops
    // it: it is one of them.
    loop {
        let holders: Vec<String> = public
            .iter()
            .filter(|(name, _, body)| {
                !dropping.contains(name)
                    && body
                        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .any(|word| dropping.iter().any(|held| held == word))
            })
            .map(|(name, _, _)| name.clone())
            .collect();
        if holders.is_empty() {
            break;
        }
        dropping.extend(holders);
    }
    let checked: Vec<&str> = public
        .iter()
        .filter(|(name, _, _)| dropping.contains(name))
        .map(|(name, _, _)| name.as_str())
        .collect();
    for guard in [
        "LockGuard",
        "OwnedLockGuard",
        "MultiLockGuard",
        "Leadership",
    ] {
        assert!(checked.contains(&guard), "{guard} not found in {checked:?}");
    }
    let missing: Vec<&str> = public
        .iter()
        .filter(|(name, significant, _)| {
            dropping.contains(name)
                && !significant
                && !INSIGNIFICANT_DROPS.iter().any(|(exempt, _)| exempt == name)
        })
        .map(|(name, _, _)| name.as_str())
        .collect();
    assert!(
        missing.is_empty(),
        "public types whose drop releases over the network without #[clippy::has_significant_drop]: {missing:?}"
    );
}
