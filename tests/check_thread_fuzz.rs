//! A differential fuzz test of the shadow check on a thread of its own (src/hb/checker.rs, docs/engine-split.md):
//! small pseudo-random but valid JSON traces, each analyzed with the check on the engine's thread and on its own
//! thread in both host orders, must give the same report, byte for byte, and the same findings as the engine
//! numbered them. The traces mix what `streamtrace synth` does not write: two processes at the same addresses,
//! several host threads with recorded host synchronization (`host_release`/`host_acquire`), the legacy default,
//! blocking, non-blocking and per-thread default streams (some declared midway), strided views, pointer
//! arguments, copies and sets of every memory kind, device, stream-ordered, mapped, pinned, managed and pool
//! allocations and their frees, host accesses, host functions and their accesses, framework ops, stream captures
//! with forks and joins, graphs built with the graph API, inline graphs, graph launches, and capture ranges.
//!
//! The generator is seeded (a splitmix64 written here), so a failing seed is reproduced by running it alone:
//! `CHECK_THREAD_FUZZ_SEED=N cargo test --test tests check_thread_fuzz -- --nocapture` prints its trace (and
//! `CHECK_THREAD_FUZZ_VERBOSE=1` whether each seed's trace analyzed and raced, and why one was refused); `CHECK_THREAD_FUZZ_SEEDS=N`
//! runs seeds 1 to N instead of the default.

use std::fmt::Write;

use streamtrace::analysis::analyze_source;
use streamtrace::hb::EngineOptions;
use streamtrace::ingest::json::JsonTraceReader;

use crate::check_thread::{compare_both_ways, BothWays};
use crate::util::random::{hex, seeds_to_run, Rng};

/// How many seeds the test runs (from 1).
const SEEDS: u64 = 200;

/// Every block's size: small, so that accesses overlap.
const SLOT_SIZE: u64 = 0x4000;
/// Device blocks per process (the same addresses in both processes: the shadows are per process).
const DEVICE_SLOTS: u64 = 4;
/// Pinned host blocks per process.
const PINNED_SLOTS: u64 = 2;
/// Pool blocks a live device block may be cut into.
const POOL_BLOCKS: u64 = 4;

fn device_base(slot: u64) -> u64 {
    0x7f00_0000_0000 + slot * 0x10000
}

fn pinned_base(slot: u64) -> u64 {
    0x6000_0000_0000 + slot * 0x10000
}

const MANAGED_BASE: u64 = 0x5000_0000_0000;

/// What a live block was allocated as, which decides how it is freed.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Kind {
    Device,
    StreamOrdered,
    VirtualMap,
    Host,
    Managed,
}

#[derive(Copy, Clone)]
struct Block {
    base: u64,
    live: Option<(u64, Kind)>,
}

/// The legacy default stream, two blocking and two non-blocking ones; stream 5 is declared midway, and each
/// thread's per-thread default stream at its first use.
const PREAMBLE_STREAMS: [(u64, &str); 4] =
    [(0, "legacy_default"), (1, "blocking"), (2, "non_blocking"), (3, "non_blocking")];
const LATE_STREAM: u64 = 5;
const PER_THREAD_BASE: u64 = 2_147_483_648;
/// Events used anywhere, and two kept for captures (recorded and waited on inside them only).
const EVENTS: [u64; 4] = [1, 2, 3, 4];
const CAPTURE_EVENTS: [u64; 2] = [100, 101];
/// The host object of each process's lock (the disciplined operations').
const LOCK: u64 = 77;
/// The driver thread host functions run on.
const DRIVER_THREAD: u64 = 900;

struct Process {
    pid: u64,
    threads: Vec<u64>,
    declared: Vec<u64>,
    device: Vec<Block>,
    pinned: Vec<Block>,
    managed: Block,
    /// By device block: the pool blocks handed out in it (their ids).
    pool: Vec<[Option<u64>; POOL_BLOCKS as usize]>,
    next_alloc: u64,
    next_pool: u64,
    next_host_func: u64,
    next_graph: u64,
    next_node: u64,
    next_object: u64,
    /// Executable graphs that may be launched.
    execs: Vec<u64>,
    /// Objects released into (by any thread), which an acquire picks from.
    objects: Vec<u64>,
}

struct Gen {
    rng: Rng,
    out: String,
    processes: Vec<Process>,
    /// Capture ranges: whether the header says so, the one open, the next id.
    ranges: bool,
    open_range: Option<u64>,
    next_range: u64,
    /// In how many operations of a hundred the thread takes the process's lock, and synchronizes the device
    /// before it lets go: 100 makes a trace without races, 0 one that races all over.
    discipline: u64,
    /// Leaves out what makes the engine wait for the checker (graph launches, a site's first pointer argument in
    /// a block, the end of a capture range), so that the checker's batches fill up.
    no_drains: bool,
}

