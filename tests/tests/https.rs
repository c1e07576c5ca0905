//! HTTPS as an operator with a private CA sees it: `[fetch] extra_root_certificates` names
//! the CA's PEM file and the site is crawled over TLS (robots.txt, pages, links, WARC);
//! without it no request reaches the site; a file that is not there stops the daemon at
//! its config check, naming the key and the path.

use std::time::Duration;

use frontierd_e2e::{
    config_check, logged, metric, require_warcio, wait_until, warc_files, warc_records,
    warcio_check, Env, Reply, Req, Site,
};

fn page(req: &Req) -> Reply {
    match req.path.as_str() {
        "/robots.txt" => Reply::text("User-agent: *\nDisallow: /private\n"),
        "/" => Reply::html(r#"<a href="/a">a</a> <a href="/private/x">p</a>"#),
        "/a" => Reply::html("leaf"),
        _ => Reply::not_found(),
    }
}

#[test]
fn a_site_under_a_private_ca_is_crawled_when_its_ca_is_trusted() {
    require_warcio();
    let site = Site::start_tls(page);
    let ca_pem = site.ca_pem.clone().expect("a TLS site has a CA");
    let pem_dir = tempfile::tempdir().unwrap();
    let ca = pem_dir.path().join("our-ca.pem");
    std::fs::write(&ca, ca_pem).unwrap();
    let base = site.base("www.site.test");
    assert!(base.starts_with("https://"), "{base}");

    // trusted: robots.txt obeyed, the link followed, all over TLS
    let env = Env::new(&[
        (
            "fetch",
            "extra_root_certificates",
            &format!("[{:?}]", ca.display().to_string()),
        ),
        ("scope", "follow_links", "true"),
        ("scope", "mode", "\"same-host\""),
    ]);
    let mut daemon = env.start();
    let answer = daemon.submit(&[format!("{base}/")]);
    assert_eq!(answer["accepted"], 1, "{answer}");
    let expected = [
        (format!("{base}/"), "fetched"),
        (format!("{base}/a"), "fetched"),
        (format!("{base}/private/x"), "blocked-by-robots"),
    ];
    wait_until(
        "the HTTPS site in the crawl log",
        Duration::from_secs(60),
        || {
            let log = env.crawl_log();
            expected.iter().all(|(u, o)| logged(&log, u, o))
        },
    );
    let paths: Vec<String> = site.hits().into_iter().map(|h| h.path).collect();
    assert!(paths.contains(&"/robots.txt".to_string()), "{paths:?}");
    assert!(!paths.contains(&"/private/x".to_string()), "{paths:?}");
    daemon.signal(libc::SIGTERM);
    assert!(
        daemon.wait_exit(Duration::from_secs(20)).is_some(),
        "the daemon did not stop"
    );
    let (closed, _open) = warc_files(&env.warc_dir());
    let mut uris = Vec::new();
    for file in &closed {
        warcio_check(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        uris.extend(warc_records(file).into_iter().map(|(_, uri)| uri));
    }
    assert!(uris.contains(&format!("{base}/a")), "{uris:?}");

    // not trusted: the robots.txt fetch fails in its handshake (a network failure), so no
    // request reaches the site and the page waits with its origin held
    let site = Site::start_tls(page);
    let base = site.base("www.site.test");
    let env = Env::new(&[]);
    let daemon = env.start();
    daemon.submit(&[format!("{base}/")]);
    let network_failures = "frontierd_robots_fetches_total{outcome=\"network\"}";
    wait_until(
        "the robots.txt fetch failed",
        Duration::from_secs(30),
        || metric(&daemon.metrics(), network_failures).unwrap_or(0.0) >= 1.0,
    );
    assert!(site.connections() > 0, "the daemon connected");
    assert!(site.hits().is_empty(), "{:?}", site.hits());
    assert!(!logged(&env.crawl_log(), &format!("{base}/"), "fetched"));
    drop(daemon);

    // a PEM file that is not there: the config check names the key and the file
    let env_dir = tempfile::tempdir().unwrap();
    let config = env_dir.path().join("frontierd.toml");
    std::fs::write(
        &config,
        "[fetch]\nextra_root_certificates = [\"/nonexistent/our-ca.pem\"]\n",
    )
    .unwrap();
    let check = config_check(&config);
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(!check.status.success());
    assert!(
        stderr.contains("fetch.extra_root_certificates")
            && stderr.contains("/nonexistent/our-ca.pem"),
        "{stderr}"
    );
}
