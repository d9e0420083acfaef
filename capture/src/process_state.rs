//! The capture's state in one process: the writer, and what it has already declared (streams, events,
//! allocations, kernel layouts), and the records not yet written. One mutex guards it (its slot, `STATE`, is in
//! state.rs), which also makes the order of records in the file the order in which the calls were made. Every
//! record goes in through `emit`, after what the calling thread owes the trace before it (its op's begin, the
//! host synchronization it acquired). Touches the driver (stream flags, kernel layouts, pointer kinds) and the
//! switches; never the file (the writer's, handed the records by state.rs).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::ffi::c_void;

use cudarc::driver::sys as cu;
use streamtrace_format::{AllocKind, ByteRuns, CopyKind, Coverage, FreeKind, MemoryKind, StreamKind, Unseen};

use crate::args::{launch_pointers, PointerArg};
use crate::control::EXACT;
use crate::driver_call::{CallContext, ContextKey};
use crate::functions::{describe, FunctionInfo};
use crate::graph_record::NodeBody;
use crate::pitched::{PitchedCopyShape, PitchedSide};
use crate::record::{Batch, Call, KnownAccesses, Record, Seen};
use crate::sites::CallSites;
use crate::unwind::Start;
use crate::writer::Writer;

/// A launch the exact-access backend holds until its accesses are read back, with its pointer words.
struct HeldLaunch {
    call: Call,
    record: Record,
    pointers: Vec<PointerArg>,
}

/// What the exact-access backend saw a launch touch, and how much of it that is.
pub struct SeenAccesses {
    pub coverage: Coverage,
    pub unseen: Option<Unseen>,
    pub reads: Vec<ByteRuns>,
    pub writes: Vec<ByteRuns>,
}

/// Stream ids the trace uses for the default streams; real streams use their handle, a pointer far above these.
const PER_THREAD_BASE: u64 = 1 << 31;

pub struct ProcessState {
    pub pid: u32,
    pub writer: Writer,
    streams: HashSet<u64>,
    per_thread_streams: HashMap<(u32, u64), u64>,
    events: HashSet<u64>,
    next_alloc: u64,
    /// Live allocations by start address: (id, bytes, kind).
    allocations: BTreeMap<u64, (u64, u64, AllocKind)>,
    /// Each kernel handle's index into `function_layouts`, which is also the index its `Function` record names.
    functions: HashMap<usize, u32>,
    function_layouts: Vec<FunctionInfo>,
    /// The device of each context, by context uid.
    devices: HashMap<u32, Option<u32>>,
    /// The trace's id of each context handle, for a backend that gives no ids of its own (recording.rs).
    context_ids: HashMap<usize, u32>,
    /// Launches recorded at entry whose accesses the exact-access backend adds before they are written, by
    /// thread (one each: a thread is in one launch call at a time).
    held_launches: Vec<HeldLaunch>,
    /// Records not yet written: the draining thread takes them every 100 ms.
    pub pending: Batch,
    /// The last drained batch, emptied, so that the next one starts with room (no regrowth on the launch path).
    pub spare: Option<Batch>,
    /// The graph each node added through the graph API belongs to: the graph-side setters name only the node.
    pub graph_of_node: HashMap<u64, u64>,
    /// The size of each graph allocation node's block, by address: a free node names only the address.
    pub graph_allocs: HashMap<u64, u64>,
    /// The graph each stream capturing into an existing graph (`cuStreamBeginCaptureToGraph`) captures into:
    /// its end may name no graph.
    pub capturing_into: HashMap<u64, u64>,
    /// The native call sites declared in this process's trace.
    pub(crate) sites: CallSites,
    /// The capture ranges' edges and what a range needs from before it (ranges.rs).
    pub ranges: crate::ranges::Edges,
}