impl Gen {
    fn new(seed: u64) -> Gen {
        let mut rng = Rng::new(seed);
        let process_count = if rng.chance(70) { 2 } else { 1 };
        let ranges = rng.chance(35);
        let processes = (0..process_count)
            .map(|pid| {
                let threads = (1..=2 + rng.below(2)).map(|t| pid * 10 + t).collect();
                Process {
                    pid,
                    threads,
                    declared: Vec::new(),
                    device: (0..DEVICE_SLOTS).map(|i| Block { base: device_base(i), live: None }).collect(),
                    pinned: (0..PINNED_SLOTS).map(|i| Block { base: pinned_base(i), live: None }).collect(),
                    managed: Block { base: MANAGED_BASE, live: None },
                    pool: vec![[None; POOL_BLOCKS as usize]; DEVICE_SLOTS as usize],
                    next_alloc: 1,
                    next_pool: 1,
                    next_host_func: 1,
                    next_graph: 1000,
                    next_node: 5000,
                    next_object: 1,
                    execs: Vec::new(),
                    objects: Vec::new(),
                }
            })
            .collect();
        let discipline = rng.pick(&[0, 60, 60, 85, 85, 95, 100, 100]);
        Gen {
            rng,
            out: String::new(),
            processes,
            ranges,
            open_range: None,
            next_range: 1,
            discipline,
            no_drains: false,
        }
    }

    /// Writes one record: `body` (the fields after `type`), with the process and thread.
    fn emit(&mut self, p: usize, thread: u64, kind: &str, body: &str) {
        let pid = self.processes[p].pid;
        let sep = if body.is_empty() { "" } else { ", " };
        // Process 0 is named now and then, and left to the default otherwise.
        let pid_field = if pid == 0 && self.rng.chance(50) { String::new() } else { format!(", \"pid\": {pid}") };
        writeln!(self.out, "{{\"type\": \"{kind}\"{pid_field}, \"thread\": {thread}{sep}{body}}}").expect("written");
    }

    /// A source line from a small set, so that sites repeat.
    fn src(&mut self) -> String {
        format!("\"src\": \"fuzz.cu:{}\"", 1 + self.rng.below(40))
    }

    fn generate(mut self, seed: u64, operations: u64) -> String {
        let mut header = format!(
            "{{\"type\": \"streamtrace\", \"version\": 1, \"comment\": \"check_thread_fuzz seed {seed}, discipline {}\"",
            self.discipline
        );
        if self.rng.chance(60) {
            header.push_str(", \"host_sync\": true");
        }
        if self.ranges {
            header.push_str(", \"ranges\": \"nvtx\"");
        }
        self.out.push_str(&header);
        self.out.push_str("}\n");
        for p in 0..self.processes.len() {
            let main = self.processes[p].threads[0];
            for (id, kind) in PREAMBLE_STREAMS {
                let priority = if kind == "non_blocking" && self.rng.chance(30) { ", \"priority\": -1" } else { "" };
                self.emit(p, main, "stream", &format!("\"id\": {id}, \"stream_kind\": \"{kind}\"{priority}"));
                self.processes[p].declared.push(id);
            }
            for event in EVENTS.iter().chain(&CAPTURE_EVENTS) {
                self.emit(p, main, "event", &format!("\"id\": {event}"));
            }
            // Most device blocks live from the start, so that most accesses land in one.
            for slot in 0..DEVICE_SLOTS as usize {
                if self.rng.chance(75) {
                    self.alloc_device(p, main, slot);
                }
            }
            for slot in 0..PINNED_SLOTS as usize {
                self.toggle_pinned(p, main, slot);
            }
            if self.tame() {
                // The stream-ordered allocations done before anything uses them.
                self.emit(p, main, "sync", "\"device\": 0");
                self.emit(p, main, "host_release", &format!("\"object\": {LOCK}, \"api\": \"pthread_create\""));
            }
        }
        for _ in 0..operations {
            self.operation();
        }
        if let Some(id) = self.open_range.take() {
            self.out.push_str(&format!("{{\"type\": \"range_end\", \"id\": {id}}}\n"));
        }
        for p in 0..self.processes.len() {
            if self.rng.chance(50) {
                let thread = self.processes[p].threads[0];
                self.emit(p, thread, "sync", "\"device\": 0");
            }
        }
        self.out
    }

    /// Whether every operation is ordered: graphs then chain their nodes too.
    fn tame(&self) -> bool {
        self.discipline == 100
    }

    /// A stream thread `thread` may issue to (declaring it first when it is declared late).
    fn stream(&mut self, p: usize, thread: u64) -> u64 {
        let choice = self.rng.below(8);
        let stream = match choice {
            0..=3 => choice,
            4 => LATE_STREAM,
            5 => PER_THREAD_BASE + thread,
            _ => self.rng.pick(&[2, 3]),
        };
        if !self.processes[p].declared.contains(&stream) {
            let kind = if stream == LATE_STREAM { "non_blocking" } else { "per_thread_default" };
            self.emit(p, thread, "stream", &format!("\"id\": {stream}, \"stream_kind\": \"{kind}\""));
            self.processes[p].declared.push(stream);
        }
        stream
    }

