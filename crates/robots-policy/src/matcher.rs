//! The compiled rules of one crawler and the URL matcher.
//!
//! Verdicts equal Google's `RobotsMatcher`: the matching rule with the longest (escaped)
//! pattern decides, allow wins ties, no matching rule means allowed. Rules are kept in
//! precedence order, so the first matching rule in that order is the deciding one.
//!
//! Speed: a check never tries every rule. Rules that start with a literal prefix longer
//! than `/` sit in a sorted prefix array where the prefixes of a path are found by one
//! binary search and a walk up a parent chain; rules that start with `*` or `/*` are found
//! through an Aho-Corasick automaton over their longest literal piece. Only those
//! candidates are matched, in precedence order, stopping at the first that matches.
//! Matching a pattern is greedy over its `*`-separated pieces, linear in pattern x path,
//! and allocates nothing.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;

mod index;

use self::index::{bigram_set, MatchIndex, NO_PARENT};

/// One user-agent line of a group (its line number and value), for `explain`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentLine {
    pub line: u32,
    pub value: String,
}

/// Allow or disallow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RuleKind {
    Allow,
    Disallow,
}

impl RuleKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::Allow => "allow",
            RuleKind::Disallow => "disallow",
        }
    }
}

/// A rule as found in the file (pattern already escaped).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RuleSource<'a> {
    pub kind: RuleKind,
    pub pattern: &'a [u8],
    pub line: u32,
}

/// Which group governs the crawler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupChoice {
    /// Groups naming the crawler's product token (merged); their user-agent lines.
    Specific(Vec<AgentLine>),
    /// No group names the crawler: the `*` groups (merged); their user-agent lines.
    Global(Vec<AgentLine>),
    /// No group applies: everything is allowed.
    NoGroup,
}

/// One compiled rule.
#[derive(Clone, Copy, Debug)]
struct Rule {
    kind: RuleKind,
    start: u32,
    len: u32,
    line: u32,
    /// Google adds `allow: <dir>/$` for `allow: <dir>/index.htm...`.
    synthesized: bool,
    shape: Shape,
}

/// What is left to match once a rule's literal prefix is known to start the path: most
/// rules are plain prefixes, and the prefix index has already proved those.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// No `*` and no final `$`: the literal prefix is the whole pattern.
    Literal,
    /// A literal then a final `$`: the path must be exactly the literal.
    LiteralEnd,
    /// Has a `*`: run [`glob_match`].
    Glob,
}

impl Shape {
    fn of(pattern: &[u8]) -> Shape {
        let (body, anchored) = match pattern.strip_suffix(b"$") {
            Some(body) => (body, true),
            None => (pattern, false),
        };
        let Some(star) = memchr::memchr(b'*', body) else {
            return if anchored {
                Shape::LiteralEnd
            } else {
                Shape::Literal
            };
        };
        // Only stars after the literal (`/a*`, `/a**`, `/a*$`): they match any rest, so
        // the pattern is the plain prefix.
        if body[star..].iter().all(|&b| b == b'*') {
            Shape::Literal
        } else {
            Shape::Glob
        }
    }
}

/// A rule as shown to people: kind, pattern, line, and whether frontierd derived it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleView<'a> {
    pub kind: RuleKind,
    pub pattern: &'a str,
    pub line: u32,
    /// True for the `allow: <dir>/$` rule Google derives from `allow: <dir>/index.htm...`.
    pub synthesized: bool,
}

/// The answer for one URL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    /// Index of the deciding rule (see [`AgentPolicy::rule`]); `None` when no rule matched.
    pub rule: Option<u32>,
}

/// The compiled robots.txt rules for one crawler. Cheap to query from many threads.
#[derive(Clone, Debug)]
pub struct AgentPolicy {
    arena: Vec<u8>,
    rules: Vec<Rule>,
    index: MatchIndex,
    crawl_delay: Option<f64>,
    group: GroupChoice,
}

impl Default for AgentPolicy {
    fn default() -> Self {
        AgentPolicy::allow_all()
    }
}

