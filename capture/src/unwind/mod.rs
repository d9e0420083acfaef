//! Native call sites: the return addresses of the program's frames that led to a recorded call, found by
//! walking the stack from inside the CUPTI callback with the modules' DWARF call frame information.
//!
//! The walk runs on every recorded call, so it is cached three times. The last few walks are replayed first
//! (recent.rs): from the same start over the same stack words, a walk would find the same call site, and checking
//! that takes loads that do not wait on each other. Otherwise each path walked is kept as a tree of frames
//! (paths.rs): a walk along a known path reads each return address from the stack (stack.rs) and compares it
//! with the next known frame's, and the path's end remembers the call site it led to. And each code address's
//! rule is worked out once (the loader names its module, gimli evaluates its CFI: modules.rs, rules.rs) and kept
//! in a small direct-mapped cache. Frames of the capture library itself, CUPTI, the driver and
//! the shared CUDA runtime are walked through but not kept; the next `MAX_FRAMES` are.
//!
//! Never a fault in the program: stack reads stay between the stack pointer and the thread's stack top, a code
//! address is only trusted once the loader has said which module maps it (and the walk stops at one it does
//! not know), and any rule the loop cannot follow ends the walk with the frames found so far.

mod modules;
mod paths;
mod recent;
mod rules;
mod stack;

use gimli::UnwindContext;

pub use modules::ModuleInfo;
use paths::{NodeId, Paths};
use recent::Recent;
use rules::Rule;
pub use stack::{StackWords, Start};

/// The loaded module that maps code address `address` (path, load bias, build id), asked of the loader.
pub fn module_at(address: u64) -> Option<ModuleInfo> {
    modules::look_up(address, &mut UnwindContext::new()).map(|found| found.module)
}

/// Frames kept per call site: enough to pass the CUDA runtime linked into the program (`cudart_static`) and
/// the kernel's launch stub, and reach the caller's caller.
pub const MAX_FRAMES: usize = 16;
/// Frames walked at most, kept or not.
const MAX_DEPTH: usize = 64;
/// Slots of the rule cache (a power of two); it serves the first walk of each new path.
const CACHE_SLOTS: usize = 1024;
/// The tree's root: the parent of every walk's first frame.
const ROOT: NodeId = 0;

/// The frames of one call: return addresses, innermost first, and the index of each one's module.
pub struct Frames {
    pub addresses: [u64; MAX_FRAMES],
    pub modules: [u16; MAX_FRAMES],
    pub len: usize,
}

impl Frames {
    pub fn new() -> Frames {
        Frames { addresses: [0; MAX_FRAMES], modules: [0; MAX_FRAMES], len: 0 }
    }

    pub fn addresses(&self) -> &[u64] {
        &self.addresses[..self.len]
    }
}

impl Default for Frames {
    fn default() -> Self {
        Frames::new()
    }
}

/// How the walks went, for `STREAMTRACE_WALK_STATS` (printed at exit).
#[derive(Copy, Clone, Debug, Default)]
pub struct WalkStats {
    /// Walks answered by replaying a recent one.
    pub replayed: u64,
    /// Walks along the tree of paths, and the frames they visited.
    pub walked: u64,
    pub frames: u64,
    /// Walks that ended where another walk of the same path might not (a stack read refused, a null return
    /// address): their site is looked up by its frames each time.
    pub open_ended: u64,
}

/// What a walk found.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Walk {
    /// A known path, whose call site is this one (the frames were not all gathered).
    Known(u32),
    /// The kept frames are in the `Frames` given. When `end` is set, the walk ended where any walk along the
    /// same path ends: [`Unwinder::remember`] the site there, and the next walk will say [`Walk::Known`].
    Found { end: Option<NodeId> },
}

/// A cached rule: for code address `address`, its module and whether frames there are kept.
#[derive(Copy, Clone)]
struct Slot {
    address: u64,
    rule: Rule,
    module: u16,
    kept: bool,
}

const EMPTY: Slot = Slot { address: 0, rule: Rule::Unknown, module: NO_MODULE, kept: false };
/// The module of an address no loaded module maps.
const NO_MODULE: u16 = u16::MAX;

