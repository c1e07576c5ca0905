//! When "crawl drained" is announced: once each time the crawl runs out of work, again only
//! after new work arrived and drained too (the daemon looks, this decides).

/// `observe` says yes on the first drained observation after work arrived (the count of URLs
/// that ever entered the queues moved).
#[derive(Debug, Default)]
pub struct DrainAnnouncer {
    /// `arrived` at the last announcement, while still drained.
    announced: Option<u64>,
}

impl DrainAnnouncer {
    /// Whether to announce now: `drained` is nothing queued and nothing in flight, `arrived`
    /// the count of URLs that ever entered the queues.
    pub fn observe(&mut self, drained: bool, arrived: u64) -> bool {
        if !drained {
            self.announced = None;
            return false;
        }
        if self.announced == Some(arrived) {
            return false;
        }
        self.announced = Some(arrived);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announced_once_per_drain() {
        let mut a = DrainAnnouncer::default();
        assert!(a.observe(true, 0), "drained at start");
        assert!(!a.observe(true, 0));
        assert!(!a.observe(false, 3), "work arrived");
        assert!(!a.observe(false, 3));
        assert!(a.observe(true, 3), "drained again");
        assert!(!a.observe(true, 3));
        // work that arrived and drained between two looks still counts
        assert!(a.observe(true, 5));
        assert!(!a.observe(true, 5));
    }
}