impl ProcessState {
    pub fn new(pid: u32, writer: Writer) -> ProcessState {
        ProcessState {
            pid,
            writer,
            streams: HashSet::default(),
            per_thread_streams: HashMap::default(),
            events: HashSet::default(),
            next_alloc: 1,
            allocations: BTreeMap::new(),
            functions: HashMap::default(),
            function_layouts: Vec::new(),
            devices: HashMap::default(),
            context_ids: HashMap::default(),
            held_launches: Vec::new(),
            pending: Batch::with_capacity(4096),
            spare: None,
            graph_of_node: HashMap::default(),
            graph_allocs: HashMap::default(),
            capturing_into: HashMap::default(),
            sites: CallSites::new(),
            ranges: crate::ranges::Edges::default(),
        }
    }

    pub fn emit(&mut self, call: Call, record: Record) {
        // Outside a capture range only what a later range needs is written (ranges.rs); a range's edges come
        // before the first record made after they moved.
        if crate::ranges::in_use() {
            if !self.ranges.keeps(call, &record) {
                return;
            }
            self.ranges.before(call, &mut self.pending);
        }
        self.before_record(call, record.teaches_the_host());
        self.pending.push(call, record);
    }

    /// A framework hook's record (a PyTorch op's `op_end`, a block of its allocator), which the caller found
    /// kept (ranges.rs), with what comes before any record; None when the batch's text is full.
    pub fn push_framework_record(&mut self, call: Call, text: &str) -> Option<()> {
        self.ranges.before(call, &mut self.pending);
        self.before_record(call, crate::record::framework_record_teaches(text));
        self.pending.push_raw(call, text)
    }

    /// What comes before a record: the `op_begin` records the calling thread owes (framework.rs: an op's begin
    /// waits for the first record made inside it), outermost first and the calling thread's even where `call`
    /// is another thread's (a record collected on its behalf); then what the calling thread acquired from other
    /// threads since its last record (host_sync/).
    fn before_record(&mut self, call: Call, teaches: bool) {
        let owed = crate::framework::take_unwritten_begins();
        if owed > 0 {
            let begin = Call { tid: crate::origin::thread_id(), correlation: 0, site: 0, ..call };
            for _ in 0..owed {
                self.pending.push(begin, Record::OpBegin);
            }
        }
        crate::thread_knowledge::before_record(call, teaches, &mut self.pending);
    }

    /// The trace's id of a call's context and the context's device, looked up once per context.
    pub fn context_of(&mut self, key: ContextKey, device_of: fn(*mut c_void) -> Option<u32>) -> (u32, Option<u32>) {
        let (uid, handle) = match key {
            ContextKey::Uid { uid, handle } => (uid, handle),
            ContextKey::Handle(handle) => {
                let next = self.context_ids.len() as u32 + 1;
                (*self.context_ids.entry(handle as usize).or_insert(next), handle)
            }
        };
        let device = *self.devices.entry(uid).or_insert_with(|| device_of(handle));
        (uid, device)
    }

    /// Holds a launch until its accesses are known (the exact-access backend): its pointer words leave the
    /// batch with it, which the writer may take meanwhile.
    fn hold_launch(&mut self, call: Call, record: Record) {
        // A launch left from a call whose end never came (a driver that skipped the exit callback) goes out as
        // it is rather than be lost.
        if let Some(i) = self.held_launches.iter().position(|held| held.call.tid == call.tid) {
            let held = self.held_launches.swap_remove(i);
            self.release_launch(held, None);
        }
        let pointers = match &record {
            Record::Kernel { first_pointer, .. } => self.pending.pointers.split_off(*first_pointer as usize),
            _ => Vec::new(),
        };
        self.held_launches.push(HeldLaunch { call, record, pointers });
    }

    /// Writes the launch thread `tid` holds with what the exact-access backend saw of it (None: nothing, its
    /// pointer words alone stand for what it touched).
    pub fn complete_launch(&mut self, tid: u64, seen: Option<SeenAccesses>) {
        if let Some(i) = self.held_launches.iter().position(|held| held.call.tid == tid) {
            let held = self.held_launches.swap_remove(i);
            self.release_launch(held, seen);
        }
    }

