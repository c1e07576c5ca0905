//! IP groups: hosts whose address is the same share one politeness budget, on top of
//! their own (`max_in_flight_per_ip` requests at once, and `ip_delay` between two request
//! starts at the address: BUbiNG's `ipDelay`). A host whose address is not known yet is a
//! group of its own; with `FrontierConfig::resolve_before_robots` a new host's address is
//! asked for before its first robots.txt (`resolve.rs`), so even that request waits here.
//!
//! Cost per decision does not grow with the hosts of a group: a host that finds its group
//! busy waits in the group's line (no heap entry), and the group lets one waiter back into
//! the ready heap when it may go again (one wake-up entry per group at most). Pure: every
//! method takes `now_ms`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::net::IpAddr;

/// A host's address before its first robots.txt fetch
/// (`FrontierConfig::resolve_before_robots`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Resolve {
    /// Not asked (or answered: the host has its address).
    #[default]
    NotAsked,
    /// Asked of the caller ([`crate::Frontier::take_resolves`]); the host waits for the
    /// answer out of the ready heap.
    Asked,
    /// The name did not resolve: its robots.txt fetch goes, and fails as a fetch (the
    /// DNS failure outcome and its back-off).
    Failed,
}

/// The shared budget of one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpLimits {
    /// Requests in flight to one address at most (robots.txt included); at least 1.
    pub max_in_flight: u64,
    /// Smallest gap between two request starts at one address (ms).
    pub delay_ms: u64,
}

/// One address and the hosts in memory that resolve to it.
#[derive(Debug, Default)]
pub(crate) struct IpGroup {
    /// Host ids whose address this is.
    pub(crate) members: HashSet<u64>,
    /// Requests in flight to the address: the sum of its members' in-flight counts.
    pub(crate) in_flight: u64,
    /// No request to the address starts before this instant (unix ms).
    pub(crate) next_allowed_ms: u64,
    /// Hosts that were ready while the group was busy: (their ready time, host id), in
    /// the order they came. An entry is stale once its host was scheduled again (the
    /// caller checks, as for heap entries).
    waiting: VecDeque<(u64, u64)>,
    /// The instant one waiter goes back to the ready heap, if a wake-up is set.
    armed: Option<u64>,
}

/// What a group says to a host that may go by its own rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpGate {
    /// The address has a free slot and its gap is over.
    Go,
    /// The address is busy: every slot taken, or its gap not over until `until_ms`.
    Wait {
        /// When the gap is over (the slots may free later).
        until_ms: u64,
        /// Every slot is taken.
        full: bool,
    },
}

/// A group as the operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpGroupView {
    pub ip: IpAddr,
    /// Politeness keys in memory that resolve to the address, sorted.
    pub hosts: Vec<String>,
    pub in_flight: u64,
    /// No request to the address before this instant (unix ms).
    pub next_allowed_ms: u64,
    /// Hosts ready by their own rules and waiting for the address.
    pub waiting: u64,
}

/// Every group with members in memory, and the wake-ups of the busy ones.
#[derive(Debug)]
pub(crate) struct IpGroups {
    pub(crate) limits: IpLimits,
    pub(crate) groups: HashMap<IpAddr, IpGroup>,
    /// (instant, address): when a busy group lets its next waiter go. An entry whose
    /// group's `armed` differs is stale.
    wake: BinaryHeap<Reverse<(u64, IpAddr)>>,
    /// Times a ready host had to wait for its address (since open).
    pub(crate) waits: u64,
}

impl IpGroups {
    pub(crate) fn new(limits: IpLimits) -> IpGroups {
        IpGroups {
            limits: IpLimits {
                max_in_flight: limits.max_in_flight.max(1),
                delay_ms: limits.delay_ms,
            },
            groups: HashMap::new(),
            wake: BinaryHeap::new(),
            waits: 0,
        }
    }

    /// Whether a host of `ip` may send a request at `now_ms`.
    pub(crate) fn gate(&self, ip: IpAddr, now_ms: u64) -> IpGate {
        let Some(g) = self.groups.get(&ip) else {
            return IpGate::Go;
        };
        let full = g.in_flight >= self.limits.max_in_flight;
        // With no gap, `next_allowed_ms` is only when the last request started. Callers read
        // the clock on their own threads before they take the lock, so one may come with an
        // instant a few ms before a start another recorded; it parked every ready host of
        // the address in its line, and the line gave back one a call (10M URLs over 1M
        // hosts on one address: 587 545 waiting, 83 hosts never asked for robots.txt).
        let gap_over = self.limits.delay_ms == 0 || g.next_allowed_ms <= now_ms;
        if !full && gap_over {
            IpGate::Go
        } else {
            IpGate::Wait {
                until_ms: g.next_allowed_ms,
                full,
            }
        }
    }

