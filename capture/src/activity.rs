//! CUPTI activity records: GPU start and end times (kernels, copies, sets), joined to the recorded calls by
//! correlation id in the trace (`gpu_time` records), and the unified-memory counters that host_watch/managed_faults.rs
//! reads. GPU times are opt-in (`STREAMTRACE_GPU_TIMES=1`, `streamtrace capture --gpu-times`): activity tracing
//! costs more than the callbacks themselves, and ordering needs no times. The records wait in this file's
//! queue until the drain (state.rs) takes them; this file touches only CUPTI's activity API, the queue and the
//! on/off switch.

use std::alloc::{alloc, dealloc, Layout};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use cudarc::cupti::result::activity;
use cudarc::cupti::sys::{
    CUpti_Activity, CUpti_ActivityKind, CUpti_ActivityUnifiedMemoryCounterConfig,
    CUpti_ActivityUnifiedMemoryCounterKind, CUpti_ActivityUnifiedMemoryCounterScope,
};

use crate::control::ENABLED;
use crate::record::{Call, Entry, Record};

const BUFFER_SIZE: usize = 8 << 20;
const BUFFER_ALIGN: usize = 8;

/// Offsets of (start, end, correlationId) in the record layouts, stable across CUPTI versions: the kernel
/// records since CUpti_ActivityKernel4, the copy records since CUpti_ActivityMemcpy5, the set records since
/// CUpti_ActivityMemset2.
fn time_fields(kind: CUpti_ActivityKind) -> Option<(usize, usize, usize)> {
    match kind {
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL | CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_KERNEL => {
            Some((16, 24, 92))
        }
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY => Some((16, 24, 44)),
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET => Some((16, 24, 44)),
        _ => None,
    }
}

/// CUPTI asks for a buffer to fill; it hands it back to `buffer_completed`, which frees it.
extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    let _ = std::panic::catch_unwind(|| {
        let Ok(layout) = Layout::from_size_align(BUFFER_SIZE, BUFFER_ALIGN) else { return };
        // Safety: a non-zero-sized layout.
        let allocated = unsafe { alloc(layout) };
        // Safety: CUPTI passes three out-pointers to its own variables.
        unsafe {
            *buffer = allocated;
            *size = if allocated.is_null() { 0 } else { BUFFER_SIZE };
            *max_records = 0;
        }
    });
}

/// CUPTI hands back a buffer it filled with `valid` bytes of activity records.
extern "C" fn buffer_completed(
    _context: cudarc::driver::sys::CUcontext,
    _stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    let _ = std::panic::catch_unwind(|| {
        if buffer.is_null() {
            return;
        }
        let mut times = Vec::new();
        let mut record: *mut CUpti_Activity = std::ptr::null_mut();
        // Safety: the buffer CUPTI filled with `valid` bytes; `record` is null or the record it returned last.
        while unsafe { activity::get_next_record(buffer, valid, &mut record) }.is_ok() && !record.is_null() {
            // Safety: a record CUPTI returned, inside the buffer; every record starts with its kind.
            let kind = unsafe { (*record).kind };
            if kind == CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER {
                if let Some(sink) = UNIFIED_MEMORY_SINK.get() {
                    // Safety: a whole record of that kind, inside the buffer, which is what the sink takes.
                    unsafe { sink(record as *const u8) };
                }
                continue;
            }
            if let Some((start, end, correlation)) = time_fields(kind) {
                // Safety: the record is at least as long as the layout of its kind, which has these fields at
                // these offsets (`time_fields`); reads need no alignment.
                let time = unsafe {
                    let base = record as *const u8;
                    Record::GpuTime {
                        correlation: base.add(correlation).cast::<u32>().read_unaligned(),
                        start: base.add(start).cast::<u64>().read_unaligned(),
                        end: base.add(end).cast::<u64>().read_unaligned(),
                    }
                };
                times.push(time);
            }
        }
        queue(times);
        if let Ok(layout) = Layout::from_size_align(BUFFER_SIZE, BUFFER_ALIGN) {
            // Safety: allocated in `buffer_requested` with this layout.
            unsafe { dealloc(buffer, layout) };
        }
    });
}

/// Registers the buffer callbacks, once (GPU times and managed faults share them).
pub fn register() -> Result<(), String> {
    static REGISTERED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            activity::register_callbacks(Some(buffer_requested), Some(buffer_completed)).map_err(|e| format!("{e:?}"))
        })
        .clone()
}

/// Where unified-memory counter records go (host_watch/managed_faults.rs gives its receiver when it asks for them): the
/// activity buffers are read here, what the records mean is known there.
static UNIFIED_MEMORY_SINK: std::sync::OnceLock<UnifiedMemorySink> = std::sync::OnceLock::new();

/// Takes one whole CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER record.
pub type UnifiedMemorySink = unsafe fn(*const u8);

/// Starts CUPTI's unified-memory counter of CPU page faults; each record goes to `sink`.
pub fn enable_cpu_page_faults(sink: UnifiedMemorySink) -> Result<(), String> {
    register()?;
    let _ = UNIFIED_MEMORY_SINK.set(sink);
    let mut config = CUpti_ActivityUnifiedMemoryCounterConfig {
        scope:
            CUpti_ActivityUnifiedMemoryCounterScope::CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE,
        kind: CUpti_ActivityUnifiedMemoryCounterKind::CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT,
        deviceId: 0,
        enable: 1,
    };
    // Safety: one configuration structure, a local.
    unsafe { activity::configure_unified_memory_counter(&mut config, 1) }.map_err(|e| format!("{e:?}"))?;
    activity::enable(CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER).map_err(|e| format!("{e:?}"))
}

/// Starts activity tracing of kernels, copies and sets. Failure only costs the GPU times.
pub fn enable() -> Result<(), String> {
    register()?;
    for kind in [
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY,
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET,
    ] {
        activity::enable(kind).map_err(|e| format!("{e:?}"))?;
    }
    Ok(())
}

/// Hands over every buffered record (at exit).
pub fn flush() {
    let _ = activity::flush_all(1);
}

/// Hands over the buffers whose records are complete (the writer thread, while managed faults are watched:
/// CUPTI's own period returns only full buffers).
pub fn flush_completed() {
    let _ = activity::flush_all(0);
}

/// GPU times waiting to be written. Their own lock: CUPTI may deliver them on a thread that is inside the
/// driver-API callback, which holds the state lock.
static QUEUE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// Queues records that come from outside a driver call (GPU times); the next drain writes them.
fn queue(records: Vec<Record>) {
    if records.is_empty() || !ENABLED.load(Ordering::Relaxed) {
        return;
    }
    if let Ok(mut queue) = QUEUE.lock() {
        queue.extend(records.into_iter().map(|record| Entry { call: no_call(), record }));
    }
}

/// Moves the queued GPU times to the end of `entries` (the batch a drain is about to write).
pub fn take_queued(entries: &mut Vec<Entry>) {
    if let Ok(mut queue) = QUEUE.lock() {
        entries.append(&mut queue);
    }
}

/// The call a GPU-time record is attributed to: none (it is written as it arrives).
fn no_call() -> Call {
    Call { tid: 0, time_ns: 0, correlation: 0, site: 0 }
}
