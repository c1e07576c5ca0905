//! The `frontierd robots` command-line contract, driven through the real binary.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn frontierd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_frontierd"))
        .args(args)
        .output()
        .expect("run frontierd")
}

fn stdout_lines(output: &Output) -> Vec<String> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn robots_file(body: &[u8]) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    file.write_all(body).expect("write robots");
    file
}

/// Google's own test expectations (and a few byte-level cases), one JSON object per line
/// with the expected verdict in `expect`: the batch output must agree line for line.
#[test]
fn batch_agrees_with_google_expectations() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/conformance.jsonl");
    let expected: Vec<String> = std::fs::read_to_string(path)
        .expect("read conformance cases")
        .lines()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).expect("fixture is JSON");
            value["expect"].as_str().expect("expect field").to_string()
        })
        .collect();
    assert!(expected.len() > 100);
    let output = frontierd(&["robots", "check", "--batch", path]);
    assert!(output.status.success());
    let got = stdout_lines(&output);
    assert_eq!(got.len(), expected.len());
    for (i, (got, want)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(got, want, "case on line {}", i + 1);
    }
}

#[test]
fn batch_reports_malformed_lines_and_carries_on() {
    let mut input = tempfile::NamedTempFile::new().expect("temp file");
    let lines = [
        r#"{"agent":"foobot","url":"http://a.com/x","robots":"user-agent: *\ndisallow: /x"}"#,
        "",
        "not json",
        r#"{"url":"http://a.com/x","robots":""}"#,
        r#"{"agent":"a","url":"http://a.com/x"}"#,
        r#"{"agent":"a","url":"http://a.com/x","robots_b64":"***"}"#,
        r#"[1,2]"#,
        // robots_b64 wins over robots: base64 of "user-agent: *\ndisallow: /".
        r#"{"agent":"a","url":"http://a.com/y","robots":"","robots_b64":"dXNlci1hZ2VudDogKgpkaXNhbGxvdzogLw=="}"#,
    ];
    for line in lines {
        writeln!(input, "{line}").expect("write");
    }
    let output = frontierd(&[
        "robots",
        "check",
        "--batch",
        &input.path().to_string_lossy(),
    ]);
    assert!(output.status.success());
    let got = stdout_lines(&output);
    assert_eq!(got.len(), lines.len());
    assert_eq!(got[0], "disallowed");
    assert_eq!(got[1], "error: empty line");
    assert!(got[2].starts_with("error: not valid JSON"), "{}", got[2]);
    assert_eq!(got[3], "error: missing field `agent`");
    assert_eq!(got[4], "error: missing field `robots` or `robots_b64`");
    assert!(got[5].starts_with("error: field `robots_b64` is not valid base64"));
    assert_eq!(got[6], "error: not a JSON object");
    assert_eq!(got[7], "disallowed");
}

#[test]
fn batch_reads_standard_input() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_frontierd"))
        .args(["robots", "check", "--batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(
            br#"{"agent":"a","url":"http://a.com/p","robots":"user-agent: a\nallow: /p\ndisallow: /"}"#,
        )
        .expect("write");
    drop(stdin);
    let output = child.wait_with_output().expect("wait");
    assert_eq!(stdout_lines(&output), ["allowed"]);
}

#[test]
fn check_prints_one_line_per_url_with_the_deciding_rule() {
    let robots = robots_file(b"User-agent: *\nDisallow: /private\nAllow: /private/ok\n");
    let path = robots.path().to_string_lossy().to_string();
    let output = frontierd(&[
        "robots",
        "check",
        "--robots",
        &path,
        "--agent",
        "foobot",
        "http://a.com/private/x",
        "http://a.com/private/ok",
        "http://a.com/public",
    ]);
    assert!(output.status.success());
    let lines = stdout_lines(&output);
    assert_eq!(lines.len(), 3);
    assert!(lines[0].starts_with("disallowed "), "{}", lines[0]);
    assert!(lines[0].contains("line 2"), "{}", lines[0]);
    assert!(lines[1].starts_with("allowed "), "{}", lines[1]);
    assert!(lines[1].contains("line 3"), "{}", lines[1]);
    assert!(lines[2].starts_with("allowed "), "{}", lines[2]);
}

#[test]
fn unreadable_file_and_bad_arguments_exit_2() {
    let output = frontierd(&[
        "robots",
        "check",
        "--robots",
        "/nonexistent/robots.txt",
        "--agent",
        "a",
        "http://a.com/",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("/nonexistent/robots.txt"), "{stderr}");

    let robots = robots_file(b"");
    let path = robots.path().to_string_lossy().to_string();
    // No URL.
    let output = frontierd(&["robots", "check", "--robots", &path, "--agent", "a"]);
    assert_eq!(output.status.code(), Some(2));
    // No agent.
    let output = frontierd(&["robots", "check", "--robots", &path, "http://a.com/"]);
    assert_eq!(output.status.code(), Some(2));
    // Missing batch file.
    let output = frontierd(&["robots", "check", "--batch", "/nonexistent/cases.jsonl"]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn explain_shows_group_rules_delay_sitemaps_and_repairs() {
    let robots = robots_file(
        b"Sitemap: https://a.com/sitemap.xml\n\
          User-agent: *\nDisallow: /\n\n\
          User-agent: FooBot\nCrawl-delay: 2.5\nDisalow: /tmp\nAllow: /tmp/ok\nNoindex: /x\n\
          Allow: /docs/index.html\n",
    );
    let path = robots.path().to_string_lossy().to_string();
    let output = frontierd(&["robots", "explain", "--robots", &path, "--agent", "foobot"]);
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("line 5 (FooBot)"), "{text}");
    let allow_ok = text.find("/tmp/ok").expect("allow rule listed");
    let disallow_tmp = text.find("disallow /tmp").expect("disallow rule listed");
    assert!(allow_ok < disallow_tmp, "longer rule first:\n{text}");
    assert!(
        text.contains("/docs/$"),
        "derived index rule shown:\n{text}"
    );
    assert!(text.contains("crawl-delay: 2.5 s"), "{text}");
    assert!(text.contains("https://a.com/sitemap.xml"), "{text}");
    assert!(text.contains("`Disalow` read as `disallow`"), "{text}");
    assert!(text.contains("unknown field `Noindex`"), "{text}");
}
