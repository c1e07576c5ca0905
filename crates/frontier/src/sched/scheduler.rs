//! The scheduler's state, owned in one place: the hosts in memory, the ready heap, the IP
//! groups, the line of hosts waiting for a robots.txt slot, the global quota, clients'
//! delays and blocks, paused keys and the lease clock. Sans-I/O, like quinn-proto's
//! `Connection`: `now_ms` comes in, decisions come out (`poll_*`), what happened is told to
//! it (`handle_*`); no store, no lock, no logging. The frontier (`dispatch.rs`,
//! `complete.rs`, `intake.rs`) reads the entries from the store and persists the records.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::Rng;

use crate::config::FrontierConfig;
use crate::sched::gate::DispatchGate;
use crate::sched::host_table::HostTable;
use crate::sched::hosts::{self, DueAt, HostMem, ReadyHeap};
use crate::sched::ipgroup::{IpGate, IpGroupView, IpGroups, IpLimits, Resolve};
use crate::sched::lease::LeaseClock;
use crate::sched::politeness;
use crate::sched::rate::TokenBucket;
use crate::sched::records::QueueControl;
use crate::work::LeaseId;

/// The scheduler of one frontier.
pub(crate) struct Scheduler {
    /// Hosts with work, boxed: a table of 1M inline records (~500 bytes each) doubled
    /// its 0.5-1 GB on every resize; boxed, the table moves 8-byte entries.
    hosts: HostTable,
    heap: ReadyHeap,
    next_host_id: u64,
    /// `global_rate_per_sec` as a token bucket on the callers' `now_ms`.
    quota: Option<TokenBucket>,
    rng: StdRng,
    /// Politeness keys paused by the operator.
    paused: HashSet<Arc<str>>,
    /// Clients' delays and blocks per politeness key ("" = the default delay).
    controls: HashMap<Arc<str>, QueueControl>,
    /// robots.txt leases handed out and not yet completed.
    robots_in_flight: u64,
    /// Hosts whose address was asked for before their first robots.txt and not answered
    /// yet: each holds a robots.txt slot ([`Scheduler::robots_slots_taken`]).
    resolves_in_flight: u64,
    /// Hosts (ready time, id) that need robots.txt while `max_robots_in_flight` is reached,
    /// oldest first. Each keeps `scheduled == Some(ready)`: this entry is its place (a
    /// later `schedule` makes it stale, as for heap entries).
    robots_waiting: VecDeque<(u64, u64)>,
    /// Deadlines of the page leases handed out with one (external fetchers).
    lease_clock: LeaseClock,
    /// Hosts sharing an IP address share its politeness budget.
    ip_groups: IpGroups,
    /// Set by [`Scheduler::hold_after_restart`]: hosts that come into memory later are held
    /// for their gap from this time too.
    restart_hold_from_ms: Option<u64>,
    /// Whether a host may be handed out at all (a cluster node's shard leases).
    gate: Option<Arc<dyn DispatchGate>>,
    /// The limits and the gap's rule (`max_in_flight_per_host`, `max_robots_in_flight`, ...).
    cfg: FrontierConfig,
}

/// What handing out a page changed, for the lease the caller builds.
pub(crate) struct PageLeased {
    /// How long the host had a free slot and work before this lease (ms).
    pub(crate) politeness_wait_ms: u64,
    /// Nothing else is queued for the host.
    pub(crate) last_queued: bool,
}

impl Scheduler {
    pub(crate) fn new(
        cfg: &FrontierConfig,
        next_host_id: u64,
        quota: Option<TokenBucket>,
        rng: StdRng,
    ) -> Scheduler {
        Scheduler {
            hosts: HostTable::default(),
            heap: BinaryHeap::new(),
            next_host_id,
            quota,
            rng,
            paused: HashSet::new(),
            controls: HashMap::new(),
            robots_in_flight: 0,
            resolves_in_flight: 0,
            robots_waiting: VecDeque::new(),
            lease_clock: LeaseClock::default(),
            ip_groups: IpGroups::new(IpLimits {
                max_in_flight: cfg.max_in_flight_per_ip,
                delay_ms: cfg.ip_delay_ms,
            }),
            restart_hold_from_ms: None,
            gate: None,
            cfg: cfg.clone(),
        }
    }

    // ------------------------------------------------------------------- hosts

