//! A parsed robots.txt, independent of any crawler: the directives in file order, the
//! sitemaps, and every ignored or repaired line. [`RobotsTxt::for_agent`] turns it into the
//! compiled [`AgentPolicy`] for one crawler.

use crate::matcher::{AgentLine, AgentPolicy, GroupChoice, RuleKind, RuleSource};
use crate::parser::{
    escape_pattern_into, is_global_agent, parse_crawl_delay, product_token, Diagnostic,
    DiagnosticKind, Field, LineContent, Lines, ParseOptions, HARD_MAX_BYTES, MAX_DIAGNOSTICS,
};

#[derive(Clone, Copy, Debug)]
enum DirectiveKind {
    /// `token_len`: length of the product token at the start of the value.
    UserAgent {
        global: bool,
        token_len: u32,
    },
    Rule(RuleKind),
    CrawlDelay(f64),
}

/// A group-relevant line; its text lives in `RobotsTxt::arena`.
#[derive(Clone, Copy, Debug)]
struct Directive {
    kind: DirectiveKind,
    line: u32,
    start: u32,
    len: u32,
}

/// A robots.txt body, parsed once. Parsing never fails: bad lines are ignored and reported.
#[derive(Clone, Debug, Default)]
pub struct RobotsTxt {
    /// User-agent values (raw) and rule patterns (escaped), back to back.
    arena: Vec<u8>,
    directives: Vec<Directive>,
    sitemaps: Vec<String>,
    diagnostics: Vec<Diagnostic>,
    diagnostics_omitted: usize,
    bytes_parsed: usize,
    bytes_ignored: usize,
}

impl RobotsTxt {
    /// Parse with the default options (500 KiB limit).
    pub fn parse(body: &[u8]) -> RobotsTxt {
        Self::parse_with(body, &ParseOptions::default())
    }

    /// Parse with explicit options.
    pub fn parse_with(body: &[u8], options: &ParseOptions) -> RobotsTxt {
        let limit = options.max_bytes.min(HARD_MAX_BYTES);
        let kept = &body[..body.len().min(limit)];
        let mut robots = RobotsTxt {
            arena: Vec::with_capacity(kept.len() / 2),
            directives: Vec::with_capacity(kept.len() / 24),
            bytes_parsed: kept.len(),
            bytes_ignored: body.len() - kept.len(),
            ..RobotsTxt::default()
        };
        let mut seen_agent = false;
        let mut last_line = 0;
        for parsed in Lines::new(kept) {
            last_line = parsed.number;
            let number = parsed.number;
            if let Some(original_len) = parsed.cut_from {
                robots.report(number, DiagnosticKind::LineCut { original_len });
            }
            if parsed.had_nul {
                robots.report(number, DiagnosticKind::NulByte);
            }
            let directive = match parsed.content {
                LineContent::Blank => continue,
                LineContent::Invalid(kind) => {
                    robots.report(number, kind);
                    continue;
                }
                LineContent::Directive(d) => d,
            };
            if directive.missing_colon {
                robots.report(number, DiagnosticKind::MissingColonAccepted);
            }
            let field = directive.field;
            if directive.repaired {
                robots.report(
                    number,
                    DiagnosticKind::KeyRepaired {
                        written: String::from_utf8_lossy(directive.key).into_owned(),
                        read_as: field,
                    },
                );
            }
            let value = directive.value;
            match field {
                Field::UserAgent => {
                    seen_agent = true;
                    let start = robots.arena.len();
                    robots.arena.extend_from_slice(value);
                    robots.push(
                        DirectiveKind::UserAgent {
                            global: is_global_agent(value),
                            token_len: product_token(value).len() as u32,
                        },
                        number,
                        start,
                    );
                }
                Field::Allow | Field::Disallow => {
                    let kind = if field == Field::Allow {
                        RuleKind::Allow
                    } else {
                        RuleKind::Disallow
                    };
                    if !seen_agent {
                        robots.report(number, DiagnosticKind::RuleWithoutUserAgent);
                    } else if value.is_empty() {
                        robots.report(number, DiagnosticKind::RuleWithoutPath);
                    }
                    // Kept even when empty: a rule line closes the user-agent list of its
                    // group, whatever its value.
                    let start = robots.arena.len();
                    escape_pattern_into(value, &mut robots.arena);
                    robots.push(DirectiveKind::Rule(kind), number, start);
                }
                Field::Sitemap => {
                    if value.is_empty() {
                        robots.report(number, DiagnosticKind::EmptySitemap);
                    } else {
                        robots
                            .sitemaps
                            .push(String::from_utf8_lossy(value).into_owned());
                    }
                }
                Field::CrawlDelay => match parse_crawl_delay(value) {
                    Some(seconds) => {
                        let start = robots.arena.len();
                        robots.push(DirectiveKind::CrawlDelay(seconds), number, start);
                    }
                    None => robots.report(
                        number,
                        DiagnosticKind::BadCrawlDelay(String::from_utf8_lossy(value).into_owned()),
                    ),
                },
                Field::Unknown => robots.report(
                    number,
                    DiagnosticKind::UnknownField(
                        String::from_utf8_lossy(directive.key).into_owned(),
                    ),
                ),
            }
        }
        if robots.bytes_ignored > 0 {
            robots.report(
                last_line,
                DiagnosticKind::PastSizeLimit {
                    ignored_bytes: robots.bytes_ignored,
                    limit,
                },
            );
        }
        robots
    }