impl AgentPolicy {
    /// A policy that allows every URL (no robots.txt, a 4xx, too many redirects).
    pub fn allow_all() -> AgentPolicy {
        AgentPolicy {
            arena: Vec::new(),
            rules: Vec::new(),
            index: MatchIndex::default(),
            crawl_delay: None,
            group: GroupChoice::NoGroup,
        }
    }

    /// Parse `body` and compile it for `agent` in one call.
    pub fn parse(body: &[u8], agent: &str) -> AgentPolicy {
        crate::RobotsTxt::parse(body).for_agent(agent)
    }

    pub(crate) fn compile(
        group: GroupChoice,
        sources: &[RuleSource<'_>],
        crawl_delay: Option<f64>,
    ) -> AgentPolicy {
        let mut arena = Vec::with_capacity(sources.iter().map(|s| s.pattern.len() + 2).sum());
        let mut rules = Vec::with_capacity(sources.len());
        for source in sources {
            let start = arena.len() as u32;
            arena.extend_from_slice(source.pattern);
            rules.push(Rule {
                kind: source.kind,
                start,
                len: source.pattern.len() as u32,
                line: source.line,
                synthesized: false,
                shape: Shape::of(source.pattern),
            });
            if source.kind == RuleKind::Allow {
                if let Some(dir) = index_page_directory(source.pattern) {
                    let start = arena.len() as u32;
                    arena.extend_from_slice(dir);
                    arena.push(b'$');
                    rules.push(Rule {
                        kind: RuleKind::Allow,
                        start,
                        len: dir.len() as u32 + 1,
                        line: source.line,
                        synthesized: true,
                        shape: Shape::of(&arena[start as usize..]),
                    });
                }
            }
        }
        // Precedence: longest pattern first, allow before disallow on equal length.
        rules.sort_by_key(|r| {
            (
                std::cmp::Reverse(r.len),
                r.kind == RuleKind::Disallow,
                r.line,
            )
        });
        let index = MatchIndex::build(&arena, &rules);
        AgentPolicy {
            arena,
            rules,
            index,
            crawl_delay,
            group,
        }
    }

    fn pattern(&self, rule: &Rule) -> &[u8] {
        &self.arena[rule.start as usize..(rule.start + rule.len) as usize]
    }

    /// The verdict for a path (path, params and query, starting with `/`), taken as given:
    /// it must already be in canonical percent-encoded form.
    pub fn check(&self, path: &str) -> Verdict {
        self.check_bytes(path.as_bytes())
    }

    /// The verdict for a full URL; only its path, params and query are used.
    pub fn check_url(&self, url: &str) -> Verdict {
        self.check(&path_params_query(url))
    }

    /// Shorthand for `check(path).allowed`.
    pub fn is_allowed(&self, path: &str) -> bool {
        self.check(path).allowed
    }

    fn check_bytes(&self, path: &[u8]) -> Verdict {
        match self.deciding_rule(path) {
            Some(id) => Verdict {
                allowed: self.rules[id as usize].kind == RuleKind::Allow,
                rule: Some(id),
            },
            None => Verdict {
                allowed: true,
                rule: None,
            },
        }
    }

    /// The first rule in precedence order that matches `path`.
    fn deciding_rule(&self, path: &[u8]) -> Option<u32> {
        let mut best = u32::MAX;
        let index = &self.index;
        // The path's bigram set, computed the first time a wildcard rule is tried.
        let mut path_bigrams: Option<u128> = None;
        let mut glob = |id: u32| {
            let needed = index.rule_bigrams[id as usize];
            let have = *path_bigrams.get_or_insert_with(|| bigram_set(path));
            have & needed == needed && glob_match(self.pattern(&self.rules[id as usize]), path)
        };

        // Candidates from the prefix index: their literal prefix starts the path, so only
        // what follows it is left to match.
        let mut entry = index.deepest_prefix_of(&self.arena, path);
        while let Some(e) = entry {
            let e = &index.prefixes[e as usize];
            for &id in &index.prefix_rule_ids[e.rules_start as usize..e.rules_end as usize] {
                if id >= best {
                    break;
                }
                let matched = match self.rules[id as usize].shape {
                    Shape::Literal => true,
                    Shape::LiteralEnd => path.len() == e.len as usize,
                    Shape::Glob => glob(id),
                };
                if matched {
                    best = id;
                    break;
                }
            }
            entry = (e.parent != NO_PARENT).then_some(e.parent);
        }
        let mut try_ids = |ids: &[u32], best: &mut u32| {
            for &id in ids {
                if id >= *best {
                    break;
                }
                if glob(id) {
                    *best = id;
                    break;
                }
            }
        };
        try_ids(&index.always, &mut best);
        if best <= index.floating_min_id {
            return (best != u32::MAX).then_some(best);
        }
        match index.automaton(&self.arena) {
            Some(automaton) => {
                for m in automaton.find_overlapping_iter(path) {
                    let (from, to) = index.floating_ranges[m.pattern().as_usize()];
                    try_ids(
                        &index.floating_rule_ids[from as usize..to as usize],
                        &mut best,
                    );
                }
            }
            None => {
                // No automaton (it could not be built): try every floating rule.
                for &(from, to) in &index.floating_ranges {
                    try_ids(
                        &index.floating_rule_ids[from as usize..to as usize],
                        &mut best,
                    );
                }
            }
        }
        (best != u32::MAX).then_some(best)
    }

    /// The rule with index `id`, as returned in a [`Verdict`].
    pub fn rule(&self, id: u32) -> Option<RuleView<'_>> {
        let rule = self.rules.get(id as usize)?;
        Some(RuleView {
            kind: rule.kind,
            // Patterns are ASCII: bytes >= 0x80 were percent-encoded and NUL ends a line.
            pattern: std::str::from_utf8(self.pattern(rule)).unwrap_or(""),
            line: rule.line,
            synthesized: rule.synthesized,
        })
    }