/// Walks the calling thread's stack; holds the rule cache, the paths walked and the modules met so far.
pub struct Unwinder {
    slots: Box<[Slot; CACHE_SLOTS]>,
    paths: Paths,
    modules: Vec<ModuleInfo>,
    /// Whether each module's frames are walked through rather than kept.
    runtime: Vec<bool>,
    /// Whether each module is the CUDA driver (libcuda), whose threads run host functions.
    driver: Vec<bool>,
    /// During a fault's walk: its first frame, the faulting instruction, is kept.
    keep_first: bool,
    /// Whether the last walk along the tree passed a frame of the driver.
    passed_driver: bool,
    context: Box<UnwindContext<usize>>,
    /// The address of a function of this library, whose module is the capture's own.
    own_code: u64,
    recent: Recent,
    /// The last walk: where it started, whether it used the start's frame pointer, the stack words it read.
    last_start: Start,
    start_bp_used: bool,
    reads: Vec<(u64, u64)>,
    pub stats: WalkStats,
}

impl Default for Unwinder {
    fn default() -> Self {
        Unwinder::new()
    }
}

impl Unwinder {
    pub fn new() -> Unwinder {
        Unwinder::walking_through(Unwinder::walk as fn(&mut Unwinder, Start, &mut Frames) -> Walk as usize as u64)
    }

    /// An unwinder that keeps the frames of the capture's own module too (tests, where that module is the test
    /// program).
    #[cfg(test)]
    pub fn keeping_own_frames() -> Unwinder {
        Unwinder::walking_through(0)
    }

    /// An unwinder that walks through the frames of the module mapping `own_code` without keeping them.
    fn walking_through(own_code: u64) -> Unwinder {
        Unwinder {
            slots: Box::new([EMPTY; CACHE_SLOTS]),
            paths: Paths::new(),
            modules: Vec::new(),
            runtime: Vec::new(),
            driver: Vec::new(),
            keep_first: false,
            passed_driver: false,
            context: Box::new(UnwindContext::new()),
            own_code,
            recent: Recent::default(),
            last_start: Start { pc: 0, sp: 0, bp: 0 },
            start_bp_used: false,
            reads: Vec::with_capacity(2 * MAX_DEPTH),
            stats: WalkStats::default(),
        }
    }

    /// The module with index `index` in `Frames::modules`.
    pub fn module(&self, index: u16) -> Option<&ModuleInfo> {
        self.modules.get(index as usize)
    }

    /// Notes the call site that walks ending at `end` lead to (`end` from the last walk).
    pub fn remember(&mut self, end: NodeId, site: u32) {
        self.paths.set_site(end, site);
        self.recent.keep(self.last_start, self.start_bp_used, &self.reads, site);
    }

    /// As [`Unwinder::remember`], for a fault's walk: its path only. A replay checks where a walk starts and
    /// the stack words it read, not its first pc, which for a fault is not the CUPTI callback's.
    pub fn remember_fault(&mut self, end: NodeId, site: u32) {
        self.paths.set_site(end, site);
    }

    /// The index of the module that maps `address`, and whether it is the CUDA stack's (the driver, CUPTI, the
    /// runtime, the capture); None when no loaded module maps it.
    pub fn module_of(&mut self, address: u64) -> Option<(u16, bool)> {
        let slot = self.slot(address);
        (slot.module != NO_MODULE).then(|| (slot.module, self.runtime[slot.module as usize]))
    }

    /// Walks the calling thread's stack outward from `start`, keeping frames in `out`. `start` must be in a
    /// frame that is still live (a caller of this function, or this function's caller itself).
    #[inline(never)]
    pub fn walk(&mut self, start: Start, out: &mut Frames) -> Walk {
        const LOST: Walk = Walk::Found { end: None };
        out.len = 0;
        if cfg!(not(target_arch = "x86_64")) {
            return LOST;
        }
        let Some(stack) = StackWords::above(start.sp) else { return LOST };
        if let Some(site) = self.recent.site(start, &stack) {
            self.stats.replayed += 1;
            return Walk::Known(site);
        }
        let walk = self.walk_tree(start, &stack, out);
        self.stats.walked += 1;
        self.stats.frames += self.reads.len() as u64;
        match walk {
            Walk::Known(site) => self.recent.keep(start, self.start_bp_used, &self.reads, site),
            Walk::Found { end: None } => self.stats.open_ended += 1,
            Walk::Found { end: Some(_) } => {}
        }
        walk
    }