    fn release_launch(&mut self, held: HeldLaunch, seen: Option<SeenAccesses>) {
        let HeldLaunch { call, mut record, pointers } = held;
        if let Record::Kernel { first_pointer, pointer_count, known, .. } = &mut record {
            *first_pointer = self.pending.pointers.len() as u32;
            *pointer_count = pointers.len() as u32;
            self.pending.pointers.extend(pointers);
            let seen = seen.unwrap_or(SeenAccesses {
                coverage: Coverage::Arguments,
                unseen: Some(Unseen::NotReadBack),
                reads: Vec::new(),
                writes: Vec::new(),
            });
            let how_much = Seen { coverage: seen.coverage, unseen: seen.unseen };
            *known = Some(self.known_accesses(seen.reads, seen.writes, Some(how_much)));
        }
        self.emit(call, record);
    }

    /// A launch's known reads and writes, put in the pending batch's runs.
    fn known_accesses(&mut self, reads: Vec<ByteRuns>, writes: Vec<ByteRuns>, seen: Option<Seen>) -> KnownAccesses {
        let first_run = self.pending.runs.len() as u32;
        let (read_count, write_count) = (reads.len() as u32, writes.len() as u32);
        self.pending.runs.extend(reads);
        self.pending.runs.extend(writes);
        KnownAccesses { first_run, reads: read_count, writes: write_count, seen }
    }

    /// How the call sites' walks went.
    pub fn walk_stats(&self) -> crate::unwind::WalkStats {
        self.sites.stats()
    }

    /// The id of the native call site of the call being recorded (0: none found), declared in the trace the
    /// first time. The walk starts at `start`, in the CUPTI callback's frame.
    pub fn call_site(&mut self, call: Call, start: Start, python_line: Option<&str>) -> u32 {
        let pending = &mut self.pending;
        self.sites.site_of_this_call(start, python_line, |record| pending.push(call, record))
    }

    /// Takes the records collected so far, leaving the spare batch (or a new one) to collect the next.
    pub fn take_pending(&mut self) -> Batch {
        let next = self.spare.take().unwrap_or_else(|| Batch::with_capacity(self.pending.entries.len()));
        std::mem::replace(&mut self.pending, next)
    }

    /// The trace's id for a stream handle, declaring the stream on first sight. A null handle is the legacy
    /// default stream, or the calling thread's default stream in a per-thread (`_ptsz`) call.
    pub fn stream(&mut self, cx: &CallContext, handle: *mut c_void) -> u64 {
        let CallContext { call, context, device, per_thread: per_thread_call } = *cx;
        let raw = handle as u64;
        let (id, kind, priority) = match raw {
            0 if !per_thread_call => (context as u64, StreamKind::LegacyDefault, None),
            1 => (context as u64, StreamKind::LegacyDefault, None),
            0 | 2 => {
                let next = PER_THREAD_BASE + self.per_thread_streams.len() as u64;
                let id = *self.per_thread_streams.entry((context, call.tid)).or_insert(next);
                (id, StreamKind::PerThreadDefault, None)
            }
            _ => {
                if self.streams.contains(&raw) {
                    return raw;
                }
                let (mut flags, mut priority) = (0u32, 0i32);
                // Safety: a stream handle from the call being traced (an invalid one returns an error code);
                // out-pointer to a local.
                let known =
                    unsafe { cu::cuStreamGetFlags(handle as cu::CUstream, &mut flags) } == cu::CUresult::CUDA_SUCCESS;
                // Safety: as above.
                let _ = unsafe { cu::cuStreamGetPriority(handle as cu::CUstream, &mut priority) };
                let kind = if known && flags & 1 == 0 { StreamKind::Blocking } else { StreamKind::NonBlocking };
                (raw, kind, Some(priority))
            }
        };
        if self.streams.insert(id) {
            // Declared at its first use, not where it was made: no creation site.
            self.emit(Call { site: 0, ..call }, Record::Stream { handle: id, kind, priority, context, device });
        }
        id
    }

    /// Declares a stream from its creation call.
    pub fn created_stream(&mut self, cx: &CallContext, handle: u64, flags: u32, priority: Option<i32>) {
        if handle > 2 && self.streams.insert(handle) {
            let kind = if flags & 1 == 0 { StreamKind::Blocking } else { StreamKind::NonBlocking };
            let (context, device) = (cx.context, cx.device);
            self.emit(cx.call, Record::Stream { handle, kind, priority, context, device });
        }
    }

