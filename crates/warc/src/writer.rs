//! Size-rotated `.warc.gz` files: each opens with a `warcinfo` record; every fetch becomes
//! a `request` record followed by its `response` record, written by one
//! [`WarcWriter::write_exchange`] call. A file being written is named `….warc.gz.open` and
//! is renamed to `….warc.gz` when it is complete (rotation, [`WarcWriter::finish`], or drop).

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Seek, Write};
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::SystemTime;

use crate::sha1_pair::{sha1_pair, sha1_parts, EMPTY_SHA1_LABEL};

use crate::compressed::payload_is_compressed;
use crate::files::{rename_no_clobber, sync_dir};
use crate::record::{
    check_uri, encode_record, file_timestamp, new_record_id, sha1_label, warc_date, with_blank_line,
};
use crate::WarcError;

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
    /// Deflate level of every record's gzip member, libdeflate's scale: 0 (stored) to 12.
    /// Default 1: on real HTML its output is about 10 % larger than zlib's level 6 at 6x
    /// the speed (level 1 as patched in vendor/libdeflate-sys); 6 is as small as zlib's 6
    /// at 1.4x its speed (docs/benchmarks.md).
    pub gzip_level: u32,
    /// Deflate a response record at `gzip_level` even when its payload is already
    /// compressed ([`payload_is_compressed`]: a `Content-Encoding`, an image, video, archive
    /// or font format). Default false: such a record's gzip member is stored, since deflate
    /// would spend a full pass over it for almost no size (docs/benchmarks.md).
    pub deflate_compressed_payloads: bool,
}

/// How records are deflated: a writer's [`WarcConfig::gzip_level`] and
/// [`WarcConfig::deflate_compressed_payloads`], for [`WarcWriter::encode_exchange`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deflate {
    /// libdeflate's level, 0 (stored) to [`MAX_GZIP_LEVEL`].
    pub level: u32,
    /// Deflate payloads that are already compressed too.
    pub compressed_payloads: bool,
}

impl Default for Deflate {
    fn default() -> Self {
        Deflate {
            level: DEFAULT_GZIP_LEVEL,
            compressed_payloads: false,
        }
    }
}

impl Deflate {
    /// The level for a response record whose head is `response_head`.
    fn response_level(self, response_head: &[u8]) -> u32 {
        if !self.compressed_payloads && payload_is_compressed(response_head) {
            0
        } else {
            self.level
        }
    }
}

/// Default [`WarcConfig::gzip_level`].
pub const DEFAULT_GZIP_LEVEL: u32 = 1;

/// The highest [`WarcConfig::gzip_level`] (libdeflate's slowest, smallest).
pub const MAX_GZIP_LEVEL: u32 = 12;

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
            gzip_level: DEFAULT_GZIP_LEVEL,
            deflate_compressed_payloads: false,
        }
    }

    /// How this writer deflates its records.
    pub fn deflate(&self) -> Deflate {
        Deflate {
            level: self.gzip_level,
            compressed_payloads: self.deflate_compressed_payloads,
        }
    }
}

/// Why a response body was cut short (`WARC-Truncated`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truncated {
    /// The body exceeded the configured size cap.
    Length,
    /// The peer closed the connection early.
    Disconnect,
}

impl Truncated {
    /// The WARC-Truncated field value.
    pub fn as_str(self) -> &'static str {
        match self {
            Truncated::Length => "length",
            Truncated::Disconnect => "disconnect",
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
    /// [`payload_digest`] of `response_body` when the caller has already computed it (to
    /// compare with an earlier capture), so the body is not hashed twice; `None`: the
    /// writer computes it.
    pub payload_digest: Option<&'a str>,
}

/// Why an answer is archived as a `revisit` record (WARC 1.1 section 6.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevisitProfile {
    /// The payload digest equals the one of an earlier capture of the URL.
    IdenticalPayloadDigest,
    /// The server answered 304 Not Modified to a conditional request.
    ServerNotModified,
}