    /// Host `id`, if in memory.
    pub(crate) fn host(&self, id: u64) -> Option<&HostMem> {
        self.hosts.get(id)
    }

    /// Host `id`, if in memory, to change.
    pub(crate) fn host_mut(&mut self, id: u64) -> Option<&mut HostMem> {
        self.hosts.get_mut(id)
    }

    /// The id of politeness key `key`, if in memory.
    pub(crate) fn id_of(&self, key: &str) -> Option<u64> {
        self.hosts.id_of(key)
    }

    /// The host of politeness key `key`, if in memory.
    pub(crate) fn host_of_key(&self, key: &str) -> Option<&HostMem> {
        self.id_of(key).and_then(|id| self.host(id))
    }

    /// Every host in memory, with its id (in no order).
    pub(crate) fn hosts(&self) -> impl Iterator<Item = (u64, &HostMem)> {
        self.hosts.iter().map(|h| (h.rec.id, h))
    }

    /// The ids of the hosts in memory.
    pub(crate) fn host_ids(&self) -> Vec<u64> {
        self.hosts.iter().map(|h| h.rec.id).collect()
    }

    /// How many hosts are in memory.
    pub(crate) fn host_count(&self) -> usize {
        self.hosts.len()
    }

    /// The id the next new host gets.
    pub(crate) fn next_host_id(&self) -> u64 {
        self.next_host_id
    }

    /// Take a new host id.
    pub(crate) fn allocate_host_id(&mut self) -> u64 {
        let id = self.next_host_id;
        self.next_host_id += 1;
        id
    }

    /// Bring host `h` into memory under its id (`h.rec.id`). `stored_before`: it has a
    /// record from an earlier run, so a restart hold applies to it too (its gap may have
    /// started just before a crash).
    pub(crate) fn insert_host(&mut self, mut h: HostMem, stored_before: bool) {
        let id = h.rec.id;
        if let Some(from) = self.restart_hold_from_ms.filter(|_| stored_before) {
            let client_delay = self.client_delay_ms(&h.key);
            politeness::hold_for_restart(&self.cfg, &mut h.rec, from, client_delay);
        }
        if let Some(ip) = h.ip {
            // a host loaded after a restart: its address waits its gap from the restart
            let started = self.restart_hold_from_ms.unwrap_or(0);
            self.ip_groups.join(ip, id, 0, started);
        }
        self.hosts.insert(Box::new(h));
    }

    /// Take host `id` out of memory (it leaves its IP group).
    pub(crate) fn remove_host(&mut self, id: u64) -> Option<Box<HostMem>> {
        let h = self.hosts.remove(id)?;
        if let Some(ip) = h.ip {
            self.ip_groups.leave(ip, id, 0);
        }
        Some(h)
    }

    // ------------------------------------------------------------- ready heap

    /// Put host `id` into the ready heap if it may go: queued work, a free slot, not
    /// paused, not before a client's block ends (see [`hosts::schedule`]).
    pub(crate) fn schedule(&mut self, id: u64) {
        let Some(h) = self.hosts.get_mut(id) else {
            return;
        };
        let is_paused = !self.paused.is_empty() && self.paused.contains(&h.key);
        let blocked_until = if self.controls.is_empty() {
            0
        } else {
            self.controls.get(&h.key).map_or(0, |c| c.blocked_until_ms)
        };
        hosts::schedule(
            h,
            id,
            &mut self.heap,
            self.cfg.max_in_flight_per_host,
            is_paused,
            blocked_until,
        );
    }

    /// The start of a dispatch call: hosts waiting for a robots.txt slot go back to the
    /// heap, as many as there are free slots, and hosts whose address may take a request
    /// again, one per address (their old ready times put them first).
    pub(crate) fn handle_call_start(&mut self, now_ms: u64) {
        if let Some(cap) = self.cfg.max_robots_in_flight {
            self.readmit_robots_waiting(cap, u64::MAX);
        }
        let hosts = &self.hosts;
        let due = self.ip_groups.due(now_ms, |ready, id| {
            hosts
                .get(id)
                .is_some_and(|h| h.scheduled.get() == Some(ready))
        });
        for (ready, id) in due {
            self.heap.push(Reverse((ready, id)));
        }
    }

