//! The engine against a model of the ordering rules (docs/semantics.md rules 1 to 7, 10 to 13) written out the
//! slow, obvious way: every operation is a node that keeps the set of every node before it (no clocks, no
//! epochs, no shadow), and two accesses race when their bytes overlap, one of them writes and neither node is in
//! the other's past. On seeded random traces of two host threads, each pair must agree:
//! - every race the engine reports is a race of the model between those two operations, of that kind, on those
//!   bytes (nothing false);
//! - every block on which the model finds a race has a finding whose two operations race there (the engine, as
//!   FastTrack, finds at least the first race on each byte, not every pair that races).
//!
//! The traces hold kernels, copies and sets (async and plain, on device, pinned and pageable memory), host accesses and
//! host functions, on the legacy default stream, blocking, non-blocking and per-thread default streams of two
//! devices (two of them created midway, by either thread: their work runs after what their creator knew); event
//! records and waits (some before any record), stream, event and device synchronization, queries that succeed
//! and fail, and recorded host synchronization between the threads (`host_release`/`host_acquire`, the
//! per-thread host order of rule 10), and graph launches (rule 9: nodes ordered by their dependencies alone).
//! Stream capture, the graph API, frees and views are left to the rule tests: the model would have to grow as
//! much as the engine.
//!
//! `ORDERING_ORACLE_SEED=N cargo test --test tests ordering_oracle -- --nocapture` runs one seed and prints its
//! trace; `ORDERING_ORACLE_SEEDS=N` runs seeds 1 to N.

use std::collections::BTreeSet;
use std::fmt::Write;

use streamtrace::analysis::Analysis;
use streamtrace::findings::{RaceFinding, RaceKind};
use streamtrace::hb::HostOrder;

use crate::util::random::{hex, seeds_to_run, Rng};
use crate::util::scenario::analyze_text;

const SEEDS: u64 = 2500;

/// The host threads that issue work; host functions run on [`DRIVER_THREAD`].
const THREADS: [u64; 2] = [1, 2];
const DRIVER_THREAD: u64 = 900;

#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum StreamKind {
    LegacyDefault,
    Blocking,
    NonBlocking,
    /// A per-thread default stream: `per_thread_stream(t)` is thread `t`'s.
    PerThreadDefault,
}

impl StreamKind {
    fn name(self) -> &'static str {
        match self {
            StreamKind::LegacyDefault => "legacy_default",
            StreamKind::Blocking => "blocking",
            StreamKind::NonBlocking => "non_blocking",
            StreamKind::PerThreadDefault => "per_thread_default",
        }
    }

    /// Whether rule 7 makes it wait for the legacy default stream, and that stream for it.
    fn blocking(self) -> bool {
        matches!(self, StreamKind::Blocking | StreamKind::PerThreadDefault)
    }
}

/// Thread `t`'s per-thread default stream.
fn per_thread_stream(t: usize) -> usize {
    5 + t
}

/// The streams, by handle (the handle is the index), with their device (each device has one context, and
/// plain copies and sets run on device 0). The last [`LATE_STREAMS`] are created midway, by either thread.
const STREAMS: [(StreamKind, u64); 12] = [
    (StreamKind::LegacyDefault, 0),
    (StreamKind::Blocking, 0),
    (StreamKind::Blocking, 0),
    (StreamKind::NonBlocking, 0),
    (StreamKind::NonBlocking, 0),
    (StreamKind::PerThreadDefault, 0),
    (StreamKind::PerThreadDefault, 0),
    (StreamKind::LegacyDefault, 1),
    (StreamKind::Blocking, 1),
    (StreamKind::NonBlocking, 1),
    (StreamKind::Blocking, 0),
    (StreamKind::NonBlocking, 1),
];
const LATE_STREAMS: usize = 2;
const DEVICES: u64 = 2;
const EVENTS: u64 = 3;
const OBJECTS: u64 = 3;

