//! The writer and the recovery, checked by reading the files back (and with warcio).

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, UNIX_EPOCH};

use crate::record::{file_timestamp, with_blank_line};
use crate::*;

/// The files in `dir` whose names start with `prefix` and end with `suffix`, by name.
fn listed(dir: &Path, prefix: &str, suffix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with(prefix) && name.ends_with(suffix)
        })
        .collect();
    found.sort();
    found
}

/// The one `.open` file a writer with this prefix has in `dir`.
fn open_file(dir: &Path, prefix: &str) -> PathBuf {
    let open = listed(dir, prefix, OPEN_SUFFIX);
    assert_eq!(open.len(), 1, "{open:?}");
    open[0].clone()
}

/// One parsed record.
#[derive(Debug)]
struct Record {
    headers: HashMap<String, String>,
    block: Vec<u8>,
}

impl Record {
    fn get(&self, name: &str) -> &str {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
            .unwrap_or_else(|| panic!("no {name} in {:?}", self.headers))
    }
    fn has(&self, name: &str) -> bool {
        self.headers.contains_key(&name.to_ascii_lowercase())
    }
}

/// Decompresses each gzip member separately and parses it as exactly one record.
fn read_records(path: &Path) -> Vec<Record> {
    let data = fs::read(path).unwrap();
    let mut rest = &data[..];
    let mut records = Vec::new();
    while !rest.is_empty() {
        let mut dec = flate2::bufread::GzDecoder::new(rest);
        let mut member = Vec::new();
        dec.read_to_end(&mut member).unwrap();
        rest = dec.into_inner();
        records.push(parse_record(&member));
    }
    records
}

fn parse_record(member: &[u8]) -> Record {
    let end = member
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("header end");
    let head = std::str::from_utf8(&member[..end]).unwrap();
    let mut lines = head.split("\r\n");
    assert_eq!(lines.next(), Some("WARC/1.1"));
    let headers: HashMap<String, String> = lines
        .map(|l| {
            let (k, v) = l.split_once(": ").expect("field");
            (k.to_ascii_lowercase(), v.to_string())
        })
        .collect();
    let len: usize = headers["content-length"].parse().unwrap();
    let block = member[end + 4..end + 4 + len].to_vec();
    assert_eq!(&member[end + 4 + len..], b"\r\n\r\n", "record trailer");
    Record { headers, block }
}

fn sha1_of(data: &[u8]) -> String {
    sha1_label(&<sha1::Sha1 as sha1::Digest>::digest(data))
}

fn exchange<'a>(uri: &'a str, head: &'a [u8], body: &'a [u8]) -> Exchange<'a> {
    Exchange {
        target_uri: uri,
        ip: Some("127.0.0.1".parse().unwrap()),
        date: UNIX_EPOCH + Duration::from_secs(1_714_564_800),
        request_head:
            b"GET /robots.txt HTTP/1.1\r\nHost: example.org\r\nUser-Agent: frontierd/0.1\r\n\r\n",
        response_head: head,
        response_body: body,
        truncated: None,
        payload_digest: None,
    }
}

/// The interpreter with warcio, found as the e2e suite finds it (tests/README.md):
/// `FRONTIERD_PYTHON`, else the project venv `<repo>/.venv`, else `python3`.
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("FRONTIERD_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python3");
    if venv.is_file() {
        return venv;
    }
    PathBuf::from("python3")
}

/// Runs `warcio check -v` on the files; fails loudly when warcio is missing.
fn warcio_check(paths: &[PathBuf]) {
    let python = python();
    let probe = Command::new(&python)
        .args(["-c", "import warcio.cli"])
        .output();
    match probe {
        Ok(o) if o.status.success() => {}
        _ => panic!(
            "this test needs the Python package warcio, which {} lacks. Create the project \
             venv (.ci/run does): apt-get install -y python3-venv; python3 -m venv .venv; \
             .venv/bin/pip install warcio (in the repository root), or set \
             FRONTIERD_PYTHON to a python3 that has it",
            python.display()
        ),
    }
    let out = Command::new(&python)
        .args(["-m", "warcio.cli", "check", "-v"])
        .args(paths)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "warcio check failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    // -v prints every record's digest verdicts; none may be a failure.
    assert!(!stdout.contains("digest fail"), "{stdout}");
    assert!(
        stdout.contains("digest pass"),
        "no digests checked: {stdout}"
    );
}