    /// Walks from a fault: `start` holds the faulting instruction's registers and `stack` the words copied from
    /// its stack pointer up (the walk runs after the signal handler returned). The first frame, the faulting
    /// instruction, is kept when its module's frames are (its address is no return address: see
    /// [`FaultWalk::first_is_fault`]). Never replayed: a fault is rare, and whether the walk passed the driver is
    /// worked out anew.
    pub fn walk_fault(&mut self, start: Start, stack: &StackWords, out: &mut Frames) -> FaultWalk {
        out.len = 0;
        if cfg!(not(target_arch = "x86_64")) {
            return FaultWalk { walk: Walk::Found { end: None }, through_driver: false, first_is_fault: false };
        }
        self.keep_first = true;
        let walk = self.walk_tree(start, stack, out);
        self.keep_first = false;
        let first_is_fault = out.len > 0 && out.addresses[0] == start.pc;
        FaultWalk { walk, through_driver: self.passed_driver, first_is_fault }
    }

    /// The walk along the tree of known paths, growing it where the stack leaves it; notes what it read.
    fn walk_tree(&mut self, start: Start, stack: &StackWords, out: &mut Frames) -> Walk {
        const LOST: Walk = Walk::Found { end: None };
        self.last_start = start;
        self.start_bp_used = false;
        self.passed_driver = false;
        self.reads.clear();
        let (mut sp, mut bp) = (start.sp, start.bp);
        // Where the frame pointer's current value was read (None: it is the start's). Optimized code keeps
        // anything in rbp and saves it like any register: a saved value only decides the walk, and so joins
        // the words a replay must find again, once a frame's CFA is taken from it.
        let mut bp_read: Option<(u64, u64)> = None;
        let mut bp_read_noted = false;
        let Some(mut node) = self.frame(ROOT, start.pc, start.pc) else { return LOST };
        for _ in 0..MAX_DEPTH {
            let frame = self.paths.node(node);
            if self.driver.get(frame.module as usize).copied().unwrap_or(false) {
                self.passed_driver = true;
            }
            if frame.kept {
                out.addresses[out.len] = frame.pc;
                out.modules[out.len] = frame.module;
                out.len += 1;
                if out.len == MAX_FRAMES {
                    return self.ended(node);
                }
            }
            let Rule::Step { from_bp, offset, saved_bp } = frame.rule else { return self.ended(node) };
            if from_bp {
                match bp_read {
                    None => self.start_bp_used = true,
                    Some(read) if !bp_read_noted => {
                        self.reads.push(read);
                        bp_read_noted = true;
                    }
                    Some(_) => {}
                }
            }
            let Some(cfa) = (if from_bp { bp } else { sp }).checked_add_signed(i64::from(offset)) else { return LOST };
            if cfa <= sp {
                return LOST;
            }
            let Some(return_address) = stack.read(cfa - 8) else { return LOST };
            self.reads.push((cfa - 8, return_address));
            if saved_bp != 0 {
                let Some(at) = cfa.checked_add_signed(i64::from(saved_bp)) else { return LOST };
                let Some(saved) = stack.read(at) else { return LOST };
                bp_read = Some((at, saved));
                bp_read_noted = false;
                bp = saved;
            }
            if return_address == 0 {
                return LOST;
            }
            sp = cfa;
            // A return address is just past its call: its rule is the call's, at the address before.
            let Some(next) = self.frame(node, return_address, return_address - 1) else { return LOST };
            node = next;
        }
        LOST
    }

