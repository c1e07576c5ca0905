//! WARC/1.1 output: one `.warc.gz` file at a time, one gzip member per record.
//!
//! Each file opens with a `warcinfo` record; every fetch (robots.txt included) becomes a
//! `request` record followed by its `response` record, written by one
//! [`WarcWriter::write_exchange`] call. A file being written is named `….warc.gz.open` and is
//! renamed to `….warc.gz` when it is complete (rotation, [`WarcWriter::finish`], or drop).
//! [`recover_open_files`] completes the `.open` files a crash left behind. See docs/warc.md.

// Wired in by the daemon (issue 5).
#![allow(dead_code)]

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use flate2::write::GzEncoder;
use flate2::Compression;

/// Default size at which a WARC file is closed and the next one opened: 1 GiB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 1 << 30;

/// Suffix of a finished file.
pub const WARC_SUFFIX: &str = ".warc.gz";
/// Suffix of a file still being written.
pub const OPEN_SUFFIX: &str = ".warc.gz.open";

/// Where and how WARC files are written, and what their `warcinfo` record says.
#[derive(Debug, Clone)]
pub struct WarcConfig {
    /// Directory the files go into (created if missing).
    pub dir: PathBuf,
    /// File name prefix: `{prefix}-{UTC timestamp}-{serial:05}.warc.gz`.
    pub prefix: String,
    /// A file is rotated before an exchange that would take it past this many (compressed)
    /// bytes. A record is never split: an exchange larger than this gets a file of its own.
    pub max_file_size: u64,
    /// `software` field of the warcinfo record.
    pub software: String,
    /// `hostname` field of the warcinfo record.
    pub hostname: Option<String>,
    /// `operator` field of the warcinfo record (contact of who runs the crawl).
    pub operator: Option<String>,
    /// `description` field of the warcinfo record.
    pub description: Option<String>,
    /// `robots` field of the warcinfo record (e.g. `obey`).
    pub robots: Option<String>,
}

impl WarcConfig {
    /// Defaults: prefix `frontierd`, 1 GiB files, `software: frontierd/<version>`, the
    /// kernel's host name, `robots: obey`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        let hostname = fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty());
        WarcConfig {
            dir: dir.into(),
            prefix: "frontierd".to_string(),
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            software: format!("frontierd/{}", env!("CARGO_PKG_VERSION")),
            hostname,
            operator: None,
            description: None,
            robots: Some("obey".to_string()),
        }
    }
}

/// Why a response body was cut short (`WARC-Truncated`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truncated {
    /// The body exceeded the configured size cap.
    Length,
    /// The fetch exceeded its time budget.
    Time,
    /// The peer closed the connection early.
    Disconnect,
    /// Any other reason.
    Unspecified,
}

impl Truncated {
    /// The WARC-Truncated field value.
    pub fn as_str(self) -> &'static str {
        match self {
            Truncated::Length => "length",
            Truncated::Time => "time",
            Truncated::Disconnect => "disconnect",
            Truncated::Unspecified => "unspecified",
        }
    }
}

/// One fetch as it went over the wire.
///
/// The heads are written verbatim; each should end with its blank line (`\r\n\r\n`), which
/// is added if missing. `response_body` must be the entity body in the form the head
/// describes: if the fetcher removed a `Transfer-Encoding` or `Content-Encoding`, the head
/// handed here should no longer announce it, or WARC readers will try to decode it again.
#[derive(Debug, Clone)]
pub struct Exchange<'a> {
    /// The URL fetched (written as `WARC-Target-URI`).
    pub target_uri: &'a str,
    /// The peer's address, when known.
    pub ip: Option<IpAddr>,
    /// When the request was sent.
    pub date: SystemTime,
    /// Request line and headers as sent.
    pub request_head: &'a [u8],
    /// Status line and headers as received.
    pub response_head: &'a [u8],
    /// Entity body as received (possibly cut, see `truncated`).
    pub response_body: &'a [u8],
    /// Set when the body was cut short.
    pub truncated: Option<Truncated>,
}

/// What [`WarcWriter::write_exchange`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenExchange {
    /// `<urn:uuid:…>` of the request record.
    pub request_id: String,
    /// `<urn:uuid:…>` of the response record.
    pub response_id: String,
    /// Final name (`.warc.gz`) of the file that holds both records.
    pub file: PathBuf,
    /// Byte offset in that file where the response record's gzip member starts (seek there
    /// and gunzip one member to read the record).
    pub response_offset: u64,
    /// The response record's `WARC-Payload-Digest` (`sha1:` + base32).
    pub payload_digest: String,
    /// Compressed bytes written by this call (including a warcinfo record if a file was
    /// opened for it).
    pub bytes: u64,
}