    /// A range in one of the process's blocks (live or not), 256-byte aligned.
    fn range(&mut self, p: usize) -> (u64, u64) {
        let base = match self.rng.below(10) {
            0..=6 => return self.device_range(),
            7 | 8 => pinned_base(self.rng.below(PINNED_SLOTS)),
            _ => self.processes[p].managed.base,
        };
        self.range_in(base)
    }

    fn device_range(&mut self) -> (u64, u64) {
        if self.rng.chance(25) {
            // Inside one of the pool blocks of the first segment, which are handed out again and again.
            let block = device_base(0) + self.rng.below(2) * (SLOT_SIZE / POOL_BLOCKS);
            let start = 256 * self.rng.below(8);
            return (block + start, 256 * (1 + self.rng.below(4)));
        }
        let base = device_base(self.rng.below(DEVICE_SLOTS));
        self.range_in(base)
    }

    fn pinned_range(&mut self) -> (u64, u64) {
        let base = pinned_base(self.rng.below(PINNED_SLOTS));
        self.range_in(base)
    }

    fn range_in(&mut self, base: u64) -> (u64, u64) {
        if self.rng.chance(10) {
            return (base, SLOT_SIZE);
        }
        let units = SLOT_SIZE / 256;
        let start = self.rng.below(units);
        let len = 1 + self.rng.below((units - start).min(12));
        (base + start * 256, len * 256)
    }

    /// A `reads`/`writes` item: a plain range, or a strided view of one or two dimensions inside a block.
    fn access_item(&mut self, base_range: (u64, u64)) -> String {
        let (start, len) = base_range;
        if self.rng.chance(70) {
            return format!("[{}, {len}]", hex(start));
        }
        let element = self.rng.pick(&[4u64, 8]);
        let offset = element * self.rng.below(4);
        let room = len.saturating_sub(offset) / element; // elements from the view's start to the range's end
        if room < 2 {
            return format!("[{}, {len}]", hex(start));
        }
        let inner_stride = 1 + self.rng.below(3);
        let inner_size = 1 + self.rng.below(((room - 1) / inner_stride + 1).min(64));
        let mut dims = vec![(inner_size, inner_stride)];
        let mut span = (inner_size - 1) * inner_stride + 1; // elements from the first to one past the last
        if self.rng.chance(40) && room > span * 2 {
            let outer_stride = span + self.rng.below(4);
            let outer_size = 1 + self.rng.below(((room - span) / outer_stride + 1).min(8));
            dims.insert(0, (outer_size, outer_stride));
            span += (outer_size - 1) * outer_stride;
        }
        if self.rng.chance(10) {
            // An expanded dimension: stride 0.
            dims.insert(0, (1 + self.rng.below(3), 0));
        }
        let dims = dims.iter().map(|(size, stride)| format!("[{size}, {stride}]")).collect::<Vec<_>>().join(", ");
        format!("[{}, {}, {element}, [{dims}]]", hex(start + offset), span * element)
    }

    fn access_list(&mut self, p: usize, most: u64, device_only: bool) -> String {
        let count = self.rng.below(most + 1);
        let items: Vec<String> = (0..count)
            .map(|_| {
                let range = if device_only { self.device_range() } else { self.range(p) };
                self.access_item(range)
            })
            .collect();
        format!("[{}]", items.join(", "))
    }

    /// A kernel's fields: reads, writes, and now and then pointer arguments into the device blocks.
    fn kernel_fields(&mut self, p: usize, pointers: bool) -> String {
        let reads = self.access_list(p, 2, false);
        let writes = self.access_list(p, 2, false);
        let mut fields = format!("\"reads\": {reads}, \"writes\": {writes}");
        if pointers && !self.no_drains && self.rng.chance(15) {
            let slot = self.rng.below(DEVICE_SLOTS);
            let inside = device_base(slot) + 256 * self.rng.below(SLOT_SIZE / 256);
            let mode = self.rng.pick(&["r", "w"]);
            fields.push_str(&format!(", \"pointers\": [[{}, \"{mode}\"]]", hex(inside)));
        }
        fields
    }

    fn kernel(&mut self, p: usize, thread: u64, stream: u64) {
        let fields = self.kernel_fields(p, true);
        let name = self.rng.pick(&["fill", "scale", "reduce", "gemm"]);
        let src = self.src();
        self.emit(p, thread, "kernel", &format!("\"stream\": {stream}, \"name\": \"{name}\", {fields}, {src}"));
    }

    fn kernel_on_any_stream(&mut self, p: usize, thread: u64) {
        let stream = self.stream(p, thread);
        self.kernel(p, thread, stream);
    }