    /// Hosts waiting in line for a robots.txt slot back to the heap, in order: as many as
    /// `cap` leaves free slots, and `room` at most. Returns how many.
    pub(crate) fn readmit_robots_waiting(&mut self, cap: u64, room: u64) -> u64 {
        let mut free = cap.saturating_sub(self.robots_slots_taken()).min(room);
        let mut readmitted = 0;
        while free > 0 {
            let Some((ready, id)) = self.robots_waiting.pop_front() else {
                break;
            };
            // (a stale entry: the host was rescheduled, paused or left memory meanwhile)
            if self.is_scheduled_at(id, ready) {
                self.heap.push(Reverse((ready, id)));
                free -= 1;
                readmitted += 1;
            }
        }
        release_drained(&mut self.robots_waiting);
        readmitted
    }

    fn is_scheduled_at(&self, id: u64, ready: u64) -> bool {
        self.hosts
            .get(id)
            .is_some_and(|h| h.scheduled.get() == Some(ready))
    }

    /// The host to visit next and its ready time: the heap's first, if it is ready at
    /// `now_ms`. Stale heap entries are passed over; so are hosts `accept` refuses (their
    /// ids go to `skipped`, to be scheduled again after the call) and hosts whose address
    /// is busy (they wait in the address's line, keeping their place). The addresses of
    /// the hosts looked at go to `visited_ips` (armed at the end of the call).
    pub(crate) fn poll_ready(
        &mut self,
        now_ms: u64,
        mut accept: Option<&mut dyn FnMut(&str) -> bool>,
        skipped: &mut Vec<u64>,
        visited_ips: &mut Vec<IpAddr>,
    ) -> Option<(u64, u64)> {
        loop {
            let &Reverse((ready, id)) = self.heap.peek()?;
            if ready > now_ms {
                return None;
            }
            self.heap.pop();
            let ip = match self.hosts.get_mut(id) {
                Some(h) if h.scheduled.get() == Some(ready) => {
                    if let Some(wait) = self.gate.as_ref().and_then(|g| g.closed_for(&h.key)) {
                        // not this node's to fetch now: its place, later (politeness untouched)
                        let at = now_ms.saturating_add(wait.max(1));
                        h.scheduled = DueAt::at(at);
                        self.heap.push(Reverse((at, id)));
                        continue;
                    }
                    if let Some(accept) = accept.as_mut() {
                        if !accept(&h.key) {
                            h.scheduled = DueAt::NEVER;
                            skipped.push(id);
                            continue;
                        }
                    }
                    h.ip
                }
                _ => continue,
            };
            if let Some(ip) = ip {
                visited_ips.push(ip);
                if self.ip_groups.gate(ip, now_ms) != IpGate::Go {
                    self.ip_groups.wait(ip, ready, id);
                    continue;
                }
            }
            return Some((ready, id));
        }
    }

    /// The end of a dispatch call: hosts skipped go back to the heap, and the addresses
    /// looked at may wake their lines again.
    pub(crate) fn handle_call_end(&mut self, skipped: Vec<u64>, visited_ips: Vec<IpAddr>) {
        for id in skipped {
            self.schedule(id);
        }
        for ip in visited_ips {
            self.ip_groups.arm(ip);
        }
    }

    /// The host keeps its turn: back to the heap at `ready`, to go first once the global
    /// quota allows again.
    pub(crate) fn keep_turn(&mut self, ready: u64, id: u64) {
        self.heap.push(Reverse((ready, id)));
        if let Some(h) = self.hosts.get_mut(id) {
            h.scheduled = DueAt::at(ready);
        }
    }

    /// Earliest instant at which some host becomes ready (None if none will).
    pub(crate) fn next_ready_at(&self) -> Option<u64> {
        let robots_free = self
            .cfg
            .max_robots_in_flight
            .is_none_or(|cap| self.robots_slots_taken() < cap);
        let waiting = self
            .robots_waiting
            .front()
            .filter(|_| robots_free)
            .map(|&(t, _)| t);
        self.heap
            .peek()
            .map(|Reverse((t, _))| *t)
            .into_iter()
            .chain(waiting)
            .chain(self.ip_groups.next_wake())
            .min()
    }

    /// Whether the global quota lets one more request go at `now_ms` (taking its token).
    pub(crate) fn poll_quota(&mut self, now_ms: u64) -> bool {
        self.quota.as_mut().is_none_or(|b| b.try_take(now_ms))
    }

    // ------------------------------------------------------------------ leases