/// Blocks: three of device memory, then one of pinned host memory, each [`BLOCK_SIZE`] bytes.
const DEVICE_BLOCKS: usize = 3;
const PINNED: usize = DEVICE_BLOCKS;
const BLOCKS: usize = DEVICE_BLOCKS + 1;
const BLOCK_SIZE: u64 = 4096;

/// The trace's name for the memory of `block`.
fn memory_of(block: usize) -> &'static str {
    if block == PINNED {
        "pinned"
    } else {
        "device"
    }
}

fn block_base(block: usize) -> u64 {
    if block == PINNED {
        0x6000_0000_0000
    } else {
        0x7f00_0000_0000 + block as u64 * 0x10000
    }
}

/// The streams rule 7 orders stream `s` with, on its device: every blocking stream for the legacy default
/// stream, the legacy default stream for a blocking one, none for a non-blocking one.
fn barrier_partners(s: usize) -> impl Iterator<Item = usize> {
    let (kind, device) = STREAMS[s];
    STREAMS.iter().enumerate().filter_map(move |(other, &(other_kind, other_device))| {
        let partner = match kind {
            StreamKind::LegacyDefault => other_kind.blocking(),
            _ => kind.blocking() && other_kind == StreamKind::LegacyDefault,
        };
        (partner && other_device == device).then_some(other)
    })
}

/// A set of nodes, by number.
#[derive(Clone, Default, Debug)]
struct NodeSet(Vec<u64>);

impl NodeSet {
    fn insert(&mut self, node: usize) {
        if self.0.len() <= node / 64 {
            self.0.resize(node / 64 + 1, 0);
        }
        self.0[node / 64] |= 1 << (node % 64);
    }

    fn remove(&mut self, node: usize) {
        if let Some(word) = self.0.get_mut(node / 64) {
            *word &= !(1 << (node % 64));
        }
    }

    fn contains(&self, node: usize) -> bool {
        self.0.get(node / 64).is_some_and(|word| word & (1 << (node % 64)) != 0)
    }

    fn join(&mut self, other: &NodeSet) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (word, theirs) in self.0.iter_mut().zip(&other.0) {
            *word |= theirs;
        }
    }
}

/// Bytes `start..end` of a block, read or written.
#[derive(Copy, Clone, Debug)]
struct Access {
    block: usize,
    start: u64,
    end: u64,
    write: bool,
}

impl Access {
    /// The bytes both touch, as addresses, when they share any.
    fn overlap(&self, other: &Access) -> Option<(u64, u64)> {
        let (start, end) = (self.start.max(other.start), self.end.min(other.end));
        (self.block == other.block && start < end)
            .then(|| (block_base(self.block) + start, block_base(self.block) + end))
    }
}

/// One operation: what happened before it (itself included) and what it touched.
#[derive(Debug)]
struct Node {
    past: NodeSet,
    accesses: Vec<Access>,
    /// The trace lines that stand for it (a host function's accesses are records of their own).
    lines: Vec<u64>,
    /// Its index among the nodes of a graph launch, when it is one.
    graph_node: Option<u32>,
}

/// The rules, applied to sets of nodes.
#[derive(Default)]
struct Model {
    nodes: Vec<Node>,
    /// The past of each stream's last operation.
    streams: [NodeSet; STREAMS.len()],
    /// What each stream's creator knew when it created it: its work runs after that.
    created_with: [NodeSet; STREAMS.len()],
    /// What each thread knows to be complete, and its own host accesses.
    threads: [NodeSet; THREADS.len()],
    /// The past each event's last record captured (rule 3).
    events: [Option<NodeSet>; EVENTS as usize],
    /// What was released into each host synchronization object (rule 10).
    objects: [Option<NodeSet>; OBJECTS as usize],
}

impl Model {
    fn add_node(&mut self, mut past: NodeSet, accesses: Vec<Access>, line: u64) -> usize {
        let node = self.nodes.len();
        past.insert(node);
        self.nodes.push(Node { past, accesses, lines: vec![line], graph_node: None });
        node
    }