    pub fn event(&mut self, call: Call, handle: u64) -> u64 {
        if self.events.insert(handle) {
            // Declared at its first use, not where it was made: no creation site.
            self.emit(Call { site: 0, ..call }, Record::Event { handle });
        }
        handle
    }

    /// Declares an event from its creation call, with the call's site.
    pub fn created_event(&mut self, call: Call, handle: u64) {
        if handle != 0 && self.events.insert(handle) {
            self.emit(call, Record::Event { handle });
        }
    }

    /// Records a kernel launch: the kernel's pointer words go to the batch's pointer list.
    ///
    /// # Safety
    /// `kernel_params` and `extra` are the launch's arguments for kernel `handle`, valid for the call.
    pub unsafe fn kernel(
        &mut self,
        cx: &CallContext,
        stream: u64,
        handle: *mut c_void,
        kernel_params: *mut *mut c_void,
        extra: *mut *mut c_void,
        api: &'static str,
    ) {
        let call = cx.call;
        let exact = EXACT.load(Ordering::Relaxed);
        let inside_op = crate::framework::inside_op();
        // Inside a framework op (a PyTorch op at tier T2) the op's extents stand for its kernels' accesses and
        // their pointer arguments are dropped (ingest's frames stage): they are not read, which saves the scan
        // on every launch of the op's thread. The exact-access backend reads them as always.
        let body = if !exact && inside_op {
            let function = self.function(call, handle);
            NodeBody::Kernel { function, first_pointer: self.pending.pointers.len() as u32, pointer_count: 0 }
        } else {
            // Safety: passed on from the caller.
            crate::cost::kernel_args(|| unsafe { self.kernel_body(call, handle, kernel_params, extra) })
        };
        let NodeBody::Kernel { function, first_pointer, mut pointer_count } = body else {
            return;
        };
        // A kernel that carries out a library call takes the call's ranges (inside a framework op, the op's
        // extents stand for them, and another thread's call must not lend it its ranges): an NCCL kernel's one
        // argument names none of the program's buffers, and a cuBLAS kernel's struct of parameters names them
        // without saying which it writes.
        let nccl = self.function_layouts.get(function as usize).is_some_and(|f| f.name.starts_with("nccl"));
        let library = match (exact || inside_op, nccl) {
            (true, _) => None,
            (false, true) => crate::nccl::buffers_for_launch(call.tid, cx.device),
            (false, false) => crate::library_call::buffers_for_launch(),
        };
        let known = library.map(|buffers| {
            // Its pointer words into those ranges say no more than the call does; the others (a workspace)
            // still count as the launch's own.
            pointer_count = buffers.drop_words_within(&mut self.pending.pointers, first_pointer as usize);
            self.known_accesses(buffers.reads, buffers.writes, None)
        });
        let record = Record::Kernel { stream, function, first_pointer, pointer_count, api, known };
        if exact {
            self.hold_launch(call, record);
        } else {
            self.emit(call, record);
        }
    }

    /// A kernel's name and pointer arguments, for a launch or a kernel node: the arguments are scanned the same
    /// way for both.
    ///
    /// # Safety
    /// As for [`ProcessState::kernel`].
    pub unsafe fn kernel_body(
        &mut self,
        call: Call,
        handle: *mut c_void,
        kernel_params: *mut *mut c_void,
        extra: *mut *mut c_void,
    ) -> NodeBody {
        let function = self.function(call, handle);
        let first_pointer = self.pending.pointers.len();
        let layout = &self.function_layouts[function as usize].params;
        // Safety: the launch's arguments (the caller), and `layout` is the driver's layout of kernel `handle`.
        unsafe { launch_pointers(layout, kernel_params, extra, &mut self.pending.pointers) };
        let pointer_count = (self.pending.pointers.len() - first_pointer) as u32;
        NodeBody::Kernel { function, first_pointer: first_pointer as u32, pointer_count }
    }

