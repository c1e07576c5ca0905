//! Tests of the spool protocol on a temporary directory: the entries taken and in which
//! order, entries judged without opening them, rejections that never overwrite, a file
//! moved to done with its rejected lines.

use super::*;

fn spool() -> (tempfile::TempDir, Spool) {
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::new(dir.path().join("spool"));
    spool.create().unwrap();
    (dir, spool)
}

fn read(p: impl AsRef<Path>) -> String {
    fs::read_to_string(p).unwrap()
}

#[test]
fn waiting_names_are_sorted_and_dot_files_wait() {
    let (_dir, s) = spool();
    for n in ["b.txt", ".a.txt.part", "a.txt", "c"] {
        fs::write(s.incoming().join(n), "").unwrap();
    }
    assert_eq!(s.waiting().unwrap(), ["a.txt", "b.txt", "c"]);
}

#[test]
fn a_missing_incoming_directory_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let e = Spool::new(dir.path().join("nowhere"))
        .waiting()
        .unwrap_err();
    assert!(e.to_string().starts_with("listing "), "{e}");
    assert!(e.to_string().ends_with("nowhere/incoming"), "{e}");
}

#[test]
fn spool_entries_are_judged_without_opening_them() {
    let (_dir, s) = spool();
    let d = s.incoming();
    fs::write(d.join("file"), "http://a/\n").unwrap();
    fs::create_dir(d.join("dir")).unwrap();
    std::os::unix::fs::symlink(d.join("file"), d.join("link")).unwrap();
    std::os::unix::fs::symlink(d.join("nowhere"), d.join("dangling")).unwrap();
    std::os::unix::fs::symlink(d.join("dir"), d.join("dirlink")).unwrap();
    let mkfifo = std::process::Command::new("mkfifo")
        .arg(d.join("fifo"))
        .status()
        .unwrap();
    assert!(mkfifo.success());
    let entry = |n: &str| s.entry(OsStr::new(n)).unwrap();
    assert_eq!(entry("file"), Some(Entry::File { link: None }));
    assert_eq!(
        entry("link"),
        Some(Entry::File {
            link: Some(d.join("file"))
        })
    );
    assert_eq!(entry("gone"), None, "gone since the listing");
    let kind = |n: &str| match entry(n) {
        Some(Entry::Reject { kind, reason }) => (kind, reason),
        other => panic!("{n}: {other:?}"),
    };
    assert_eq!(
        kind("dir"),
        (
            EntryKind::Directory,
            "a directory, not a file of URLs".into()
        )
    );
    assert_eq!(kind("dangling").0, EntryKind::DanglingLink);
    assert!(kind("dangling").1.contains("which cannot be read"));
    assert_eq!(
        kind("dirlink"),
        (
            EntryKind::LinkToNonFile,
            format!(
                "symbolic link to {}, which is a directory, not a file of URLs",
                d.join("dir").display()
            )
        )
    );
    assert_eq!(kind("fifo").0, EntryKind::Fifo);
}

#[test]
fn free_name_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert_eq!(free_name(d, OsStr::new("x")), "x");
    fs::write(d.join("x"), "").unwrap();
    assert_eq!(free_name(d, OsStr::new("x")), "x.1");
    fs::write(d.join("x.1.reason"), "").unwrap();
    assert_eq!(free_name(d, OsStr::new("x")), "x.2");
}

/// A rejected entry goes to rejected/ with NAME.reason; a second one of the same name
/// gets NAME.1 and NAME.1.reason; nothing is left in tmp/.
#[test]
fn rejections_get_a_reason_file_and_never_overwrite() {
    let (_dir, s) = spool();
    let rejected = s.root.join("rejected");
    for round in ["", ".1"] {
        fs::create_dir(s.incoming().join("d")).unwrap();
        let moved = s
            .reject(OsStr::new("d"), "a directory, not a file of URLs")
            .unwrap();
        assert_eq!(moved, rejected.join(format!("d{round}")));
        assert!(moved.is_dir());
        assert_eq!(
            read(rejected.join(format!("d{round}.reason"))),
            "d: a directory, not a file of URLs\n"
        );
    }
    assert_eq!(fs::read_dir(s.root.join("tmp")).unwrap().count(), 0);
    assert!(s.waiting().unwrap().is_empty());
}

/// A file read to its end goes to done/; its rejected lines to rejected/NAME, in the
/// order given, under a header; without rejected lines no such file is written.
#[test]
fn done_moves_the_file_and_writes_its_rejected_lines() {
    let (_dir, s) = spool();
    fs::write(s.incoming().join("clean"), "http://a/\n").unwrap();
    fs::write(s.incoming().join("mixed"), "http://a/\nnot a url\n").unwrap();
    s.done(OsStr::new("clean"), []).unwrap();
    let rejected = [RejectedLine {
        line: 2,
        reason: "invalid-url",
        input: "not a url",
    }];
    s.done(OsStr::new("mixed"), rejected).unwrap();
    assert_eq!(read(s.root.join("done/clean")), "http://a/\n");
    assert_eq!(read(s.root.join("done/mixed")), "http://a/\nnot a url\n");
    assert!(!s.root.join("rejected/clean").exists());
    assert_eq!(
        read(s.root.join("rejected/mixed")),
        "# line\treason\turl\n2\tinvalid-url\tnot a url\n"
    );
    assert!(s.waiting().unwrap().is_empty());
}

/// A symbolic link is moved itself, never its target.
#[test]
fn a_link_is_moved_not_its_target() {
    let (dir, s) = spool();
    let target = dir.path().join("list.txt");
    fs::write(&target, "http://a/\n").unwrap();
    std::os::unix::fs::symlink(&target, s.incoming().join("list")).unwrap();
    s.done(OsStr::new("list"), []).unwrap();
    assert!(target.is_file(), "the target stays where it is");
    let moved = s.root.join("done/list");
    assert!(fs::symlink_metadata(&moved)
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn open_tells_gone_from_unreadable() {
    let (_dir, s) = spool();
    assert!(matches!(s.open(OsStr::new("none")), Opened::Gone));
    fs::write(s.incoming().join("f"), "x").unwrap();
    assert!(matches!(s.open(OsStr::new("f")), Opened::File(_)));
}