    /// An operation the thread `t` enqueues on stream `s` (rules 1, 2 and 7), after `also` when given (the
    /// event a wait joins, rule 4).
    fn enqueue(&mut self, t: usize, s: usize, accesses: Vec<Access>, line: u64, also: Option<NodeSet>) -> usize {
        let past = self.issued_after(t, s, also);
        let node = self.add_node(past, accesses, line);
        self.streams[s] = self.nodes[node].past.clone();
        node
    }

    /// A graph launched by thread `t` on stream `s` (rule 9): each node after what an operation issued there now
    /// would be, and after its dependencies; the stream's later work after every node. `nodes`: each node's
    /// accesses and the indexes of the nodes it depends on.
    fn launch_graph(&mut self, t: usize, s: usize, nodes: Vec<(Vec<Access>, Vec<usize>)>, line: u64) {
        let start = self.issued_after(t, s, None);
        let mut launched: Vec<usize> = Vec::new();
        let mut end = start.clone();
        for (index, (accesses, deps)) in nodes.into_iter().enumerate() {
            let mut past = start.clone();
            for dep in deps {
                past.join(&self.nodes[launched[dep]].past);
            }
            let node = self.add_node(past, accesses, line);
            self.nodes[node].graph_node = Some(index as u32);
            end.join(&self.nodes[node].past);
            launched.push(node);
        }
        self.streams[s] = end;
    }

    /// What an operation thread `t` issues on stream `s` now comes after (rules 1, 2 and 7), and `also`.
    fn issued_after(&self, t: usize, s: usize, also: Option<NodeSet>) -> NodeSet {
        let mut past = self.streams[s].clone();
        past.join(&self.created_with[s]);
        past.join(&self.threads[t]);
        if let Some(also) = also {
            past.join(&also);
        }
        for other in barrier_partners(s) {
            past.join(&self.streams[other]);
        }
        past
    }

    /// Thread `t` creates stream `s`: its work runs after what the thread knows (docs/trace-format.md). A
    /// synchronization of it teaches that only through its work: a stream that ran nothing has none to wait for.
    fn create_stream(&mut self, t: usize, s: usize) {
        self.created_with[s] = self.threads[t].clone();
    }

    /// The thread waits for stream `s` (rules 5 and 7).
    fn sync_stream(&mut self, t: usize, s: usize) {
        let mut known = self.streams[s].clone();
        if STREAMS[s].0 == StreamKind::LegacyDefault {
            for other in barrier_partners(s) {
                known.join(&self.streams[other]);
            }
        }
        self.threads[t].join(&known);
    }

    /// The thread waits for event `e`'s last record, when there was one (rules 3 and 5).
    fn sync_event(&mut self, t: usize, e: usize) {
        if let Some(recorded) = &self.events[e] {
            self.threads[t].join(recorded);
        }
    }

    /// The thread waits for every stream of `device` (`cudaDeviceSynchronize`, and `cuCtxSynchronize` of its one
    /// context).
    fn sync_device(&mut self, t: usize, device: u64) {
        for (stream, (_, on)) in self.streams.iter().zip(STREAMS) {
            if on == device {
                self.threads[t].join(stream);
            }
        }
    }

    /// The thread waits for what `node` waited for, not for `node` itself (a plain copy from pageable memory).
    fn learn_before(&mut self, t: usize, node: usize) {
        let mut known = self.nodes[node].past.clone();
        known.remove(node);
        self.threads[t].join(&known);
    }

    /// The thread learns that `node` is complete (a synchronous copy or set returned).
    fn learn(&mut self, t: usize, node: usize) {
        let known = self.nodes[node].past.clone();
        self.threads[t].join(&known);
    }

    /// The thread's own loads and stores (rule 12): after what it knows, and known to it afterwards.
    fn host_access(&mut self, t: usize, accesses: Vec<Access>, line: u64) {
        let node = self.add_node(self.threads[t].clone(), accesses, line);
        self.learn(t, node);
    }

