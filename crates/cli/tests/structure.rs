//! The shape of the code (issue 29): inside `pev-engine` and `pev` (the CLI), the modules that
//! import each other in a circle, a module that imports its parent, an import of a higher layer
//! (`ENGINE_LAYERS`, `CLI_LAYERS`), and the files over 800 lines anywhere in the workspace.
//!
//! A module's imports are read from its source, test code left out (`*_tests.rs` files and
//! what follows a `#[cfg(test)]`): every `crate::…` and `super::…` path, braces expanded,
//! resolved to the longest module path it names. The circles are the strongly connected
//! components of that graph with more than one module.
//!
//! Both crates are at zero circles and no file in the workspace is over 800 lines: a new circle,
//! or a file growing past the limit, fails this test (`OVERSIZE` is where a file being split
//! would be listed, with the length it may not exceed). `cargo test -p pev --test structure -- --nocapture`
//! prints the circles and the large files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Modules in circles, and circles, per crate: never more than these.
const ENGINE_BUDGET: (usize, usize) = (0, 0);
const CLI_BUDGET: (usize, usize) = (0, 0);
/// Imports of a parent module by its child (a `#[path]` helper importing the module that
/// declares it): none.
const ENGINE_UPWARD: usize = 0;
const CLI_UPWARD: usize = 0;
/// Files over [`MAX_LINES`] lines (tests included) allowed while they are split: none.
const MAX_LINES: usize = 800;
const OVERSIZE: &[(&str, usize)] = &[];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every non-test module of the crate at `src`: its path (`a::b`, `""` for the root) and file.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "bin") {
                    stack.push(path);
                }
                continue;
            }
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
            let test_only =
                name.ends_with("_tests.rs") || matches!(name, "tests.rs" | "test_clients.rs");
            if !name.ends_with(".rs") || test_only {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap_or(&path).with_extension("");
            let mut parts: Vec<String> =
                rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
            if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                parts.pop();
            }
            out.insert(parts.join("::"), path);
        }
    }
    // `#[path = "x.rs"] mod name;` makes x.rs the module `declaring::name`.
    let declared: Vec<(String, PathBuf)> = out
        .iter()
        .flat_map(|(module, file)| {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
            let mut found = Vec::new();
            let marker = "#[path = \"";
            for (at, _) in text.match_indices(marker) {
                let rest = &text[at + marker.len()..];
                let Some(end) = rest.find('"') else { continue };
                let target = dir.join(&rest[..end]);
                let Some(name) = rest[end..]
                    .split("mod ")
                    .nth(1)
                    .and_then(|r| r.split(|c: char| !(c.is_alphanumeric() || c == '_')).next())
                else {
                    continue;
                };
                let path =
                    if module.is_empty() { name.to_owned() } else { format!("{module}::{name}") };
                found.push((path, target));
            }
            found
        })
        .collect();
    for (module, file) in declared {
        out.retain(|_, f| *f != file);
        if !file.to_string_lossy().ends_with("_tests.rs") {
            out.insert(module, file);
        }
    }
    out
}

/// The byte ranges of inline `mod name { … }` blocks, where `super` names the file's module.
fn inline_modules(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices("mod ") {
        let rest = &text[at + 4..];
        let name_len = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(0);
        if name_len == 0 || !rest[name_len..].trim_start().starts_with('{') {
            continue;
        }
        let open = at + 4 + name_len + rest[name_len..].find('{').unwrap_or(0);
        let end = pev_test_support::matching(text, open, '{', '}').unwrap_or(text.len());
        out.push((open, end));
    }
    out
}

/// The source without its test code.
fn non_test(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |at| &text[..at])
}

/// Every path after `crate::` or `super::` (braces expanded), as segments from the crate root.
fn imports(module: &str, text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let here: Vec<String> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(str::to_owned).collect()
    };
    let bytes = text.as_bytes();
    let inline = inline_modules(text);
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        let nested = inline.iter().any(|(a, b)| *a < i && i < *b);
        let (base, skip) = if rest.starts_with("crate::") && !preceded_by_ident(bytes, i) {
            (Vec::new(), "crate::".len())
        } else if rest.starts_with("super::") && !preceded_by_ident(bytes, i) {
            // `super::super::x` climbs once per `super`.
            let mut base = here.clone();
            let mut at = 0;
            let mut first = true;
            while rest[at..].starts_with("super::") {
                // In an inline module, the first `super` is the file's own module.
                if !(first && nested) {
                    base.pop();
                }
                first = false;
                at += "super::".len();
            }
            (base, at)
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        let (paths, used) = read_tree(&text[i + skip..]);
        for p in paths {
            let mut full = base.clone();
            full.extend(p);
            out.push(full);
        }
        i += skip + used.max(1);
    }
    out
}

