//! Versioned binary encoding of [`OriginRobots`] for the store.
//!
//! Layout (all integers big-endian):
//!
//! ```text
//! byte 0        format version (FORMAT_VERSION = 1)
//! then, to the end, a list of fields:
//!   tag         1 byte
//!   length      unsigned LEB128 varint (at most 10 bytes), the number of value bytes
//!   value       `length` bytes
//! ```
//!
//! Fields of version 1 (written in this order; read in any order):
//!
//! | tag | name | value | when |
//! | --- | --- | --- | --- |
//! | 1 | state kind | u8: 0 unknown, 1 fresh, 2 stale, 3 5xx-disallow, 4 fallback | always (required) |
//! | 2 | copy kind | u8: 1 body, 2 allow-all after a 4xx, 3 allow-all after a redirect overflow | the state holds a copy (current or last good) |
//! | 3 | copy body | the robots.txt bytes | copy kind 1 |
//! | 4 | copy status | u16: the 4xx status | copy kind 2 |
//! | 5 | copy fetched at | u64 ms since the epoch | a copy |
//! | 6 | expires at | u64 ms | fresh, stale |
//! | 7 | since | u64 ms: first failure of the run | 5xx-disallow, fallback |
//! | 8 | attempt | u32 | 5xx-disallow, fallback |
//! | 9 | next retry at | u64 ms | 5xx-disallow, fallback |
//! | 10 | last fetch at | u64 ms | a fetch happened |
//! | 11 | last outcome | u8 kind, then: 1 => u16 status; 2 => nothing (redirect limit); 3 => u8 network kind | with tag 10 |
//!
//! Versioning rule: a field added later gets a new tag and a default for stores written
//! before it, so it never needs a version bump; readers skip tags they do not know, so older
//! builds still read newer stores. The version byte changes only for a change older readers
//! must not misread (a field whose meaning changes); a reader keeps decoding every older
//! version it ever wrote. A field listed above as needed for a state is required: if it is
//! missing the record is rejected rather than guessed.
//!
//! Decoding never panics: any input either decodes or gives a [`DecodeError`].

use super::{
    AllowAllCause, CopyContent, FetchSummary, LastFetch, NetworkErrorKind, OriginRobots,
    RobotsCopy, RobotsState, UnixMillis,
};

/// The version byte this build writes.
pub const FORMAT_VERSION: u8 = 1;

mod tag {
    pub const STATE_KIND: u8 = 1;
    pub const COPY_KIND: u8 = 2;
    pub const COPY_BODY: u8 = 3;
    pub const COPY_STATUS: u8 = 4;
    pub const COPY_FETCHED_AT: u8 = 5;
    pub const EXPIRES_AT: u8 = 6;
    pub const SINCE: u8 = 7;
    pub const ATTEMPT: u8 = 8;
    pub const NEXT_RETRY_AT: u8 = 9;
    pub const LAST_FETCH_AT: u8 = 10;
    pub const LAST_OUTCOME: u8 = 11;
    /// One past the highest tag this build knows.
    pub const END: u8 = 12;
}

mod state_code {
    pub const UNKNOWN: u8 = 0;
    pub const FRESH: u8 = 1;
    pub const STALE: u8 = 2;
    pub const SERVER_ERROR_DISALLOW: u8 = 3;
    pub const FALLBACK: u8 = 4;
}

mod copy_code {
    pub const BODY: u8 = 1;
    pub const ALLOW_ALL_CLIENT_ERROR: u8 = 2;
    pub const ALLOW_ALL_REDIRECT_LIMIT: u8 = 3;
    pub const ALLOW_ALL_ADDRESS_REFUSED: u8 = 4;
}

