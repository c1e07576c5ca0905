//! Unit tests of the configuration: defaults, errors that name the key, typed choices.
use super::*;

#[test]
fn settings_carry_typed_choices() {
    let s = Config::parse(
        "[politeness]\nkey = \"origin\"\ncrawl_delay_over_cap = \"skip\"\n[log]\nformat = \"json\"\n",
        "t",
    )
    .unwrap()
    .check(None)
    .unwrap();
    assert_eq!(s.key_mode, frontier::PolitenessKeyMode::Origin);
    assert_eq!(s.crawl_delay_over_cap, frontier::CrawlDelayOverCap::Skip);
    assert!(s.json_logs);
    let f = s.frontier_config();
    assert_eq!(f.key_mode, frontier::PolitenessKeyMode::Origin);
}

#[test]
fn embedded_default_parses_and_checks() {
    let c = Config::load(None).unwrap();
    let s = c.check(None).unwrap();
    assert_eq!(s.data_dir, PathBuf::from("./frontierd-data"));
    assert_eq!(s.product_token, "frontierd");
    assert_eq!(s.raw.fetch.workers, FetchSection::default().workers);
    assert_eq!(s.raw.log.stats_interval, Dur(Duration::from_secs(10)));
}

#[test]
fn embedded_default_equals_built_in_defaults() {
    let from_file = format!("{:?}", Config::load(None).unwrap());
    let built_in = format!("{:?}", Config::default());
    assert_eq!(from_file, built_in);
}

#[test]
fn state_directory_is_used() {
    let s = Config::default().check(Some("/var/lib/frontierd")).unwrap();
    assert_eq!(s.store_path, PathBuf::from("/var/lib/frontierd/store"));
}

fn err(text: &str) -> String {
    match Config::parse(text, "t.toml").and_then(|c| c.check(None)) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn errors_name_key_value_and_allowed() {
    let e = err("[fetch]\nworkerz = 3\n");
    assert!(e.contains("workerz"), "{e}");
    let e = err("[politeness]\nmin_delay = \"5 parsecs\"\n");
    assert!(
        e.contains("min_delay") && e.contains("5 parsecs") && e.contains("allowed"),
        "{e}"
    );
    let e = err("[fetch]\nworkers = -1\n");
    assert!(e.contains("workers"), "{e}");
    let e = err("[fetch]\nworkers = 100000\n");
    assert!(
        e.contains("fetch.workers = 100000") && e.contains("0 to 4096"),
        "{e}"
    );
    let e = err("[politeness]\nmax_delay = \"90days\"\n");
    assert!(
        e.contains("politeness.max_delay = \"90days\"") && e.contains("to \"1days\""),
        "{e}"
    );
    let e = err("[scope]\nmode = \"galaxy\"\n");
    assert!(e.contains("scope.mode") && e.contains("same-host"), "{e}");
    // a chain is counted on the last 50 hops kept with a URL
    let e = err("[scope]\nmax_redirect_hops = 51\n");
    assert!(
        e.contains("scope.max_redirect_hops = 51") && e.contains("0 to 50"),
        "{e}"
    );
    let e = err("[resolve]\n\"*.site.test\" = [\"not-an-ip\"]\n");
    assert!(e.contains("not-an-ip"), "{e}");
}

/// Short robots timings are accepted (a rehearsal on a test site), with a warning
/// naming the key; zero is still refused. The defaults warn about nothing.
#[test]
fn short_robots_timings_are_accepted_with_a_warning() {
    let s = Config::parse(
        "[robots]\nfreshness = \"5s\"\nfallback_after = \"10s\"\n",
        "t.toml",
    )
    .and_then(|c| c.check(None))
    .unwrap();
    let w = robots_timing_warnings(&s.raw);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0].contains("robots.freshness = \"5s\""));
    // logged at start and printed by `config check` with the other warnings
    assert!(w.iter().all(|x| s.warnings().contains(x)));
    assert!(s
        .warnings()
        .iter()
        .any(|x| x.contains("robots.fallback_after = \"10s\"")));
    assert!(robots_timing_warnings(&Config::default()).is_empty());
    let e = err("[robots]\nfreshness = \"0s\"\n");
    assert!(e.contains("robots.freshness"), "{e}");
    let s = Config::parse("[politeness]\nkey = \"origin\"\n", "t.toml")
        .and_then(|c| c.check(None))
        .unwrap();
    assert_eq!(
        s.frontier_config().key_mode,
        frontier::PolitenessKeyMode::Origin
    );
}