    fn memcpy(&mut self, p: usize, thread: u64, stream: u64) {
        let device = self.device_range();
        let pinned = self.pinned_range();
        let sync = if self.rng.chance(25) { ", \"sync\": true" } else { "" };
        let src = self.src();
        let body = match self.rng.below(6) {
            0 => {
                let other = self.device_range();
                let len = device.1.min(other.1);
                format!("\"copy\": \"DtoD\", \"from\": [{}, {len}], \"to\": [{}, {len}]", hex(device.0), hex(other.0))
            }
            1 => {
                let len = device.1.min(pinned.1);
                format!(
                    "\"copy\": \"HtoD\", \"from\": [{}, {len}], \"to\": [{}, {len}], \"from_memory\": \"pinned\"",
                    hex(pinned.0),
                    hex(device.0)
                )
            }
            2 => {
                let len = device.1.min(pinned.1);
                format!(
                    "\"copy\": \"DtoH\", \"from\": [{}, {len}], \"to\": [{}, {len}], \"to_memory\": \"pinned\"",
                    hex(device.0),
                    hex(pinned.0)
                )
            }
            3 => {
                // From pageable memory the analyzer does not track, or back to it.
                let pageable = 0x1000_0000 + 0x1000 * self.rng.below(4);
                if self.rng.chance(50) {
                    format!(
                        "\"copy\": \"HtoD\", \"from\": [{}, {}], \"to\": [{}, {}]",
                        hex(pageable),
                        device.1,
                        hex(device.0),
                        device.1
                    )
                } else {
                    format!(
                        "\"copy\": \"DtoH\", \"from\": [{}, {}], \"to\": [{}, {}]",
                        hex(device.0),
                        device.1,
                        hex(pageable),
                        device.1
                    )
                }
            }
            4 => {
                let managed = self.range_in(MANAGED_BASE);
                let len = device.1.min(managed.1);
                format!(
                    "\"copy\": \"Default\", \"from\": [{}, {len}], \"to\": [{}, {len}], \"from_memory\": \"managed\", \"to_memory\": \"device\"",
                    hex(managed.0),
                    hex(device.0)
                )
            }
            _ => {
                let len = pinned.1.min(device.1);
                format!(
                    "\"copy\": \"PtoP\", \"from\": [{}, {len}], \"to\": [{}, {len}]",
                    hex(device.0),
                    hex(device_base(0) + 0x100)
                )
            }
        };
        self.emit(p, thread, "memcpy", &format!("\"stream\": {stream}, {body}{sync}, {src}"));
    }

    fn memset(&mut self, p: usize, thread: u64, stream: u64) {
        let sync = if self.rng.chance(25) { ", \"sync\": true" } else { "" };
        let (to, memory) = match self.rng.below(6) {
            0 => (self.pinned_range(), ", \"to_memory\": \"pinned\""),
            1 => (self.range_in(MANAGED_BASE), ", \"to_memory\": \"managed\""),
            _ => (self.device_range(), ""),
        };
        let src = self.src();
        let body = format!("\"stream\": {stream}, \"to\": [{}, {}]{memory}{sync}, {src}", hex(to.0), to.1);
        self.emit(p, thread, "memset", &body);
    }

    fn alloc_device(&mut self, p: usize, thread: u64, slot: usize) {
        let id = self.processes[p].next_alloc;
        self.processes[p].next_alloc += 1;
        let base = self.processes[p].device[slot].base;
        // The first two are the caching allocator's segments, which pool blocks are handed out in.
        let choice = if slot < 2 { 0 } else { self.rng.below(10) };
        let (kind, extra) = match choice {
            0..=5 => (Kind::Device, String::new()),
            6..=8 => {
                let stream = self.stream(p, thread);
                (Kind::StreamOrdered, format!(", \"alloc_kind\": \"stream_ordered\", \"stream\": {stream}"))
            }
            _ => (Kind::VirtualMap, ", \"alloc_kind\": \"virtual_map\"".to_string()),
        };
        let src = self.src();
        let body = format!(
            "\"id\": {id}, \"addr\": {}, \"size\": {SLOT_SIZE}{extra}, \"label\": \"d{slot}\", {src}",
            hex(base)
        );
        self.emit(p, thread, "alloc", &body);
        self.processes[p].device[slot].live = Some((id, kind));
    }

    /// Allocates the device block `slot`, or frees it (its pool blocks first).
    fn toggle_device(&mut self, p: usize, thread: u64, slot: usize) {
        let Some((id, kind)) = self.processes[p].device[slot].live else {
            return self.alloc_device(p, thread, slot);
        };
        for j in 0..POOL_BLOCKS as usize {
            if self.processes[p].pool[slot][j].is_some() {
                self.toggle_pool(p, thread, slot, j);
            }
        }
        let extra = match kind {
            Kind::StreamOrdered => {
                let stream = self.stream(p, thread);
                format!(", \"free_kind\": \"stream_ordered\", \"stream\": {stream}")
            }
            Kind::VirtualMap => ", \"free_kind\": \"virtual_unmap\"".to_string(),
            _ => String::new(),
        };
        let src = self.src();
        self.emit(p, thread, "free", &format!("\"id\": {id}{extra}, {src}"));
        self.processes[p].device[slot].live = None;
    }