mod outcome_code {
    pub const STATUS: u8 = 1;
    pub const REDIRECT_LIMIT: u8 = 2;
    pub const NETWORK: u8 = 3;
    pub const ADDRESS_REFUSED: u8 = 4;
}

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("empty record")]
    Empty,
    #[error("unsupported format version {0} (this build reads 1..={FORMAT_VERSION})")]
    UnsupportedVersion(u8),
    #[error("record truncated at byte {at}")]
    Truncated { at: usize },
    #[error("field length varint at byte {at} is malformed")]
    BadLength { at: usize },
    #[error("field {tag} has length {len}, expected {expected}")]
    FieldLength {
        tag: u8,
        len: usize,
        expected: &'static str,
    },
    #[error("field {tag} appears twice")]
    DuplicateField { tag: u8 },
    #[error("field {field} has invalid value {value}")]
    InvalidValue { field: &'static str, value: u64 },
    #[error("required field {0} is missing")]
    MissingField(&'static str),
}

/// Encode a state for the store. Deterministic: equal values give equal bytes.
pub fn encode(origin: &OriginRobots) -> Vec<u8> {
    let mut out = vec![FORMAT_VERSION];
    let (kind, copy, expires_at, run) = match &origin.state {
        RobotsState::Unknown => (state_code::UNKNOWN, None, None, None),
        RobotsState::Fresh { copy, expires_at } => {
            (state_code::FRESH, Some(copy), Some(*expires_at), None)
        }
        RobotsState::Stale { copy, expires_at } => {
            (state_code::STALE, Some(copy), Some(*expires_at), None)
        }
        RobotsState::ServerErrorDisallow {
            since,
            last_good,
            attempt,
            next_retry_at,
        } => (
            state_code::SERVER_ERROR_DISALLOW,
            last_good.as_ref(),
            None,
            Some((*since, *attempt, *next_retry_at)),
        ),
        RobotsState::Fallback {
            since,
            last_good,
            attempt,
            next_retry_at,
        } => (
            state_code::FALLBACK,
            last_good.as_ref(),
            None,
            Some((*since, *attempt, *next_retry_at)),
        ),
    };
    put(&mut out, tag::STATE_KIND, &[kind]);
    if let Some(copy) = copy {
        match &copy.content {
            CopyContent::Body(body) => {
                put(&mut out, tag::COPY_KIND, &[copy_code::BODY]);
                put(&mut out, tag::COPY_BODY, body);
            }
            CopyContent::AllowAll(AllowAllCause::ClientError { status }) => {
                put(
                    &mut out,
                    tag::COPY_KIND,
                    &[copy_code::ALLOW_ALL_CLIENT_ERROR],
                );
                put(&mut out, tag::COPY_STATUS, &status.to_be_bytes());
            }
            CopyContent::AllowAll(AllowAllCause::RedirectLimitExceeded) => {
                put(
                    &mut out,
                    tag::COPY_KIND,
                    &[copy_code::ALLOW_ALL_REDIRECT_LIMIT],
                );
            }
            CopyContent::AllowAll(AllowAllCause::AddressRefused) => {
                put(
                    &mut out,
                    tag::COPY_KIND,
                    &[copy_code::ALLOW_ALL_ADDRESS_REFUSED],
                );
            }
        }
        put(
            &mut out,
            tag::COPY_FETCHED_AT,
            &copy.fetched_at.0.to_be_bytes(),
        );
    }
    if let Some(expires_at) = expires_at {
        put(&mut out, tag::EXPIRES_AT, &expires_at.0.to_be_bytes());
    }
    if let Some((since, attempt, next_retry_at)) = run {
        put(&mut out, tag::SINCE, &since.0.to_be_bytes());
        put(&mut out, tag::ATTEMPT, &attempt.to_be_bytes());
        put(&mut out, tag::NEXT_RETRY_AT, &next_retry_at.0.to_be_bytes());
    }
    if let Some(last) = &origin.last_fetch {
        put(&mut out, tag::LAST_FETCH_AT, &last.at.0.to_be_bytes());
        let mut v = Vec::with_capacity(3);
        match last.outcome {
            FetchSummary::Status(s) => {
                v.push(outcome_code::STATUS);
                v.extend_from_slice(&s.to_be_bytes());
            }
            FetchSummary::RedirectLimitExceeded => v.push(outcome_code::REDIRECT_LIMIT),
            FetchSummary::AddressRefused => v.push(outcome_code::ADDRESS_REFUSED),
            FetchSummary::Network(k) => {
                v.push(outcome_code::NETWORK);
                v.push(network_code(k));
            }
        }
        put(&mut out, tag::LAST_OUTCOME, &v);
    }
    out
}

fn put(out: &mut Vec<u8>, tag: u8, value: &[u8]) {
    out.push(tag);
    let mut len = value.len() as u64;
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        if len == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
    out.extend_from_slice(value);
}

fn network_code(k: NetworkErrorKind) -> u8 {
    match k {
        NetworkErrorKind::Other => 0,
        NetworkErrorKind::Dns => 1,
        NetworkErrorKind::Connect => 2,
        NetworkErrorKind::Tls => 3,
        NetworkErrorKind::Timeout => 4,
        NetworkErrorKind::Reset => 5,
        NetworkErrorKind::InvalidResponse => 6,
        NetworkErrorKind::BrokenChunking => 7,
    }
}

/// A code written by a later build decodes as `Other`: the state stays readable.
fn network_from_code(c: u8) -> NetworkErrorKind {
    match c {
        1 => NetworkErrorKind::Dns,
        2 => NetworkErrorKind::Connect,
        3 => NetworkErrorKind::Tls,
        4 => NetworkErrorKind::Timeout,
        5 => NetworkErrorKind::Reset,
        6 => NetworkErrorKind::InvalidResponse,
        7 => NetworkErrorKind::BrokenChunking,
        _ => NetworkErrorKind::Other,
    }
}

/// Decode a record written by [`encode`] (of this or any earlier format version, and of later
/// builds that only added fields).
pub fn decode(bytes: &[u8]) -> Result<OriginRobots, DecodeError> {
    let (&version, mut rest) = bytes.split_first().ok_or(DecodeError::Empty)?;
    if version != 1 {
        return Err(DecodeError::UnsupportedVersion(version));
    }
    let mut fields: [Option<&[u8]>; tag::END as usize] = [None; tag::END as usize];
    let mut pos = 1usize;
    while let Some((&t, after_tag)) = rest.split_first() {
        let len_at = pos + 1;
        let (len, after_len, len_bytes) = read_varint(after_tag, len_at)?;
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= after_len.len())
            .ok_or(DecodeError::Truncated {
                at: len_at + len_bytes,
            })?;
        let (value, next) = after_len.split_at(len);
        if let Some(slot) = fields.get_mut(usize::from(t)).filter(|_| t != 0) {
            if slot.is_some() {
                return Err(DecodeError::DuplicateField { tag: t });
            }
            *slot = Some(value);
        } // else: a field of a later build (or tag 0): skipped.
        pos = len_at + len_bytes + len;
        rest = next;
    }
    let f = Fields(fields);

    let kind = f
        .u8(tag::STATE_KIND)?
        .ok_or(DecodeError::MissingField("state kind"))?;
    let copy = f.copy()?;
    let state = match kind {
        state_code::UNKNOWN => RobotsState::Unknown,
        state_code::FRESH | state_code::STALE => {
            let copy = copy.ok_or(DecodeError::MissingField("copy kind"))?;
            let expires_at = f.required_instant(tag::EXPIRES_AT, "expires at")?;
            if kind == state_code::FRESH {
                RobotsState::Fresh { copy, expires_at }
            } else {
                RobotsState::Stale { copy, expires_at }
            }
        }
        state_code::SERVER_ERROR_DISALLOW | state_code::FALLBACK => {
            let since = f.required_instant(tag::SINCE, "since")?;
            let attempt = f
                .u32(tag::ATTEMPT)?
                .ok_or(DecodeError::MissingField("attempt"))?;
            let next_retry_at = f.required_instant(tag::NEXT_RETRY_AT, "next retry at")?;
            if kind == state_code::SERVER_ERROR_DISALLOW {
                RobotsState::ServerErrorDisallow {
                    since,
                    last_good: copy,
                    attempt,
                    next_retry_at,
                }
            } else {
                RobotsState::Fallback {
                    since,
                    last_good: copy,
                    attempt,
                    next_retry_at,
                }
            }
        }
        other => {
            return Err(DecodeError::InvalidValue {
                field: "state kind",
                value: u64::from(other),
            })
        }
    };

    let last_fetch = match (f.u64(tag::LAST_FETCH_AT)?, f.get(tag::LAST_OUTCOME)) {
        (None, None) => None,
        (Some(_), None) => return Err(DecodeError::MissingField("last outcome")),
        (None, Some(_)) => return Err(DecodeError::MissingField("last fetch at")),
        (Some(at), Some(v)) => Some(LastFetch {
            at: UnixMillis(at),
            outcome: decode_outcome(v)?,
        }),
    };
    Ok(OriginRobots { state, last_fetch })
}

