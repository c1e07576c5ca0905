//! Durations in the config: humantime strings in, the shortest exact spelling out.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// A duration written as a humantime string (`"5s"`, `"24h"`, `"1h 30m"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dur(pub Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        humantime::parse_duration(s.trim()).map(Dur).map_err(|e| {
            serde::de::Error::custom(format!(
                "invalid duration {s:?} ({e}); allowed: a number with a unit, e.g. \"500ms\", \"5s\", \"10m\", \"24h\", \"30days\""
            ))
        })
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&fmt_dur(self.0))
    }
}

/// Shortest exact spelling: "90days", "24h", "5s", "1500ms".
pub(super) fn fmt_dur(d: Duration) -> String {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    for (unit, name) in [
        (86_400_000, "days"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1000, "s"),
    ] {
        if ms >= unit && ms % unit == 0 {
            return format!("{}{name}", ms / unit);
        }
    }
    format!("{ms}ms")
}

impl Dur {
    pub(super) fn ms(self) -> u64 {
        u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX)
    }
}