#[test]
fn dates_and_labels() {
    assert_eq!(warc_date(UNIX_EPOCH), "1970-01-01T00:00:00Z");
    assert_eq!(
        warc_date(UNIX_EPOCH + Duration::from_millis(1_714_564_800_250)),
        "2024-05-01T12:00:00Z"
    );
    assert_eq!(
        warc_date(UNIX_EPOCH + Duration::from_secs(951_782_400)),
        "2000-02-29T00:00:00Z"
    );
    assert_eq!(
        file_timestamp(UNIX_EPOCH + Duration::from_millis(1_714_564_800_250)),
        "20240501120000250"
    );
    // SHA-1 of the empty string, base32.
    assert_eq!(sha1_of(b""), "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ");
    assert_eq!(
        crate::rfc3339_millis(UNIX_EPOCH + Duration::from_millis(1_714_564_800_007)),
        "2024-05-01T12:00:00.007Z"
    );
}

proptest::proptest! {
    /// The hand-written formatting against humantime's, to the year 9999.
    #[test]
    fn dates_match_humantime(ms in 0u64..253_402_300_800_000) {
        let t = UNIX_EPOCH + Duration::from_millis(ms);
        proptest::prop_assert_eq!(
            crate::rfc3339_millis(t),
            humantime::format_rfc3339_millis(t).to_string()
        );
        proptest::prop_assert_eq!(warc_date(t), humantime::format_rfc3339_seconds(t).to_string());
    }
}

