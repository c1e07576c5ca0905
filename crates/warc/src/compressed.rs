//! Whether a response's payload is already compressed, read off its head: deflating such
//! a payload again costs a full pass for almost no size (docs/benchmarks.md, "WARC:
//! payloads already compressed").

/// Media types whose bodies are compressed by their format (images, audio and video
/// codecs, archives, web fonts); a `*` ends a prefix.
const COMPRESSED_TYPES: &[&str] = &[
    "image/jpeg",
    "image/png",
    "image/gif",
    "image/webp",
    "image/avif",
    "image/heic",
    "image/heif",
    "image/jxl",
    "video/*",
    "audio/mpeg",
    "audio/mp4",
    "audio/aac",
    "audio/ogg",
    "audio/opus",
    "audio/webm",
    "audio/flac",
    "application/zip",
    "application/gzip",
    "application/x-gzip",
    "application/zstd",
    "application/x-xz",
    "application/x-bzip2",
    "application/x-7z-compressed",
    "application/vnd.rar",
    "application/x-rar-compressed",
    "application/java-archive",
    "application/epub+zip",
    "application/vnd.openxmlformats-officedocument.*",
    "application/vnd.oasis.opendocument.*",
    "font/woff",
    "font/woff2",
    "application/font-woff",
];

/// Whether the body a response head describes is already compressed: a `Content-Encoding`
/// other than `identity`, or a `Content-Type` of a compressed format (JPEG, PNG, video,
/// zip, woff2, ...). `head` is the status line and header lines as archived; a head that
/// does not parse says no (the record is deflated as any other).
pub fn payload_is_compressed(head: &[u8]) -> bool {
    let mut lines = head.split(|&b| b == b'\n');
    // the status line
    lines.next();
    for line in lines {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.eq_ignore_ascii_case(b"content-encoding") {
            let coded = value
                .split(|&b| b == b',')
                .map(<[u8]>::trim_ascii)
                .any(|c| !c.is_empty() && !c.eq_ignore_ascii_case(b"identity"));
            if coded {
                return true;
            }
        } else if name.eq_ignore_ascii_case(b"content-type") {
            let media = value
                .split(|&b| b == b';')
                .next()
                .unwrap_or(&[])
                .trim_ascii();
            if COMPRESSED_TYPES.iter().any(|t| media_matches(media, t)) {
                return true;
            }
        }
    }
    false
}

fn media_matches(media: &[u8], pattern: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => media
            .get(..prefix.len())
            .is_some_and(|m| m.eq_ignore_ascii_case(prefix.as_bytes())),
        None => media.eq_ignore_ascii_case(pattern.as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::payload_is_compressed;

    fn head(fields: &str) -> Vec<u8> {
        format!("HTTP/1.1 200 OK\r\n{fields}\r\n").into_bytes()
    }

    #[test]
    fn a_content_encoding_or_a_compressed_format_says_compressed() {
        for fields in [
            "Content-Type: text/html\r\nContent-Encoding: gzip\r\n",
            "content-encoding: br\r\n",
            "CONTENT-ENCODING:  zstd \r\n",
            "Content-Encoding: identity, gzip\r\n",
            "Content-Type: image/JPEG\r\n",
            "content-type: image/webp; q=1\r\n",
            "content-type: video/mp4\r\n",
            "content-type: application/vnd.openxmlformats-officedocument.wordprocessingml.document\r\n",
            "content-type: font/woff2\r\n",
        ] {
            assert!(payload_is_compressed(&head(fields)), "{fields:?}");
        }
    }

    #[test]
    fn text_identity_and_unparsed_heads_say_not_compressed() {
        for fields in [
            "Content-Type: text/html; charset=utf-8\r\n",
            "Content-Encoding: identity\r\nContent-Type: application/json\r\n",
            "content-encoding:\r\n",
            "content-type: image/svg+xml\r\n",
            "content-type: image/bmp\r\n",
            "content-type: application/pdf\r\n",
            "x-content-encoding: gzip\r\n",
            "",
        ] {
            assert!(!payload_is_compressed(&head(fields)), "{fields:?}");
        }
        // a field after the blank line is body, not head
        assert!(!payload_is_compressed(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nContent-Encoding: gzip\r\n"
        ));
        assert!(!payload_is_compressed(b""));
        assert!(!payload_is_compressed(b"\xff\xfe garbage without lines"));
    }
}
