//! Value checks shared by the sections: ranges, choices, regular expressions (each error
//! names the key, the value and what is allowed).

use std::time::Duration;

use super::{bad, fmt_dur, ConfigError, Dur};

pub(super) fn range_u64(key: &str, v: u64, min: u64, max: u64) -> Result<(), ConfigError> {
    if v < min || v > max {
        return Err(bad(key, v, &format!("allowed: {min} to {max}")));
    }
    Ok(())
}

pub(super) fn range_dur(key: &str, v: Dur, min_ms: u64, max_ms: u64) -> Result<(), ConfigError> {
    let ms = v.ms();
    if ms < min_ms || ms > max_ms {
        return Err(bad(
            key,
            format!("\"{v}\""),
            &format!(
                "allowed: from \"{}\" to \"{}\"",
                fmt_dur(Duration::from_millis(min_ms)),
                fmt_dur(Duration::from_millis(max_ms))
            ),
        ));
    }
    Ok(())
}

/// The value that `v` names among `choices` (spelling, value); anything else is an error
/// listing the spellings. The one place a string setting becomes a typed one.
pub(super) fn choose<T: Copy>(key: &str, v: &str, choices: &[(&str, T)]) -> Result<T, ConfigError> {
    match choices.iter().find(|(name, _)| *name == v) {
        Some((_, value)) => Ok(*value),
        None => {
            let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
            Err(bad(
                key,
                format!("{v:?}"),
                &format!("allowed: {}", names.join(" | ")),
            ))
        }
    }
}

pub(super) fn regexes(key: &str, pats: &[String]) -> Result<Vec<regex::Regex>, ConfigError> {
    pats.iter()
        .map(|p| {
            regex::Regex::new(p).map_err(|e| {
                bad(
                    key,
                    format!("{p:?}"),
                    &format!("allowed: a regular expression ({e})"),
                )
            })
        })
        .collect()
}