    fn toggle_pinned(&mut self, p: usize, thread: u64, slot: usize) {
        let block = self.processes[p].pinned[slot];
        let src = self.src();
        match block.live {
            Some((id, _)) => {
                self.emit(p, thread, "free", &format!("\"id\": {id}, \"free_kind\": \"host\", {src}"));
                self.processes[p].pinned[slot].live = None;
            }
            None => {
                let id = self.alloc_whole(p, thread, block.base, "host", &src);
                self.processes[p].pinned[slot].live = Some((id, Kind::Host));
            }
        }
    }

    fn toggle_managed(&mut self, p: usize, thread: u64) {
        let block = self.processes[p].managed;
        let src = self.src();
        match block.live {
            Some((id, _)) => {
                self.emit(p, thread, "free", &format!("\"id\": {id}, {src}"));
                self.processes[p].managed.live = None;
            }
            None => {
                let id = self.alloc_whole(p, thread, block.base, "managed", &src);
                self.processes[p].managed.live = Some((id, Kind::Managed));
            }
        }
    }

    /// Allocates the whole slot at `base` as `alloc_kind`, at `src`: the block's id.
    fn alloc_whole(&mut self, p: usize, thread: u64, base: u64, alloc_kind: &str, src: &str) -> u64 {
        let id = self.processes[p].next_alloc;
        self.processes[p].next_alloc += 1;
        let body = format!(
            "\"id\": {id}, \"addr\": {}, \"size\": {SLOT_SIZE}, \"alloc_kind\": \"{alloc_kind}\", {src}",
            hex(base)
        );
        self.emit(p, thread, "alloc", &body);
        id
    }

    /// Hands out pool block `j` of device block `slot` (which must be live), or gives it back.
    fn toggle_pool(&mut self, p: usize, thread: u64, slot: usize, j: usize) {
        let src = self.src();
        match self.processes[p].pool[slot][j] {
            Some(id) => {
                self.emit(p, thread, "free", &format!("\"id\": {id}, \"free_kind\": \"pool_block\", {src}"));
                self.processes[p].pool[slot][j] = None;
            }
            None => {
                let id = self.processes[p].next_pool;
                self.processes[p].next_pool += 1;
                let size = SLOT_SIZE / POOL_BLOCKS;
                let addr = device_base(slot as u64) + j as u64 * size;
                let stream = self.stream(p, thread);
                let body = format!(
                    "\"id\": {id}, \"addr\": {}, \"size\": {size}, \"alloc_kind\": \"pool_block\", \"stream\": {stream}, \"label\": \"t{id}\", {src}",
                    hex(addr)
                );
                self.emit(p, thread, "alloc", &body);
                self.processes[p].pool[slot][j] = Some(id);
            }
        }
    }

    fn host_access(&mut self, p: usize, thread: u64, host_func: Option<u64>) {
        let base = if self.rng.chance(75) { pinned_base(self.rng.below(PINNED_SLOTS)) } else { MANAGED_BASE };
        let range = self.range_in(base);
        let item = self.access_item(range);
        let field = if self.rng.chance(50) { "reads" } else { "writes" };
        let func = host_func.map_or(String::new(), |id| format!(", \"host_func\": {id}, \"fault\": \"guard\""));
        let src = self.src();
        self.emit(p, thread, "host_access", &format!("\"name\": \"host\", \"{field}\": [{item}]{func}, {src}"));
    }

    /// A host function on `stream`, its accesses on the driver thread, and now and then what that thread hands on.
    fn host_func(&mut self, p: usize, thread: u64, stream: u64) {
        let id = self.processes[p].next_host_func;
        self.processes[p].next_host_func += 1;
        let src = self.src();
        self.emit(
            p,
            thread,
            "host_func",
            &format!("\"stream\": {stream}, \"id\": {id}, \"name\": \"callback\", {src}"),
        );
        for _ in 0..self.rng.below(3) {
            self.host_access(p, DRIVER_THREAD, Some(id));
        }
        if self.rng.chance(50) {
            let object = (0xff_ffff << 40) + id;
            self.emit(p, DRIVER_THREAD, "host_acquire", &format!("\"object\": {object}, \"api\": \"host function\""));
            if self.rng.chance(70) {
                let object = self.new_object(p);
                self.emit(p, DRIVER_THREAD, "host_release", &format!("\"object\": {object}, \"api\": \"sem_post\""));
            }
        }
    }

    fn new_object(&mut self, p: usize) -> u64 {
        // A few objects shared as mutexes, and snapshots released once.
        let object = if self.rng.chance(50) {
            1 + self.rng.below(3)
        } else {
            self.processes[p].next_object += 1;
            (1 << 40) * 7 + self.processes[p].next_object
        };
        self.processes[p].objects.push(object);
        object
    }