    /// robots.txt leases in flight.
    #[cfg(test)]
    pub(crate) fn robots_in_flight(&self) -> u64 {
        self.robots_in_flight
    }

    /// robots.txt slots taken: the leases in flight and the address lookups before a first
    /// robots.txt still unanswered.
    pub(crate) fn robots_slots_taken(&self) -> u64 {
        self.robots_in_flight + self.resolves_in_flight
    }

    /// Host `id`'s address is asked for before its first robots.txt: it holds a slot
    /// until [`Scheduler::handle_resolve_answered`].
    pub(crate) fn handle_resolve_asked(&mut self, id: u64) {
        if let Some(h) = self.hosts.get_mut(id) {
            h.resolve = Resolve::Asked;
        }
        self.resolves_in_flight += 1;
    }

    /// The answer to an address asked for host `id` came (an address or none): its slot
    /// is free whether the host is still in memory or not. Returns whether the host was
    /// waiting for it (it is scheduled again then).
    pub(crate) fn handle_resolve_answered(&mut self, id: u64, found: bool) -> bool {
        self.resolves_in_flight = self.resolves_in_flight.saturating_sub(1);
        let Some(h) = self.hosts.get_mut(id) else {
            return false;
        };
        if h.resolve != Resolve::Asked {
            return false;
        }
        h.resolve = if found {
            Resolve::NotAsked
        } else {
            Resolve::Failed
        };
        self.schedule(id);
        true
    }

    /// Host `id` needs robots.txt but every slot is taken: it waits in line at `ready`.
    pub(crate) fn wait_for_robots_slot(&mut self, ready: u64, id: u64) {
        // its line entry holds while `scheduled` is `ready` (as for heap entries)
        if let Some(h) = self.hosts.get_mut(id) {
            h.scheduled = DueAt::at(ready);
        }
        self.robots_waiting.push_back((ready, id));
    }

    /// A robots.txt lease for `origin` of host `id` is handed out at `now_ms`: the host's
    /// slot and gap, its address's budget, the global count. False if the host is gone.
    pub(crate) fn handle_robots_lease(&mut self, id: u64, origin: &str, now_ms: u64) -> bool {
        let Some(h) = self.hosts.get_mut(id) else {
            return false;
        };
        h.set_robots_pending(Some(origin));
        h.rec.in_flight += 1;
        if let Some(ip) = h.ip {
            self.ip_groups.charge(ip, now_ms);
        }
        crate::sched::records::bump(&mut h.rec.counters.robots_fetches);
        h.rec.next_allowed_ms = now_ms + politeness::gap_ms(&self.cfg, &h.rec);
        self.robots_in_flight += 1;
        true
    }

    /// A robots.txt lease of host `id` ended at `now_ms` (whatever its outcome): the
    /// global count, the host's slot and its address's budget.
    pub(crate) fn handle_robots_done(&mut self, id: u64, now_ms: u64) {
        self.robots_in_flight = self.robots_in_flight.saturating_sub(1);
        let Some(h) = self.hosts.get_mut(id) else {
            return;
        };
        h.set_robots_pending(None);
        h.rec.in_flight = h.rec.in_flight.saturating_sub(1);
        if let Some(ip) = h.ip {
            self.ip_groups.release(ip);
        }
        h.free_since_ms = now_ms;
    }

    /// The page at `seq` of host `id` (taken from `from`) is handed out at `now_ms`,
    /// turned at `ready`; `deadline_ms` for an external fetcher's lease. None if the host
    /// is gone.
    pub(crate) fn handle_page_lease(
        &mut self,
        (ready, id): (u64, u64),
        (seq, from): (u64, crate::sched::aside::Source),
        now_ms: u64,
        deadline_ms: Option<u64>,
    ) -> Option<PageLeased> {
        let client_delay = self.client_delay_ms_of_id(id);
        let h = self.hosts.get_mut(id)?;
        let politeness_wait_ms = ready.min(now_ms).saturating_sub(h.free_since_ms);
        h.push_lease(seq);
        h.consume(seq, from);
        if let Some(a) = h.aside.as_deref_mut() {
            a.held_origin = None;
        }
        h.rec.in_flight += 1;
        if let Some(ip) = h.ip {
            self.ip_groups.charge(ip, now_ms);
        }
        h.rec.counters.queued = h.rec.counters.queued.saturating_sub(1);
        let last_queued = h.rec.counters.queued == 0;
        crate::sched::records::bump(&mut h.rec.counters.dispatched);
        h.rec.next_allowed_ms = now_ms
            + crate::sched::lease::gap_with_client_delay(
                politeness::gap_ms(&self.cfg, &h.rec),
                client_delay,
            );
        if let Some(deadline) = deadline_ms {
            self.lease_clock.set(LeaseId { host_id: id, seq }, deadline);
        }
        Some(PageLeased {
            politeness_wait_ms,
            last_queued,
        })
    }