#[test]
fn writes_valid_warc_with_linked_records_and_digests() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = WarcConfig::new(dir.path());
    config.operator = Some("ops@example.org".into());
    config.hostname = Some("crawler-1".into());
    let mut w = WarcWriter::new(config).unwrap();

    let text_head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 25\r\n\r\n";
    let text = b"User-agent: *\nDisallow:\n";
    let binary: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
    let bin_head = b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 5000\r\n\r\n";
    let empty_head = b"HTTP/1.1 204 No Content\r\n\r\n";
    let cut_head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n";
    let cut = vec![b'x'; 1000];

    let first = w
        .write_exchange(&exchange("https://example.org/robots.txt", text_head, text))
        .unwrap();
    w.write_exchange(&exchange("https://example.org/bin", bin_head, &binary))
        .unwrap();
    let mut e = exchange("http://example.org/empty", empty_head, b"");
    e.ip = None;
    w.write_exchange(&e).unwrap();
    let mut e = exchange("http://[::1]:8080/big", cut_head, &cut);
    e.truncated = Some(Truncated::Length);
    e.ip = Some("::1".parse().unwrap());
    w.write_exchange(&e).unwrap();

    let open = open_file(dir.path(), "frontierd-");
    assert!(open.to_string_lossy().ends_with(".warc.gz.open"));
    assert!(open.exists());
    let written = w.bytes_written();
    let path = w.close().unwrap().unwrap();
    assert_eq!(path, first.file);
    assert!(!open.exists());
    assert_eq!(fs::metadata(&path).unwrap().len(), written);
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        name.starts_with("frontierd-") && name.ends_with("-00001.warc.gz"),
        "{name}"
    );

    let records = read_records(&path);
    assert_eq!(records.len(), 9);
    let info = &records[0];
    assert_eq!(info.get("WARC-Type"), "warcinfo");
    assert_eq!(info.get("WARC-Filename"), name);
    assert_eq!(info.get("Content-Type"), "application/warc-fields");
    let fields = String::from_utf8(info.block.clone()).unwrap();
    assert!(fields.contains("software: frontierd/"), "{fields}");
    assert!(fields.contains("format: WARC File Format 1.1\r\n"));
    assert!(fields.contains("hostname: crawler-1\r\n"));
    assert!(fields.contains("operator: ops@example.org\r\n"));

    let mut ids = std::collections::HashSet::new();
    for r in &records {
        let id = r.get("WARC-Record-ID");
        assert!(
            id.starts_with("<urn:uuid:") && id.ends_with('>') && id.len() == 47,
            "{id}"
        );
        assert!(ids.insert(id.to_string()), "duplicate id");
        assert_eq!(r.get("WARC-Block-Digest"), sha1_of(&r.block));
        assert_eq!(r.get("Content-Length"), r.block.len().to_string());
    }
    for pair in records[1..].chunks(2) {
        let (req, resp) = (&pair[0], &pair[1]);
        assert_eq!(req.get("WARC-Type"), "request");
        assert_eq!(resp.get("WARC-Type"), "response");
        assert_eq!(req.get("Content-Type"), "application/http;msgtype=request");
        assert_eq!(
            resp.get("Content-Type"),
            "application/http;msgtype=response"
        );
        assert_eq!(req.get("WARC-Concurrent-To"), resp.get("WARC-Record-ID"));
        assert_eq!(resp.get("WARC-Concurrent-To"), req.get("WARC-Record-ID"));
        assert_eq!(req.get("WARC-Target-URI"), resp.get("WARC-Target-URI"));
        assert_eq!(req.get("WARC-Date"), "2024-05-01T12:00:00Z");
        assert!(req.block.starts_with(b"GET /robots.txt HTTP/1.1\r\n"));
    }
    assert_eq!(records[1].get("WARC-Record-ID"), first.request_id);
    assert_eq!(records[2].get("WARC-Record-ID"), first.response_id);
    assert_eq!(records[2].get("WARC-IP-Address"), "127.0.0.1");
    assert_eq!(records[2].get("WARC-Payload-Digest"), sha1_of(text));
    assert_eq!(records[2].block, [&text_head[..], &text[..]].concat());
    assert_eq!(records[4].get("WARC-Payload-Digest"), sha1_of(&binary));
    assert!(records[4].block.ends_with(&binary));
    assert!(!records[6].has("WARC-IP-Address"));
    assert_eq!(records[6].get("WARC-Payload-Digest"), sha1_of(b""));
    assert_eq!(records[6].block, empty_head);
    assert_eq!(records[8].get("WARC-Truncated"), "length");
    assert_eq!(records[8].get("WARC-IP-Address"), "::1");
    assert_eq!(records[8].get("WARC-Target-URI"), "http://[::1]:8080/big");
    assert!(!records[7].has("WARC-Truncated"));
    assert!(!records[2].has("WARC-Truncated"));

    warcio_check(&[path]);
}

/// What `write_exchange` returns locates its response record: seeking to the offset in
/// the named file and gunzipping one member gives the response with that payload digest,
/// in the first file and in the files after a rotation.
#[test]
fn written_exchange_locates_its_response_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = WarcConfig::new(dir.path());
    config.max_file_size = 2500;
    let mut w = WarcWriter::new(config).unwrap();
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n";
    let mut x: u32 = 7;
    let mut written = Vec::new();
    for i in 0..6 {
        let body: Vec<u8> = (0..700 + 100 * i)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        let uri = format!("https://example.org/{i}");
        let done = w.write_exchange(&exchange(&uri, head, &body)).unwrap();
        assert_eq!(done.payload_digest, sha1_of(&body));
        written.push((uri, done));
    }
    w.finish().unwrap();
    assert!(listed(dir.path(), "", WARC_SUFFIX).len() >= 3, "rotated");
    for (uri, done) in &written {
        let mut f = File::open(&done.file).unwrap();
        f.seek(io::SeekFrom::Start(done.response_offset)).unwrap();
        let mut member = Vec::new();
        flate2::read::GzDecoder::new(f)
            .read_to_end(&mut member)
            .unwrap();
        let r = parse_record(&member);
        assert_eq!(r.get("WARC-Type"), "response");
        assert_eq!(r.get("WARC-Target-URI"), uri);
        assert_eq!(r.get("WARC-Record-ID"), done.response_id);
        assert_eq!(r.get("WARC-Payload-Digest"), done.payload_digest);
    }
}

