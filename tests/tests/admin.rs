//! The admin API at its edges: hosts named as an operator would (with a port, as an
//! origin), unknown hosts, query parameters that are misspelt or percent-encoded, stalled
//! and surplus connections, and a listener open to the network without a token.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use frontierd_e2e::{
    config_check, config_text, frontierd_bin, metric, path_segment, wait_until, Env, Reply, Site,
};

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

#[test]
fn pausing_an_unknown_host_is_a_404_unless_created() {
    let env = Env::new(&[]);
    let daemon = env.start();

    let (status, body) = daemon.post("/v1/hosts/typo.site.test/pause");
    assert_eq!(status, 404, "{body}");
    assert!(
        body.contains("typo.site.test") && body.contains("create=true"),
        "{body}"
    );
    let (status, body) = daemon.post("/v1/hosts/typo.site.test/resume");
    assert_eq!(status, 404, "{body}");
    let (status, body) = daemon.get("/v1/hosts/typo.site.test");
    assert_eq!(status, 404, "{body}");

    // paused ahead of its first URL
    let (status, body) = daemon.post("/v1/hosts/later.site.test/pause?create=true");
    assert_eq!(status, 200, "{body}");
    let v = json(&body);
    assert_eq!(
        (&v["paused"], &v["changed"], &v["created"]),
        (&true.into(), &true.into(), &true.into()),
        "{body}"
    );
    let (status, body) = daemon.post("/v1/hosts/later.site.test/pause");
    assert_eq!(status, 200, "a paused host is known: {body}");
    assert_eq!(json(&body)["changed"], false, "{body}");
    let (status, body) = daemon.get("/v1/hosts/later.site.test");
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["paused"], true, "{body}");
    let (status, body) = daemon.post("/v1/hosts/later.site.test/resume");
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["changed"], true, "{body}");

    let (status, body) = daemon.post("/v1/hosts/later.site.test/pause?create=maybe");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("maybe"), "{body}");
}

#[test]
fn host_arguments_in_origin_form_name_the_politeness_key() {
    let site = Site::start(|_| Reply::not_found());
    let env = Env::new(&[]);
    let daemon = env.start();
    // paused first, so its URL stays queued
    let (status, body) = daemon.post("/v1/hosts/a.site.test/pause?create=true");
    assert_eq!(status, 200, "{body}");
    let answer = daemon.submit(&[format!("{}/x", site.base("a.site.test"))]);
    assert_eq!(answer["accepted"], 1, "{answer}");

    let with_port = format!("a.site.test:{}", site.port);
    for arg in [
        with_port.clone(),
        format!("http://a.site.test:{}/", site.port),
        format!("HTTPS://A.Site.Test:{}/", site.port),
        "A.SITE.TEST".to_string(),
    ] {
        let (status, body) = daemon.get(&format!("/v1/hosts/{}", path_segment(&arg)));
        assert_eq!(status, 200, "{arg}: {body}");
        let v = json(&body);
        assert_eq!(v["key"], "a.site.test", "{arg}: {body}");
        assert_eq!(v["requested"], arg.as_str(), "{body}");
        assert_eq!(v["queued"], 1, "{body}");
    }
    // a port in a pause names the same queue
    let (status, body) = daemon.post(&format!("/v1/hosts/{with_port}/resume"));
    assert_eq!(status, 200, "{body}");
    let v = json(&body);
    assert_eq!(
        (&v["key"], &v["changed"]),
        (&"a.site.test".into(), &true.into())
    );

    for not_a_host in ["not a host", "ftp://a.site.test/"] {
        let (status, body) = daemon.get(&format!("/v1/hosts/{}", path_segment(not_a_host)));
        assert_eq!(status, 400, "{not_a_host}: {body}");
        assert!(body.contains(not_a_host), "{body}");
    }

    // the CLI says which key it looked up
    let out = env.cli("hosts").arg(&with_port).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stderr.contains(&with_port) && stderr.contains("politeness key a.site.test"),
        "{stderr}"
    );
    assert_eq!(
        json(&String::from_utf8_lossy(&out.stdout))["key"],
        "a.site.test"
    );
}

#[test]
fn query_parameters_are_decoded_and_checked() {
    let site = Site::start(|req| {
        if req.path == "/robots.txt" {
            Reply::status(500, "down")
        } else {
            Reply::html("page")
        }
    });
    let env = Env::new(&[]);
    let daemon = env.start();
    daemon.submit(&[format!("{}/", site.base("err.site.test"))]);
    wait_until(
        "err.site.test in 5xx-disallow",
        Duration::from_secs(30),
        || {
            daemon
                .get("/v1/hosts?state=5xx-disallow")
                .1
                .contains("err.site.test")
        },
    );
    // percent-encoded values are decoded
    let (status, body) = daemon.get("/v1/hosts?state=5xx%2Ddisallow&limit=%35");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("err.site.test"), "{body}");

    for (query, named) in [
        ("state=bogus&limit=10", "bogus"),
        ("limit=abc", "abc"),
        ("limit=0", "limit"),
        ("sate=fresh", "sate"),
    ] {
        let (status, body) = daemon.get(&format!("/v1/hosts?{query}"));
        assert_eq!(status, 400, "{query}: {body}");
        assert!(body.contains(named), "{query}: {body}");
    }
    let (status, body) = daemon.get("/v1/hosts/err.site.test?verbose=1");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("verbose"), "{body}");

    // the CLI with --state
    let out = env
        .cli("hosts")
        .args(["--state", "5xx-disallow"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("err.site.test"));
    let out = env
        .cli("hosts")
        .args(["--state", "bogus"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bogus"),
        "{out:?}"
    );
}

/// Read what the server sends until it closes (or `limit` passes: then None).
fn read_until_closed(s: &mut TcpStream, limit: Duration) -> Option<String> {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) => Some(String::from_utf8_lossy(&out).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
            Some(String::from_utf8_lossy(&out).into_owned())
        }
        Err(_) => None,
    }
}