    /// All rules in precedence order (the first that matches a URL decides it).
    pub fn rules(&self) -> impl Iterator<Item = RuleView<'_>> + '_ {
        (0..self.rules.len() as u32).filter_map(|id| self.rule(id))
    }

    /// The crawl-delay of the chosen group, if it has a valid one (the largest, if several).
    pub fn crawl_delay(&self) -> Option<Duration> {
        self.crawl_delay
            .map(|s| Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX))
    }

    /// Which group was chosen.
    pub fn group(&self) -> &GroupChoice {
        &self.group
    }
}

/// For `allow: <dir>/index.htm...`, Google also allows `<dir>/` exactly.
fn index_page_directory(pattern: &[u8]) -> Option<&[u8]> {
    let slash = pattern.iter().rposition(|&b| b == b'/')?;
    pattern[slash..]
        .starts_with(b"/index.htm")
        .then(|| &pattern[..=slash])
}

/// Length of the literal text before the first `*` (or before a final `$`).
fn literal_prefix_len(pattern: &[u8]) -> usize {
    let body = pattern.strip_suffix(b"$").unwrap_or(pattern);
    memchr::memchr(b'*', body).unwrap_or(body.len())
}

/// Google's robots.txt pattern match: anchored at the start of `path`, `*` matches any run
/// of bytes, a final `$` anchors the end, and any other `$` is literal.
///
/// Greedy over the `*`-separated pieces: each middle piece is taken at its leftmost
/// occurrence, which is optimal when `*` is the only wildcard. Linear in pattern x path.
pub fn glob_match(pattern: &[u8], path: &[u8]) -> bool {
    let (body, anchored) = match pattern.strip_suffix(b"$") {
        Some(body) => (body, true),
        None => (pattern, false),
    };
    let mut pieces = body.split(|&b| b == b'*');
    let first = pieces.next().unwrap_or(&[]);
    if !path
        .get(..first.len())
        .is_some_and(|head| same_bytes(head, first))
    {
        return false;
    }
    let Some(last_star) = memchr::memrchr(b'*', body) else {
        return !anchored || path.len() == first.len();
    };
    let mut pos = first.len();
    if anchored {
        let last = &body[last_star + 1..];
        // Necessary for the final test below, and cheaper than finding the middle pieces.
        if !ends_with(path, last) {
            return false;
        }
        let middle = &body[first.len() + 1..last_star.max(first.len() + 1)];
        if last_star > first.len() {
            for piece in middle.split(|&b| b == b'*') {
                match find(&path[pos..], piece) {
                    Some(i) => pos += i + piece.len(),
                    None => return false,
                }
            }
        }
        path.len() - pos >= last.len()
    } else {
        for piece in pieces {
            match find(&path[pos..], piece) {
                Some(i) => pos += i + piece.len(),
                None => return false,
            }
        }
        true
    }
}