    /// The page lease at position `pos` of host `id`'s lease list ended at `now_ms`
    /// (reported or expired): its slot, its address's budget, its deadline. Returns the
    /// host, for the caller to apply the outcome to.
    pub(crate) fn handle_page_done(
        &mut self,
        id: u64,
        pos: usize,
        now_ms: u64,
    ) -> Option<&mut HostMem> {
        let h = self.hosts.get_mut(id)?;
        // the list is freed with its box once empty (a million hosts each kept a 48-byte
        // list between their leases)
        let seq = h.take_lease(pos)?;
        self.lease_clock.clear(LeaseId { host_id: id, seq });
        h.rec.in_flight = h.rec.in_flight.saturating_sub(1);
        // left taken, four expiries filled a default address group for good (issue 33)
        if let Some(ip) = h.ip {
            self.ip_groups.release(ip);
        }
        h.free_since_ms = now_ms;
        h.set_hold_until(0);
        Some(h)
    }

    /// The deadline of an external fetcher's lease, if it has one.
    pub(crate) fn lease_deadline(&self, lease: LeaseId) -> Option<u64> {
        self.lease_clock.deadline(lease)
    }

    /// The leases whose deadline passed at `now_ms` (their deadlines are forgotten).
    pub(crate) fn poll_expired_leases(&mut self, now_ms: u64) -> Vec<LeaseId> {
        if self.lease_clock.next_deadline().is_none_or(|d| d > now_ms) {
            return Vec::new();
        }
        self.lease_clock.take_expired(now_ms)
    }

    /// A random fraction in `0..0.25`, for back-off jitter.
    pub(crate) fn jitter_fraction(&mut self) -> f64 {
        self.rng.gen_range(0.0..0.25)
    }

    /// A random u64 (jitter of a retry, spreading of recrawl times).
    pub(crate) fn random_u64(&mut self) -> u64 {
        self.rng.gen()
    }

    // ---------------------------------------------------------- pause, clients

    /// Pause `key`: none of its URLs is handed out until resumed. False if it was paused.
    pub(crate) fn pause(&mut self, key: &str) -> bool {
        let added = self.paused.insert(Arc::from(key));
        if let Some(h) = self.id_of(key).and_then(|id| self.hosts.get_mut(id)) {
            h.scheduled = DueAt::NEVER;
        }
        added
    }

    /// Undo [`Scheduler::pause`]. False if it was not paused.
    pub(crate) fn resume(&mut self, key: &str) -> bool {
        let removed = self.paused.remove(key);
        if let Some(id) = self.id_of(key) {
            self.schedule(id);
        }
        removed
    }

    /// Whether `key` is paused.
    pub(crate) fn is_paused(&self, key: &str) -> bool {
        !self.paused.is_empty() && self.paused.contains(key)
    }

    /// A pause read from the store at open.
    pub(crate) fn load_pause(&mut self, key: &str) {
        self.paused.insert(Arc::from(key));
    }

    /// A client's delay and block read from the store at open.
    pub(crate) fn load_control(&mut self, key: &str, control: QueueControl) {
        self.controls.insert(Arc::from(key), control);
    }

    /// How many keys are paused.
    pub(crate) fn paused_count(&self) -> usize {
        self.paused.len()
    }

    /// A client's delay and block for `key` ("" = the default delay), if set.
    pub(crate) fn control(&self, key: &str) -> Option<QueueControl> {
        self.controls.get(key).copied()
    }

    /// Set a client's delay and block for `key`; an empty one is forgotten. The host, if
    /// in memory, is scheduled again under it.
    pub(crate) fn set_control(&mut self, key: &str, control: QueueControl) {
        if control.is_empty() {
            self.controls.remove(key);
        } else {
            self.controls.insert(Arc::from(key), control);
        }
        if let Some(id) = self.id_of(key) {
            self.schedule(id);
        }
    }