    fn push(&mut self, kind: DirectiveKind, line: u32, start: usize) {
        self.directives.push(Directive {
            kind,
            line,
            start: start as u32,
            len: (self.arena.len() - start) as u32,
        });
    }

    fn report(&mut self, line: u32, kind: DiagnosticKind) {
        if self.diagnostics.len() < MAX_DIAGNOSTICS {
            self.diagnostics.push(Diagnostic { line, kind });
        } else {
            self.diagnostics_omitted += 1;
        }
    }

    fn text(&self, d: &Directive) -> &[u8] {
        &self.arena[d.start as usize..(d.start + d.len) as usize]
    }

    /// Every `sitemap:` URL, in file order (they belong to no group).
    pub fn sitemaps(&self) -> &[String] {
        &self.sitemaps
    }

    /// Ignored and repaired lines, in file order (at most [`MAX_DIAGNOSTICS`]).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// Diagnostics beyond [`MAX_DIAGNOSTICS`] that were counted but not kept.
    pub fn diagnostics_omitted(&self) -> usize {
        self.diagnostics_omitted
    }

    /// Bytes of the body that were parsed (after the size limit).
    pub fn bytes_parsed(&self) -> usize {
        self.bytes_parsed
    }

    /// Bytes past the size limit, ignored.
    pub fn bytes_ignored(&self) -> usize {
        self.bytes_ignored
    }

    /// Compile the rules that govern `agent`, exactly as Google's `RobotsMatcher` selects
    /// them: the groups whose user-agent product token equals `agent` (case-insensitive),
    /// merged; or, if there is none, the `*` groups, merged. `agent` is compared as given.
    pub fn for_agent(&self, agent: &str) -> AgentPolicy {
        let agent = agent.as_bytes();
        let mut seen_global = false;
        let mut seen_specific = false;
        let mut seen_rule = false;
        let mut specific = GroupCollector::default();
        let mut global = GroupCollector::default();

        for d in &self.directives {
            match d.kind {
                DirectiveKind::UserAgent {
                    global: star,
                    token_len,
                } => {
                    // A user-agent line after rules starts a new group.
                    if seen_rule {
                        seen_global = false;
                        seen_specific = false;
                        seen_rule = false;
                    }
                    let value = self.text(d);
                    if star {
                        seen_global = true;
                        global.agent_lines.push(agent_line(d.line, value));
                    } else if value[..token_len as usize].eq_ignore_ascii_case(agent) {
                        seen_specific = true;
                        specific.agent_lines.push(agent_line(d.line, value));
                    }
                }
                DirectiveKind::Rule(kind) => {
                    if !(seen_global || seen_specific) {
                        continue;
                    }
                    seen_rule = true;
                    if d.len == 0 {
                        continue;
                    }
                    let target = if seen_specific {
                        &mut specific
                    } else {
                        &mut global
                    };
                    target.rules.push(RuleSource {
                        kind,
                        pattern: self.text(d),
                        line: d.line,
                    });
                }
                DirectiveKind::CrawlDelay(seconds) => {
                    let target = if seen_specific {
                        &mut specific
                    } else if seen_global {
                        &mut global
                    } else {
                        continue;
                    };
                    // Several values for one crawler: the most polite one wins.
                    target.crawl_delay =
                        Some(target.crawl_delay.map_or(seconds, |c: f64| c.max(seconds)));
                }
            }
        }

        let (choice, chosen) = if !specific.agent_lines.is_empty() {
            (
                GroupChoice::Specific(std::mem::take(&mut specific.agent_lines)),
                specific,
            )
        } else if !global.agent_lines.is_empty() {
            (
                GroupChoice::Global(std::mem::take(&mut global.agent_lines)),
                global,
            )
        } else {
            (GroupChoice::NoGroup, GroupCollector::default())
        };
        AgentPolicy::compile(choice, &chosen.rules, chosen.crawl_delay)
    }
}

fn agent_line(line: u32, value: &[u8]) -> AgentLine {
    AgentLine {
        line,
        value: String::from_utf8_lossy(value).into_owned(),
    }
}

/// The user-agent lines, rules and crawl-delay gathered for one side (specific or `*`).
#[derive(Default)]
struct GroupCollector<'a> {
    agent_lines: Vec<AgentLine>,
    rules: Vec<RuleSource<'a>>,
    crawl_delay: Option<f64>,
}