    /// Every race: the two nodes (the earlier first), and the two accesses.
    fn races(&self) -> Vec<(usize, usize, Access, Access)> {
        let mut races = Vec::new();
        for (later, node) in self.nodes.iter().enumerate() {
            for earlier in 0..later {
                if node.past.contains(earlier) {
                    continue;
                }
                for a in &self.nodes[earlier].accesses {
                    for b in &node.accesses {
                        if (a.write || b.write) && a.overlap(b).is_some() {
                            races.push((earlier, later, *a, *b));
                        }
                    }
                }
            }
        }
        races
    }
}

/// A trace and its model, written together.
struct Gen {
    rng: Rng,
    out: String,
    line: u64,
    model: Model,
    /// Plain copies and sets run on the legacy default stream, or (the program built with per-thread default
    /// streams) on each thread's own.
    per_thread_default: bool,
    next_host_func: u64,
    /// The streams declared so far.
    declared: usize,
}

impl Gen {
    fn new(seed: u64) -> Gen {
        let mut rng = Rng::new(seed ^ 0x0ac1e);
        let per_thread_default = rng.chance(30);
        let declared = STREAMS.len() - LATE_STREAMS;
        Gen {
            rng,
            out: String::new(),
            line: 0,
            model: Model::default(),
            per_thread_default,
            next_host_func: 1,
            declared,
        }
    }

    /// Writes one record; its line.
    fn emit(&mut self, thread: u64, kind: &str, body: &str) -> u64 {
        let sep = if body.is_empty() { "" } else { ", " };
        writeln!(
            self.out,
            "{{\"type\": \"{kind}\", \"thread\": {thread}{sep}{body}, \"src\": \"oracle.cu:{}\"}}",
            self.line + 1
        )
        .expect("written");
        self.line += 1;
        self.line
    }

    fn preamble(&mut self, seed: u64) {
        self.out.push_str(&format!(
            "{{\"type\": \"streamtrace\", \"version\": 1, \"host_sync\": true, \"comment\": \"ordering_oracle seed {seed}\"}}\n"
        ));
        self.line = 1;
        for handle in 0..self.declared {
            self.declare_stream(0, handle);
        }
        for event in 1..=EVENTS {
            self.emit(1, "event", &format!("\"id\": {event}"));
        }
        for block in 0..BLOCKS {
            let kind = if block == PINNED { ", \"alloc_kind\": \"host\"" } else { "" };
            let body =
                format!("\"id\": {}, \"addr\": {}, \"size\": {BLOCK_SIZE}{kind}", block + 1, hex(block_base(block)));
            self.emit(1, "alloc", &body);
        }
    }

    /// Thread `t` declares stream `handle`.
    fn declare_stream(&mut self, t: usize, handle: usize) {
        let (kind, device) = STREAMS[handle];
        let body = format!(
            "\"id\": {handle}, \"stream_kind\": \"{}\", \"device\": {device}, \"context\": {device}",
            kind.name()
        );
        self.emit(THREADS[t], "stream", &body);
        self.model.create_stream(t, handle);
    }

    /// A part of `block`, written `write_percent` times in a hundred and read otherwise.
    fn access(&mut self, block: usize, write_percent: u64) -> Access {
        let write = self.rng.chance(write_percent);
        let start = self.rng.below(4) * 1024;
        let end = (start + self.rng.pick(&[1024, 2048])).min(BLOCK_SIZE);
        Access { block, start, end, write }
    }

    fn device_block(&mut self) -> usize {
        self.rng.below(DEVICE_BLOCKS as u64) as usize
    }

    /// A `reads`/`writes` body of `accesses`.
    fn access_lists(accesses: &[Access]) -> String {
        let list = |write: bool| {
            let items: Vec<String> = accesses.iter().filter(|a| a.write == write).map(Gen::range).collect();
            items.join(", ")
        };
        format!("\"reads\": [{}], \"writes\": [{}]", list(false), list(true))
    }

    fn range(access: &Access) -> String {
        format!("[{}, {}]", hex(block_base(access.block) + access.start), access.end - access.start)
    }