struct OpenWarc {
    open_path: PathBuf,
    final_path: PathBuf,
    out: BufWriter<File>,
    /// Bytes in the file, warcinfo included.
    size: u64,
    /// Exchanges in the file.
    exchanges: u64,
}

/// Writes exchanges to size-rotated `.warc.gz` files. Not thread-safe by itself: the
/// daemon keeps one behind a mutex or a channel.
pub struct WarcWriter {
    config: WarcConfig,
    current: Option<OpenWarc>,
    serial: u32,
    bytes_written: u64,
    completed: Vec<PathBuf>,
}

impl WarcWriter {
    /// Creates the output directory if needed. No file is opened until the first exchange.
    pub fn new(config: WarcConfig) -> Result<Self> {
        fs::create_dir_all(&config.dir)
            .with_context(|| format!("creating WARC directory {}", config.dir.display()))?;
        if config.prefix.is_empty() || config.prefix.contains(['/', '\0']) {
            bail!("invalid WARC file prefix {:?}", config.prefix);
        }
        Ok(WarcWriter {
            config,
            current: None,
            serial: 0,
            bytes_written: 0,
            completed: Vec::new(),
        })
    }

    /// Total compressed bytes written since this writer was created (for the metric).
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// The `.open` file currently being written, if any.
    pub fn current_path(&self) -> Option<&Path> {
        self.current.as_ref().map(|c| c.open_path.as_path())
    }

    /// Files completed (renamed to `.warc.gz`) by this writer, oldest first.
    pub fn completed_files(&self) -> &[PathBuf] {
        &self.completed
    }

    /// Writes the request record and the response record of one fetch, linked to each
    /// other by `WARC-Concurrent-To`, into the same file. Both are flushed to the OS before
    /// returning.
    pub fn write_exchange(&mut self, exchange: &Exchange<'_>) -> Result<WrittenExchange> {
        check_uri(exchange.target_uri)?;
        let request_id = new_record_id();
        let response_id = new_record_id();
        let date = warc_date(exchange.date);

        let mut common = vec![("WARC-Target-URI", exchange.target_uri.to_string())];
        if let Some(ip) = exchange.ip {
            common.push(("WARC-IP-Address", ip.to_string()));
        }

        let request_head = with_blank_line(exchange.request_head);
        let mut request_fields = common.clone();
        request_fields.push(("WARC-Concurrent-To", response_id.clone()));
        let request = encode_record(
            "request",
            &request_id,
            &date,
            &request_fields,
            "application/http;msgtype=request",
            &[&request_head],
            Some(&sha1_label(&sha1_smol::Sha1::new().digest().bytes())),
        )?;

        let response_head = with_blank_line(exchange.response_head);
        let mut response_fields = common;
        response_fields.push(("WARC-Concurrent-To", request_id.clone()));
        if let Some(reason) = exchange.truncated {
            response_fields.push(("WARC-Truncated", reason.as_str().to_string()));
        }
        let payload_digest = sha1_label(
            &sha1_smol::Sha1::from(exchange.response_body)
                .digest()
                .bytes(),
        );
        let response = encode_record(
            "response",
            &response_id,
            &date,
            &response_fields,
            "application/http;msgtype=response",
            &[&response_head, exchange.response_body],
            Some(&payload_digest),
        )?;

        let needed = (request.len() + response.len()) as u64;
        let mut bytes = 0;
        if let Some(current) = &self.current {
            // Rotate unless the file holds nothing but its warcinfo: an oversized exchange
            // gets a file of its own rather than an empty file before it.
            if current.size + needed > self.config.max_file_size && current.exchanges > 0 {
                self.finish()?;
            }
        }
        if self.current.is_none() {
            bytes += self.open_next()?;
        }
        let current = self.current.as_mut().expect("file opened above");
        let written = (|| -> io::Result<()> {
            current.out.write_all(&request)?;
            current.out.write_all(&response)?;
            current.out.flush()
        })();
        if let Err(error) = written {
            let path = current.open_path.clone();
            self.roll_back();
            return Err(error).with_context(|| format!("writing WARC file {}", path.display()));
        }
        let response_offset = current.size + request.len() as u64;
        current.size += needed;
        current.exchanges += 1;
        bytes += needed;
        self.bytes_written += needed;
        Ok(WrittenExchange {
            request_id,
            response_id,
            file: current.final_path.clone(),
            response_offset,
            payload_digest,
            bytes,
        })
    }