    /// The client's delay for `key` in ms (its own, else the default; 0: none).
    pub(crate) fn client_delay_ms(&self, key: &str) -> u64 {
        if self.controls.is_empty() {
            return 0;
        }
        match self.controls.get(key) {
            Some(c) if c.delay_ms > 0 => c.delay_ms,
            _ => self.controls.get("").map_or(0, |c| c.delay_ms),
        }
    }

    fn client_delay_ms_of_id(&self, id: u64) -> u64 {
        match self.hosts.get(id) {
            Some(h) if !self.controls.is_empty() => self.client_delay_ms(&h.key),
            _ => 0,
        }
    }

    // ------------------------------------------------------------- addresses

    /// A fetch of host `id` that started at `started_ms` connected to `ip`. Returns the
    /// host's key and its address before when it changed (None if unchanged or gone).
    pub(crate) fn handle_address(
        &mut self,
        id: u64,
        ip: IpAddr,
        started_ms: u64,
    ) -> Option<(Arc<str>, Option<IpAddr>)> {
        let h = self.hosts.get_mut(id)?;
        let before = h.ip;
        let in_flight = u64::from(h.rec.in_flight);
        if before == Some(ip) {
            // same group: only its gap may start later
            self.ip_groups.join(ip, id, in_flight, started_ms);
            return None;
        }
        h.ip = Some(ip);
        let key = h.key.clone();
        if let Some(old) = before {
            self.ip_groups.leave(old, id, in_flight);
        }
        self.ip_groups.join(ip, id, in_flight, started_ms);
        Some((key, before))
    }

    /// Whether address `ip` may take a request at `now_ms`.
    pub(crate) fn ip_gate(&self, ip: IpAddr, now_ms: u64) -> IpGate {
        self.ip_groups.gate(ip, now_ms)
    }

    /// The IP groups with their hosts' names.
    pub(crate) fn ip_group_views(&self) -> Vec<IpGroupView> {
        self.ip_groups
            .views(|id| self.hosts.get(id).map(|h| h.key.to_string()))
    }

    /// How many IP groups have hosts in memory.
    pub(crate) fn ip_group_count(&self) -> usize {
        self.ip_groups.groups.len()
    }

    /// What is wrong with the IP groups' books, if anything: each group's in-flight count
    /// is the sum of its members' (a count that drifts up holds the address for good, one
    /// that drifts down lets too many requests at it), and each member is in memory with
    /// that address.
    #[cfg(test)]
    pub(crate) fn ip_accounting_errors(&self) -> Vec<String> {
        let mut errors = Vec::new();
        for (ip, g) in &self.ip_groups.groups {
            let mut sum = 0;
            for &id in &g.members {
                match self.hosts.get(id) {
                    Some(h) if h.ip == Some(*ip) => sum += u64::from(h.rec.in_flight),
                    Some(h) => {
                        errors.push(format!("host {} in {ip}'s group has {:?}", h.key, h.ip))
                    }
                    None => errors.push(format!("host id {id} in {ip}'s group is not in memory")),
                }
            }
            if sum != g.in_flight {
                errors.push(format!(
                    "{ip}: {} in flight, its hosts have {sum}",
                    g.in_flight
                ));
            }
        }
        for h in self.hosts.iter() {
            let member =
                h.ip.and_then(|ip| self.ip_groups.groups.get(&ip))
                    .map(|g| g.members.contains(&h.rec.id));
            if member == Some(false) || (h.ip.is_some() && member.is_none()) {
                errors.push(format!("host {} is not in its group {:?}", h.key, h.ip));
            }
        }
        errors
    }

    /// Times a host waited for its address.
    pub(crate) fn ip_waits(&self) -> u64 {
        self.ip_groups.waits
    }

    // ------------------------------------------------------------------- gate

    /// From now on, ask `gate` before visiting a host (None: no gate).
    pub(crate) fn set_gate(&mut self, gate: Option<Arc<dyn DispatchGate>>) {
        self.gate = gate;
    }

    // ---------------------------------------------------------------- restart

    /// After an open: hold every host for its politeness gap from `now_ms`, as if a
    /// request to it had just ended, and every IP group its `ip_delay`; hosts that come
    /// into memory later are held the same way.
    pub(crate) fn hold_after_restart(&mut self, now_ms: u64) {
        self.restart_hold_from_ms = Some(now_ms);
        self.ip_groups.hold_all(now_ms);
        for id in self.host_ids() {
            let client_delay = self.client_delay_ms_of_id(id);
            if let Some(h) = self.hosts.get_mut(id) {
                politeness::hold_for_restart(&self.cfg, &mut h.rec, now_ms, client_delay);
            }
            self.schedule(id);
        }
    }
}