/// The connection-pool keys reach the fetcher; out of range they are refused by name.
#[test]
fn pool_keys_reach_the_fetcher() {
    let s = Config::parse(
        "[fetch]\nmax_pooled_connections = 7\npool_idle_timeout = \"15s\"\n",
        "t",
    )
    .unwrap()
    .check(None)
    .unwrap();
    let f = s.fetcher_config().unwrap();
    assert_eq!(f.max_pooled_connections, 7);
    assert_eq!(f.pool_idle_timeout, Duration::from_secs(15));
    let d = Config::default()
        .check(None)
        .unwrap()
        .fetcher_config()
        .unwrap();
    assert_eq!(
        d.max_pooled_connections,
        fetcher::DEFAULT_MAX_POOLED_CONNECTIONS
    );
    let e = err("[fetch]\npool_idle_timeout = \"0s\"\n");
    assert!(e.contains("fetch.pool_idle_timeout"), "{e}");
    let e = err("[warc]\ngzip_level = 13\n");
    assert!(
        e.contains("warc.gzip_level = 13") && e.contains("0 to 12"),
        "{e}"
    );
    let e = err("[fetch]\nmax_pooled_connections = 99999999\n");
    assert!(e.contains("fetch.max_pooled_connections"), "{e}");
}

/// Unset, the kept-connection cap grows with the workers (a crawl's rotation of hosts
/// does), never below the fetcher's default; set, it is what it says.
#[test]
fn the_kept_connection_cap_follows_the_workers_unless_set() {
    let pooled = |text: &str| {
        Config::parse(text, "t")
            .unwrap()
            .check(None)
            .unwrap()
            .fetcher_config()
            .unwrap()
            .max_pooled_connections
    };
    assert_eq!(pooled("[fetch]\nworkers = 1000\n"), 16_000);
    assert_eq!(pooled("[fetch]\nworkers = 256\n"), 4_096);
    assert_eq!(pooled("[fetch]\nworkers = 16\n"), 1_024);
    assert_eq!(
        pooled("[fetch]\nworkers = 1000\nmax_pooled_connections = 512\n"),
        512
    );
    assert_eq!(
        pooled("[fetch]\nworkers = 8\nmax_pooled_connections = 0\n"),
        0
    );
}

#[test]
fn ip_politeness_and_dns_keys_reach_the_frontier_and_fetcher() {
    let s = Config::parse(
        "[politeness]\nmax_in_flight_per_ip = 2\nip_delay = \"1500ms\"\n[dns]\ncache_entries = 10\nmin_ttl = \"5s\"\nmax_ttl = \"10m\"\nnegative_ttl = \"2s\"\n",
        "t",
    )
    .unwrap()
    .check(None)
    .unwrap();
    let f = s.frontier_config();
    assert_eq!((f.max_in_flight_per_ip, f.ip_delay_ms), (2, 1500));
    let d = s.fetcher_config().unwrap().dns;
    assert_eq!(d.cache_entries, 10);
    assert_eq!(d.min_ttl, Duration::from_secs(5));
    assert_eq!(d.max_ttl, Duration::from_secs(600));
    assert_eq!(d.negative_ttl, Duration::from_secs(2));
    let e = err("[politeness]\nmax_in_flight_per_ip = 0\n");
    assert!(
        e.contains("max_in_flight_per_ip") && e.contains("allowed"),
        "{e}"
    );
    let s = Config::parse(
        "[dns]\nservers = [\"127.0.0.1:5353\", \"192.0.2.53\"]\n",
        "t",
    )
    .unwrap()
    .check(None)
    .unwrap();
    let servers: Vec<String> = s
        .fetcher_config()
        .unwrap()
        .dns
        .servers
        .iter()
        .map(|a| a.to_string())
        .collect();
    assert_eq!(servers, ["127.0.0.1:5353", "192.0.2.53:53"]);
    let e = err("[dns]\nservers = [\"resolver.example\"]\n");
    assert!(
        e.contains("dns.servers") && e.contains("resolver.example"),
        "{e}"
    );
    let e = err("[dns]\nmin_ttl = \"2h\"\nmax_ttl = \"1h\"\n");
    assert!(e.contains("dns.max_ttl") && e.contains("allowed"), "{e}");
}

/// `[warc]`'s deflate settings reach the writer: stored compressed payloads by default,
/// deflated when `deflate_compressed_payloads` says so, at the configured level.
#[test]
fn warc_deflate_settings_reach_the_writer() {
    let d = Config::default()
        .check(None)
        .unwrap()
        .warc_config()
        .deflate();
    assert_eq!(d.level, warc::DEFAULT_GZIP_LEVEL);
    assert!(!d.compressed_payloads);
    let s = Config::parse(
        "[warc]\ngzip_level = 6\ndeflate_compressed_payloads = true\n",
        "t",
    )
    .unwrap()
    .check(None)
    .unwrap();
    let d = s.warc_config().deflate();
    assert_eq!((d.level, d.compressed_payloads), (6, true));
}

fn fetcher_config_of(toml: &str) -> fetcher::FetcherConfig {
    Config::parse(toml, "t")
        .unwrap()
        .check(None)
        .unwrap()
        .fetcher_config()
        .unwrap()
}