impl RevisitProfile {
    /// The `WARC-Profile` value.
    pub fn uri(self) -> &'static str {
        match self {
            RevisitProfile::IdenticalPayloadDigest => {
                "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
            }
            RevisitProfile::ServerNotModified => {
                "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
            }
        }
    }
}

/// The earlier capture a revisit record refers to.
#[derive(Debug, Clone)]
pub struct Revisit<'a> {
    /// Why the payload is not written again.
    pub profile: RevisitProfile,
    /// `WARC-Refers-To-Target-URI`: the URL of the earlier capture.
    pub refers_to_uri: &'a str,
    /// `WARC-Refers-To-Date`: the `WARC-Date` of the earlier capture.
    pub refers_to_date: SystemTime,
}

/// The `WARC-Payload-Digest` label of a payload (`sha1:` + base32), as the writer computes
/// it: a caller compares a new payload with an earlier capture's by this.
pub fn payload_digest(payload: &[u8]) -> String {
    sha1_label(&sha1_parts(&[payload]))
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

/// Both records of one fetch, compressed and ready to append: what
/// [`WarcWriter::encode_exchange`] makes and [`WarcWriter::append_exchange`] writes.
#[derive(Debug, Clone)]
pub struct EncodedExchange {
    request_id: String,
    response_id: String,
    payload_digest: String,
    request: Vec<u8>,
    response: Vec<u8>,
}

pub(crate) struct OpenWarc {
    open_path: PathBuf,
    final_path: PathBuf,
    pub(crate) out: BufWriter<File>,
    /// Bytes in the file, warcinfo included.
    size: u64,
    /// Exchanges in the file.
    exchanges: u64,
}

/// Writes exchanges to size-rotated `.warc.gz` files. Not thread-safe by itself: the
/// daemon keeps one behind a mutex or a channel.
pub struct WarcWriter {
    config: WarcConfig,
    pub(crate) current: Option<OpenWarc>,
    serial: u32,
    bytes_written: u64,
}

impl WarcWriter {
    /// Creates the output directory if needed. No file is opened until the first exchange.
    pub fn new(config: WarcConfig) -> Result<Self, WarcError> {
        fs::create_dir_all(&config.dir)
            .map_err(WarcError::io("creating WARC directory", &config.dir))?;
        if config.prefix.is_empty() || config.prefix.contains(['/', '\0']) {
            return Err(WarcError::InvalidPrefix(config.prefix));
        }
        Ok(WarcWriter {
            config,
            current: None,
            serial: 0,
            bytes_written: 0,
        })
    }

    /// Total compressed bytes written since this writer was created (for the metric).
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// Writes the request record and the response record of one fetch, linked to each
    /// other by `WARC-Concurrent-To`, into the same file. Both are flushed to the OS before
    /// returning. The same as [`WarcWriter::encode_exchange`] then
    /// [`WarcWriter::append_exchange`].
    pub fn write_exchange(
        &mut self,
        exchange: &Exchange<'_>,
    ) -> Result<WrittenExchange, WarcError> {
        let encoded = Self::encode_exchange(exchange, self.config.deflate())?;
        self.append_exchange(encoded)
    }

    /// Builds both records of one fetch (digests and gzip members) without touching any
    /// file. It needs no writer: callers sharing one writer behind a lock encode first, on
    /// their own thread, and hold the lock only for [`WarcWriter::append_exchange`].
    /// `deflate` is [`WarcConfig::deflate`] of the writer it goes to.
    pub fn encode_exchange(
        exchange: &Exchange<'_>,
        deflate: Deflate,
    ) -> Result<EncodedExchange, WarcError> {
        Self::encode_records(exchange, None, deflate)
    }

    /// Like [`WarcWriter::encode_exchange`], but the answer becomes a `revisit` record
    /// (WARC 1.1 section 6.7): the response head only, no payload, with the profile and the
    /// capture it refers to. `exchange.response_body` is still given: for the
    /// identical-payload-digest profile its digest is the record's `WARC-Payload-Digest`
    /// (it equals the referred capture's). Appended with
    /// [`WarcWriter::append_exchange`], whose `response_id` and `response_offset` are then
    /// the revisit record's.
    pub fn encode_revisit(
        exchange: &Exchange<'_>,
        revisit: &Revisit<'_>,
        deflate: Deflate,
    ) -> Result<EncodedExchange, WarcError> {
        check_uri(revisit.refers_to_uri)?;
        Self::encode_records(exchange, Some(revisit), deflate)
    }

    /// [`WarcWriter::encode_revisit`] then [`WarcWriter::append_exchange`].
    pub fn write_revisit(
        &mut self,
        exchange: &Exchange<'_>,
        revisit: &Revisit<'_>,
    ) -> Result<WrittenExchange, WarcError> {
        let encoded = Self::encode_revisit(exchange, revisit, self.config.deflate())?;
        self.append_exchange(encoded)
    }

    fn encode_records(
        exchange: &Exchange<'_>,
        revisit: Option<&Revisit<'_>>,
        deflate: Deflate,
    ) -> Result<EncodedExchange, WarcError> {
        check_uri(exchange.target_uri)?;
        let gzip_level = deflate.level;
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
            None,
            Some(EMPTY_SHA1_LABEL),
            gzip_level,
        )?;

        let response_head = with_blank_line(exchange.response_head);
        let mut response_fields = common;
        response_fields.push(("WARC-Concurrent-To", request_id.clone()));
        if let Some(reason) = exchange.truncated {
            response_fields.push(("WARC-Truncated", reason.as_str().to_string()));
        }
        // a response record's two digests in one pass (`sha1_pair`), unless the caller
        // hashed the payload already or the record is a revisit (its block is the head only)
        let (payload_digest, block_digest) = match (exchange.payload_digest, revisit) {
            (Some(given), _) => {
                debug_assert_eq!(given, payload_digest(exchange.response_body));
                (given.to_string(), None)
            }
            (None, None) => {
                let body = exchange.response_body;
                let (block, payload) = sha1_pair(&[&response_head, body], &[body]);
                (sha1_label(&payload), Some(block))
            }
            (None, Some(_)) => (payload_digest(exchange.response_body), None),
        };
        let response = match revisit {
            None => encode_record(
                "response",
                &response_id,
                &date,
                &response_fields,
                "application/http;msgtype=response",
                &[&response_head, exchange.response_body],
                block_digest.as_ref(),
                Some(&payload_digest),
                // a payload already compressed is stored, not deflated again
                deflate.response_level(&response_head),
            )?,
            Some(r) => {
                response_fields.push(("WARC-Profile", r.profile.uri().to_string()));
                response_fields.push(("WARC-Refers-To-Target-URI", r.refers_to_uri.to_string()));
                response_fields.push(("WARC-Refers-To-Date", warc_date(r.refers_to_date)));
                // a 304 has no payload: nothing to digest (WARC 1.1 section 6.7.2)
                let digest = match r.profile {
                    RevisitProfile::IdenticalPayloadDigest => Some(payload_digest.as_str()),
                    RevisitProfile::ServerNotModified => None,
                };
                encode_record(
                    "revisit",
                    &response_id,
                    &date,
                    &response_fields,
                    "application/http;msgtype=response",
                    &[&response_head],
                    None,
                    digest,
                    gzip_level,
                )?
            }
        };
        Ok(EncodedExchange {
            request_id,
            response_id,
            payload_digest,
            request,
            response,
        })
    }

    /// Appends an exchange built by [`WarcWriter::encode_exchange`] to the current file
    /// (rotating first if it would pass `max_file_size`), flushed to the OS.
    pub fn append_exchange(
        &mut self,
        encoded: EncodedExchange,
    ) -> Result<WrittenExchange, WarcError> {
        let EncodedExchange {
            request_id,
            response_id,
            payload_digest,
            request,
            response,
        } = encoded;
        let needed = (request.len() + response.len()) as u64;
        let mut bytes = 0;
        if let Some(current) = &self.current {
            // Rotate unless the file holds nothing but its warcinfo: an oversized exchange
            // gets a file of its own rather than an empty file before it.
            if current.size + needed > self.config.max_file_size && current.exchanges > 0 {
                self.finish()?;
            }
        }
        let current = match self.current.take() {
            Some(current) => current,
            None => {
                let opened = self.open_next()?;
                bytes += opened.size;
                opened
            }
        };
        let current = self.current.insert(current);
        let written = (|| -> io::Result<()> {
            current.out.write_all(&request)?;
            current.out.write_all(&response)?;
            current.out.flush()
        })();
        if let Err(error) = written {
            let path = current.open_path.clone();
            self.roll_back();
            return Err(WarcError::io("writing WARC file", path)(error));
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
    pub fn finish(&mut self) -> Result<Option<PathBuf>, WarcError> {
        let Some(mut current) = self.current.take() else {
            return Ok(None);
        };
        current
            .out
            .flush()
            .and_then(|()| current.out.get_ref().sync_all())
            .map_err(WarcError::io("flushing WARC file", &current.open_path))?;
        drop(current.out);
        rename_no_clobber(&current.open_path, &current.final_path)?;
        sync_dir(&self.config.dir);
        Ok(Some(current.final_path))
    }

    /// If the open file is no longer in its directory (the directory or the file was
    /// removed while running), let it go: the next exchange starts a new file (and the
    /// directory again). Returns the lost file's path and how many exchanges it held:
    /// written to a file nobody can reach any more, they are gone with it.
    pub fn let_go_if_removed(&mut self) -> Option<(PathBuf, u64)> {
        let current = self.current.as_ref()?;
        if current.open_path.exists() {
            return None;
        }
        let current = self.current.take()?;
        Some((current.open_path, current.exchanges))
    }

    /// After a failed write (disk full…): cuts the file back to its last whole exchange so
    /// that later exchanges can go on in it. If even that fails, the file is abandoned as
    /// `.open` (for [`recover_open_files`]) and the next exchange opens a new one.
    pub(crate) fn roll_back(&mut self) {
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
    pub fn close(mut self) -> Result<Option<PathBuf>, WarcError> {
        self.finish()
    }

    /// Opens the next `.open` file and writes its warcinfo record.
    fn open_next(&mut self) -> Result<OpenWarc, WarcError> {
        let stamp = file_timestamp(SystemTime::now());
        loop {
            self.serial += 1;
            let base = format!("{}-{}-{:05}", self.config.prefix, stamp, self.serial);
            let final_path = self.config.dir.join(format!("{base}{WARC_SUFFIX}"));
            let open_path = self.config.dir.join(format!("{base}{OPEN_SUFFIX}"));
            if final_path.exists() {
                continue;
            }
            let open = || {
                OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&open_path)
            };
            // the directory removed while running (an operator moving files away): made
            // again, so that archiving goes on
            let opened = match open() {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    std::fs::create_dir_all(&self.config.dir).map_err(WarcError::io(
                        "creating the WARC directory",
                        &self.config.dir,
                    ))?;
                    open()
                }
                other => other,
            };
            let file = match opened {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(WarcError::io("creating WARC file", open_path)(e)),
            };
            let file_name = format!("{base}{WARC_SUFFIX}");
            let info = self.warcinfo_record(&file_name)?;
            let mut out = BufWriter::new(file);
            out.write_all(&info)
                .and_then(|()| out.flush())
                .map_err(WarcError::io("writing WARC file", &open_path))?;
            let size = info.len() as u64;
            self.bytes_written += size;
            return Ok(OpenWarc {
                open_path,
                final_path,
                out,
                size,
                exchanges: 0,
            });
        }
    }

    fn warcinfo_record(&self, file_name: &str) -> Result<Vec<u8>, WarcError> {
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
            None,
            c.gzip_level,
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