    /// Completes the current file: flush, fsync, rename `.open` → `.warc.gz`. Returns its
    /// final path, or `None` if no file was open. The next exchange opens a new file.
    pub fn finish(&mut self) -> Result<Option<PathBuf>> {
        let Some(mut current) = self.current.take() else {
            return Ok(None);
        };
        current
            .out
            .flush()
            .and_then(|()| current.out.get_ref().sync_all())
            .with_context(|| format!("flushing WARC file {}", current.open_path.display()))?;
        drop(current.out);
        rename_no_clobber(&current.open_path, &current.final_path)?;
        sync_dir(&self.config.dir);
        self.completed.push(current.final_path.clone());
        Ok(Some(current.final_path))
    }

    /// After a failed write (disk full…): cuts the file back to its last whole exchange so
    /// that later exchanges can go on in it. If even that fails, the file is abandoned as
    /// `.open` (for [`recover_open_files`]) and the next exchange opens a new one.
    fn roll_back(&mut self) {
        let Some(current) = self.current.take() else {
            return;
        };
        let OpenWarc {
            open_path,
            final_path,
            out,
            size,
            exchanges,
        } = current;
        // Drop whatever the buffer still holds instead of flushing it.
        let (mut file, _unflushed) = out.into_parts();
        let restored = file
            .set_len(size)
            .and_then(|()| file.seek(io::SeekFrom::Start(size)));
        if restored.is_ok() {
            self.current = Some(OpenWarc {
                open_path,
                final_path,
                out: BufWriter::new(file),
                size,
                exchanges,
            });
        }
    }

    /// [`finish`](Self::finish), consuming the writer.
    pub fn close(mut self) -> Result<Option<PathBuf>> {
        self.finish()
    }

    /// Opens the next `.open` file and writes its warcinfo record. Returns the bytes written.
    fn open_next(&mut self) -> Result<u64> {
        let stamp = file_timestamp(SystemTime::now());
        loop {
            self.serial += 1;
            let base = format!("{}-{}-{:05}", self.config.prefix, stamp, self.serial);
            let final_path = self.config.dir.join(format!("{base}{WARC_SUFFIX}"));
            let open_path = self.config.dir.join(format!("{base}{OPEN_SUFFIX}"));
            if final_path.exists() {
                continue;
            }
            let file = match OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&open_path)
            {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e)
                        .with_context(|| format!("creating WARC file {}", open_path.display()))
                }
            };
            let file_name = format!("{base}{WARC_SUFFIX}");
            let info = self.warcinfo_record(&file_name)?;
            let mut out = BufWriter::new(file);
            out.write_all(&info)
                .and_then(|()| out.flush())
                .with_context(|| format!("writing WARC file {}", open_path.display()))?;
            let size = info.len() as u64;
            self.bytes_written += size;
            self.current = Some(OpenWarc {
                open_path,
                final_path,
                out,
                size,
                exchanges: 0,
            });
            return Ok(size);
        }
    }

    fn warcinfo_record(&self, file_name: &str) -> Result<Vec<u8>> {
        let c = &self.config;
        let mut block = String::new();
        let mut field = |name: &str, value: &str| {
            // warc-fields are one line each: fold any line break away.
            let value = value.replace(['\r', '\n'], " ");
            block.push_str(&format!("{name}: {value}\r\n"));
        };
        field("software", &c.software);
        field("format", "WARC File Format 1.1");
        field(
            "conformsTo",
            "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
        );
        if let Some(v) = &c.hostname {
            field("hostname", v);
        }
        if let Some(v) = &c.operator {
            field("operator", v);
        }
        if let Some(v) = &c.description {
            field("description", v);
        }
        if let Some(v) = &c.robots {
            field("robots", v);
        }
        encode_record(
            "warcinfo",
            &new_record_id(),
            &warc_date(SystemTime::now()),
            &[("WARC-Filename", file_name.to_string())],
            "application/warc-fields",
            &[block.as_bytes()],
            None,
        )
    }
}

impl Drop for WarcWriter {
    /// Best effort: a writer dropped without `finish` still completes its file (every
    /// record in it was written whole).
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// Builds one record as a complete gzip member. `payload_digest` is the digest label of the
/// entity body, if the record has one.
fn encode_record(
    warc_type: &str,
    record_id: &str,
    date: &str,
    fields: &[(&str, String)],
    content_type: &str,
    block: &[&[u8]],
    payload_digest: Option<&str>,
) -> Result<Vec<u8>> {
    let mut block_digest = sha1_smol::Sha1::new();
    let mut length = 0usize;
    for part in block {
        block_digest.update(part);
        length += part.len();
    }
    let mut head = format!("WARC/1.1\r\nWARC-Type: {warc_type}\r\nWARC-Record-ID: {record_id}\r\nWARC-Date: {date}\r\n");
    for (name, value) in fields {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "WARC-Block-Digest: {}\r\n",
        sha1_label(&block_digest.digest().bytes())
    ));
    if let Some(digest) = payload_digest {
        head.push_str(&format!("WARC-Payload-Digest: {digest}\r\n"));
    }
    head.push_str(&format!(
        "Content-Type: {content_type}\r\nContent-Length: {length}\r\n\r\n"
    ));