    /// The index of a kernel handle's layout, described (and its name declared) on first sight.
    fn function(&mut self, call: Call, handle: *mut c_void) -> u32 {
        if let Some(&index) = self.functions.get(&(handle as usize)) {
            return index;
        }
        let info = crate::cost::kernel_layout(|| describe(handle));
        let index = self.function_layouts.len() as u32;
        self.emit(call, Record::Function { index, name: info.name.clone() });
        self.function_layouts.push(info);
        self.functions.insert(handle as usize, index);
        index
    }

    pub fn allocated(
        &mut self,
        call: Call,
        address: u64,
        bytes: u64,
        kind: AllocKind,
        stream: Option<u64>,
        api: &'static str,
    ) {
        self.allocated_named(call, address, bytes, kind, stream, None, api);
    }

    /// [`ProcessState::allocated`] with the name findings give the block (`label` in the trace).
    #[allow(clippy::too_many_arguments)]
    pub fn allocated_named(
        &mut self,
        call: Call,
        address: u64,
        bytes: u64,
        kind: AllocKind,
        stream: Option<u64>,
        label: Option<&'static str>,
        api: &'static str,
    ) {
        let id = self.next_alloc;
        self.next_alloc += 1;
        // A block at an address still marked live was freed by a path the capture does not see: retire it first.
        if let Some((old, _, old_kind)) = self.allocations.insert(address, (id, bytes, kind)) {
            let free_kind =
                if old_kind == AllocKind::VirtualMap { FreeKind::VirtualUnmap } else { FreeKind::Synchronous };
            self.emit(call, Record::Free { id: old, kind: free_kind, stream: None, api: "implicit" });
        }
        self.emit(call, Record::Alloc { id, address, bytes, kind, stream, label, api });
    }

    pub fn freed(&mut self, call: Call, address: u64, kind: FreeKind, stream: Option<u64>, api: &'static str) {
        if let Some((id, _, _)) = self.allocations.remove(&address) {
            self.emit(call, Record::Free { id, kind, stream, api });
        }
    }

    /// What memory `address` is: the kind of the capture's own block that holds it, or else what the driver says
    /// of the pointer (memory pinned or mapped before the capture saw it); memory the driver does not know is
    /// ordinary pageable host memory.
    pub fn memory_at(&self, address: u64) -> MemoryKind {
        if let Some(kind) = self.recorded_memory_at(address) {
            return kind;
        }
        // Managed memory the capture did not see allocated says it is device memory when asked its type alone:
        // its managedness is asked with it, in the same call.
        let (mut memory_type, mut managed) = (0u32, 0u32);
        let mut attributes = [
            cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
        ];
        let mut answers: [*mut c_void; 2] = [(&mut memory_type as *mut u32).cast(), (&mut managed as *mut u32).cast()];
        // Safety: asks the driver about a pointer value (it need not be valid) and writes the answers, a
        // CUmemorytype (unsigned int) and a boolean (unsigned int), into locals; both arrays hold two entries. The
        // capture's re-entry guard keeps this call unrecorded.
        let known = unsafe { cu::cuPointerGetAttributes(2, attributes.as_mut_ptr(), answers.as_mut_ptr(), address) }
            == cu::CUresult::CUDA_SUCCESS;
        match memory_type {
            // Unlike cuPointerGetAttribute, it succeeds on memory CUDA does not know, with type 0.
            _ if !known || memory_type == 0 => MemoryKind::Pageable,
            _ if managed != 0 => MemoryKind::Managed,
            t if t == cu::CUmemorytype::CU_MEMORYTYPE_HOST as u32 => MemoryKind::Pinned,
            t if t == cu::CUmemorytype::CU_MEMORYTYPE_UNIFIED as u32 => MemoryKind::Managed,
            _ => MemoryKind::Device,
        }
    }

    /// What memory `address` is by the capture's own blocks alone, None outside them. The capture sees every
    /// pinned block from the process's first CUDA call, so host memory outside them is pageable.
    pub fn recorded_memory_at(&self, address: u64) -> Option<MemoryKind> {
        let block = self.allocations.range(..=address).next_back();
        let (_, &(_, _, kind)) = block.filter(|(start, (_, bytes, _))| address - **start < *bytes)?;
        Some(match kind {
            AllocKind::Host => MemoryKind::Pinned,
            AllocKind::Managed => MemoryKind::Managed,
            _ => MemoryKind::Device,
        })
    }