    /// Where a walk that follows a known path to `node` ends.
    fn ended(&self, node: NodeId) -> Walk {
        match self.paths.node(node).site {
            0 => Walk::Found { end: Some(node) },
            site => Walk::Known(site),
        }
    }

    /// The node of the frame at `pc` above `parent` (its rule looked up at `lookup`), added on first sight.
    #[inline]
    fn frame(&mut self, parent: NodeId, pc: u64, lookup: u64) -> Option<NodeId> {
        match self.paths.child(parent, pc) {
            Some(node) => Some(node),
            None => self.new_frame(parent, pc, lookup),
        }
    }

    #[cold]
    fn new_frame(&mut self, parent: NodeId, pc: u64, lookup: u64) -> Option<NodeId> {
        let slot = self.slot(lookup);
        // The walk's own first frame is never kept: its pc is no return address (but a fault's is its site).
        let kept = slot.kept && (parent != ROOT || self.keep_first);
        let added = self.paths.add_child(parent, pc, slot.rule, slot.module, kept);
        if added.is_none() {
            self.paths.clear();
        }
        added
    }

    /// The cached rule at `address`, worked out on first sight. An address no loaded module maps has the
    /// rule `Unknown` and no module.
    fn slot(&mut self, address: u64) -> Slot {
        let index = (address.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - CACHE_SLOTS.trailing_zeros())) as usize;
        let slot = self.slots[index];
        if slot.address == address && address != 0 {
            return slot;
        }
        let slot = self.work_out(address);
        self.slots[index] = slot;
        slot
    }

    /// Asks the loader about `address` (once per address).
    fn work_out(&mut self, address: u64) -> Slot {
        let Some(found) = modules::look_up(address, &mut self.context) else { return Slot { address, ..EMPTY } };
        let module = match self.modules.iter().position(|m| *m == found.module) {
            Some(index) => index,
            None => {
                let runtime = is_runtime(&found.module.path)
                    || (found.module.start <= self.own_code && self.own_code < found.module.end);
                self.driver.push(is_driver(&found.module.path));
                self.modules.push(found.module);
                self.runtime.push(runtime);
                self.modules.len() - 1
            }
        };
        // Past 65,534 modules an address counts as unknown (a program loads hundreds at most).
        if module >= NO_MODULE as usize {
            return Slot { address, ..EMPTY };
        }
        Slot { address, rule: found.rule, module: module as u16, kept: !self.runtime[module] }
    }
}

/// What a fault's walk found: the walk, whether it passed a frame of the driver (a driver thread: the driver's
/// own work, or a host function it runs), and whether the first kept frame is the faulting instruction itself.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FaultWalk {
    pub walk: Walk,
    pub through_driver: bool,
    pub first_is_fault: bool,
}

/// Whether the module at `path` is the CUDA driver.
fn is_driver(path: &str) -> bool {
    path.rsplit('/').next().unwrap_or(path).starts_with("libcuda.so")
}