    /// The stream a plain (not Async) copy or set of thread `t` runs on.
    fn default_stream(&self, t: usize) -> usize {
        if self.per_thread_default {
            per_thread_stream(t)
        } else {
            0
        }
    }

    /// A stream thread `t` may issue to: any but the other thread's per-thread default stream.
    fn stream(&mut self, t: usize) -> usize {
        loop {
            let s = self.rng.below(self.declared as u64) as usize;
            if STREAMS[s].0 != StreamKind::PerThreadDefault || s == per_thread_stream(t) {
                return s;
            }
        }
    }

    fn kernel(&mut self, t: usize) {
        let s = self.stream(t);
        let block = self.device_block();
        let mut accesses = vec![self.access(block, 60)];
        if self.rng.chance(40) {
            accesses.push(self.access(block, 40));
        }
        let body = format!("\"stream\": {s}, \"name\": \"k{}\", {}", self.line + 1, Gen::access_lists(&accesses));
        let line = self.emit(THREADS[t], "kernel", &body);
        self.model.enqueue(t, s, accesses, line, None);
    }

    /// `cudaMemsetAsync` on device memory, or the plain `cudaMemset` on device (no wait) or pinned memory (the
    /// host waits, rule 6).
    fn memset(&mut self, t: usize) {
        let plain = self.rng.chance(35);
        let (s, block) = if plain {
            let block = if self.rng.chance(40) { PINNED } else { self.device_block() };
            (self.default_stream(t), block)
        } else {
            (self.stream(t), self.device_block())
        };
        let to = self.access(block, 100);
        let body = format!(
            "\"stream\": {s}, \"to\": {}, \"bytes\": {}, \"to_memory\": \"{}\", \"sync\": {plain}",
            Gen::range(&to),
            to.end - to.start,
            memory_of(block)
        );
        let line = self.emit(THREADS[t], "memset", &body);
        let node = self.model.enqueue(t, s, vec![to], line, None);
        if plain && block == PINNED {
            self.model.learn(t, node);
        }
    }

    /// A copy between two device blocks, or between the pinned block and a device block, Async or plain: the
    /// plain ones to or from pinned memory make the host wait, device to device does not (rule 6).
    fn memcpy(&mut self, t: usize) {
        let plain = self.rng.chance(35);
        let s = if plain { self.default_stream(t) } else { self.stream(t) };
        let device = self.device_block();
        let (from_block, to_block, copy) = match self.rng.below(3) {
            0 => (PINNED, device, "HtoD"),
            1 => (device, PINNED, "DtoH"),
            _ => (device, (device + 1 + self.rng.below(DEVICE_BLOCKS as u64 - 1) as usize) % DEVICE_BLOCKS, "DtoD"),
        };
        let from = self.access(from_block, 0);
        let mut to = self.access(to_block, 100);
        to.end = (to.start + (from.end - from.start)).min(BLOCK_SIZE);
        let bytes = to.end - to.start;
        let from = Access { end: from.start + bytes, ..from };
        let body = format!(
            "\"stream\": {s}, \"copy\": \"{copy}\", \"from\": {}, \"to\": {}, \"bytes\": {bytes}, \"from_memory\": \"{}\", \"to_memory\": \"{}\", \"sync\": {plain}",
            Gen::range(&from),
            Gen::range(&to),
            memory_of(from_block),
            memory_of(to_block),
        );
        let line = self.emit(THREADS[t], "memcpy", &body);
        let node = self.model.enqueue(t, s, vec![from, to], line, None);
        if plain && copy != "DtoD" {
            self.model.learn(t, node);
        }
    }