/// `[fetch] accept_encoding` reaches the fetcher in its order; an unknown or repeated
/// coding is refused by name, and the embedded default asks for gzip and deflate only.
#[test]
fn accept_encoding_reaches_the_fetcher() {
    use fetcher::AcceptedCoding::{Brotli, Deflate, Gzip};
    let codings = |toml: &str| fetcher_config_of(toml).accept_encoding;
    assert_eq!(
        codings("[fetch]\naccept_encoding = [\"br\", \"GZIP\"]\n"),
        vec![Brotli, Gzip]
    );
    assert_eq!(codings("[fetch]\naccept_encoding = []\n"), vec![]);
    assert_eq!(codings(""), vec![Gzip, Deflate]);
    let embedded = Config::parse(crate::DEFAULT_TOML, "t")
        .unwrap()
        .check(None)
        .unwrap();
    assert_eq!(
        embedded.fetcher_config().unwrap().accept_encoding,
        vec![Gzip, Deflate]
    );
    let e = err("[fetch]\naccept_encoding = [\"gzip\", \"zstd\"]\n");
    assert!(
        e.contains("fetch.accept_encoding") && e.contains("zstd") && e.contains("br"),
        "{e}"
    );
    let e = err("[fetch]\naccept_encoding = [\"gzip\", \"gzip\"]\n");
    assert!(
        e.contains("fetch.accept_encoding") && e.contains("once"),
        "{e}"
    );
}

/// `[fetch] tls_sessions` reaches the fetcher; unset, it scales with the workers as the
/// pool does (16 a worker, at least 1 024); out of range it is refused by name.
#[test]
fn tls_sessions_reach_the_fetcher() {
    let sessions = |toml: &str| fetcher_config_of(toml).tls_sessions;
    assert_eq!(sessions(""), fetcher::DEFAULT_TLS_SESSIONS);
    assert_eq!(sessions("[fetch]\nworkers = 256\n"), 4096);
    assert_eq!(sessions("[fetch]\nworkers = 256\ntls_sessions = 10\n"), 10);
    assert_eq!(sessions("[fetch]\ntls_sessions = 0\n"), 0);
    let e = err("[fetch]\ntls_sessions = 2000000\n");
    assert!(e.contains("fetch.tls_sessions"), "{e}");
}

/// A test CA's certificate (no key anywhere), made with `openssl req -x509`.
const TEST_CA_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBnTCCAUOgAwIBAgIUfQJ+TbXzIPrybcalG87kZGsQ2YYwCgYIKoZIzj0EAwIw
IzEhMB8GA1UEAwwYZnJvbnRpZXJkIGNvbmZpZyB0ZXN0IENBMCAXDTI2MTIwNzE5
MjQzM1oYDzIxMjYxMTEzMTkyNDMzWjAjMSEwHwYDVQQDDBhmcm9udGllcmQgY29u
ZmlnIHRlc3QgQ0EwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAASrexPRmyhIsZSK
ytRz5tRrCPleHeEpcVPfhlKofEIs6sOg2k7ogbUcqqyPV/K+dbjwHYSF0N7ylWyF
RAFb/llDo1MwUTAdBgNVHQ4EFgQUguhKktuYUOiwPc3BnpS5UxjitNowHwYDVR0j
BBgwFoAUguhKktuYUOiwPc3BnpS5UxjitNowDwYDVR0TAQH/BAUwAwEB/zAKBggq
hkjOPQQDAgNIADBFAiEA97Cgt7mWaFS7jXkyR4VIoVMKybBV6Knb/0esEOvS/f4C
IFz2zlbdBkVedtd7AHJQU36Afvpft13KI44pYeADhfkB
-----END CERTIFICATE-----
";

/// `[fetch] extra_root_certificates`: each PEM file's certificates reach the fetcher (keys
/// and other blocks passed over); a missing file or one without a certificate is refused
/// by key and path, at check time.
#[test]
fn extra_root_certificates_are_read_from_pem_files() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    // a key block between the certificates, as a combined file has: passed over
    let key = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n";
    std::fs::write(&ca, format!("# our CA\n{TEST_CA_PEM}{key}{TEST_CA_PEM}")).unwrap();
    let naming = |file: &std::path::Path| {
        format!(
            "[fetch]\nextra_root_certificates = [{:?}]\n",
            file.display().to_string()
        )
    };
    let roots = fetcher_config_of(&naming(&ca)).extra_root_certificates;
    assert_eq!(roots.len(), 2);
    assert!(
        roots.iter().all(|der| der.len() > 300 && der[0] == 0x30),
        "DER"
    );
    assert!(fetcher_config_of("").extra_root_certificates.is_empty());

    let missing = dir.path().join("missing.pem");
    let e = err(&naming(&missing));
    assert!(
        e.contains("fetch.extra_root_certificates") && e.contains("missing.pem"),
        "{e}"
    );
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let e = err(&naming(&empty));
    assert!(
        e.contains("empty.pem") && e.contains("no certificate"),
        "{e}"
    );
}

/// `[fetch] http2` reaches the fetcher, off by default and in the embedded file.
#[test]
fn http2_is_offered_only_when_asked() {
    assert!(!fetcher_config_of("").http2);
    assert!(!fetcher_config_of(crate::DEFAULT_TOML).http2);
    assert!(fetcher_config_of("[fetch]\nhttp2 = true\n").http2);
}
