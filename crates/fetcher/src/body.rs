//! Reading a response body under caps, decoding `Content-Encoding` as it streams.
//!
//! Decoding is push-based (flate2/brotli writers into a capped sink), so a bomb stops
//! the moment the decoded output reaches its cap: nothing past it is produced or kept. A
//! gzip body of at most 1 MiB is held until it has arrived whole and decoded in one call
//! when it is one member within the cap (gunzip.rs, faster than the stream); a bomb is read
//! to 1 MiB at most before the streaming decoder cuts its output at the cap.

use std::io::{self, Write};

use bytes::Bytes;
use http::header::CONTENT_ENCODING;
use http::HeaderMap;
use http_body_util::BodyExt;
use hyper::body::Incoming;

use crate::gunzip::gunzip_whole;
use crate::outcome::ContentCoding;

/// The body as read.
pub(crate) struct ReadBody {
    pub(crate) body: Bytes,
    /// The wire bytes, kept only when the body was decoded.
    pub(crate) wire_body: Option<Bytes>,
    pub(crate) truncated: bool,
}

/// Why the body could not be read to its end.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// The connection failed while the body streamed.
    Transport(hyper::Error),
    /// The content coding was corrupt.
    Decode(io::Error),
}

/// Caps on one body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caps {
    /// Bytes read off the wire.
    pub(crate) wire: usize,
    /// Bytes of decoded output kept (only for gzip/deflate/br).
    pub(crate) decoded: usize,
}

pub(crate) fn content_coding(headers: &HeaderMap) -> ContentCoding {
    let codings: Vec<String> = headers
        .get_all(CONTENT_ENCODING)
        .iter()
        .flat_map(|v| {
            String::from_utf8_lossy(v.as_bytes())
                .split(',')
                .map(|c| c.trim().to_ascii_lowercase())
                .collect::<Vec<_>>()
        })
        .filter(|c| !c.is_empty() && c != "identity")
        .collect();
    match codings.as_slice() {
        [] => ContentCoding::Identity,
        [one] => match one.as_str() {
            "gzip" | "x-gzip" => ContentCoding::Gzip,
            "deflate" => ContentCoding::Deflate,
            "br" => ContentCoding::Brotli,
            _ => ContentCoding::Unsupported(one.clone()),
        },
        many => ContentCoding::Unsupported(many.join(", ")),
    }
}

/// The most a body's buffer is sized up front from its Content-Length.
const PREALLOCATE_AT_MOST: usize = 1 << 20;

/// A gzip body up to this size is held until it has arrived whole and then decoded in one
/// call ([`gunzip_whole`]); past it, it is decoded as it streams, so a gzip bomb is read
/// no further than this before its decoded output reaches the cap.
const GUNZIP_WHOLE_MAX: usize = 1 << 20;

pub(crate) async fn read_body(
    mut incoming: Incoming,
    coding: &ContentCoding,
    caps: Caps,
) -> Result<ReadBody, BodyError> {
    // Room for the announced length (capped: the header is the server's word), so a body
    // of many frames is not copied again at each doubling.
    let announced = http_body::Body::size_hint(&incoming).lower();
    let mut wire: Vec<u8> =
        Vec::with_capacity((announced.min(caps.wire as u64) as usize).min(PREALLOCATE_AT_MOST));
    let mut wire_truncated = false;
    let mut decoder = if coding.is_decoded() {
        Some(Decoder::Pending(
            coding.clone(),
            CappedSink::new(caps.decoded),
        ))
    } else {
        None
    };
    // gzip waits for the whole body (up to GUNZIP_WHOLE_MAX) before it is decoded
    let mut held = *coding == ContentCoding::Gzip;
    // wire bytes handed to the decoder so far
    let mut fed = 0;

    while let Some(frame) = incoming.frame().await {
        let frame = frame.map_err(BodyError::Transport)?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        let room = caps.wire - wire.len();
        let chunk = if data.len() > room {
            wire_truncated = true;
            &data[..room]
        } else {
            &data[..]
        };
        wire.extend_from_slice(chunk);
        if held && wire.len() > GUNZIP_WHOLE_MAX {
            // too large to hold: decode what came so far, and the rest as it comes
            held = false;
        }
        if let (Some(d), false) = (decoder.as_mut(), held) {
            d.write(&wire[fed..]).map_err(BodyError::Decode)?;
            fed = wire.len();
            if d.sink().full {
                break;
            }
        }
        if wire_truncated {
            break;
        }
    }
    // Dropping `incoming` early (cap reached) closes the connection instead of draining it.

    let Some(mut decoder) = decoder else {
        return Ok(ReadBody {
            body: Bytes::from(wire),
            wire_body: None,
            truncated: wire_truncated,
        });
    };
    if held {
        if !wire_truncated {
            if let Some(body) = gunzip_whole(&wire, caps.decoded) {
                return Ok(ReadBody {
                    body: Bytes::from(body),
                    wire_body: Some(Bytes::from(wire)),
                    truncated: false,
                });
            }
        }
        // more than one member, over the cap, cut or corrupt: as it would have streamed
        decoder.write(&wire).map_err(BodyError::Decode)?;
    }
    let cut = wire_truncated || decoder.sink().full;
    let sink = decoder.finish(cut).map_err(BodyError::Decode)?;
    Ok(ReadBody {
        truncated: cut || sink.full,
        body: Bytes::from(sink.buf),
        wire_body: Some(Bytes::from(wire)),
    })
}