/// The daemon encodes on each worker's thread and appends under a lock: records encoded in
/// parallel and appended in another order must still be whole, located and paired.
#[test]
fn exchanges_encoded_on_other_threads_append_whole_in_any_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = WarcWriter::new(WarcConfig::new(dir.path())).unwrap();
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n";
    let encoded: Vec<(String, Vec<u8>, EncodedExchange)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                s.spawn(move || {
                    let uri = format!("https://example.org/{i}");
                    let body = format!("body of page {i} ").repeat(50 + i).into_bytes();
                    let e = WarcWriter::encode_exchange(
                        &exchange(&uri, head, &body),
                        Deflate {
                            level: 6,
                            ..Deflate::default()
                        },
                    )
                    .unwrap();
                    (uri, body, e)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut written = Vec::new();
    for (uri, body, e) in encoded.into_iter().rev() {
        let done = w.append_exchange(e).unwrap();
        assert_eq!(done.payload_digest, sha1_of(&body));
        written.push((uri, body, done));
    }
    let path = w.finish().unwrap().unwrap();
    let records = read_records(&path);
    // warcinfo, then a request/response pair per exchange, in append order
    assert_eq!(records.len(), 1 + 2 * written.len());
    for ((uri, body, done), pair) in written.iter().zip(records[1..].chunks(2)) {
        let (req, resp) = (&pair[0], &pair[1]);
        assert_eq!(req.get("WARC-Type"), "request");
        assert_eq!(resp.get("WARC-Target-URI"), uri);
        assert_eq!(resp.get("WARC-Record-ID"), done.response_id);
        assert_eq!(req.get("WARC-Concurrent-To"), done.response_id);
        assert!(resp.block.ends_with(body));
        let mut f = File::open(&path).unwrap();
        f.seek(io::SeekFrom::Start(done.response_offset)).unwrap();
        let mut member = Vec::new();
        flate2::read::GzDecoder::new(f)
            .read_to_end(&mut member)
            .unwrap();
        assert_eq!(
            parse_record(&member).get("WARC-Record-ID"),
            done.response_id
        );
    }
    warcio_check(&[path]);
}

#[test]
fn rotates_by_size_without_splitting_exchanges() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = WarcConfig::new(dir.path());
    config.prefix = "test".into();
    config.max_file_size = 3000;
    let mut w = WarcWriter::new(config).unwrap();
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n";
    // Incompressible bodies so sizes are predictable: ~1.3 KB per exchange.
    let mut bodies = Vec::new();
    let mut x: u32 = 12345;
    for i in 0..7 {
        let len = if i == 3 { 8000 } else { 900 };
        let body: Vec<u8> = (0..len)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        bodies.push(body);
    }
    let mut files = Vec::new();
    for body in &bodies {
        let done = w
            .write_exchange(&exchange("https://example.org/x", head, body))
            .unwrap();
        files.push(done.file);
    }
    let total = w.bytes_written();
    w.finish().unwrap();
    let completed = listed(dir.path(), "", WARC_SUFFIX);
    assert!(completed.len() >= 3, "{completed:?}");
    // the files as the exchanges went into them: sorted by name, they are in that order
    let mut created = files.clone();
    created.dedup();
    assert_eq!(created, completed, "names sort in creation order");
    let mut sum = 0;
    let mut exchanges = 0;
    for p in &completed {
        let len = fs::metadata(p).unwrap().len();
        sum += len;
        let records = read_records(p);
        assert_eq!(records[0].get("WARC-Type"), "warcinfo");
        assert_eq!(records.len() % 2, 1, "whole exchanges only");
        exchanges += (records.len() - 1) / 2;
        let big = records.iter().any(|r| r.block.len() > 5000);
        assert!(
            len <= 3000 || (big && records.len() == 3),
            "{} is {len} bytes",
            p.display()
        );
    }
    assert_eq!(exchanges, 7);
    assert_eq!(sum, total);
    // The exchange reported each file correctly.
    for f in &files {
        assert!(completed.contains(f));
    }
    // Nothing left open.
    let open: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".open")
        })
        .collect();
    assert!(open.is_empty());
    warcio_check(&completed);
}