    let mut gz = GzEncoder::new(Vec::with_capacity(length / 2 + 512), Compression::default());
    gz.write_all(head.as_bytes())?;
    for part in block {
        gz.write_all(part)?;
    }
    gz.write_all(b"\r\n\r\n")?;
    Ok(gz.finish()?)
}

/// `sha1:` + RFC 4648 base32 (upper case, padded: a SHA-1 is 32 characters, no padding).
pub fn sha1_label(digest: &[u8]) -> String {
    format!("sha1:{}", data_encoding::BASE32.encode(digest))
}

fn new_record_id() -> String {
    format!("<urn:uuid:{}>", uuid::Uuid::new_v4())
}

fn check_uri(uri: &str) -> Result<()> {
    if uri.is_empty() || uri.bytes().any(|b| b <= b' ' || b == 0x7f) {
        bail!("WARC-Target-URI must be non-empty without spaces or control characters: {uri:?}");
    }
    Ok(())
}

/// The head with exactly one terminating blank line guaranteed.
fn with_blank_line(head: &[u8]) -> Vec<u8> {
    let mut head = head.to_vec();
    if head.ends_with(b"\r\n\r\n") || head.ends_with(b"\n\n") {
        // already terminated
    } else if head.ends_with(b"\r\n") {
        head.extend_from_slice(b"\r\n");
    } else if !head.is_empty() {
        head.extend_from_slice(b"\r\n\r\n");
    }
    head
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn utc_parts(t: SystemTime) -> (i64, u32, u32, u32, u32, u32, u32) {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (y, mo, da) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400) as u32;
    (
        y,
        mo,
        da,
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis(),
    )
}

/// WARC-Date: ISO 8601 / RFC 3339 UTC with second precision, e.g. `2024-05-01T12:00:00Z`.
pub fn warc_date(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s, _) = utc_parts(t);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// File name timestamp, sortable, millisecond precision: `20240501120000123`.
fn file_timestamp(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s, ms) = utc_parts(t);
    format!("{y:04}{mo:02}{d:02}{h:02}{mi:02}{s:02}{ms:03}")
}

fn rename_no_clobber(from: &Path, to: &Path) -> Result<()> {
    if to.exists() {
        bail!(
            "cannot rename {} to {}: target exists",
            from.display(),
            to.display()
        );
    }
    fs::rename(from, to).with_context(|| format!("renaming {} to {}", from.display(), to.display()))
}

fn sync_dir(dir: &Path) {
    // Makes the rename durable; best effort (not every file system allows it).
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// What [`recover_open_files`] did with one leftover `.open` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovered {
    /// Every gzip member was complete; renamed to the given path.
    Renamed(PathBuf),
    /// An incomplete or corrupt tail was cut at the end of the last whole member
    /// (`kept` bytes of `was`), then the file was renamed.
    Truncated { path: PathBuf, kept: u64, was: u64 },
    /// Not one whole record: the file was removed.
    Removed(PathBuf),
}

impl std::fmt::Display for Recovered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Recovered::Renamed(path) => write!(f, "complete, renamed to {}", path.display()),
            Recovered::Truncated { path, kept, was } => write!(
                f,
                "cut after its last whole record ({kept} of {was} bytes kept), renamed to {}",
                path.display()
            ),
            Recovered::Removed(path) => {
                write!(f, "not one whole record, removed {}", path.display())
            }
        }
    }
}

/// Completes every `*.warc.gz.open` file in `dir` left by a crash.
///
/// Each file is decompressed member by member (streaming, constant memory; about as
/// long as `gunzip` takes on it). Everything after the last gzip member that decodes whole,
/// CRC and length checked, is cut off; then the file is renamed to `.warc.gz`. A file
/// without a single whole member is deleted. Records are not parsed, so a response whose
/// request made it but which itself did not is simply missing (a lone request record is
/// valid WARC).
pub fn recover_open_files(dir: &Path) -> Result<Vec<Recovered>> {
    let mut out = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    };
    let mut paths = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        let name = entry.file_name();
        if name.to_string_lossy().ends_with(OPEN_SUFFIX) {
            paths.push(entry.path());
        }
    }
    paths.sort();
    for open_path in paths {
        out.push(recover_one(&open_path)?);
    }
    if !out.is_empty() {
        sync_dir(dir);
    }
    Ok(out)
}

