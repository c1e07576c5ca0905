//! The map of who owns what stays whole: every `.rs` file under `crates/*/src` has a row under
//! its crate's `###` heading in docs/architecture.md, section "Source files", and every row
//! there names a file that exists.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

const DOC: &str = "docs/architecture.md";
const SECTION: &str = "## Source files";

/// Adds every `.rs` file under `dir` to `out`, as its path relative to `src` with `/` between
/// the parts (the document's spelling on every platform).
fn collect_rust_files(src: &Path, dir: &Path, out: &mut BTreeSet<String>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            collect_rust_files(src, &path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let relative = path.strip_prefix(src).expect("a file under src/");
            let parts: Vec<String> = relative
                .components()
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.insert(parts.join("/"));
        }
    }
}

/// The source files of each crate: its directory name under `crates/`, and its `.rs` files
/// relative to its `src/`.
fn source_files(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let crates = root.join("crates");
    let entries =
        fs::read_dir(&crates).unwrap_or_else(|e| panic!("reading {}: {e}", crates.display()));
    let mut by_crate = BTreeMap::new();
    for entry in entries {
        let dir = entry.expect("directory entry").path();
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        let name = dir.file_name().expect("a crate directory's name");
        let mut files = BTreeSet::new();
        collect_rust_files(&src, &src, &mut files);
        by_crate.insert(name.to_string_lossy().into_owned(), files);
    }
    by_crate
}

/// The first cell of a Markdown table row, trimmed; None for a line that is not a row.
fn first_cell(line: &str) -> Option<&str> {
    let row = line.trim_start().strip_prefix('|')?;
    row.split('|').next().map(str::trim)
}

/// What each `### <crate>` subsection of the section lists: the backticked paths in the first
/// column of its table. A subsection runs from its heading to the next `### ` or `## ` line.
fn listed_files(doc: &str) -> BTreeMap<String, BTreeSet<String>> {
    let section = doc
        .lines()
        .skip_while(|line| line.trim_end() != SECTION)
        .skip(1)
        .take_while(|line| !line.starts_with("## "));
    let mut listed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in section {
        if let Some(heading) = line.strip_prefix("### ") {
            let name = heading.trim().to_string();
            listed.entry(name.clone()).or_default();
            current = Some(name);
            continue;
        }
        let (Some(name), Some(cell)) = (&current, first_cell(line)) else {
            continue;
        };
        if let Some(path) = cell.strip_prefix('`').and_then(|c| c.strip_suffix('`')) {
            listed
                .entry(name.clone())
                .or_default()
                .insert(path.to_string());
        }
    }
    listed
}

#[test]
fn every_source_file_has_an_owner_in_the_architecture_doc() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository root, above tests/");
    let doc_path = root.join(DOC);
    let doc = fs::read_to_string(&doc_path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", doc_path.display()));
    assert!(
        doc.lines().any(|line| line.trim_end() == SECTION),
        "{DOC} has no line {SECTION:?}"
    );
    let files = source_files(root);
    assert!(
        !files.is_empty(),
        "no crates/*/src under {}",
        root.display()
    );
    let listed = listed_files(&doc);

    let mut problems = Vec::new();
    for (name, paths) in &files {
        for path in paths {
            if !listed.get(name).is_some_and(|rows| rows.contains(path)) {
                problems.push(format!(
                    "crates/{name}/src/{path} has no row: add a row for it under its crate in \
                     {DOC}, section Source files (heading \"### {name}\", first cell `{path}`)"
                ));
            }
        }
    }
    for (name, paths) in &listed {
        for path in paths.iter().filter(|path| path.ends_with(".rs")) {
            if !files
                .get(name)
                .is_some_and(|on_disk| on_disk.contains(path))
            {
                problems.push(format!(
                    "{DOC}, section Source files, lists `{path}` under \"### {name}\", but \
                     crates/{name}/src/{path} does not exist: remove or correct its row"
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{DOC} does not match crates/*/src ({} problems):\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
}