/// Capacity a drained queue keeps whatever it once held.
const DRAINED_KEEP: usize = 1024;

/// A queue that once held every new host (a bulk submit puts millions in line for a
/// robots.txt slot) gives back what it no longer needs: under a quarter full, it shrinks
/// to twice its length. Each shrink copies fewer entries than were taken out since the
/// queue last grew or shrank, so the cost stays constant a pop. (What a drained line held
/// at 3M hosts: docs/benchmarks.md, "Memory at 10M URLs over 1M hosts".)
fn release_drained<T>(queue: &mut VecDeque<T>) {
    if queue.capacity() > DRAINED_KEEP && queue.len() < queue.capacity() / 4 {
        queue.shrink_to((queue.len() * 2).max(DRAINED_KEEP));
    }
}

#[cfg(test)]
mod tests {
    //! The scheduler alone: no store, no lock; time is what the test says it is.

    use rand::SeedableRng;

    use super::*;
    use crate::sched::aside::Source;
    use crate::sched::records::HostRecord;

    fn scheduler(edit: impl FnOnce(&mut FrontierConfig)) -> Scheduler {
        let mut cfg = FrontierConfig::new("unused");
        cfg.min_delay_ms = 1_000;
        cfg.ip_delay_ms = 500;
        edit(&mut cfg);
        Scheduler::new(&cfg, 1, None, StdRng::seed_from_u64(7))
    }

    /// A host with `queued` URLs, on `ip` when given.
    fn add(s: &mut Scheduler, key: &str, queued: u64, ip: Option<&str>) -> u64 {
        let id = s.allocate_host_id();
        let mut rec = HostRecord {
            id,
            ..HostRecord::default()
        };
        rec.counters.queued = queued;
        let mut h = HostMem::empty(Arc::from(key), rec);
        h.ip = ip.map(|a| a.parse().expect("an address"));
        s.insert_host(h, false);
        s.schedule(id);
        id
    }

    fn ready(s: &mut Scheduler, now_ms: u64) -> Option<u64> {
        s.handle_call_start(now_ms);
        let (mut skipped, mut ips) = (Vec::new(), Vec::new());
        let got = s.poll_ready(now_ms, None, &mut skipped, &mut ips);
        s.handle_call_end(skipped, ips);
        got.map(|(_, id)| id)
    }

    #[test]
    fn a_paused_host_is_not_ready_until_resumed() {
        let mut s = scheduler(|_| {});
        let a = add(&mut s, "a.test", 2, None);
        assert!(s.pause("a.test"));
        assert_eq!(ready(&mut s, 10), None);
        assert!(s.resume("a.test"));
        assert_eq!(ready(&mut s, 10), Some(a));
    }

    #[test]
    fn hosts_on_one_address_wait_for_its_gap_and_its_slot() {
        let mut s = scheduler(|c| c.max_in_flight_per_ip = 1);
        let a = add(&mut s, "a.test", 2, Some("127.0.0.9"));
        let b = add(&mut s, "b.test", 2, Some("127.0.0.9"));
        // a known address waits its gap from when it was joined (0 + 500 ms)
        assert_eq!(ready(&mut s, 499), None);
        let first = ready(&mut s, 1_000).expect("a host is ready");
        let other = if first == a { b } else { a };
        s.handle_page_lease((1_000, first), (0, Source::Head), 1_000, None)
            .expect("in memory");
        // the address's one slot is taken: the other host waits, whatever the time
        assert_eq!(ready(&mut s, 5_000), None);
        let pos = s.host(first).map_or(0, |h| h.leased().len() - 1);
        s.handle_page_done(first, pos, 5_000).expect("in memory");
        // the slot is free and the address's gap (500 ms from the lease) has passed; the
        // host that went keeps its own gap (1 s)
        assert_eq!(ready(&mut s, 5_000), Some(other));
    }