    /// A copy between pageable host memory (not followed: no block) and a device block. From pageable memory
    /// the plain form waits for what the copy waits for and returns before the copy is done; to pageable memory
    /// both forms return when it is done (rule 6).
    fn pageable_memcpy(&mut self, t: usize) {
        let plain = self.rng.chance(50);
        let s = if plain { self.default_stream(t) } else { self.stream(t) };
        let device = self.device_block();
        let to_device = self.rng.chance(50);
        let access = self.access(device, if to_device { 100 } else { 0 });
        let bytes = access.end - access.start;
        let body = if to_device {
            format!(
                "\"copy\": \"HtoD\", \"to\": {}, \"from_memory\": \"pageable\", \"to_memory\": \"device\"",
                Gen::range(&access)
            )
        } else {
            format!(
                "\"copy\": \"DtoH\", \"from\": {}, \"from_memory\": \"device\", \"to_memory\": \"pageable\"",
                Gen::range(&access)
            )
        };
        let body = format!("\"stream\": {s}, {body}, \"bytes\": {bytes}, \"sync\": {plain}");
        let line = self.emit(THREADS[t], "memcpy", &body);
        let node = self.model.enqueue(t, s, vec![access], line, None);
        match (to_device, plain) {
            (true, true) => self.model.learn_before(t, node),
            (true, false) => {}
            (false, _) => self.model.learn(t, node),
        }
    }

    fn host_access(&mut self, t: usize) {
        let access = self.access(PINNED, 50);
        let body = format!("\"name\": \"host\", {}", Gen::access_lists(&[access]));
        let line = self.emit(THREADS[t], "host_access", &body);
        self.model.host_access(t, vec![access], line);
    }

    /// A host function on a stream (rule 13), its loads and stores on the driver thread.
    fn host_func(&mut self, t: usize) {
        let s = self.stream(t);
        let id = self.next_host_func;
        self.next_host_func += 1;
        let line =
            self.emit(THREADS[t], "host_func", &format!("\"stream\": {s}, \"id\": {id}, \"name\": \"callback\""));
        let node = self.model.enqueue(t, s, Vec::new(), line, None);
        for _ in 0..1 + self.rng.below(2) {
            let access = self.access(PINNED, 50);
            let body = format!(
                "\"name\": \"host\", {}, \"host_func\": {id}, \"fault\": \"guard\"",
                Gen::access_lists(&[access])
            );
            let line = self.emit(DRIVER_THREAD, "host_access", &body);
            self.model.nodes[node].accesses.push(access);
            self.model.nodes[node].lines.push(line);
        }
    }

    /// A graph of two to four nodes launched on a stream (the trace's inline `graph` record): each node touches a
    /// device block and depends on some of the nodes before it.
    fn graph(&mut self, t: usize) {
        let s = self.stream(t);
        let mut nodes = Vec::new();
        let mut items = Vec::new();
        for index in 0..2 + self.rng.below(3) as usize {
            let block = self.device_block();
            let access = self.access(block, 50);
            let deps: Vec<usize> = (0..index).filter(|_| self.rng.chance(40)).collect();
            let deps_text: Vec<String> = deps.iter().map(usize::to_string).collect();
            items.push(format!(
                "{{\"name\": \"n{index}\", {}, \"deps\": [{}]}}",
                Gen::access_lists(&[access]),
                deps_text.join(", ")
            ));
            nodes.push((vec![access], deps));
        }
        let body = format!("\"stream\": {s}, \"name\": \"g{}\", \"nodes\": [{}]", self.line + 1, items.join(", "));
        let line = self.emit(THREADS[t], "graph", &body);
        self.model.launch_graph(t, s, nodes, line);
    }

    fn record(&mut self, t: usize) {
        let (s, e) = (self.stream(t), self.rng.below(EVENTS) as usize);
        let line = self.emit(THREADS[t], "record", &format!("\"event\": {}, \"stream\": {s}", e + 1));
        let node = self.model.enqueue(t, s, Vec::new(), line, None);
        self.model.events[e] = Some(self.model.nodes[node].past.clone());
    }

    fn wait(&mut self, t: usize) {
        let (s, e) = (self.stream(t), self.rng.below(EVENTS) as usize);
        let line = self.emit(THREADS[t], "wait", &format!("\"stream\": {s}, \"event\": {}", e + 1));
        let recorded = self.model.events[e].clone();
        self.model.enqueue(t, s, Vec::new(), line, recorded);
    }