fn preceded_by_ident(bytes: &[u8], i: usize) -> bool {
    i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b':')
}

/// A use-tree at the start of `text`: `a::b::c`, `a::{b, c::d}`; the paths and bytes read.
fn read_tree(text: &str) -> (Vec<Vec<String>>, usize) {
    let mut segments = Vec::new();
    let mut i = 0;
    let bytes = text.as_bytes();
    loop {
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        if i > start {
            segments.push(text[start..i].to_owned());
        }
        let group = if i == 0 && text.starts_with('{') {
            Some(1)
        } else if text[i..].starts_with("::{") {
            Some(3)
        } else {
            None
        };
        if let Some(open) = group {
            let begin = i + open;
            // `i` past the group's `}` (or to the end of a group left open).
            let close = pev_test_support::matching(text, begin - 1, '{', '}');
            i = close.map_or(text.len(), |c| c + 1);
            let inner = &text[begin..close.unwrap_or(text.len())];
            let mut out = Vec::new();
            for item in pev_test_support::split_top_level(inner, '{', '}') {
                let (paths, _) = read_tree(item.trim());
                for p in paths {
                    let mut full = segments.clone();
                    full.extend(p);
                    out.push(full);
                }
            }
            return (out, i);
        }
        if text[i..].starts_with("::") {
            i += 2;
            continue;
        }
        return (vec![segments], i);
    }
}

/// The module a path names: its longest prefix that is a module.
fn resolve(path: &[String], known: &BTreeMap<String, PathBuf>) -> Option<String> {
    (0..=path.len()).rev().map(|n| path[..n].join("::")).find(|m| known.contains_key(m))
}

/// The module graph of the crate at `src`: edges between distinct modules.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let known = modules(src);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &known {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let to = edges.entry(module.clone()).or_default();
        for path in imports(module, non_test(&text)) {
            if let Some(target) = resolve(&path, &known)
                && target != *module
            {
                to.insert(target);
            }
        }
    }
    edges
}

/// Strongly connected components with more than one module (Tarjan, recursive: the graphs
/// are a few hundred nodes).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                if let Some(lv) = t.low.get_mut(v) {
                    *lv = (*lv).min(lw);
                }
            } else if t.on.contains(w) {
                let iw = t.index[w];
                if let Some(lv) = t.low.get_mut(v) {
                    *lv = (*lv).min(iw);
                }
            }
        }
        if t.low[v] == t.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                scc.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                t.out.push(scc);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[allow(clippy::print_stdout)] // the report, for --nocapture
fn check(name: &str, src: &str, (modules_budget, circles_budget): (usize, usize)) {
    let found = circles(&graph(&root().join(src)));
    let in_circles: usize = found.iter().map(Vec::len).sum();
    println!("{name}: {} circles, {in_circles} modules in them", found.len());
    for c in &found {
        println!(
            "  {}",
            c.iter()
                .map(|m| if m.is_empty() { "<root>" } else { m })
                .collect::<Vec<_>>()
                .join(" ↔ ")
        );
    }
    assert!(
        in_circles <= modules_budget && found.len() <= circles_budget,
        "{name}: {} circles over {in_circles} modules, more than the budget ({circles_budget}, \
         {modules_budget}): {found:#?}",
        found.len()
    );
}

/// Edges from a module to one of its ancestors (a child importing its `mod.rs`, or deeper):
/// what the `mod.rs` rule forbids.
fn upward(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (from, to) in edges {
        for t in to {
            let ancestor = !t.is_empty() && from.starts_with(&format!("{t}::"));
            if ancestor {
                out.push((from.clone(), t.clone()));
            }
        }
    }
    out
}

#[test]
#[allow(clippy::print_stdout)]
fn no_module_imports_its_parent() {
    for (name, src, budget) in [
        ("pev-engine", "crates/engine/src", ENGINE_UPWARD),
        ("pev (cli)", "crates/cli/src", CLI_UPWARD),
    ] {
        let found = upward(&graph(&root().join(src)));
        for (from, to) in &found {
            println!("{name}: {from} -> {to}");
        }
        assert!(found.len() <= budget, "{name}: {} imports of a parent: {found:#?}", found.len());
    }
}