#[test]
fn failed_write_is_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = WarcWriter::new(WarcConfig::new(dir.path())).unwrap();
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n";
    w.write_exchange(&exchange("https://example.org/1", head, b"one"))
        .unwrap();
    // Simulate a write that failed half-way: bytes on disk and in the buffer.
    {
        let current = w.current.as_mut().unwrap();
        current.out.write_all(b"\x1f\x8b torn member").unwrap();
        current.out.flush().unwrap();
        current.out.write_all(b"still buffered").unwrap();
    }
    w.roll_back();
    assert!(
        w.current.is_some(),
        "file kept after a successful roll-back"
    );
    w.write_exchange(&exchange("https://example.org/2", head, b"two"))
        .unwrap();
    let path = w.close().unwrap().unwrap();
    let records = read_records(&path);
    assert_eq!(records.len(), 5);
    assert_eq!(records[4].get("WARC-Target-URI"), "https://example.org/2");
    warcio_check(&[path]);
}

#[test]
fn rejects_bad_target_uri() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = WarcWriter::new(WarcConfig::new(dir.path())).unwrap();
    let err = w
        .write_exchange(&exchange(
            "https://example.org/a b",
            b"HTTP/1.1 200 OK\r\n\r\n",
            b"",
        ))
        .unwrap_err();
    assert!(err.to_string().contains("WARC-Target-URI"), "{err}");
    assert!(w.current.is_none());
    assert!(listed(dir.path(), "", "").is_empty(), "no file opened");
}

#[test]
fn heads_get_their_blank_line() {
    assert_eq!(
        with_blank_line(b"HTTP/1.1 200 OK"),
        b"HTTP/1.1 200 OK\r\n\r\n"
    );
    assert_eq!(
        with_blank_line(b"HTTP/1.1 200 OK\r\n"),
        b"HTTP/1.1 200 OK\r\n\r\n"
    );
    assert_eq!(
        with_blank_line(b"HTTP/1.1 200 OK\r\n\r\n"),
        b"HTTP/1.1 200 OK\r\n\r\n"
    );
}