fn recover_one(open_path: &Path) -> Result<Recovered> {
    let name = open_path.to_string_lossy();
    let final_path = PathBuf::from(format!(
        "{}{WARC_SUFFIX}",
        &name[..name.len() - OPEN_SUFFIX.len()]
    ));
    let file = File::open(open_path).with_context(|| format!("opening {}", open_path.display()))?;
    let was = file
        .metadata()
        .with_context(|| format!("reading {}", open_path.display()))?
        .len();
    let kept =
        whole_members_len(file).with_context(|| format!("reading {}", open_path.display()))?;
    if kept == 0 {
        fs::remove_file(open_path).with_context(|| format!("removing {}", open_path.display()))?;
        return Ok(Recovered::Removed(open_path.to_path_buf()));
    }
    if kept < was {
        let f = OpenOptions::new()
            .write(true)
            .open(open_path)
            .and_then(|f| f.set_len(kept).and_then(|()| f.sync_all()))
            .with_context(|| format!("truncating {}", open_path.display()));
        f?;
    }
    rename_no_clobber(open_path, &final_path)?;
    Ok(if kept < was {
        Recovered::Truncated {
            path: final_path,
            kept,
            was,
        }
    } else {
        Recovered::Renamed(final_path)
    })
}

/// A BufRead that counts the bytes its consumer consumed.
struct Counting<R> {
    inner: BufReader<R>,
    consumed: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.consumed += n as u64;
        Ok(n)
    }
}

impl<R: Read> BufRead for Counting<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        self.consumed += amt as u64;
        self.inner.consume(amt);
    }
}

/// Byte length of the leading run of whole, valid gzip members.
fn whole_members_len<R: Read>(input: R) -> io::Result<u64> {
    let mut reader = Counting {
        inner: BufReader::with_capacity(1 << 16, input),
        consumed: 0,
    };
    let mut good = 0;
    let mut sink = vec![0u8; 1 << 16];
    loop {
        if reader.fill_buf()?.is_empty() {
            return Ok(good);
        }
        // The bufread decoder stops exactly at the end of its member.
        let mut member = flate2::bufread::GzDecoder::new(reader);
        let ok = loop {
            match member.read(&mut sink) {
                Ok(0) => break true,
                Ok(_) => {}
                Err(_) => break false,
            }
        };
        reader = member.into_inner();
        if !ok {
            return Ok(good);
        }
        good = reader.consumed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::process::Command;
    use std::time::Duration;

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
        sha1_label(&sha1_smol::Sha1::from(data).digest().bytes())
    }

    fn exchange<'a>(uri: &'a str, head: &'a [u8], body: &'a [u8]) -> Exchange<'a> {
        Exchange {
            target_uri: uri,
            ip: Some("127.0.0.1".parse().unwrap()),
            date: UNIX_EPOCH + Duration::from_secs(1_714_564_800),
            request_head: b"GET /robots.txt HTTP/1.1\r\nHost: example.org\r\nUser-Agent: frontierd/0.1\r\n\r\n",
            response_head: head,
            response_body: body,
            truncated: None,
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
    }

    #[test]
    fn writes_valid_warc_with_linked_records_and_digests() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = WarcConfig::new(dir.path());
        config.operator = Some("ops@example.org".into());
        config.hostname = Some("crawler-1".into());
        let mut w = WarcWriter::new(config).unwrap();

        let text_head =
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 25\r\n\r\n";
        let text = b"User-agent: *\nDisallow:\n";
        let binary: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        let bin_head = b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 5000\r\n\r\n";
        let empty_head = b"HTTP/1.1 204 No Content\r\n\r\n";
        let cut_head =
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n";
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

        let open = w.current_path().unwrap().to_path_buf();
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
        assert!(w.completed_files().len() >= 3, "rotated");
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
        let completed = w.completed_files().to_vec();
        assert!(completed.len() >= 3, "{completed:?}");
        let mut names: Vec<_> = completed
            .iter()
            .map(|p| p.file_name().unwrap().to_owned())
            .collect();
        let sorted = {
            let mut s = names.clone();
            s.sort();
            s
        };
        assert_eq!(names, sorted, "names sort in creation order");
        names.dedup();
        assert_eq!(names.len(), completed.len());
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
            w.current_path().is_some(),
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
        assert!(w.current_path().is_none());
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
            let open = w.current_path().unwrap().to_path_buf();
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
}
