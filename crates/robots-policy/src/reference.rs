//! A deliberately naive model of Google's matcher, for tests and fuzzing only.
//!
//! It streams the lines as Google's `RobotsMatcher` does (flags for "global agent seen",
//! "specific agent seen", "rule seen"), tries every rule against the path with the
//! position-set algorithm, and keeps the best priority per bucket. It shares only the line
//! splitter with the real implementation; grouping, precedence, the index and the glob
//! matcher are independent, so a disagreement points at a bug in one of them.

use crate::parser::{
    escape_pattern_into, is_global_agent, product_token, Field, LineContent, Lines,
};
use crate::path_params_query;

/// The position-set pattern match: `pos` holds every path offset the pattern prefix can
/// reach. Quadratic, allocation-heavy, obviously correct.
pub fn naive_match(path: &[u8], pattern: &[u8]) -> bool {
    let mut pos: Vec<usize> = vec![0];
    for (i, &c) in pattern.iter().enumerate() {
        if c == b'$' && i + 1 == pattern.len() {
            return pos.last() == Some(&path.len());
        }
        if c == b'*' {
            pos = (pos[0]..=path.len()).collect();
        } else {
            pos = pos
                .iter()
                .filter(|&&p| p < path.len() && path[p] == c)
                .map(|&p| p + 1)
                .collect();
            if pos.is_empty() {
                return false;
            }
        }
    }
    true
}

#[derive(Default)]
struct Best {
    allow: i64,
    disallow: i64,
}

/// Google's verdict for `url`, computed the slow way. `max_bytes` is the size limit.
pub fn naive_allowed(body: &[u8], agent: &str, url: &str, max_bytes: usize) -> bool {
    let body = &body[..body.len().min(max_bytes)];
    let path = path_params_query(url);
    let path = path.as_bytes();
    let (mut global, mut specific) = (
        Best {
            allow: -1,
            disallow: -1,
        },
        Best {
            allow: -1,
            disallow: -1,
        },
    );
    let (mut seen_global, mut seen_specific, mut ever_specific, mut seen_separator) =
        (false, false, false, false);
    for line in Lines::new(body) {
        let LineContent::Directive(d) = line.content else {
            continue;
        };
        match d.field {
            Field::UserAgent => {
                if seen_separator {
                    seen_global = false;
                    seen_specific = false;
                    seen_separator = false;
                }
                if is_global_agent(d.value) {
                    seen_global = true;
                } else if product_token(d.value).eq_ignore_ascii_case(agent.as_bytes()) {
                    seen_specific = true;
                    ever_specific = true;
                }
            }
            Field::Allow | Field::Disallow => {
                if !(seen_global || seen_specific) {
                    continue;
                }
                seen_separator = true;
                let mut pattern = Vec::new();
                escape_pattern_into(d.value, &mut pattern);
                let bucket = if seen_specific {
                    &mut specific
                } else {
                    &mut global
                };
                let allow = d.field == Field::Allow;
                let mut priority = if naive_match(path, &pattern) {
                    pattern.len() as i64
                } else {
                    -1
                };
                if allow && priority < 0 {
                    // Google retries `allow: <dir>/index.htm...` as `allow: <dir>/$`.
                    if let Some(slash) = pattern.iter().rposition(|&b| b == b'/') {
                        if pattern[slash..].starts_with(b"/index.htm") {
                            let mut dir = pattern[..=slash].to_vec();
                            dir.push(b'$');
                            if naive_match(path, &dir) {
                                priority = dir.len() as i64;
                            }
                        }
                    }
                }
                let slot = if allow {
                    &mut bucket.allow
                } else {
                    &mut bucket.disallow
                };
                *slot = (*slot).max(priority);
            }
            _ => {}
        }
    }
    if specific.allow > 0 || specific.disallow > 0 {
        return specific.disallow <= specific.allow;
    }
    if ever_specific {
        return true;
    }
    if global.allow > 0 || global.disallow > 0 {
        return global.disallow <= global.allow;
    }
    true
}