fn ends_with(text: &[u8], tail: &[u8]) -> bool {
    text.len() >= tail.len() && same_bytes(&text[text.len() - tail.len()..], tail)
}

/// `a == b` for slices of equal length. Pieces and paths are short: comparing 8 bytes at
/// a time inline beats a call to `memcmp`, which `==` on slices compiles to.
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    debug_assert_eq!(a.len(), b.len());
    let word = |s: &[u8], at: usize| s[at..].first_chunk::<8>().map(|w| u64::from_ne_bytes(*w));
    let mut at = 0;
    while at + 8 <= a.len() {
        if word(a, at) != word(b, at) {
            return false;
        }
        at += 8;
    }
    a[at..].iter().zip(&b[at..]).all(|(x, y)| x == y)
}

/// Leftmost occurrence of `needle`. Paths and pieces are short, so a `memchr` for the
/// first byte plus a compare beats setting up a substring searcher on every call; the
/// worst case stays within pattern x path.
#[inline]
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, rest) = match needle.split_first() {
        Some(split) => split,
        None => return Some(0),
    };
    let mut from = 0;
    while let Some(i) = memchr::memchr(first, haystack.get(from..)?) {
        let at = from + i;
        if haystack
            .get(at + 1..at + 1 + rest.len())
            .is_some_and(|candidate| same_bytes(candidate, rest))
        {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// Google's `GetPathParamsQuery`: the path, params and query of a URL, without scheme,
/// authority and fragment, always starting with `/`.
pub fn path_params_query(url: &str) -> Cow<'_, str> {
    let bytes = url.as_bytes();
    let search_start = if bytes.starts_with(b"//") { 2 } else { 0 };
    let first_delimiter =
        |from: usize| memchr::memchr3(b'/', b'?', b';', bytes.get(from..)?).map(|i| i + from);
    // Google looks for "://" and ignores it when a '/', '?' or ';' comes first. Since
    // "://" itself holds a '/', it counts exactly when the first delimiter is its '/'.
    let authority_start = match first_delimiter(search_start) {
        Some(p)
            if bytes[p] == b'/'
                && p > search_start
                && bytes[p - 1] == b':'
                && bytes.get(p + 1) == Some(&b'/') =>
        {
            p + 2
        }
        _ => search_start,
    };
    let Some(path_start) = first_delimiter(authority_start) else {
        return Cow::Borrowed("/");
    };
    let hash = memchr::memchr(b'#', &bytes[search_start..]).map(|i| i + search_start);
    if let Some(hash) = hash {
        if hash < path_start {
            return Cow::Borrowed("/");
        }
    }
    let path_end = hash.unwrap_or(bytes.len());
    let path = &url[path_start..path_end];
    if bytes[path_start] == b'/' {
        Cow::Borrowed(path)
    } else {
        Cow::Owned(format!("/{path}"))
    }
}

#[cfg(test)]
mod tests {
    use super::index::key8;
    use super::*;
    use proptest::prelude::*;

    proptest! {
        // The prefix search relies on this: differing keys order like the texts.
        #[test]
        fn keys_order_like_texts(a in proptest::collection::vec(0u8..4, 0..12),
                                 b in proptest::collection::vec(0u8..4, 0..12)) {
            if key8(&a) != key8(&b) {
                prop_assert_eq!(key8(&a) < key8(&b), a < b, "{:?} {:?}", a, b);
            }
        }

        // The bigram filter must never reject a text that contains the piece.
        #[test]
        fn bigram_set_of_a_substring_is_contained(text in "[a-f/?=.%*$]{0,40}",
                                                  from in 0usize..40, len in 0usize..20) {
            let text = text.as_bytes();
            let from = from.min(text.len());
            let piece = &text[from..(from + len).min(text.len())];
            prop_assert_eq!(bigram_set(text) & bigram_set(piece), bigram_set(piece));
            prop_assert!(same_bytes(piece, &text[from..from + piece.len()]));
        }
    }

    #[test]
    fn path_extraction_like_google() {
        let cases = [
            ("", "/"),
            ("http://www.example.com", "/"),
            ("http://www.example.com/", "/"),
            ("http://www.example.com/a", "/a"),
            ("http://www.example.com/a/", "/a/"),
            (
                "http://www.example.com/a/b?c=http://d.e/",
                "/a/b?c=http://d.e/",
            ),
            (
                "http://www.example.com/a/b?c=d&e=f#fragment",
                "/a/b?c=d&e=f",
            ),
            ("example.com", "/"),
            ("example.com/", "/"),
            ("example.com/a", "/a"),
            ("example.com/a/", "/a/"),
            ("example.com/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"),
            ("a", "/"),
            ("a/", "/"),
            ("/a", "/a"),
            ("a/b", "/b"),
            ("example.com?a", "/?a"),
            ("example.com/a;b#c", "/a;b"),
            ("//a/b/c", "/b/c"),
            ("http://example.com#frag/x", "/"),
            // No "://" here: the ':' and '/' around the '?' are not one.
            (":?/", "/?/"),
            ("a:;/b", "/;/b"),
        ];
        for (url, want) in cases {
            assert_eq!(path_params_query(url), want, "{url}");
        }
    }

    #[test]
    fn shapes_that_need_no_glob_match_like_glob() {
        let cases = [
            ("/a", Shape::Literal),
            ("/a*", Shape::Literal),
            ("/a**", Shape::Literal),
            ("/a*$", Shape::Literal),
            ("/a$", Shape::LiteralEnd),
            ("/a$$", Shape::LiteralEnd),
            ("/a*b", Shape::Glob),
            ("/a*$b", Shape::Glob),
            ("/a*b$", Shape::Glob),
        ];
        for (pattern, shape) in cases {
            assert_eq!(Shape::of(pattern.as_bytes()), shape, "{pattern}");
            let literal = &pattern.as_bytes()[..literal_prefix_len(pattern.as_bytes())];
            for path in ["/a", "/ab", "/a$", "/b", "/a/b$"] {
                let by_shape = match shape {
                    Shape::Literal => path.as_bytes().starts_with(literal),
                    Shape::LiteralEnd => path.as_bytes() == literal,
                    Shape::Glob => continue,
                };
                assert_eq!(
                    by_shape,
                    glob_match(pattern.as_bytes(), path.as_bytes()),
                    "{pattern} {path}"
                );
            }
        }
    }

    #[test]
    fn glob_examples() {
        assert!(glob_match(b"/fish", b"/fish.html"));
        assert!(!glob_match(b"/fish", b"/Fish.asp"));
        assert!(glob_match(b"/*.php$", b"/folder/filename.php"));
        assert!(!glob_match(b"/*.php$", b"/filename.php?parameters"));
        assert!(glob_match(b"/a$b", b"/a$bc"));
        assert!(glob_match(b"/a*$", b"/a"));
        assert!(!glob_match(b"$", b"/"));
        assert!(glob_match(b"*", b"/"));
        assert!(glob_match(b"/*a*a*b$", b"/xaab"));
        assert!(!glob_match(b"/*ab*ba$", b"/aba"));
        assert!(glob_match(b"/*ab*ba$", b"/abba"));
    }
}