    /// The memory a copy reads and writes. A direction the call names fixes its device side; host sides and
    /// `cuMemcpy`'s unified pointers are looked up.
    pub fn copy_memory(&self, copy: CopyKind, src: u64, dst: u64) -> (MemoryKind, MemoryKind) {
        match copy {
            CopyKind::HtoD => (self.memory_at(src), MemoryKind::Device),
            CopyKind::DtoH => (MemoryKind::Device, self.memory_at(dst)),
            CopyKind::DtoD | CopyKind::PtoP => (MemoryKind::Device, MemoryKind::Device),
            CopyKind::HtoH | CopyKind::Default => (self.memory_at(src), self.memory_at(dst)),
        }
    }

    /// A 2D or 3D copy: each side's extent, where the descriptor gives one (a CUDA array has no address), and
    /// its memory; the direction follows from the memory on both sides.
    pub fn pitched_copy(
        &mut self,
        call: Call,
        stream: u64,
        shape: &PitchedCopyShape,
        synchronous: bool,
        api: &'static str,
    ) {
        let (from, from_memory) = self.pitched_side(&shape.src);
        let (to, to_memory) = self.pitched_side(&shape.dst);
        let copy = direction(from_memory, to_memory);
        let memory = (from_memory, to_memory);
        self.emit(call, Record::PitchedMemcpy { stream, copy, from, to, synchronous, memory, api });
    }

    /// One side of a 2D or 3D copy: its `(first byte, extent)` (none for a CUDA array) and what memory it is.
    pub fn pitched_side(&self, side: &PitchedSide) -> (Option<(u64, u64)>, MemoryKind) {
        match side.memory_type {
            1 => (Some((side.host.wrapping_add(side.offset), side.extent)), self.host_memory_at(side.host)),
            2 => (Some((side.device.wrapping_add(side.offset), side.extent)), MemoryKind::Device),
            4 => (Some((side.device.wrapping_add(side.offset), side.extent)), self.memory_at(side.device)),
            _ => (None, MemoryKind::Device),
        }
    }

    /// A batch of copies (`cuMemcpyBatchAsync`): each one a copy on the stream, its direction from the memory on
    /// both sides.
    pub fn batch_copy(&mut self, call: Call, stream: u64, copies: &[(u64, u64, u64)], api: &'static str) {
        for &(dst, src, bytes) in copies {
            let memory = (self.memory_at(src), self.memory_at(dst));
            let copy = direction(memory.0, memory.1);
            self.emit(call, Record::Memcpy { stream, copy, src, dst, bytes, synchronous: false, memory, api });
        }
    }

    /// What host memory `address` is: pinned when the capture or the driver knows it so, else pageable.
    fn host_memory_at(&self, address: u64) -> MemoryKind {
        match self.memory_at(address) {
            MemoryKind::Pinned => MemoryKind::Pinned,
            _ => MemoryKind::Pageable,
        }
    }

    /// cuMemUnmap of `[address, address + bytes)`: every mapping that starts inside it ends.
    pub fn unmapped(&mut self, call: Call, address: u64, bytes: u64) {
        let end = address.saturating_add(bytes);
        let starts: Vec<u64> = self.allocations.range(address..end).map(|(start, _)| *start).collect();
        for start in starts {
            self.freed(call, start, FreeKind::VirtualUnmap, None, "cuMemUnmap");
        }
    }
}

/// A copy's direction from the memory on its two sides (host memory is pageable or pinned; managed memory counts
/// as the device's).
fn direction(from: MemoryKind, to: MemoryKind) -> CopyKind {
    let host = |m: MemoryKind| matches!(m, MemoryKind::Pageable | MemoryKind::Pinned);
    match (host(from), host(to)) {
        (true, false) => CopyKind::HtoD,
        (false, true) => CopyKind::DtoH,
        (true, true) => CopyKind::HtoH,
        (false, false) => CopyKind::DtoD,
    }
}