#[test]
fn recovers_open_files_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n";
    let make = |prefix: &str| -> PathBuf {
        let mut config = WarcConfig::new(dir.path());
        config.prefix = prefix.into();
        let mut w = WarcWriter::new(config).unwrap();
        w.write_exchange(&exchange("https://example.org/", head, b"hello"))
            .unwrap();
        w.write_exchange(&exchange("https://example.org/2", head, b"world"))
            .unwrap();
        let open = open_file(dir.path(), prefix);
        // Simulate a crash: the writer never finishes.
        std::mem::forget(w);
        open
    };
    let clean = make("a");
    let torn = make("b");
    let garbage = make("c");
    // b: tear the last member in half.
    let len = fs::metadata(&torn).unwrap().len();
    let f = OpenOptions::new().write(true).open(&torn).unwrap();
    f.set_len(len - 40).unwrap();
    // c: nothing but a torn first member.
    fs::write(&garbage, &fs::read(&garbage).unwrap()[..30]).unwrap();

    let result = recover_open_files(dir.path()).unwrap();
    assert_eq!(result.len(), 3);
    let a = PathBuf::from(clean.to_string_lossy().trim_end_matches(".open"));
    let b = PathBuf::from(torn.to_string_lossy().trim_end_matches(".open"));
    assert_eq!(result[0], Recovered::Renamed(a.clone()));
    match &result[1] {
        Recovered::Truncated { path, kept, was } => {
            assert_eq!(path, &b);
            assert_eq!(*was, len - 40);
            assert!(kept < was);
            assert_eq!(fs::metadata(&b).unwrap().len(), *kept);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(result[2], Recovered::Removed(garbage.clone()));
    assert!(!garbage.exists());
    assert_eq!(read_records(&a).len(), 5);
    // The torn response is gone; warcinfo, request, response, request remain.
    assert_eq!(read_records(&b).len(), 4);
    // A second pass finds nothing to do.
    assert!(recover_open_files(dir.path()).unwrap().is_empty());
    warcio_check(&[a, b]);
}

/// Members come from one deflate state per thread, reset between records: a record much
/// larger than the first output reservation (incompressible), then small ones on the same
/// thread, each decode alone to exactly their record with a correct gzip trailer.
#[test]
fn reused_deflate_state_makes_whole_independent_members() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = WarcWriter::new(WarcConfig::new(dir.path())).unwrap();
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n";
    let mut x: u64 = 99;
    let noise: Vec<u8> = (0..3 << 20)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (x >> 33) as u8
        })
        .collect();
    let bodies = [noise, b"small".to_vec(), Vec::new(), b"again".repeat(1000)];
    let mut done = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        let uri = format!("https://example.org/{i}");
        done.push(w.write_exchange(&exchange(&uri, head, body)).unwrap());
    }
    let path = w.finish().unwrap().unwrap();
    for (body, d) in bodies.iter().zip(&done) {
        let mut f = File::open(&path).unwrap();
        f.seek(io::SeekFrom::Start(d.response_offset)).unwrap();
        // GzDecoder checks the CRC-32 and length trailer of the member
        let mut member = Vec::new();
        flate2::read::GzDecoder::new(f)
            .read_to_end(&mut member)
            .unwrap();
        let r = parse_record(&member);
        assert_eq!(r.get("WARC-Record-ID"), d.response_id);
        assert!(r.block.ends_with(body));
        assert_eq!(r.get("WARC-Payload-Digest"), sha1_of(body));
    }
    warcio_check(&[path]);
}

