//! What `frontierd robots check|explain` say, as pure functions over bytes and strings
//! (the command reads the files and prints): the verdict line of `check` for one URL, the
//! answer to one line of a `--batch` file (JSON Lines), and the `explain` report.
//!
//! The output of `check` is a contract: one line per URL (or per batch input line),
//! starting with `allowed` or `disallowed`, or `error: <reason>` for a malformed batch line.

use std::fmt::Write as _;

use base64::Engine;

use crate::{AgentLine, AgentPolicy, GroupChoice, RobotsTxt};

/// Whether `agent` is a bare product token (`[A-Za-z_-]+`). Robots.txt groups name bare
/// product tokens, so another agent (a version, a URL) can only fall back to `*`.
pub fn is_product_token(agent: &str) -> bool {
    !agent.is_empty()
        && agent
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || b == b'-' || b == b'_')
}

/// `check`'s line for one URL: `allowed URL (line N: allow: PATTERN)`, or
/// `disallowed URL (no rule matches)`.
pub fn check_line(policy: &AgentPolicy, url: &str) -> String {
    let verdict = policy.check_url(url);
    let word = if verdict.allowed {
        "allowed"
    } else {
        "disallowed"
    };
    match verdict.rule.and_then(|id| policy.rule(id)) {
        Some(rule) => format!(
            "{word} {url} (line {}: {}: {})",
            rule.line,
            rule.kind.as_str(),
            rule.pattern
        ),
        None => format!("{word} {url} (no rule matches)"),
    }
}

/// One line of a batch file, decoded: check `url` for `agent` against `robots`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchCase {
    pub agent: String,
    pub url: String,
    /// The robots.txt's exact bytes.
    pub robots: Vec<u8>,
}

/// Why a batch line is not a case (after `error: ` in the output).
#[derive(Debug, thiserror::Error)]
pub enum BatchLineError {
    #[error("empty line")]
    Empty,
    #[error("not valid JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("not a JSON object")]
    NotObject,
    #[error("field `{0}` must be a string")]
    NotText(&'static str),
    #[error("missing field `{0}`")]
    Missing(&'static str),
    #[error("missing field `robots` or `robots_b64`")]
    NoRobots,
    #[error("field `robots_b64` is not valid base64: {0}")]
    NotBase64(base64::DecodeError),
}

/// Decode one batch line (without its line end): a JSON object with `agent`, `url`, and
/// `robots` (text) or `robots_b64` (base64 of the exact bytes; wins over `robots`).
pub fn parse_batch_line(line: &[u8]) -> Result<BatchCase, BatchLineError> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Err(BatchLineError::Empty);
    }
    let value: serde_json::Value = serde_json::from_slice(line).map_err(BatchLineError::NotJson)?;
    let object = value.as_object().ok_or(BatchLineError::NotObject)?;
    let text_field = |name: &'static str| -> Result<Option<&str>, BatchLineError> {
        match object.get(name) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(BatchLineError::NotText(name)),
        }
    };
    let agent = text_field("agent")?.ok_or(BatchLineError::Missing("agent"))?;
    let url = text_field("url")?.ok_or(BatchLineError::Missing("url"))?;
    let robots = match (text_field("robots_b64")?, text_field("robots")?) {
        (Some(b64), _) => base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map_err(BatchLineError::NotBase64)?,
        (None, Some(text)) => text.as_bytes().to_vec(),
        (None, None) => return Err(BatchLineError::NoRobots),
    };
    Ok(BatchCase {
        agent: agent.to_string(),
        url: url.to_string(),
        robots,
    })
}

/// Answers the lines of a batch file in order. Consecutive cases often share one
/// robots.txt and agent: their policy is compiled once.
#[derive(Default)]
pub struct BatchChecker {
    cached: Option<(Vec<u8>, String, AgentPolicy)>,
}

impl BatchChecker {
    pub fn new() -> BatchChecker {
        BatchChecker::default()
    }

    /// The output line for one input line (its `\n` or `\r\n` end may be included):
    /// `allowed`, `disallowed`, or `error: <reason>`.
    pub fn answer(&mut self, line: &[u8]) -> String {
        let content = line.strip_suffix(b"\n").unwrap_or(line);
        let content = content.strip_suffix(b"\r").unwrap_or(content);
        let case = match parse_batch_line(content) {
            Ok(case) => case,
            Err(reason) => return format!("error: {reason}"),
        };
        let (_, _, policy) = match self.cached.take() {
            Some(hit) if hit.0 == case.robots && hit.1 == case.agent => self.cached.insert(hit),
            _ => {
                let policy = AgentPolicy::parse(&case.robots, &case.agent);
                self.cached.insert((case.robots, case.agent, policy))
            }
        };
        match policy.check_url(&case.url).allowed {
            true => "allowed",
            false => "disallowed",
        }
        .to_string()
    }
}