    /// A framework op: its kernels, then its end with the extents its tensors span.
    fn framework_op(&mut self, p: usize, thread: u64, stream: u64) {
        self.emit(p, thread, "op_begin", "");
        for _ in 0..1 + self.rng.below(2) {
            let pointers = if !self.no_drains && self.rng.chance(50) {
                format!(", \"pointers\": [[{}, \"w\"]]", hex(device_base(self.rng.below(DEVICE_SLOTS))))
            } else {
                String::new()
            };
            self.emit(p, thread, "kernel", &format!("\"stream\": {stream}, \"name\": \"op_kernel\"{pointers}"));
        }
        let reads = self.access_list(p, 2, true);
        let writes = self.access_list(p, 1, true);
        let src = self.src();
        let name = self.rng.pick(&["add_.Tensor", "mul.Tensor", "copy_.default"]);
        self.emit(
            p,
            thread,
            "op_end",
            &format!("\"name\": \"{name}\", \"reads\": {reads}, \"writes\": {writes}, {src}"),
        );
    }

    /// One captured operation on `stream`.
    fn captured_op(&mut self, p: usize, thread: u64, stream: u64) {
        match self.rng.below(4) {
            0 => self.memset_device(p, thread, stream),
            _ => self.kernel(p, thread, stream),
        }
    }

    fn memset_device(&mut self, p: usize, thread: u64, stream: u64) {
        let to = self.device_range();
        let src = self.src();
        self.emit(p, thread, "memset", &format!("\"stream\": {stream}, \"to\": [{}, {}], {src}", hex(to.0), to.1));
    }

    /// A stream capture on a non-blocking stream, a fork to the other one joined before the end, instantiated.
    fn capture(&mut self, p: usize, thread: u64) {
        let (capturing, side) = if self.rng.chance(50) { (2, 3) } else { (3, 2) };
        let src = self.src();
        self.emit(p, thread, "capture_begin", &format!("\"stream\": {capturing}, {src}"));
        for _ in 0..1 + self.rng.below(2) {
            self.captured_op(p, thread, capturing);
        }
        if self.rng.chance(30) {
            // A wait on an event recorded outside: an event-wait node.
            let event = self.rng.pick(&EVENTS);
            self.emit(p, thread, "wait", &format!("\"stream\": {capturing}, \"event\": {event}"));
        }
        if self.rng.chance(70) {
            let [fork, join] = CAPTURE_EVENTS;
            self.emit(p, thread, "record", &format!("\"event\": {fork}, \"stream\": {capturing}"));
            self.emit(p, thread, "wait", &format!("\"stream\": {side}, \"event\": {fork}"));
            for _ in 0..1 + self.rng.below(2) {
                self.captured_op(p, thread, side);
            }
            if !self.tame() && self.rng.chance(50) {
                // Unordered with the side stream's nodes: a race inside the graph.
                self.captured_op(p, thread, capturing);
            }
            self.emit(p, thread, "record", &format!("\"event\": {join}, \"stream\": {side}"));
            self.emit(p, thread, "wait", &format!("\"stream\": {capturing}, \"event\": {join}"));
        }
        if self.rng.chance(50) {
            self.captured_op(p, thread, capturing);
        }
        let graph = self.processes[p].next_graph;
        self.processes[p].next_graph += 1;
        self.emit(p, thread, "capture_end", &format!("\"stream\": {capturing}, \"graph\": {graph}"));
        self.instantiate(p, thread, graph);
    }

    fn instantiate(&mut self, p: usize, thread: u64, graph: u64) {
        let exec = self.processes[p].next_graph;
        self.processes[p].next_graph += 1;
        self.emit(p, thread, "graph_instantiate", &format!("\"graph\": {graph}, \"exec\": {exec}"));
        self.processes[p].execs.push(exec);
    }

    /// A graph built with the graph API: nodes with dependencies on earlier ones, then instantiated.
    fn graph_api(&mut self, p: usize, thread: u64) {
        let graph = self.processes[p].next_graph;
        self.processes[p].next_graph += 1;
        self.emit(p, thread, "graph_create", &format!("\"graph\": {graph}"));
        let mut nodes: Vec<u64> = Vec::new();
        for _ in 0..1 + self.rng.below(4) {
            let node = self.processes[p].next_node;
            self.processes[p].next_node += 1;
            let deps: Vec<String> = if self.tame() {
                nodes.last().iter().map(|node| node.to_string()).collect()
            } else {
                nodes.iter().filter(|_| self.rng.chance(40)).map(u64::to_string).collect()
            };
            let (kind, fields) = match self.rng.below(5) {
                0 => {
                    let to = self.device_range();
                    ("memset", format!("\"writes\": [[{}, {}]]", hex(to.0), to.1))
                }
                1 => {
                    let (from, to) = (self.device_range(), self.device_range());
                    let len = from.1.min(to.1);
                    ("memcpy", format!("\"reads\": [[{}, {len}]], \"writes\": [[{}, {len}]]", hex(from.0), hex(to.0)))
                }
                _ => ("kernel", self.kernel_fields(p, true)),
            };
            let src = self.src();
            let body = format!(
                "\"graph\": {graph}, \"node\": {node}, \"node_kind\": \"{kind}\", \"name\": \"n{node}\", \"deps\": [{}], {fields}, {src}",
                deps.join(", ")
            );
            self.emit(p, thread, "graph_node", &body);
            nodes.push(node);
        }
        if nodes.len() >= 2 && self.rng.chance(30) {
            let (a, b) = (nodes[0], nodes[nodes.len() - 1]);
            self.emit(p, thread, "graph_dep_add", &format!("\"graph\": {graph}, \"node\": {b}, \"deps\": [{a}]"));
        }
        self.instantiate(p, thread, graph);
    }

