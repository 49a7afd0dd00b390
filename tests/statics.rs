//! Process-wide state stays small and documented: every `static` item in `src/` (the items
//! of `thread_local!` included) is a row of the table in docs/architecture.md, "Process-wide
//! state", every row is such an item, and there are at most 20.
//!
//! The rule, by text: a `static NAME:` declaration outside comments counts, whatever its
//! type (immutable data belongs in a `const`); `'static` lifetimes do not.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Most process-wide items allowed.
const MAX_ITEMS: usize = 20;

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The names declared `static NAME:` in `text`, comments left out.
fn statics_in(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("static") {
            let before = rest[..at].chars().next_back();
            let after = &rest[at + "static".len()..];
            rest = after;
            if before.is_some_and(|c| c == '\'' || c == '_' || c.is_alphanumeric()) {
                continue;
            }
            let after = after.trim_start();
            let after = after.strip_prefix("mut ").unwrap_or(after).trim_start();
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && after[name.len()..].trim_start().starts_with(':') {
                names.push(name);
            }
        }
    }
    names
}

/// (name, file) of every item in `src/`, files relative to the crate root.
fn items_in_source(root: &Path) -> BTreeSet<(String, String)> {
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut items = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("a readable source file");
        let rel = f
            .strip_prefix(root)
            .expect("under the crate root")
            .to_string_lossy()
            .replace('\\', "/");
        for name in statics_in(&text) {
            assert!(
                items.insert((name.clone(), rel.clone())),
                "{name} declared twice in {rel}"
            );
        }
    }
    items
}

/// (name, file) of every row of the table, and the count its closing line states.
fn items_in_docs(root: &Path) -> (Vec<(String, String)>, usize) {
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).expect("the doc");
    let start = doc
        .find("## Process-wide state")
        .expect("the section on process-wide state");
    let section = &doc[start..];
    let section = match section[3..].find("\n## ") {
        Some(end) => &section[..end + 3],
        None => section,
    };
    let cell = |s: &str| s.trim().trim_matches('`').to_string();
    let rows: Vec<(String, String)> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cols: Vec<&str> = l.split('|').collect();
            (cell(cols[1]), cell(cols[2]))
        })
        .collect();
    let stated = section
        .lines()
        .find_map(|l| l.split_once(" items:"))
        .and_then(|(n, _)| n.trim().parse().ok())
        .expect("a closing line \"N items: ...\"");
    (rows, stated)
}

#[test]
fn process_wide_state_is_listed_and_small() {
    // the package directory where the binary runs (cargo sets it; so does a runner on
    // another machine), else where it was built
    let root = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let root = root.as_path();
    let found = items_in_source(root);
    let (rows, stated) = items_in_docs(root);
    let listed: BTreeSet<(String, String)> = rows.iter().cloned().collect();
    assert_eq!(listed.len(), rows.len(), "a row appears twice: {rows:?}");
    let missing: Vec<_> = found.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&found).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/architecture.md, \"Process-wide state\", lacks {missing:?} and lists {stale:?}, \
         which src/ does not declare"
    );
    assert_eq!(stated, rows.len(), "the closing line's count");
    assert!(
        rows.len() <= MAX_ITEMS,
        "{} process-wide items, at most {MAX_ITEMS} allowed",
        rows.len()
    );
}

#[test]
fn the_scan_sees_statics_and_skips_lifetimes_and_comments() {
    let text = "static A: u8 = 0;\npub(crate) static B_C: X = X;\n\
        fn f() -> &'static str { \"\" }\n// static D: u8 = 0;\n\
        thread_local! { static E: Cell<u8> = const { Cell::new(0) }; }\n\
        static mut F: u8 = 0;\nconst G: &'static u8 = &0;";
    assert_eq!(statics_in(text), ["A", "B_C", "E", "F"]);
}