fn decode_outcome(v: &[u8]) -> Result<FetchSummary, DecodeError> {
    let bad_len = |expected| DecodeError::FieldLength {
        tag: tag::LAST_OUTCOME,
        len: v.len(),
        expected,
    };
    match v.split_first() {
        None => Err(bad_len("1 to 3")),
        Some((&outcome_code::STATUS, rest)) => {
            let s: [u8; 2] = rest.try_into().map_err(|_| bad_len("3"))?;
            Ok(FetchSummary::Status(u16::from_be_bytes(s)))
        }
        Some((&outcome_code::REDIRECT_LIMIT, [])) => Ok(FetchSummary::RedirectLimitExceeded),
        Some((&outcome_code::REDIRECT_LIMIT, _)) => Err(bad_len("1")),
        Some((&outcome_code::ADDRESS_REFUSED, [])) => Ok(FetchSummary::AddressRefused),
        Some((&outcome_code::ADDRESS_REFUSED, _)) => Err(bad_len("1")),
        Some((&outcome_code::NETWORK, [k])) => Ok(FetchSummary::Network(network_from_code(*k))),
        Some((&outcome_code::NETWORK, _)) => Err(bad_len("2")),
        Some((&other, _)) => Err(DecodeError::InvalidValue {
            field: "last outcome",
            value: u64::from(other),
        }),
    }
}