    /// A graph written out inline (one launch).
    fn inline_graph(&mut self, p: usize, thread: u64, stream: u64) {
        let count = 1 + self.rng.below(4);
        let nodes: Vec<String> = (0..count)
            .map(|i| {
                let fields = self.kernel_fields(p, false);
                let deps: Vec<String> = if self.tame() {
                    (i.saturating_sub(1)..i).map(|d| d.to_string()).collect()
                } else {
                    (0..i).filter(|_| self.rng.chance(40)).map(|d| d.to_string()).collect()
                };
                format!("{{\"name\": \"g{i}\", {fields}, \"deps\": [{}]}}", deps.join(", "))
            })
            .collect();
        let src = self.src();
        let body = format!("\"stream\": {stream}, \"name\": \"step\", \"nodes\": [{}], {src}", nodes.join(", "));
        self.emit(p, thread, "graph", &body);
    }

    /// One operation of a thread of a process, under the process's lock and with the device synchronized before
    /// the lock is let go where the trace's discipline says.
    fn operation(&mut self) {
        let p = self.rng.below(self.processes.len() as u64) as usize;
        let thread = self.rng.pick(&self.processes[p].threads.clone());
        let disciplined = self.rng.chance(self.discipline);
        if disciplined {
            self.emit(p, thread, "host_acquire", &format!("\"object\": {LOCK}, \"api\": \"pthread_mutex_lock\""));
        }
        self.unordered_operation(p, thread);
        if disciplined {
            self.emit(p, thread, "sync", "\"device\": 0");
            self.emit(p, thread, "host_release", &format!("\"object\": {LOCK}, \"api\": \"pthread_mutex_unlock\""));
        }
    }

    fn unordered_operation(&mut self, p: usize, thread: u64) {
        if self.ranges && !self.no_drains && self.rng.chance(3) {
            match self.open_range.take() {
                Some(id) => self.out.push_str(&format!("{{\"type\": \"range_end\", \"id\": {id}}}\n")),
                None => {
                    let id = self.next_range;
                    self.next_range += 1;
                    self.out.push_str(&format!("{{\"type\": \"range_begin\", \"id\": {id}, \"name\": \"step\"}}\n"));
                    self.open_range = Some(id);
                }
            }
            return;
        }
        match self.rng.below(100) {
            0..=21 => self.kernel_on_any_stream(p, thread),
            22..=27 => {
                let stream = self.stream(p, thread);
                self.memcpy(p, thread, stream);
            }
            28..=31 => {
                let stream = self.stream(p, thread);
                self.memset(p, thread, stream);
            }
            32..=39 => {
                let (stream, event) = (self.stream(p, thread), self.rng.pick(&EVENTS));
                self.emit(p, thread, "record", &format!("\"event\": {event}, \"stream\": {stream}"));
            }
            40..=47 => {
                let (stream, event) = (self.stream(p, thread), self.rng.pick(&EVENTS));
                let src = self.src();
                self.emit(p, thread, "wait", &format!("\"stream\": {stream}, \"event\": {event}, {src}"));
            }
            48..=50 => {
                let stream = self.stream(p, thread);
                self.emit(p, thread, "sync", &format!("\"stream\": {stream}"));
            }
            51 | 52 => {
                let event = self.rng.pick(&EVENTS);
                self.emit(p, thread, "sync", &format!("\"event\": {event}"));
            }
            53 => {
                let what = self.rng.pick(&["device", "context"]);
                self.emit(p, thread, "sync", &format!("\"{what}\": 0"));
            }
            54..=56 => {
                let ready = self.rng.chance(60);
                let what = if self.rng.chance(50) {
                    format!("\"stream\": {}", self.stream(p, thread))
                } else {
                    format!("\"event\": {}", self.rng.pick(&EVENTS))
                };
                self.emit(p, thread, "query", &format!("{what}, \"ready\": {ready}"));
            }
            57..=60 => {
                let slot = self.rng.below(DEVICE_SLOTS) as usize;
                self.toggle_device(p, thread, slot);
            }
            61..=63 | 95..=99 => {
                // Pool blocks in two places of two device blocks: handed out again where they were given back
                // (the tensor block reused, which findings name).
                let slot = if self.rng.chance(75) { 0 } else { 1 };
                if self.processes[p].device[slot].live.is_some_and(|(_, kind)| kind == Kind::Device) {
                    let j = self.rng.below(2) as usize;
                    let was_live = self.processes[p].pool[slot][j].is_some();
                    self.toggle_pool(p, thread, slot, j);
                    if was_live && self.rng.chance(60) {
                        // Handed out again at once and written, maybe on another stream than the last user's.
                        self.toggle_pool(p, thread, slot, j);
                        let size = SLOT_SIZE / POOL_BLOCKS;
                        let block = device_base(slot as u64) + j as u64 * size;
                        let stream = self.stream(p, thread);
                        let src = self.src();
                        let body = format!(
                            "\"stream\": {stream}, \"name\": \"zero_\", \"writes\": [[{}, {size}]], {src}",
                            hex(block)
                        );
                        self.emit(p, thread, "kernel", &body);
                    }
                }
            }
            64 => {
                let slot = self.rng.below(PINNED_SLOTS) as usize;
                self.toggle_pinned(p, thread, slot);
            }
            65 => self.toggle_managed(p, thread),
            66..=69 => self.host_access(p, thread, None),
            70..=71 => {
                let stream = self.stream(p, thread);
                self.host_func(p, thread, stream);
            }
            72..=76 => {
                let object = self.new_object(p);
                self.emit(
                    p,
                    thread,
                    "host_release",
                    &format!("\"object\": {object}, \"api\": \"pthread_mutex_unlock\""),
                );
            }
            77..=82 => {
                // Mostly an object released before; now and then one nothing released into.
                let object = match self.processes[p].objects.len() {
                    0 => 1,
                    n if self.rng.chance(90) => self.processes[p].objects[self.rng.below(n as u64) as usize],
                    _ => 999,
                };
                self.emit(p, thread, "host_acquire", &format!("\"object\": {object}, \"api\": \"pthread_mutex_lock\""));
            }
            83 | 84 => self.capture(p, thread),
            85 => self.graph_api(p, thread),
            86..=89 => {
                if let (Some(&exec), false) = (self.processes[p].execs.last(), self.no_drains) {
                    let exec = if self.rng.chance(70) { exec } else { self.rng.pick(&self.processes[p].execs.clone()) };
                    let stream = self.stream(p, thread);
                    let src = self.src();
                    self.emit(p, thread, "graph_launch", &format!("\"exec\": {exec}, \"stream\": {stream}, {src}"));
                }
            }
            90 | 91 if !self.no_drains => {
                let stream = self.stream(p, thread);
                self.inline_graph(p, thread, stream);
            }
            90 | 91 => self.kernel_on_any_stream(p, thread),
            92..=94 => {
                let stream = self.stream(p, thread);
                self.framework_op(p, thread, stream);
            }
            _ => unreachable!("a number below 100"),
        }
    }
}