/// `gzip_level` is honoured: 0 stores (the file outgrows the page), 1 (the default)
/// deflates it to a fraction, 12 (the slowest) to no more than 1 does; all files are
/// valid WARC and hold the same record.
#[test]
fn gzip_level_is_honoured() {
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n";
    let body = b"<p>the same paragraph, again and again</p>\n".repeat(2000);
    let mut sizes = Vec::new();
    for level in [0, DEFAULT_GZIP_LEVEL, MAX_GZIP_LEVEL] {
        let dir = tempfile::tempdir().unwrap();
        let mut config = WarcConfig::new(dir.path());
        config.gzip_level = level;
        let mut w = WarcWriter::new(config).unwrap();
        let done = w
            .write_exchange(&exchange("https://example.org/", head, &body))
            .unwrap();
        assert_eq!(done.payload_digest, sha1_of(&body));
        let path = w.finish().unwrap().unwrap();
        let records = read_records(&path);
        assert!(records[2].block.ends_with(&body));
        sizes.push(fs::metadata(&path).unwrap().len());
        warcio_check(&[path]);
    }
    assert!(sizes[0] > body.len() as u64, "level 0 stores: {sizes:?}");
    assert!(sizes[1] * 20 < sizes[0], "level 1 deflates: {sizes:?}");
    assert!(
        sizes[2] <= sizes[1],
        "level 12 is no larger than 1: {sizes:?}"
    );
}
/// A response whose payload is already compressed (a Content-Encoding, or a compressed
/// format) goes into its gzip member stored: the file holds the body's bytes at full
/// length; with `deflate_compressed_payloads` the same record is deflated. Either way the
/// file is valid WARC with the same record and digests, and a plain page beside it is
/// deflated as before.
#[test]
fn a_compressed_payload_is_stored_unless_asked_otherwise() {
    // compressible bytes, so that deflating them would show: a server's word that they
    // are compressed is what counts
    let body = b"<p>announced as compressed</p>\n".repeat(2000);
    let plain_head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n";
    for coded_head in [
        &b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\n\r\n"[..],
        &b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\n\r\n"[..],
    ] {
        let mut sizes = Vec::new();
        for deflate_them in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let mut config = WarcConfig::new(dir.path());
            config.deflate_compressed_payloads = deflate_them;
            let mut w = WarcWriter::new(config).unwrap();
            let coded = w
                .write_exchange(&exchange("https://example.org/c", coded_head, &body))
                .unwrap();
            let plain = w
                .write_exchange(&exchange("https://example.org/p", plain_head, &body))
                .unwrap();
            assert_eq!(coded.payload_digest, sha1_of(&body));
            let path = w.finish().unwrap().unwrap();
            let bytes = fs::read(&path).unwrap();
            // the coded response's member, then the plain page's small request record
            let coded_member = plain.response_offset - coded.response_offset;
            let plain_member = bytes.len() as u64 - plain.response_offset;
            assert!(
                plain_member * 20 < body.len() as u64,
                "the plain page is deflated: {plain_member} bytes"
            );
            sizes.push(coded_member);
            let records = read_records(&path);
            assert!(records[2].block.ends_with(&body));
            assert_eq!(records[2].get("WARC-Payload-Digest"), sha1_of(&body));
            warcio_check(&[path]);
        }
        assert!(
            sizes[0] > body.len() as u64,
            "stored by default: {sizes:?} for a body of {}",
            body.len()
        );
        assert!(
            sizes[1] * 10 < body.len() as u64,
            "deflated when asked: {sizes:?}"
        );
    }
}

/// A payload digest the caller already computed is the one written, and the records are
/// those the writer makes when it computes the digest itself.
#[test]
fn a_given_payload_digest_is_written_as_computed() {
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n";
    let body = b"<p>hashed once by the caller</p>\n".repeat(50);
    let given = payload_digest(&body);
    for payload in [None, Some(given.as_str())] {
        let dir = tempfile::tempdir().unwrap();
        let mut w = WarcWriter::new(WarcConfig::new(dir.path())).unwrap();
        let mut ex = exchange("https://example.org/given", head, &body);
        ex.payload_digest = payload;
        let done = w.write_exchange(&ex).unwrap();
        assert_eq!(done.payload_digest, sha1_of(&body), "given {payload:?}");
        let path = w.finish().unwrap().unwrap();
        let records = read_records(&path);
        assert_eq!(records[2].get("WARC-Payload-Digest"), sha1_of(&body));
        assert!(records[2].block.ends_with(&body));
        warcio_check(&[path]);
    }
}