    /// A synchronization or a query of the host (rule 5).
    fn host_sync(&mut self, t: usize) {
        let (s, e) = (self.stream(t), self.rng.below(EVENTS) as usize);
        let thread = THREADS[t];
        match self.rng.below(6) {
            0 | 1 => {
                self.emit(thread, "sync", &format!("\"stream\": {s}"));
                self.model.sync_stream(t, s);
            }
            2 => {
                self.emit(thread, "sync", &format!("\"event\": {}", e + 1));
                self.model.sync_event(t, e);
            }
            3 => {
                let device = self.rng.below(DEVICES);
                let what = if self.rng.chance(50) { "device" } else { "context" };
                self.emit(thread, "sync", &format!("\"{what}\": {device}"));
                self.model.sync_device(t, device);
            }
            4 => {
                let ready = self.rng.chance(60);
                self.emit(thread, "query", &format!("\"stream\": {s}, \"ready\": {ready}"));
                if ready {
                    self.model.sync_stream(t, s);
                }
            }
            _ => {
                let ready = self.rng.chance(60);
                self.emit(thread, "query", &format!("\"event\": {}, \"ready\": {ready}", e + 1));
                if ready {
                    self.model.sync_event(t, e);
                }
            }
        }
    }

    /// A release into, or an acquire of, a host synchronization object (rule 10).
    fn host_edge(&mut self, t: usize) {
        let object = self.rng.below(OBJECTS) as usize;
        if self.rng.chance(50) {
            self.emit(THREADS[t], "host_release", &format!("\"object\": {}", object + 1));
            let known = self.model.threads[t].clone();
            self.model.objects[object].get_or_insert_with(NodeSet::default).join(&known);
        } else {
            self.emit(THREADS[t], "host_acquire", &format!("\"object\": {}", object + 1));
            if let Some(released) = self.model.objects[object].clone() {
                self.model.threads[t].join(&released);
            }
        }
    }

    fn generate(mut self, seed: u64, operations: u64) -> (String, Model) {
        self.preamble(seed);
        // In how many steps of a hundred a thread orders something rather than touching memory: traces from
        // racing all over to nearly ordered.
        let ordering = 35 + self.rng.below(50);
        // Some traces are mostly the host's own accesses to the pinned block, against copies to and from it.
        let host_heavy = self.rng.chance(40);
        for _ in 0..operations {
            let t = self.rng.below(THREADS.len() as u64) as usize;
            if self.declared < STREAMS.len() && self.rng.chance(8) {
                self.declare_stream(t, self.declared);
                self.declared += 1;
                continue;
            }
            let step = if self.rng.chance(ordering) {
                56 + self.rng.below(44)
            } else if host_heavy && self.rng.chance(50) {
                self.rng.pick(&[36, 47, 52])
            } else {
                self.rng.below(56)
            };
            match step {
                0..=3 => self.graph(t),
                4..=27 => self.kernel(t),
                28..=35 => self.memset(t),
                36..=42 => self.memcpy(t),
                43..=46 => self.pageable_memcpy(t),
                47..=51 => self.host_access(t),
                52..=55 => self.host_func(t),
                56..=66 => self.record(t),
                67..=77 => self.wait(t),
                78..=89 => self.host_sync(t),
                _ => self.host_edge(t),
            }
        }
        (self.out, self.model)
    }
}

fn kind_of(earlier: &Access, later: &Access) -> RaceKind {
    match (earlier.write, later.write) {
        (true, false) => RaceKind::ReadAfterWrite,
        (false, true) => RaceKind::WriteAfterRead,
        _ => RaceKind::WriteAfterWrite,
    }
}