/// Keeps up to `cap` bytes, then refuses writes so the decoder stops producing.
struct CappedSink {
    buf: Vec<u8>,
    cap: usize,
    /// Output reached the cap with more to come.
    full: bool,
}

impl CappedSink {
    fn new(cap: usize) -> Self {
        CappedSink {
            buf: Vec::new(),
            cap,
            full: false,
        }
    }
}

/// The sink's refusal, told apart from real decode errors by `CappedSink::full`.
#[derive(Debug, thiserror::Error)]
#[error("decoded size cap reached")]
struct CapReached;

impl Write for CappedSink {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        let room = self.cap - self.buf.len();
        if room == 0 {
            self.full = true;
            return Err(io::Error::other(CapReached));
        }
        let n = data.len().min(room);
        self.buf.extend_from_slice(&data[..n]);
        if n < data.len() {
            self.full = true;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

enum Decoder {
    /// Not started: deflate needs its first bytes to tell zlib from raw.
    Pending(ContentCoding, CappedSink),
    Gzip(flate2::write::MultiGzDecoder<CappedSink>),
    Zlib(flate2::write::ZlibDecoder<CappedSink>),
    RawDeflate(flate2::write::DeflateDecoder<CappedSink>),
    Brotli(Box<brotli_decompressor::DecompressorWriter<CappedSink>>),
}

impl Decoder {
    fn sink(&self) -> &CappedSink {
        match self {
            Decoder::Pending(_, s) => s,
            Decoder::Gzip(d) => d.get_ref(),
            Decoder::Zlib(d) => d.get_ref(),
            Decoder::RawDeflate(d) => d.get_ref(),
            Decoder::Brotli(d) => d.get_ref(),
        }
    }

    fn start(coding: &ContentCoding, sink: CappedSink, first: &[u8]) -> Decoder {
        match coding {
            ContentCoding::Gzip => Decoder::Gzip(flate2::write::MultiGzDecoder::new(sink)),
            ContentCoding::Brotli => Decoder::Brotli(Box::new(
                brotli_decompressor::DecompressorWriter::new(sink, 8 * 1024),
            )),
            // "deflate" is meant to be zlib-wrapped, but raw deflate is common.
            _ if looks_like_zlib(first) => Decoder::Zlib(flate2::write::ZlibDecoder::new(sink)),
            _ => Decoder::RawDeflate(flate2::write::DeflateDecoder::new(sink)),
        }
    }

    fn write(&mut self, chunk: &[u8]) -> io::Result<()> {
        if chunk.is_empty() {
            return Ok(());
        }
        if let Decoder::Pending(coding, sink) = self {
            let sink = std::mem::replace(sink, CappedSink::new(0));
            *self = Decoder::start(coding, sink, chunk);
        }
        let result = match self {
            Decoder::Pending(..) => Ok(()),
            Decoder::Gzip(d) => d.write_all(chunk),
            Decoder::Zlib(d) => d.write_all(chunk),
            Decoder::RawDeflate(d) => d.write_all(chunk),
            Decoder::Brotli(d) => d.write_all(chunk),
        };
        match result {
            Err(_) if self.sink().full => Ok(()),
            other => other,
        }
    }

    /// Flushes pending output. When the input was `cut` short the stream cannot be
    /// complete, so end-of-stream checks are skipped.
    fn finish(self, cut: bool) -> io::Result<CappedSink> {
        fn done<D>(
            mut d: D,
            cut: bool,
            check: impl FnOnce(&mut D) -> io::Result<()>,
            full: impl Fn(&D) -> bool,
        ) -> io::Result<D> {
            let r = if cut { Ok(()) } else { check(&mut d) };
            match r {
                Err(_) if full(&d) => Ok(d),
                Err(e) => Err(e),
                Ok(()) => Ok(d),
            }
        }
        match self {
            Decoder::Pending(_, sink) => Ok(sink),
            Decoder::Gzip(d) => {
                let mut d = done(d, cut, |d| d.try_finish(), |d| d.get_ref().full)?;
                let _ = d.flush();
                Ok(take_sink(d.get_mut()))
            }
            Decoder::Zlib(d) => {
                let mut d = done(d, cut, |d| d.try_finish(), |d| d.get_ref().full)?;
                let _ = d.flush();
                Ok(take_sink(d.get_mut()))
            }
            Decoder::RawDeflate(d) => {
                let mut d = done(d, cut, |d| d.try_finish(), |d| d.get_ref().full)?;
                let _ = d.flush();
                Ok(take_sink(d.get_mut()))
            }
            Decoder::Brotli(d) => {
                let mut d = done(*d, cut, |d| d.close(), |d| d.get_ref().full)?;
                let _ = d.flush();
                Ok(take_sink(d.get_mut()))
            }
        }
    }
}

fn take_sink(sink: &mut CappedSink) -> CappedSink {
    std::mem::replace(sink, CappedSink::new(0))
}

/// RFC 1950 header: CM = 8 and the 16-bit header a multiple of 31.
fn looks_like_zlib(first: &[u8]) -> bool {
    match first {
        [cmf, flg, ..] => cmf & 0x0f == 8 && (u16::from(*cmf) << 8 | u16::from(*flg)) % 31 == 0,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn coding_of(values: &[&'static str]) -> ContentCoding {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(CONTENT_ENCODING, HeaderValue::from_static(v));
        }
        content_coding(&h)
    }

    #[test]
    fn content_coding_header() {
        assert_eq!(coding_of(&[]), ContentCoding::Identity);
        assert_eq!(coding_of(&["identity"]), ContentCoding::Identity);
        assert_eq!(coding_of(&["GZIP"]), ContentCoding::Gzip);
        assert_eq!(coding_of(&["x-gzip"]), ContentCoding::Gzip);
        assert_eq!(coding_of(&["deflate"]), ContentCoding::Deflate);
        assert_eq!(coding_of(&["br"]), ContentCoding::Brotli);
        assert_eq!(
            coding_of(&["zstd"]),
            ContentCoding::Unsupported("zstd".into())
        );
        assert_eq!(
            coding_of(&["gzip, br"]),
            ContentCoding::Unsupported("gzip, br".into())
        );
    }

    fn decode_all(coding: ContentCoding, input: &[u8], cap: usize) -> (Vec<u8>, bool) {
        let mut d = Decoder::Pending(coding, CappedSink::new(cap));
        for chunk in input.chunks(7) {
            d.write(chunk).unwrap();
            if d.sink().full {
                break;
            }
        }
        let full = d.sink().full;
        let sink = d.finish(full).unwrap();
        (sink.buf, sink.full)
    }

    #[test]
    fn deflate_zlib_and_raw_are_both_decoded() {
        let text = b"User-agent: *\nDisallow: /private\n".repeat(20);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&text).unwrap();
        let zlib = z.finish().unwrap();
        let mut r = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        r.write_all(&text).unwrap();
        let raw = r.finish().unwrap();
        assert_eq!(
            decode_all(ContentCoding::Deflate, &zlib, 1 << 20),
            (text.clone(), false)
        );
        assert_eq!(
            decode_all(ContentCoding::Deflate, &raw, 1 << 20),
            (text.clone(), false)
        );
    }

    #[test]
    fn decoded_output_is_cut_at_the_cap() {
        let zeros = vec![0u8; 1 << 20];
        let mut g = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        g.write_all(&zeros).unwrap();
        let gz = g.finish().unwrap();
        let (out, cut) = decode_all(ContentCoding::Gzip, &gz, 1000);
        assert_eq!(out.len(), 1000);
        assert!(cut);
    }

    #[test]
    fn corrupt_gzip_is_an_error() {
        let mut d = Decoder::Pending(ContentCoding::Gzip, CappedSink::new(1000));
        let r = d.write(b"this is not gzip at all");
        assert!(r.is_err() || d.finish(false).is_err());
    }
}