/// Both revisit profiles: a `revisit` record with the response head only, the profile,
/// what it refers to, and a payload digest only where there is a payload to compare;
/// warcio accepts them.
#[test]
fn revisit_records_for_not_modified_and_identical_digest() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = WarcWriter::new(WarcConfig::new(dir.path())).unwrap();
    let url = "https://example.org/page";
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nETag: \"v1\"\r\n\r\n";
    let body = b"<html>same</html>";
    let first = w.write_exchange(&exchange(url, head, body)).unwrap();
    let earlier = UNIX_EPOCH + Duration::from_secs(1_714_564_800);
    let mut later = exchange(url, head, body);
    later.date = earlier + Duration::from_secs(60);
    let same = w
        .write_revisit(
            &later,
            &Revisit {
                profile: RevisitProfile::IdenticalPayloadDigest,
                refers_to_uri: url,
                refers_to_date: earlier,
            },
        )
        .unwrap();
    assert_eq!(same.payload_digest, first.payload_digest);
    let not_modified_head = b"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n";
    w.write_revisit(
        &exchange(url, not_modified_head, b""),
        &Revisit {
            profile: RevisitProfile::ServerNotModified,
            refers_to_uri: url,
            refers_to_date: earlier,
        },
    )
    .unwrap();
    let path = w.close().unwrap().unwrap();
    let records = read_records(&path);
    let revisits: Vec<&Record> = records
        .iter()
        .filter(|r| r.get("WARC-Type") == "revisit")
        .collect();
    assert_eq!(revisits.len(), 2);
    let (digest, nm) = (revisits[0], revisits[1]);
    assert_eq!(
        digest.get("WARC-Profile"),
        "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
    );
    assert_eq!(digest.get("WARC-Payload-Digest"), sha1_of(body));
    assert_eq!(digest.block, head.to_vec(), "head only, no payload");
    assert_eq!(digest.get("WARC-Refers-To-Target-URI"), url);
    assert_eq!(digest.get("WARC-Refers-To-Date"), "2024-05-01T12:00:00Z");
    assert_eq!(digest.get("WARC-Date"), "2024-05-01T12:01:00Z");
    assert_eq!(
        nm.get("WARC-Profile"),
        "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
    );
    assert!(!nm.has("WARC-Payload-Digest"));
    assert_eq!(nm.block, not_modified_head.to_vec());
    assert_eq!(nm.get("Content-Type"), "application/http;msgtype=response");
    warcio_check(&[path]);
}

/// A body of HTML-like runs, copies of its own earlier bytes (near and further back than
/// deflate's 32 KiB window) and noise, from `steps`: long matches in every shape for the
/// level-1 match finder, which passes over the inside of a match (vendor/libdeflate-sys).
fn repetitive_body(steps: &[(u8, u32, u16)]) -> Vec<u8> {
    let mut body = Vec::new();
    for &(kind, a, b) in steps {
        match kind % 3 {
            0 => body.extend_from_slice(
                format!(
                    "<p>Paragraph {a}: the quick brown fox. <a href=\"/p/{b}\">link {b}</a></p>\n"
                )
                .as_bytes(),
            ),
            1 if !body.is_empty() => {
                let from = a as usize % body.len();
                let len = (b as usize % 3000).min(body.len() - from);
                body.extend_from_within(from..from + len);
            }
            _ => {
                body.extend((0..b % 64).map(|i| (a.wrapping_mul(2_654_435_761) >> (i % 24)) as u8))
            }
        }
    }
    body
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Every record deflated at the default level reads back whole, byte for byte, with
    /// its gzip trailer's CRC-32 and length right.
    #[test]
    fn level_one_members_read_back_exactly(
        steps in proptest::collection::vec((0u8..3, proptest::prelude::any::<u32>(), proptest::prelude::any::<u16>()), 1..400)
    ) {
        let body = repetitive_body(&steps);
        let dir = tempfile::tempdir().unwrap();
        let mut w = WarcWriter::new(WarcConfig::new(dir.path())).unwrap();
        let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n";
        let done = w.write_exchange(&exchange("https://example.org/", head, &body)).unwrap();
        let path = w.finish().unwrap().unwrap();
        let mut f = File::open(&path).unwrap();
        f.seek(io::SeekFrom::Start(done.response_offset)).unwrap();
        let mut member = Vec::new();
        flate2::read::GzDecoder::new(f).read_to_end(&mut member).unwrap();
        let r = parse_record(&member);
        proptest::prop_assert_eq!(r.block.len(), head.len() + body.len());
        proptest::prop_assert!(r.block.ends_with(&body));
    }
}