/// The engine's layers, lowest first: a module may import its own layer (the circle check keeps
/// that a DAG) and those below, never one above. A module is in the layer of the longest prefix
/// that names it; the crate root (`lib.rs`, the table of contents) is above them all.
const ENGINE_LAYERS: &[&[&str]] = &[
    // contracts and leaves
    &[
        "digest",
        "inventory",
        "lanes",
        "model_scope",
        "resolve",
        "instruct",
        "hooks",
        "delegation",
        "write_locks",
    ],
    // the public configuration
    &["engine"],
    // what a call, an interrupted attempt and a cache entry are; the journal writer and reader
    &["call", "continuation", "cache", "journal_read", "recorder", "oracle"],
    // who holds what during a run
    &["state"],
    // the run's end: how the outcome is decided from evidence
    &["verdict"],
    // one step task
    &["step"],
    // the run: the ready queue, settling, resume
    &["scheduler"],
    // models behind the contracts
    &["agent"],
];

/// The CLI's layers, lowest first (the crate root, `main.rs`, is above them all).
const CLI_LAYERS: &[&[&str]] = &[
    // reading a plan's text, and finding a place in it
    &["input"],
    // turning values into text
    &["view"],
    // the command line
    &["args"],
    // what several commands share
    &["shared"],
    // one module per command
    &["commands"],
];

/// The layer of `module` in `layers` (the longest prefix that names it), `None` for the root or
/// a module no layer names.
fn layer_of(module: &str, layers: &[&[&str]]) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (n, names) in layers.iter().enumerate() {
        for name in *names {
            let hit = module == *name || module.starts_with(&format!("{name}::"));
            if hit && best.is_none_or(|(len, _)| name.len() > len) {
                best = Some((name.len(), n));
            }
        }
    }
    best.map(|(_, n)| n)
}

/// Imports of a module in a higher layer, and modules no layer names.
fn against_layers(
    edges: &BTreeMap<String, BTreeSet<String>>,
    layers: &[&[&str]],
) -> (Vec<(String, String)>, Vec<String>) {
    let mut up = Vec::new();
    let mut unplaced = Vec::new();
    for (from, to) in edges {
        if from.is_empty() {
            continue;
        }
        let Some(here) = layer_of(from, layers) else {
            unplaced.push(from.clone());
            continue;
        };
        for t in to {
            if layer_of(t, layers).is_some_and(|there| there > here) {
                up.push((from.clone(), t.clone()));
            }
        }
    }
    (up, unplaced)
}

#[test]
fn the_engine_imports_only_downward_through_its_layers() {
    let (up, unplaced) = against_layers(&graph(&root().join("crates/engine/src")), ENGINE_LAYERS);
    assert!(unplaced.is_empty(), "pev-engine modules in no layer (add them): {unplaced:#?}");
    assert!(up.is_empty(), "pev-engine imports of a higher layer: {up:#?}");
}

#[test]
fn the_cli_imports_only_downward_through_its_layers() {
    let (up, unplaced) = against_layers(&graph(&root().join("crates/cli/src")), CLI_LAYERS);
    let unplaced: Vec<String> = unplaced.into_iter().filter(|m| !m.starts_with("bin::")).collect();
    assert!(unplaced.is_empty(), "pev (cli) modules in no layer (add them): {unplaced:#?}");
    assert!(up.is_empty(), "pev (cli) imports of a higher layer: {up:#?}");
}

#[test]
fn a_layer_is_found_by_its_longest_prefix_and_an_upward_import_is_caught() {
    let layers: &[&[&str]] = &[&["a", "b::low"], &["b"]];
    assert_eq!(layer_of("b::low::x", layers), Some(0));
    assert_eq!(layer_of("b::high", layers), Some(1));
    assert_eq!(layer_of("c", layers), None);
    let edges: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["a".to_owned()])),
        ("c".to_owned(), BTreeSet::new()),
    ]
    .into();
    let (up, unplaced) = against_layers(&edges, layers);
    assert_eq!(up, vec![("a".to_owned(), "b".to_owned())]);
    assert_eq!(unplaced, vec!["c".to_owned()]);
}

#[test]
fn the_engine_has_no_more_circles_than_its_budget() {
    check("pev-engine", "crates/engine/src", ENGINE_BUDGET);
}

#[test]
fn the_cli_has_no_more_circles_than_its_budget() {
    check("pev (cli)", "crates/cli/src", CLI_BUDGET);
}