/// What the model and the engine disagree on, in words; empty when they agree.
fn disagreements(model: &Model, races: &[(usize, usize, Access, Access)], analysis: &Analysis) -> Vec<String> {
    // The model's nodes an occurrence may stand for: the operation at its line, or, for a graph launch, the node
    // it names (a race between two nodes of one launch names them) or else any node of the launch.
    let nodes_of = |line: u64, graph_node: Option<u32>| -> Vec<usize> {
        let at_line = |node: &Node| node.lines.contains(&line);
        (0..model.nodes.len())
            .filter(|&n| at_line(&model.nodes[n]) && (graph_node.is_none() || model.nodes[n].graph_node == graph_node))
            .collect()
    };
    let mut problems = Vec::new();
    let findings: Vec<&RaceFinding> =
        analysis.findings.races.iter().chain(&analysis.findings.timing_only_races).collect();
    // Nothing false: each finding is a race of the model, of its kind, on its bytes.
    let mut found_pairs = BTreeSet::new();
    for race in &findings {
        let (earlier, later) = (race.earlier.origin, race.later.origin);
        let (start, end) = (race.range.start, race.range.start + race.range.len);
        let (a, b) = (nodes_of(earlier, race.earlier.node), nodes_of(later, race.later.node));
        let matching: Vec<(usize, usize)> = races
            .iter()
            .filter(|&&(x, y, first, second)| {
                (a.contains(&x) && b.contains(&y) || a.contains(&y) && b.contains(&x))
                    && kind_of(&first, &second) == race.kind
                    && first.overlap(&second).is_some_and(|(lo, hi)| lo < end && start < hi)
            })
            .map(|&(x, y, _, _)| (x, y))
            .collect();
        if matching.is_empty() {
            problems.push(format!(
                "the engine reports a {} race between lines {earlier} and {later} on {start:#x}..{end:#x}; the model has none",
                race.kind.as_str()
            ));
        }
        found_pairs.extend(matching);
    }
    // Nothing missed: each block the model finds a race on has a finding whose operations race there.
    for block in 0..BLOCKS {
        let on_block: Vec<_> = races.iter().filter(|race| race.2.block == block).collect();
        if let Some(&&(x, y, first, second)) = on_block.first() {
            if !on_block.iter().any(|race| found_pairs.contains(&(race.0, race.1))) {
                problems.push(format!(
                    "the model finds a {} race on block {} between lines {:?} and {:?} ({} racing pairs there); the engine reports none there",
                    kind_of(&first, &second).as_str(),
                    block + 1,
                    model.nodes[x].lines,
                    model.nodes[y].lines,
                    on_block.len()
                ));
            }
        }
    }
    problems
}

/// The trace of `seed` and its model.
fn trace(seed: u64) -> (String, Model) {
    let mut rng = Rng::new(seed);
    let operations = 12 + rng.below(40);
    Gen::new(seed).generate(seed, operations)
}

/// Whether seed `seed`'s trace raced, after asserting that the engine and the model agree on it.
fn check_seed(seed: u64) -> bool {
    let (text, model) = trace(seed);
    let analysis = match analyze_text("oracle.json", &text, HostOrder::PerThread) {
        Ok(analysis) => analysis,
        Err(error) => panic!("seed {seed}: the trace was refused: {error}\n{text}"),
    };
    let races = model.races();
    let problems = disagreements(&model, &races, &analysis);
    assert!(
        problems.is_empty(),
        "seed {seed}: the engine and the model of the rules disagree:\n  {}\ntrace:\n{text}",
        problems.join("\n  ")
    );
    !races.is_empty()
}

#[test]
fn the_engine_agrees_with_a_model_of_the_rules_on_random_traces() {
    let seeds = seeds_to_run("ORDERING_ORACLE", SEEDS, |seed| eprintln!("{}", trace(seed).0));
    let raced = seeds.iter().filter(|&&seed| check_seed(seed)).count();
    eprintln!("ordering_oracle: {} seeds, {raced} with races", seeds.len());
    if seeds.len() > 1 {
        // Traces that all race, or none, would test little of the ordering.
        assert!(
            raced * 100 >= seeds.len() * 30 && raced * 100 <= seeds.len() * 90,
            "{raced} of {} traces raced",
            seeds.len()
        );
    }
}
