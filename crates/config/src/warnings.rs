//! Checks of a configuration that are about safety and etiquette rather than syntax: who
//! can reach the admin API, and whether site owners can reach the operator. The listener
//! rule itself is exposure.rs's, which config.rs applies as an error.

use crate::exposure::is_loopback;
use crate::Settings;

/// The contact part of the default user agent: a placeholder nobody can be reached at.
const PLACEHOLDER_CONTACTS: [&str; 3] = ["example.org", "example.com", "example.net"];

impl Settings {
    /// What is allowed but probably not meant: logged as WARN at start and printed by
    /// `frontierd config check` (which still exits 0).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let ua = &self.raw.fetch.user_agent;
        let contact = ua
            .split(|c: char| c.is_whitespace() || "()+;".contains(c))
            .find(|w| w.contains("://") || w.contains('@'))
            .unwrap_or("");
        let contact_host = contact
            .split("://")
            .last()
            .unwrap_or("")
            .split(['/', ':', '?'])
            .next()
            .unwrap_or("")
            .rsplit('@')
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        if PLACEHOLDER_CONTACTS
            .iter()
            .any(|p| contact_host == *p || contact_host.ends_with(&format!(".{p}")))
        {
            out.push(format!(
                "fetch.user_agent = {ua:?}: the contact {contact} is a placeholder; site \
                 owners cannot reach you. Set your own contact URL or e-mail"
            ));
        }
        if self.raw.admin.allow_unauthenticated
            && self.token_file.is_none()
            && !is_loopback(self.admin_listen)
        {
            out.push(format!(
                "admin.listen = \"{}\" without a token (admin.allow_unauthenticated = true): \
                 anyone who can connect can add URLs and pause hosts",
                self.admin_listen
            ));
        }
        out.extend(crate::robots_timing_warnings(&self.raw));
        out.extend(self.raw.sitemaps.warnings());
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::Config;

    fn err(text: &str) -> String {
        match Config::parse(text, "t.toml").and_then(|c| c.check(None)) {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn open_admin_listener_needs_a_token_or_explicit_consent() {
        let e = err("[admin]\nlisten = \"0.0.0.0:8470\"\n");
        assert!(
            e.contains("admin.listen = \"0.0.0.0:8470\"")
                && e.contains("admin.token_file")
                && e.contains("admin.allow_unauthenticated = true"),
            "{e}"
        );
        let ok = |t: &str| Config::parse(t, "t.toml").unwrap().check(None).unwrap();
        let s = ok("[admin]\nlisten = \"0.0.0.0:8470\"\ntoken_file = \"/etc/t\"\n");
        assert!(s.warnings().iter().all(|w| !w.contains("admin")));
        let s = ok("[admin]\nlisten = \"0.0.0.0:8470\"\nallow_unauthenticated = true\n");
        assert!(s.warnings().iter().any(|w| w.contains("without a token")));
        let s = ok("[admin]\nlisten = \"127.0.0.1:8470\"\nallow_unauthenticated = true\n");
        assert!(s.warnings().iter().all(|w| !w.contains("admin")));
    }

    #[test]
    fn placeholder_contact_is_warned_about() {
        let warned = |ua: &str| {
            let t = format!("[fetch]\nuser_agent = {ua:?}\n");
            let s = Config::parse(&t, "t.toml").unwrap().check(None).unwrap();
            s.warnings().iter().any(|w| w.contains("placeholder"))
        };
        assert!(Config::default().check(None).unwrap().warnings()[0].contains("example.org"));
        assert!(warned("frontierd/0.1 (+https://example.org/bot)"));
        assert!(warned("mybot/1.0 (+http://www.EXAMPLE.com/about)"));
        assert!(warned("mybot/1.0 (crawler@example.net)"));
        assert!(!warned("mybot/1.0 (+https://crawl.archive.test/bot)"));
        assert!(!warned("mybot/1.0 (ops@archive.test)"));
        assert!(!warned("mybot/1.0 (+https://myexample.org/bot)"));
    }
}
