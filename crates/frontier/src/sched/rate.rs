//! The global request quota (`politeness.global_rate_per_sec`): a token bucket driven by the
//! caller's `now_ms`, so it needs no clock of its own and a test can step time exactly.

/// Up to `burst` requests at once, refilled at `per_sec` a second.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    per_sec: u64,
    burst: u64,
    /// Tokens in thousandths, so a refill of less than one whole token per millisecond
    /// is not lost to rounding.
    milli_tokens: u64,
    last_ms: Option<u64>,
}

impl TokenBucket {
    /// A full bucket. `per_sec` and `burst` are at least 1.
    pub fn new(per_sec: u32, burst: u32) -> TokenBucket {
        let burst = u64::from(burst.max(1));
        TokenBucket {
            per_sec: u64::from(per_sec.max(1)),
            burst,
            milli_tokens: burst * 1000,
            last_ms: None,
        }
    }

    /// Take one token at `now_ms` if there is one. Time going backwards refills nothing.
    pub fn try_take(&mut self, now_ms: u64) -> bool {
        let last = self.last_ms.unwrap_or(now_ms);
        if now_ms > last {
            // per_sec tokens per 1000 ms = per_sec milli-tokens per ms
            let refill = (now_ms - last).saturating_mul(self.per_sec);
            self.milli_tokens = self
                .milli_tokens
                .saturating_add(refill)
                .min(self.burst * 1000);
        }
        self.last_ms = Some(last.max(now_ms));
        if self.milli_tokens >= 1000 {
            self.milli_tokens -= 1000;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate() {
        let mut b = TokenBucket::new(10, 3);
        let t = 1_000_000;
        assert!(
            (0..3).all(|_| b.try_take(t)),
            "the burst is available at once"
        );
        assert!(!b.try_take(t), "then the bucket is empty");
        assert!(!b.try_take(t + 99), "10/s: not before 100 ms");
        assert!(b.try_take(t + 100));
        assert!(!b.try_take(t + 100));
    }

    #[test]
    fn over_a_second_at_most_burst_plus_rate() {
        let mut b = TokenBucket::new(50, 5);
        let taken = (0..=1000u64).filter(|ms| b.try_take(2_000 + ms)).count();
        assert_eq!(taken, 5 + 50);
    }

    #[test]
    fn refill_never_exceeds_the_burst_and_time_going_back_is_ignored() {
        let mut b = TokenBucket::new(1000, 2);
        assert!(b.try_take(10_000));
        assert!(b.try_take(10_000));
        // an hour idle refills to the burst only
        assert!(b.try_take(3_610_000) && b.try_take(3_610_000));
        assert!(!b.try_take(3_610_000));
        assert!(!b.try_take(5_000), "an earlier now refills nothing");
    }
}