/// `explain`'s report of the robots.txt `body` (named `name`, e.g. its path) for `agent`:
/// the group chosen, its rules in precedence order, crawl-delay, sitemaps, and every
/// ignored or repaired line with the reason.
pub fn explain(body: &[u8], agent: &str, name: &str) -> String {
    let robots = RobotsTxt::parse(body);
    let policy = robots.for_agent(agent);
    let mut text = String::new();
    let ignored = match robots.bytes_ignored() {
        0 => String::new(),
        n => format!(", {n} bytes past the size limit ignored"),
    };
    let _ = writeln!(
        text,
        "robots.txt: {name} ({} bytes parsed{ignored})",
        robots.bytes_parsed()
    );
    let _ = writeln!(text, "agent: {agent}");
    explain_group(&mut text, policy.group(), agent);
    explain_rules(&mut text, &policy);
    match policy.crawl_delay() {
        Some(delay) => {
            let _ = writeln!(text, "crawl-delay: {} s", delay.as_secs_f64());
        }
        None => {
            let _ = writeln!(text, "crawl-delay: none");
        }
    }
    if robots.sitemaps().is_empty() {
        let _ = writeln!(text, "sitemaps: none");
    } else {
        let _ = writeln!(text, "sitemaps:");
        for sitemap in robots.sitemaps() {
            let _ = writeln!(text, "  {sitemap}");
        }
    }
    if robots.diagnostics().is_empty() {
        let _ = writeln!(text, "ignored or repaired lines: none");
    } else {
        let _ = writeln!(text, "ignored or repaired lines:");
        for d in robots.diagnostics() {
            let _ = writeln!(text, "  line {:>5}: {}", d.line, d.kind);
        }
        if robots.diagnostics_omitted() > 0 {
            let _ = writeln!(text, "  ... and {} more", robots.diagnostics_omitted());
        }
    }
    text
}

/// The `group:` line of the report.
fn explain_group(text: &mut String, group: &GroupChoice, agent: &str) {
    let describe = |lines: &[AgentLine]| {
        lines
            .iter()
            .map(|l| format!("line {} ({})", l.line, l.value))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = match group {
        GroupChoice::Specific(lines) => writeln!(
            text,
            "group: the groups naming {agent:?}, merged: {}",
            describe(lines)
        ),
        GroupChoice::Global(lines) => writeln!(
            text,
            "group: no group names {agent:?}; the `*` groups apply, merged: {}",
            describe(lines)
        ),
        GroupChoice::NoGroup => writeln!(
            text,
            "group: none applies (no group names {agent:?} and there is no `*` group): everything is allowed"
        ),
    };
}

/// The rules of the report, in precedence order.
fn explain_rules(text: &mut String, policy: &AgentPolicy) {
    let rules: Vec<_> = policy.rules().collect();
    if rules.is_empty() {
        let _ = writeln!(text, "rules: none (everything is allowed)");
        return;
    }
    let _ = writeln!(
        text,
        "rules, in precedence order (the first that matches a URL decides; longest pattern first, allow wins ties):"
    );
    for (i, rule) in rules.iter().enumerate() {
        let origin = if rule.synthesized {
            " [derived: an allowed index.htm* page also allows its directory]"
        } else {
            ""
        };
        let _ = writeln!(
            text,
            "  {:>4}. line {:>5}  {:<8} {}{origin}",
            i + 1,
            rule.line,
            rule.kind.as_str(),
            rule.pattern
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_lines_name_the_deciding_rule() {
        let policy = AgentPolicy::parse(b"user-agent: *\ndisallow: /private\n", "bot");
        assert_eq!(
            check_line(&policy, "http://a.test/private/x"),
            "disallowed http://a.test/private/x (line 2: disallow: /private)"
        );
        assert_eq!(
            check_line(&policy, "http://a.test/"),
            "allowed http://a.test/ (no rule matches)"
        );
        assert!(is_product_token("googlebot"));
        assert!(!is_product_token("googlebot/2.1"));
        assert!(!is_product_token(""));
    }

    #[test]
    fn batch_lines_answer_in_order_with_the_reason_for_a_bad_one() {
        let mut b = BatchChecker::new();
        let deny = r#"{"agent":"a","url":"http://a.com/x","robots":"user-agent: *\ndisallow: /"}"#;
        assert_eq!(b.answer(format!("{deny}\r\n").as_bytes()), "disallowed");
        assert_eq!(b.answer(deny.as_bytes()), "disallowed");
        assert_eq!(
            b.answer(br#"{"agent":"a","url":"http://a.com/x","robots":""}"#),
            "allowed"
        );
        assert_eq!(b.answer(b"  \n"), "error: empty line");
        assert_eq!(b.answer(b"[1]"), "error: not a JSON object");
        assert_eq!(
            b.answer(br#"{"agent":1}"#),
            "error: field `agent` must be a string"
        );
        assert_eq!(
            b.answer(br#"{"agent":"a","robots":""}"#),
            "error: missing field `url`"
        );
        assert!(b.answer(b"{").starts_with("error: not valid JSON: "));
    }

    #[test]
    fn explain_names_the_group_rules_and_ignored_lines() {
        let text = explain(
            b"user-agent: bot\ndisallow: /a\nallow: /a/b\nbogus line\nsitemap: http://a/s.xml\n",
            "bot",
            "robots.txt",
        );
        assert!(text.starts_with("robots.txt: robots.txt ("), "{text}");
        assert!(
            text.contains("group: the groups naming \"bot\", merged: line 1 (bot)"),
            "{text}"
        );
        assert!(text.contains("line     3  allow    /a/b"), "{text}");
        assert!(text.contains("crawl-delay: none"), "{text}");
        assert!(text.contains("  http://a/s.xml"), "{text}");
        assert!(
            text.contains("ignored or repaired lines:\n  line     4: "),
            "{text}"
        );
    }
}