/// Returns (value, rest, number of varint bytes).
fn read_varint(bytes: &[u8], at: usize) -> Result<(u64, &[u8], usize), DecodeError> {
    let mut value: u64 = 0;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        let part = u64::from(b & 0x7f);
        if i == 9 && (b & 0x7e) != 0 {
            // More than 64 bits.
            return Err(DecodeError::BadLength { at });
        }
        value |= part << (7 * i);
        if b & 0x80 == 0 {
            return Ok((value, &bytes[i + 1..], i + 1));
        }
    }
    if bytes.len() >= 10 {
        Err(DecodeError::BadLength { at })
    } else {
        Err(DecodeError::Truncated {
            at: at + bytes.len(),
        })
    }
}

struct Fields<'a>([Option<&'a [u8]>; tag::END as usize]);

impl<'a> Fields<'a> {
    fn get(&self, tag: u8) -> Option<&'a [u8]> {
        self.0[usize::from(tag)]
    }

    fn fixed<const N: usize>(
        &self,
        tag: u8,
        expected: &'static str,
    ) -> Result<Option<[u8; N]>, DecodeError> {
        self.get(tag)
            .map(|v| {
                v.try_into().map_err(|_| DecodeError::FieldLength {
                    tag,
                    len: v.len(),
                    expected,
                })
            })
            .transpose()
    }

    fn u8(&self, tag: u8) -> Result<Option<u8>, DecodeError> {
        Ok(self.fixed::<1>(tag, "1")?.map(|[b]| b))
    }

    fn u16(&self, tag: u8) -> Result<Option<u16>, DecodeError> {
        Ok(self.fixed::<2>(tag, "2")?.map(u16::from_be_bytes))
    }

    fn u32(&self, tag: u8) -> Result<Option<u32>, DecodeError> {
        Ok(self.fixed::<4>(tag, "4")?.map(u32::from_be_bytes))
    }

    fn u64(&self, tag: u8) -> Result<Option<u64>, DecodeError> {
        Ok(self.fixed::<8>(tag, "8")?.map(u64::from_be_bytes))
    }

    fn required_instant(&self, tag: u8, name: &'static str) -> Result<UnixMillis, DecodeError> {
        self.u64(tag)?
            .map(UnixMillis)
            .ok_or(DecodeError::MissingField(name))
    }

    fn copy(&self) -> Result<Option<RobotsCopy>, DecodeError> {
        let Some(kind) = self.u8(tag::COPY_KIND)? else {
            return Ok(None);
        };
        let content = match kind {
            copy_code::BODY => CopyContent::Body(
                self.get(tag::COPY_BODY)
                    .ok_or(DecodeError::MissingField("copy body"))?
                    .to_vec(),
            ),
            copy_code::ALLOW_ALL_CLIENT_ERROR => {
                let status = self
                    .u16(tag::COPY_STATUS)?
                    .ok_or(DecodeError::MissingField("copy status"))?;
                CopyContent::AllowAll(AllowAllCause::ClientError { status })
            }
            copy_code::ALLOW_ALL_REDIRECT_LIMIT => {
                CopyContent::AllowAll(AllowAllCause::RedirectLimitExceeded)
            }
            copy_code::ALLOW_ALL_ADDRESS_REFUSED => {
                CopyContent::AllowAll(AllowAllCause::AddressRefused)
            }
            other => {
                return Err(DecodeError::InvalidValue {
                    field: "copy kind",
                    value: u64::from(other),
                })
            }
        };
        let fetched_at = self.required_instant(tag::COPY_FETCHED_AT, "copy fetched at")?;
        Ok(Some(RobotsCopy {
            content,
            fetched_at,
        }))
    }
}