#[test]
fn the_parser_reads_grouped_and_relative_imports() {
    let text = "use crate::{a::{b, c}, d};\nuse super::e::f;\nlet x = crate::g::h();";
    let got = imports("m::n", text);
    let want: Vec<Vec<&str>> =
        vec![vec!["a", "b"], vec!["a", "c"], vec!["d"], vec!["m", "e", "f"], vec!["g", "h"]];
    assert_eq!(got, want);
    let mut edges = BTreeMap::new();
    edges.insert("a".to_owned(), BTreeSet::from(["b".to_owned()]));
    edges.insert("b".to_owned(), BTreeSet::from(["a".to_owned()]));
    edges.insert("c".to_owned(), BTreeSet::from(["a".to_owned()]));
    assert_eq!(circles(&edges), vec![vec!["a".to_owned(), "b".to_owned()]]);
}

#[test]
#[allow(clippy::print_stdout)]
fn no_file_grows_past_800_lines_and_no_new_one_does() {
    let mut over = Vec::new();
    let mut stack = vec![root().join("crates")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let lines = std::fs::read_to_string(&path).map_or(0, |t| t.lines().count());
                if lines > MAX_LINES {
                    let rel = path.strip_prefix(root()).unwrap_or(&path).display().to_string();
                    let rel = rel.trim_start_matches("./").to_owned();
                    over.push((rel, lines));
                }
            }
        }
    }
    over.sort();
    for (file, lines) in &over {
        println!("{file}: {lines} lines");
        let allowed = OVERSIZE.iter().find(|(f, _)| file.ends_with(f)).map(|(_, n)| *n);
        assert!(
            allowed.is_some_and(|n| *lines <= n),
            "{file} has {lines} lines: over {MAX_LINES}, and not on the list of files being \
             split (or longer than it was): split it"
        );
    }
}

#[test]
fn a_path_attribute_names_the_module_the_file_is() {
    let dir = tempfile::tempdir().expect("tmp");
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "mod a;\n").expect("lib");
    std::fs::write(src.join("a.rs"), "#[path = \"a_helper.rs\"]\nmod helper;\n").expect("a");
    std::fs::write(src.join("a_helper.rs"), "use super::Thing;\n").expect("helper");
    let found = modules(src);
    assert!(found.contains_key("a::helper") && !found.contains_key("a_helper"), "{found:?}");
    let edges = graph(src);
    assert_eq!(upward(&edges), vec![("a::helper".to_owned(), "a".to_owned())]);
}

/// The fences in `text`'s doc comments (`///`, `//!`) that open a block rustdoc would compile
/// as a doc test: a bare fence, or one whose info string names Rust or a doc-test attribute.
/// (Line numbers, 1-based.)
fn rust_doc_blocks(text: &str) -> Vec<usize> {
    let mut open = false;
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_start();
        let Some(doc) = line.strip_prefix("///").or_else(|| line.strip_prefix("//!")) else {
            continue;
        };
        let Some(info) = doc.trim().strip_prefix("```") else { continue };
        if open {
            open = false;
            continue;
        }
        open = true;
        let rust = info.split(',').map(str::trim).any(|w| {
            w.is_empty()
                || w == "rust"
                || w.starts_with("edition")
                || ["ignore", "no_run", "should_panic", "compile_fail"].contains(&w)
        });
        if rust {
            found.push(i + 1);
        }
    }
    found
}

/// Every library crate turns rustdoc's doc tests off (`doctest = false`: collecting none still
/// cost each crate a rustdoc build, half a minute of every test run), so a doc comment must not
/// hold Rust code that would silently go untested: a code block is marked with its language
/// (`text`, `toml`, `sh`, …), or the crate turns doc tests back on.
#[test]
fn no_doc_comment_holds_rust_code_while_doc_tests_are_off() {
    let crates = root().join("crates");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&crates).expect("crates/").flatten() {
        let manifest = std::fs::read_to_string(entry.path().join("Cargo.toml")).unwrap_or_default();
        if !manifest.contains("doctest = false") {
            continue;
        }
        let mut stack = vec![entry.path().join("src")];
        while let Some(dir) = stack.pop() {
            for file in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = file.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).expect("read");
                    for line in rust_doc_blocks(&text) {
                        found.push(format!("{}:{line}", path.display()));
                    }
                }
            }
        }
    }
    assert!(found.is_empty(), "Rust code in doc comments that no doc test runs: {found:#?}");
}

#[test]
fn a_bare_or_rust_fence_is_found_and_a_text_one_is_not() {
    let text = "//! ```text\n//! a\n//! ```\n/// ```\n/// let x = 1;\n/// ```\n/// ```rust,no_run\n/// ```\n";
    assert_eq!(rust_doc_blocks(text), vec![4, 7]);
}
