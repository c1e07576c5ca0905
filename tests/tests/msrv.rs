//! The declared MSRV stays true: `.ci/check-msrv` (run by `.ci/run`) passes on this workspace
//! and fails, naming the package, when a locked dependency needs a newer Rust or a member does
//! not inherit the workspace's `rust-version`.

use std::process::{Command, Output};

use frontierd_e2e::repo_root;

fn check_msrv(metadata: Option<&std::path::Path>) -> Output {
    let mut cmd = Command::new("bash");
    cmd.arg(repo_root().join(".ci/check-msrv"));
    if let Some(m) = metadata {
        cmd.arg(m);
    }
    cmd.output().expect("run bash .ci/check-msrv")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(repo_root())
        .output()
        .expect("cargo metadata");
    assert!(out.status.success(), "cargo metadata: {}", text(&out));
    serde_json::from_slice(&out.stdout).expect("cargo metadata JSON")
}

/// Check a modified copy of the workspace's metadata.
fn check_modified(edit: impl FnOnce(&mut serde_json::Value)) -> Output {
    let mut meta = metadata();
    edit(&mut meta);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("metadata.json");
    std::fs::write(&file, serde_json::to_vec(&meta).expect("json")).expect("write metadata");
    check_msrv(Some(&file))
}

#[test]
fn declared_msrv_covers_the_locked_graph() {
    let out = check_msrv(None);
    assert!(out.status.success(), "{}", text(&out));
    // and the README names the same version
    let meta = metadata();
    let msrv = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == "frontierd")
        .and_then(|p| p["rust_version"].as_str())
        .expect("frontierd declares a rust-version")
        .to_string();
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    assert!(
        readme.contains(&format!("rustup toolchain install {msrv}")),
        "README.md does not tell how to get Rust {msrv}"
    );
}

#[test]
fn a_dependency_needing_newer_rust_is_named() {
    let out = check_modified(|meta| {
        let members = meta["workspace_members"]
            .as_array()
            .expect("workspace_members")
            .clone();
        let packages = meta["packages"].as_array_mut().expect("packages");
        let dep = packages
            .iter_mut()
            .find(|p| p["name"] == "serde_json" && !members.contains(&p["id"]))
            .expect("serde_json is locked");
        dep["rust_version"] = "1.999".into();
    });
    assert!(!out.status.success(), "{}", text(&out));
    let msg = text(&out);
    assert!(
        msg.contains("serde_json") && msg.contains("needs rust 1.999"),
        "{msg}"
    );
    assert!(msg.contains("raise rust-version"), "{msg}");
}

#[test]
fn a_member_without_rust_version_is_named() {
    let out = check_modified(|meta| {
        let packages = meta["packages"].as_array_mut().expect("packages");
        let fetcher = packages
            .iter_mut()
            .find(|p| p["name"] == "fetcher")
            .expect("fetcher");
        fetcher["rust_version"] = serde_json::Value::Null;
    });
    assert!(!out.status.success(), "{}", text(&out));
    let msg = text(&out);
    assert!(
        msg.contains("fetcher declares no rust-version")
            && msg.contains("rust-version.workspace = true"),
        "{msg}"
    );
}