    /// A request to `ip` starts at `now_ms`: it takes a slot and starts the gap (the next
    /// waiter, if any, is woken when the gap is over).
    pub(crate) fn charge(&mut self, ip: IpAddr, now_ms: u64) {
        let delay = self.limits.delay_ms;
        let g = self.groups.entry(ip).or_default();
        g.in_flight += 1;
        g.next_allowed_ms = g.next_allowed_ms.max(now_ms + delay);
        self.arm(ip);
    }

    /// After a restart: every address waits its gap from `from_ms`, as if a request to it
    /// had just begun (a crash lost the starts of requests that may have been in flight).
    pub(crate) fn hold_all(&mut self, from_ms: u64) {
        let until = from_ms.saturating_add(self.limits.delay_ms);
        let ips: Vec<IpAddr> = self.groups.keys().copied().collect();
        for ip in ips {
            if let Some(g) = self.groups.get_mut(&ip) {
                g.next_allowed_ms = g.next_allowed_ms.max(until);
            }
            self.arm(ip);
        }
    }

    /// A request to `ip` ended: its slot is free (the gap stays as it was).
    pub(crate) fn release(&mut self, ip: IpAddr) {
        if let Some(g) = self.groups.get_mut(&ip) {
            g.in_flight = g.in_flight.saturating_sub(1);
        }
        self.arm(ip);
    }

    /// Host `id`, with `in_flight` requests going, now resolves to `ip`. Those requests
    /// count against the address from now on; `started_ms` is when the request that
    /// reported the address began (the address's gap runs from it).
    pub(crate) fn join(&mut self, ip: IpAddr, id: u64, in_flight: u64, started_ms: u64) {
        let delay = self.limits.delay_ms;
        let g = self.groups.entry(ip).or_default();
        if g.members.insert(id) {
            g.in_flight += in_flight;
        }
        g.next_allowed_ms = g.next_allowed_ms.max(started_ms + delay);
    }

    /// Host `id`, with `in_flight` requests going, no longer resolves to `ip` (it moved, or
    /// left memory). A group with no member and nothing in flight is forgotten.
    pub(crate) fn leave(&mut self, ip: IpAddr, id: u64, in_flight: u64) {
        let Some(g) = self.groups.get_mut(&ip) else {
            return;
        };
        if g.members.remove(&id) {
            g.in_flight = g.in_flight.saturating_sub(in_flight);
        }
        if g.members.is_empty() && g.in_flight == 0 {
            self.groups.remove(&ip);
        } else {
            self.arm(ip);
        }
    }

    /// Host `id`, ready at `ready`, waits for its busy address; a wake-up is set if the
    /// group has a free slot (else the next release sets it).
    pub(crate) fn wait(&mut self, ip: IpAddr, ready: u64, id: u64) {
        self.waits += 1;
        if let Some(g) = self.groups.get_mut(&ip) {
            g.waiting.push_back((ready, id));
        }
        self.arm(ip);
    }

    /// Set the group's wake-up for when its next waiter may go, if it has waiters, a free
    /// slot and no wake-up yet.
    pub(crate) fn arm(&mut self, ip: IpAddr) {
        let max = self.limits.max_in_flight;
        let Some(g) = self.groups.get_mut(&ip) else {
            return;
        };
        if g.armed.is_none() && !g.waiting.is_empty() && g.in_flight < max {
            g.armed = Some(g.next_allowed_ms);
            self.wake.push(Reverse((g.next_allowed_ms, ip)));
        }
    }