#[test]
fn stalled_and_surplus_connections_are_cut_off() {
    let env = Env::new(&[
        ("admin", "header_read_timeout", "\"3s\""),
        ("admin", "request_timeout", "\"2s\""),
        ("admin", "max_connections", "4"),
    ]);
    let daemon = env.start();
    let connect = || TcpStream::connect(&daemon.admin).unwrap();

    // three clients stop in the middle of their request head, one in its body
    let mut heads: Vec<TcpStream> = (0..3)
        .map(|_| {
            let mut s = connect();
            s.write_all(b"GET /v1/stats HTTP/1.1\r\nHost: x\r\n")
                .unwrap();
            s
        })
        .collect();
    let mut body = connect();
    body.write_all(b"POST /v1/urls HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nhttp://a")
        .unwrap();

    // the cap is reached: the next connection is answered 503 at once
    let mut surplus = connect();
    let answer = read_until_closed(&mut surplus, Duration::from_secs(10))
        .expect("the surplus connection was neither answered nor closed");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer:?}");

    let started = Instant::now();
    let answer = read_until_closed(&mut body, Duration::from_secs(30))
        .expect("a stalled body was not cut off within 30 s");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
    assert!(answer.contains("admin.request_timeout"), "{answer:?}");
    for s in &mut heads {
        read_until_closed(s, Duration::from_secs(30))
            .expect("a stalled request head was not cut off within 30 s");
    }
    eprintln!("stalled connections closed after {:?}", started.elapsed());

    // the slots are free again
    let (status, _) = daemon.get("/v1/stats");
    assert_eq!(status, 200);
    let m = daemon.metrics();
    assert_eq!(
        metric(&m, "frontierd_admin_connections_refused_total"),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        metric(&m, "frontierd_admin_timeouts_total{phase=\"header\"}"),
        Some(3.0),
        "{m}"
    );
    assert_eq!(
        metric(&m, "frontierd_admin_timeouts_total{phase=\"request\"}"),
        Some(1.0),
        "{m}"
    );
    assert!(env.daemon_log().contains("admin.max_connections"));
}

#[test]
fn token_is_required_and_compared() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let env = Env::new(&[(
        "admin",
        "token_file",
        &format!("{:?}", token.display().to_string()),
    )]);
    let daemon = env.start();
    let request = |auth: &str| {
        let mut s = TcpStream::connect(&daemon.admin).unwrap();
        write!(
            s,
            "GET /v1/stats HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"
        )
        .unwrap();
        read_until_closed(&mut s, Duration::from_secs(30)).unwrap()
    };
    assert!(request("").starts_with("HTTP/1.1 401"));
    assert!(request("Authorization: Bearer s3cre\r\n").starts_with("HTTP/1.1 401"));
    assert!(request("Authorization: Bearer s3cret!\r\n").starts_with("HTTP/1.1 401"));
    assert!(request("Authorization: Bearer s3cret\r\n").starts_with("HTTP/1.1 200"));
    // the CLI reads the same file
    let out = env.cli("stats").output().unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn open_listener_without_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("open.toml");
    std::fs::write(
        &config,
        config_text(&data, &[("admin", "listen", "\"0.0.0.0:0\"")]),
    )
    .unwrap();
    let check = config_check(&config);
    assert_eq!(check.status.code(), Some(2), "{check:?}");
    let err = String::from_utf8_lossy(&check.stderr);
    assert!(
        err.contains("admin.listen = \"0.0.0.0:0\"") && err.contains("allow_unauthenticated"),
        "{err}"
    );
    let run = Command::new(frontierd_bin())
        .args(["run", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2), "{run:?}");
    assert!(String::from_utf8_lossy(&run.stderr).contains("admin.token_file"));

    // an empty token file is no token: only the daemon can see that
    let empty = dir.path().join("empty-token");
    std::fs::write(&empty, "\n").unwrap();
    std::fs::write(
        &config,
        config_text(
            &data,
            &[
                ("admin", "listen", "\"0.0.0.0:0\""),
                (
                    "admin",
                    "token_file",
                    &format!("{:?}", empty.display().to_string()),
                ),
            ],
        ),
    )
    .unwrap();
    let run = Command::new(frontierd_bin())
        .args(["run", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2), "{run:?}");
    assert!(String::from_utf8_lossy(&run.stderr).contains("admin.token_file"));

    // the operator's explicit word: it starts, with a warning
    let env = Env::new(&[
        ("admin", "listen", "\"0.0.0.0:0\""),
        ("admin", "allow_unauthenticated", "true"),
    ]);
    let check = Command::new(frontierd_bin())
        .args(["config", "check"])
        .arg(&env.config)
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");
    assert!(String::from_utf8_lossy(&check.stderr).contains("without a token"));
    let daemon = env.start();
    assert!(daemon.healthy());
}