    /// A host between leases holds no lease list (a million hosts each kept 48 bytes).
    #[test]
    fn a_host_between_leases_holds_no_lease_list() {
        let mut s = scheduler(|c| c.max_in_flight_per_host = 2);
        let a = add(&mut s, "a.test", 3, None);
        s.handle_page_lease((0, a), (0, Source::Head), 0, None)
            .expect("in memory");
        s.handle_page_lease((0, a), (1, Source::Head), 0, None)
            .expect("in memory");
        s.handle_page_done(a, 0, 10).expect("in memory");
        assert_eq!(s.host(a).map(|h| h.leased()), Some(&[1][..]));
        s.handle_page_done(a, 0, 20).expect("in memory");
        assert!(s
            .host(a)
            .is_some_and(|h| h.leased().is_empty() && h.aside.is_none()));
    }

    #[test]
    fn robots_slots_are_taken_in_line() {
        let mut s = scheduler(|c| c.max_robots_in_flight = Some(1));
        let a = add(&mut s, "a.test", 1, None);
        let b = add(&mut s, "b.test", 1, None);
        assert_eq!(ready(&mut s, 0), Some(a));
        assert!(s.handle_robots_lease(a, "http://a.test", 0));
        assert_eq!(ready(&mut s, 0), Some(b));
        s.wait_for_robots_slot(0, b);
        // the one slot is a's: b stays in line
        assert_eq!(ready(&mut s, 100), None);
        s.handle_robots_done(a, 100);
        assert_eq!(s.robots_in_flight(), 0);
        assert_eq!(ready(&mut s, 100), Some(b));
    }

    /// A bulk submit's line for robots.txt slots does not keep its size once it has
    /// drained (what that held at 3M hosts: docs/benchmarks.md).
    #[test]
    fn the_line_for_robots_slots_gives_back_its_memory_once_drained() {
        let mut s = scheduler(|c| c.max_robots_in_flight = Some(4));
        for i in 0..100_000 {
            let id = add(&mut s, &format!("h{i}.test"), 1, None);
            if i < 4 {
                assert!(s.handle_robots_lease(id, "http://x.test", 0));
            } else {
                s.wait_for_robots_slot(0, id);
            }
        }
        let full = s.robots_waiting.capacity();
        assert!(full >= 99_996, "every host but four waits in line ({full})");
        // slots come free a thousand at a time until the line is empty; each host leaves
        // it once, and the line's memory follows what it still holds
        let mut readmitted = 0;
        loop {
            let n = s.readmit_robots_waiting(u64::MAX, 1_000);
            if n == 0 {
                break;
            }
            readmitted += n;
            let (len, cap) = (s.robots_waiting.len(), s.robots_waiting.capacity());
            assert!(
                cap <= (4 * len).max(DRAINED_KEEP),
                "{len} waiting in a line of {cap} slots"
            );
        }
        assert_eq!(readmitted, 99_996);
        assert!(s.robots_waiting.is_empty());
        assert!(
            s.robots_waiting.capacity() <= DRAINED_KEEP,
            "the drained line keeps {} of its {full} slots",
            s.robots_waiting.capacity()
        );
    }

    #[test]
    fn after_a_restart_no_host_goes_before_its_gap() {
        let mut s = scheduler(|_| {});
        let a = add(&mut s, "a.test", 1, None);
        s.hold_after_restart(50_000);
        assert_eq!(ready(&mut s, 50_999), None);
        assert_eq!(ready(&mut s, 51_000), Some(a));
        // a host that comes into memory later with a record of its own is held too
        let mut rec = HostRecord {
            id: 99,
            ..HostRecord::default()
        };
        rec.counters.queued = 1;
        s.insert_host(HostMem::empty(Arc::from("b.test"), rec), true);
        s.schedule(99);
        assert_eq!(ready(&mut s, 50_999), None);
    }

    #[test]
    fn a_client_block_holds_a_host_and_its_delay_lengthens_the_gap() {
        let mut s = scheduler(|_| {});
        let a = add(&mut s, "a.test", 3, None);
        s.set_control(
            "a.test",
            QueueControl {
                delay_ms: 4_000,
                blocked_until_ms: 20_000,
            },
        );
        assert_eq!(ready(&mut s, 19_999), None);
        assert_eq!(ready(&mut s, 20_000), Some(a));
        s.handle_page_lease((20_000, a), (0, Source::Head), 20_000, None)
            .expect("in memory");
        assert_eq!(s.host(a).map(|h| h.rec.next_allowed_ms), Some(24_000));
    }
}