    /// The waiters whose group's wake-up is due at `now_ms`, one per group (with no gap
    /// between requests, as many as the group has free slots): (ready time,
    /// host id) to put back in the ready heap. `live` says whether an entry still stands
    /// (stale ones are skipped). Each group's wake-up is spent: the caller re-arms the
    /// groups of the hosts it served (see [`IpGroups::arm`]).
    pub(crate) fn due(&mut self, now_ms: u64, live: impl Fn(u64, u64) -> bool) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        while let Some(&Reverse((t, ip))) = self.wake.peek() {
            if t > now_ms {
                break;
            }
            self.wake.pop();
            let Some(g) = self.groups.get_mut(&ip) else {
                continue;
            };
            if g.armed != Some(t) {
                continue;
            }
            g.armed = None;
            // one a gap; with no gap, as many as there are free slots
            let mut free = match self.limits.delay_ms {
                0 => self.limits.max_in_flight.saturating_sub(g.in_flight).max(1),
                _ => 1,
            };
            while free > 0 {
                let Some((ready, id)) = g.waiting.pop_front() else {
                    break;
                };
                if live(ready, id) {
                    out.push((ready, id));
                    free -= 1;
                }
            }
        }
        out
    }

    /// The earliest wake-up set (may be a stale one: asking early costs one empty look).
    pub(crate) fn next_wake(&self) -> Option<u64> {
        self.wake.peek().map(|Reverse((t, _))| *t)
    }

    /// Groups with more than one member, or any in flight or waiting, sorted by address.
    pub(crate) fn views(&self, name_of: impl Fn(u64) -> Option<String>) -> Vec<IpGroupView> {
        let mut out: Vec<IpGroupView> = self
            .groups
            .iter()
            .map(|(ip, g)| {
                let mut hosts: Vec<String> =
                    g.members.iter().filter_map(|&id| name_of(id)).collect();
                hosts.sort();
                IpGroupView {
                    ip: *ip,
                    hosts,
                    in_flight: g.in_flight,
                    next_allowed_ms: g.next_allowed_ms,
                    waiting: g.waiting.len() as u64,
                }
            })
            .collect();
        out.sort_by_key(|g| g.ip);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ip(n: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
    }

    fn groups(max: u64, delay_ms: u64) -> IpGroups {
        IpGroups::new(IpLimits {
            max_in_flight: max,
            delay_ms,
        })
    }

    #[test]
    fn after_a_restart_every_address_waits_its_gap() {
        let mut g = groups(10, 500);
        g.join(ip(1), 1, 0, 0);
        g.join(ip(2), 2, 0, 0);
        g.hold_all(10_000);
        for a in [ip(1), ip(2)] {
            assert!(matches!(
                g.gate(a, 10_499),
                IpGate::Wait {
                    until_ms: 10_500,
                    ..
                }
            ));
            assert_eq!(g.gate(a, 10_500), IpGate::Go);
        }
    }

    /// With no gap between requests, only the slots hold an address: a caller whose clock
    /// reads a little before the last start (read on another thread) is not held.
    #[test]
    fn with_no_gap_an_earlier_clock_does_not_hold_the_address() {
        let mut g = groups(10, 0);
        g.join(ip(1), 1, 0, 0);
        g.charge(ip(1), 1_000);
        assert_eq!(g.gate(ip(1), 990), IpGate::Go);
        let mut gapped = groups(10, 500);
        gapped.join(ip(1), 1, 0, 0);
        gapped.charge(ip(1), 1_000);
        assert!(matches!(gapped.gate(ip(1), 1_400), IpGate::Wait { .. }));
    }

    /// With no gap, hosts waiting for a full address go back as many as it has free slots
    /// at each wake-up, not one.
    #[test]
    fn with_no_gap_waiters_go_back_as_many_as_there_are_free_slots() {
        let mut g = groups(3, 0);
        for id in 1..=6 {
            g.join(ip(1), id, 0, 0);
        }
        for _ in 0..3 {
            g.charge(ip(1), 0);
        }
        for id in 1..=6 {
            g.wait(ip(1), 0, id);
        }
        assert!(g.due(10, |_, _| true).is_empty(), "full: nobody goes");
        g.release(ip(1));
        g.release(ip(1));
        assert_eq!(g.due(10, |_, _| true), vec![(0, 1), (0, 2)]);
        let mut gapped = groups(3, 100);
        for id in 1..=6 {
            gapped.join(ip(1), id, 0, 0);
            gapped.wait(ip(1), 0, id);
        }
        assert_eq!(gapped.due(1_000, |_, _| true).len(), 1, "one a gap");
    }

    #[test]
    fn an_unknown_address_never_holds_a_host() {
        let g = groups(1, 1000);
        assert_eq!(g.gate(ip(1), 0), IpGate::Go);
    }

    #[test]
    fn the_gap_runs_from_each_request_start_across_hosts() {
        let mut g = groups(10, 500);
        g.join(ip(1), 1, 0, 0);
        g.join(ip(1), 2, 0, 0);
        // join with a request that started at 1000: the gap runs from it
        g.join(ip(1), 3, 0, 1_000);
        assert_eq!(
            g.gate(ip(1), 1_200),
            IpGate::Wait {
                until_ms: 1_500,
                full: false
            }
        );
        assert_eq!(g.gate(ip(1), 1_500), IpGate::Go);
        g.charge(ip(1), 1_500);
        assert_eq!(
            g.gate(ip(1), 1_999),
            IpGate::Wait {
                until_ms: 2_000,
                full: false
            }
        );
        // another address is not slowed by it
        assert_eq!(g.gate(ip(2), 1_600), IpGate::Go);
    }

    #[test]
    fn in_flight_is_capped_per_address() {
        let mut g = groups(2, 0);
        g.join(ip(1), 1, 0, 0);
        g.join(ip(1), 2, 0, 0);
        g.charge(ip(1), 10);
        g.charge(ip(1), 10);
        assert_eq!(
            g.gate(ip(1), 10),
            IpGate::Wait {
                until_ms: 10,
                full: true
            }
        );
        g.release(ip(1));
        assert_eq!(g.gate(ip(1), 10), IpGate::Go);
    }

    #[test]
    fn a_joining_host_brings_its_requests_in_flight_and_a_leaving_one_takes_them() {
        let mut g = groups(2, 0);
        g.join(ip(1), 1, 1, 0);
        g.join(ip(1), 2, 1, 0);
        assert_eq!(g.groups[&ip(1)].in_flight, 2);
        assert!(matches!(g.gate(ip(1), 5), IpGate::Wait { full: true, .. }));
        g.leave(ip(1), 2, 1);
        assert_eq!(g.gate(ip(1), 5), IpGate::Go);
        g.leave(ip(1), 1, 1);
        assert!(g.groups.is_empty(), "an empty idle group is forgotten");
    }

    #[test]
    fn waiters_go_back_one_per_wake_up_in_arrival_order() {
        let mut g = groups(1, 100);
        for id in 1..=3 {
            g.join(ip(1), id, 0, 0);
        }
        g.charge(ip(1), 1_000); // host 1 went at 1000
        g.release(ip(1)); // and was answered
        g.wait(ip(1), 1_000, 2);
        g.wait(ip(1), 1_001, 3);
        assert_eq!(g.waits, 2);
        assert_eq!(g.next_wake(), Some(1_100));
        assert!(g.due(1_099, |_, _| true).is_empty(), "not before the gap");
        assert_eq!(g.due(1_100, |_, _| true), vec![(1_000, 2)]);
        assert!(g.due(1_100, |_, _| true).is_empty(), "one per wake-up");
        // host 2 goes; the caller re-arms: host 3 is next after the gap
        g.charge(ip(1), 1_100);
        g.release(ip(1));
        assert_eq!(g.next_wake(), Some(1_200));
        assert_eq!(g.due(1_200, |_, _| true), vec![(1_001, 3)]);
    }

    #[test]
    fn a_full_group_wakes_no_one_until_a_slot_frees() {
        let mut g = groups(1, 0);
        g.join(ip(1), 1, 0, 0);
        g.join(ip(1), 2, 0, 0);
        g.charge(ip(1), 0);
        g.wait(ip(1), 0, 2);
        assert_eq!(g.next_wake(), None, "no wake-up while every slot is taken");
        g.release(ip(1));
        assert_eq!(g.due(0, |_, _| true), vec![(0, 2)]);
    }

    #[test]
    fn stale_waiters_are_skipped() {
        let mut g = groups(1, 0);
        g.join(ip(1), 1, 0, 0);
        g.join(ip(1), 2, 0, 0);
        g.charge(ip(1), 0);
        g.wait(ip(1), 0, 1);
        g.wait(ip(1), 0, 2);
        g.release(ip(1));
        assert_eq!(g.due(0, |_, id| id != 1), vec![(0, 2)]);
    }

    #[test]
    fn waking_costs_nothing_per_member() {
        // 100 000 hosts on one address: each wake-up hands out one waiter, whatever the
        // line's length (the scheduler's cost per decision stays flat)
        let mut g = groups(1, 10);
        for id in 0..100_000u64 {
            g.join(ip(1), id, 0, 0);
            g.wait(ip(1), 0, id);
        }
        assert_eq!(g.wake.len(), 1, "one wake-up entry for the whole line");
        // (joining counts as a request at 0: the first may go after the gap)
        let mut t = 10;
        for expected in 0..1_000u64 {
            let out = g.due(t, |_, _| true);
            assert_eq!(out, vec![(0, expected)], "at {t}");
            g.charge(ip(1), t);
            g.release(ip(1));
            t += 10;
        }
    }

    #[test]
    fn views_list_the_hosts_sharing_an_address() {
        let mut g = groups(4, 250);
        g.join(ip(2), 7, 0, 0);
        g.join(ip(1), 5, 0, 0);
        g.join(ip(1), 6, 1, 100);
        let v = g.views(|id| Some(format!("h{id}.test")));
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].ip, ip(1));
        assert_eq!(
            v[0].hosts,
            vec!["h5.test".to_string(), "h6.test".to_string()]
        );
        assert_eq!(v[0].in_flight, 1);
        assert_eq!(v[0].next_allowed_ms, 350);
        assert_eq!(v[1].hosts, vec!["h7.test".to_string()]);
    }
}
