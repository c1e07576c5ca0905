//! A client's settings for one queue (url-frontier's SetDelay and BlockQueueUntil),
//! durable under `g` keys (see [`super::keys::queue_control`]).

use super::codec::CodecError;

/// Version byte of the encoding.
const CONTROL_V1: u8 = 1;

pub use crate::sched::records::QueueControl;

impl QueueControl {
    /// Version byte, then the two fields as u64 LE.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(17);
        v.push(CONTROL_V1);
        v.extend_from_slice(&self.delay_ms.to_le_bytes());
        v.extend_from_slice(&self.blocked_until_ms.to_le_bytes());
        v
    }

    /// Decode [`QueueControl::encode`]'s bytes (later versions may append fields).
    pub fn decode(bytes: &[u8]) -> Result<QueueControl, CodecError> {
        let bad = |why| CodecError {
            what: "queue control",
            why,
        };
        match bytes.first() {
            Some(&CONTROL_V1) => {}
            Some(_) => return Err(bad("unknown version")),
            None => return Err(bad("empty")),
        }
        let field = |i: usize| -> Result<u64, CodecError> {
            let b: [u8; 8] = bytes
                .get(1 + i * 8..9 + i * 8)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| bad("truncated"))?;
            Ok(u64::from_le_bytes(b))
        };
        Ok(QueueControl {
            delay_ms: field(0)?,
            blocked_until_ms: field(1)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_garbage() {
        let c = QueueControl {
            delay_ms: 7_000,
            blocked_until_ms: 1_800_000_000_000,
        };
        assert_eq!(QueueControl::decode(&c.encode()).unwrap(), c);
        assert!(QueueControl::decode(&[]).is_err());
        assert!(QueueControl::decode(&[9, 0]).is_err());
        assert!(QueueControl::decode(&c.encode()[..10]).is_err());
    }
}