/// Whether frames in the module at `path` belong to the CUDA stack under the program (the driver, CUPTI or the
/// Compute Sanitizer API that calls the capture, the shared runtime), whose frames are walked through but not
/// kept.
fn is_runtime(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    ["libcuda.so", "libcupti.so", "libcudart.so", "libsanitizer-public.so", "libstreamtrace_capture"]
        .iter()
        .any(|prefix| file.starts_with(prefix))
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    // The walks start in `innermost`, whose first frame is never kept.
    use super::*;

    #[inline(never)]
    fn innermost(unwinder: &mut Unwinder, out: &mut Frames) -> Walk {
        let walk = unwinder.walk(Start::here(), out);
        std::hint::black_box(walk)
    }

    #[inline(never)]
    fn middle(unwinder: &mut Unwinder, out: &mut Frames) -> Walk {
        let walk = innermost(unwinder, out);
        std::hint::black_box(walk)
    }

    #[test]
    fn walks_out_through_its_callers() {
        // The capture's own frames would be walked through: here they are the test's.
        let mut unwinder = Unwinder::keeping_own_frames();
        let mut walks = Vec::new();
        // An opaque count, so that an optimized build cannot unroll the loop into 3 places.
        for _ in 0..std::hint::black_box(3) {
            let mut frames = Frames::new();
            let walk = middle(&mut unwinder, &mut frames);
            if let Walk::Found { end: Some(end) } = walk {
                unwinder.remember(end, 42);
            }
            walks.push((walk, frames));
        }
        // The test binary is not a runtime module: every frame is kept, the first ones in `innermost`, `middle`
        // and this test, each return address just past a call in its function.
        let (first_walk, frames) = &walks[0];
        assert!(matches!(first_walk, Walk::Found { .. }));
        assert!(frames.len >= 3, "{} frames", frames.len);
        // The same place, walked by another unwinder (from the same line: a loop).
        let mut fresh = Vec::new();
        // An opaque count, so that an optimized build cannot unroll the loop into 2 places.
        for _ in 0..std::hint::black_box(2) {
            let mut other = Frames::new();
            middle(&mut Unwinder::keeping_own_frames(), &mut other);
            fresh.push(other.addresses().to_vec());
        }
        assert_eq!(fresh[0], fresh[1], "the same place walks to the same frames");
        assert_eq!(fresh[0].len(), frames.len);
        let module = unwinder.module(frames.modules[0]).expect("its module");
        assert!(module.start <= frames.addresses[0] && frames.addresses[0] < module.end);
        // The path ends where it ended before (the test thread's outermost frame, or the kept-frame limit).
        assert!(matches!(first_walk, Walk::Found { end: Some(_) }), "{first_walk:?}");
        assert_eq!(walks[1].0, Walk::Known(42));
        assert_eq!(walks[2].0, Walk::Known(42));
    }

    #[test]
    fn the_capture_library_keeps_no_frame_of_its_own() {
        let mut unwinder = Unwinder::new();
        let mut frames = Frames::new();
        middle(&mut unwinder, &mut frames);
        assert!(frames.len > 0, "the C library's frames under the test thread are kept");
        let test_binary = unwinder.module(0).expect("the first frame's module").clone();
        assert!(frames.addresses().iter().all(|&a| a < test_binary.start || a >= test_binary.end));
    }

    #[inline(never)]
    fn copy_and_walk(unwinder: &mut Unwinder, out: &mut Frames) -> FaultWalk {
        // A fault's walk runs over a copy of the stack, from registers taken earlier: here, this frame's.
        let start = Start::here();
        let (_, high) = stack::tests_bounds();
        let len = ((high - start.sp) as usize).min(16 << 10);
        // Safety: [sp, sp + len) is this thread's live stack, below its top.
        let words = unsafe { std::slice::from_raw_parts(start.sp as *const u8, len) }.to_vec();
        let walk = unwinder.walk_fault(start, &StackWords::copied(start.sp, &words), out);
        std::hint::black_box(walk)
    }

    #[test]
    fn a_fault_walk_keeps_its_first_frame_and_reads_only_the_copy() {
        let mut unwinder = Unwinder::keeping_own_frames();
        let mut frames = Frames::new();
        let walk = copy_and_walk(&mut unwinder, &mut frames);
        assert!(walk.first_is_fault, "{walk:?}");
        assert!(!walk.through_driver);
        assert!(frames.len >= 2, "{} frames", frames.len);
        let module = unwinder.module(frames.modules[1]).expect("the caller's module");
        assert!(module.start <= frames.addresses[1] && frames.addresses[1] < module.end);
    }

    #[test]
    fn the_driver_is_named_by_file() {
        assert!(is_driver("/usr/lib/x86_64-linux-gnu/libcuda.so.1"));
        assert!(!is_driver("/usr/local/cuda/lib64/libcudart.so.13"));
    }

    #[test]
    fn runtime_modules_are_named_by_file() {
        assert!(is_runtime("/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04"));
        assert!(is_runtime("/usr/local/cuda/lib64/libcupti.so.13"));
        assert!(is_runtime("/usr/local/cuda/compute-sanitizer/libsanitizer-public.so"));
        assert!(!is_runtime("/home/me/libcudart_helpers.so"));
        assert!(!is_runtime("/home/me/app"));
    }
}