/// The trace of `seed`.
fn trace(seed: u64) -> String {
    let mut rng = Rng::new(seed ^ 0xabcd);
    // Every 40th trace is long, and leaves out what makes the engine wait for the checker, so that the checker's
    // jobs fill several batches (4,096 jobs each) and its conflicts come back while the engine has moved on, not
    // only when the engine waits for them. Their discipline keeps the races (and the reports) few.
    let long = seed % 40 == 0;
    let operations = if long { 2000 + rng.below(500) } else { 60 + rng.below(140) };
    let mut generator = Gen::new(seed);
    if long {
        generator.discipline = 85;
        generator.no_drains = true;
    }
    generator.generate(seed, operations)
}

/// Seed `seed`'s trace analyzed both ways (`check_thread::compare_both_ways`, which asserts the same reports).
fn check_seed(seed: u64) -> BothWays {
    let text = trace(seed);
    let context = format!("trace:\n{text}");
    let analyze =
        |options| analyze_source("fuzz.json", Box::new(JsonTraceReader::from_text("fuzz.json", text.clone())), options);
    let outcome = compare_both_ways(&format!("seed {seed}"), &context, analyze);
    if std::env::var_os("CHECK_THREAD_FUZZ_VERBOSE").is_some() {
        let header = text.lines().next().unwrap_or("");
        eprintln!("SEED {seed} analyzed {} raced {} {header}", outcome.analyzed, outcome.raced);
        if let Err(refusal) = analyze(EngineOptions::default()) {
            eprintln!("seed {seed} refused: {refusal}");
        }
    }
    outcome
}

#[test]
fn random_traces_are_reported_the_same_with_the_check_on_its_own_thread() {
    let seeds = seeds_to_run("CHECK_THREAD_FUZZ", SEEDS, |seed| eprintln!("{}", trace(seed)));
    let outcomes: Vec<BothWays> = seeds.iter().map(|&seed| check_seed(seed)).collect();
    let analyzed = outcomes.iter().filter(|o| o.analyzed).count();
    let raced = outcomes.iter().filter(|o| o.raced).count();
    eprintln!("check_thread_fuzz: {} seeds, {analyzed} analyzed, {raced} with races", seeds.len());
    if seeds.len() > 1 {
        // A generator whose traces the analyzer refuses proves nothing; nor do traces that all race or none.
        assert!(analyzed * 100 >= seeds.len() * 95, "{analyzed} of {} traces analyzed", seeds.len());
        assert!(raced * 100 >= analyzed * 30, "{raced} of {analyzed} traces raced");
        assert!(raced < analyzed, "every trace raced: the generator makes no clean trace");
    }
}
