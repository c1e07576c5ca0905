//! WARC/1.1 output: one `.warc.gz` file at a time, one gzip member per record, and the
//! recovery of files a crash left half-written. See docs/warc.md.
//!
//! What this crate owns: the record format (headers, digests, record ids, dates), the file
//! life cycle (`….warc.gz.open` while written, renamed to `….warc.gz` when complete, rotated
//! by size, never splitting an exchange) and [`recover_open_files`], which completes the
//! `.open` files an earlier process left behind.
//!
//! What it must never do: fetch, decide what is archived, or know the crawl. It takes bytes
//! as they went over the wire ([`Exchange`]) and writes them verbatim; which head fields to
//! drop for archiving is the caller's business (the crawl crate's `archive_response`). It
//! logs nothing and counts nothing: it returns what it wrote ([`WrittenExchange`],
//! [`Recovered`]) or a [`WarcError`], and the caller reports.
//!
//! ```no_run
//! # fn main() -> Result<(), warc::WarcError> {
//! let mut writer = warc::WarcWriter::new(warc::WarcConfig::new("/var/lib/crawl/warc"))?;
//! let written = writer.write_exchange(&warc::Exchange {
//!     target_uri: "https://example.org/",
//!     ip: None,
//!     date: std::time::SystemTime::now(),
//!     request_head: b"GET / HTTP/1.1\r\nHost: example.org\r\n\r\n",
//!     response_head: b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n",
//!     response_body: b"hello",
//!     truncated: None,
//!     payload_digest: None,
//! })?;
//! println!("{} at {}", written.file.display(), written.response_offset);
//! writer.close()?;
//! # Ok(())
//! # }
//! ```

mod compressed;
mod error;
mod files;
mod record;
mod recover;
mod sha1_pair;
mod writer;

pub use compressed::payload_is_compressed;
pub use error::WarcError;
pub use record::{rfc3339_millis, sha1_label, warc_date};
pub use recover::{recover_open_files, Recovered};
pub use writer::{
    payload_digest, Deflate, EncodedExchange, Exchange, Revisit, RevisitProfile, Truncated,
    WarcConfig, WarcWriter, WrittenExchange, DEFAULT_GZIP_LEVEL, DEFAULT_MAX_FILE_SIZE,
    MAX_GZIP_LEVEL, OPEN_SUFFIX, WARC_SUFFIX,
};

#[cfg(test)]
mod tests;
