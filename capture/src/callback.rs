//! The CUPTI driver-API callback: turns one call into records. Runs on the application's threads, so it only
//! reads the call's parameters and hands records to the process's state under its lock; it never blocks on
//! I/O (a synchronizing call of a forked child drains what is pending: the program is about to wait anyway). Touches the state,
//! the switches, CUPTI's callback data and its device query; counts what it costs for the `capture_stats`
//! record.

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::Ordering;

use cudarc::cupti::result as cupti;
use cudarc::cupti::sys::{CUpti_ApiCallbackSite, CUpti_CallbackData, CUpti_CallbackDomain};
use rustc_hash::FxHashMap as HashMap;
use streamtrace_format::{AllocKind, CopyKind, FreeKind, MemoryKind};

use crate::cbid::*;
use crate::control::{disable, CALL_SITES, ENABLED, NOOP};
use crate::cost;
use crate::fork;
use crate::graph_calls::on_graph_call;
use crate::origin::{now_ns, thread_id};
use crate::params::*;
use crate::pitched::{pitched_extent, PitchedCopyShape};
use crate::record::{Call, GraphRecord, Record, SyncTarget};
use crate::state::{drain_into, state_for_this_process, ProcessState, STATE};
use crate::unwind::Start;

thread_local! {
    /// Set while this thread runs the callback: driver calls the capture makes itself must not be recorded.
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// CUPTI's callback for every enabled driver call.
///
/// # Safety
/// Called by CUPTI only: `data`, for the driver-API domain, is the callback data of the call `cbid`.
pub unsafe extern "C" fn on_driver_call(
    _user: *mut c_void,
    domain: CUpti_CallbackDomain,
    cbid: u32,
    data: *const c_void,
) {
    if !ENABLED.load(Ordering::Relaxed)
        || NOOP.load(Ordering::Relaxed)
        || data.is_null()
        || domain != CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API
    {
        return;
    }
    // CUPTI calls at entry and at exit; each call is recorded at one of them. The other returns here, before
    // the clock, the thread id or the lock.
    // Safety: CUPTI passes driver-API callback data for the driver domain; `data` is not null.
    let at_exit =
        unsafe { (*(data as *const CUpti_CallbackData)).callbackSite } == CUpti_ApiCallbackSite::CUPTI_API_EXIT;
    if at_exit != recorded_at_exit(cbid) {
        return;
    }
    if IN_CALLBACK.with(|flag| flag.replace(true)) {
        return;
    }
    // The call site's walk starts here: the capture's frames below this one are never walked.
    let walk_from = Start::here();
    let outcome = std::panic::catch_unwind(|| {
        // Safety: CUPTI passes driver-API callback data for the driver domain; `data` is not null.
        let data = unsafe { &*(data as *const CUpti_CallbackData) };
        // Safety: that data is CUPTI's for the call `cbid`, and lives until this callback returns.
        let data = unsafe { CallData::new(cbid, data) };
        let call = Call { tid: thread_id(), time_ns: now_ns(), correlation: data.data.correlationId, site: 0 };
        let start = cost::call_started(call.time_ns);
        let flush = {
            let Ok(mut slot) = cost::lock_wait(|| STATE.lock()) else { return };
            let Some(state) = state_for_this_process(&mut slot) else { return };
            let call = if CALL_SITES.load(Ordering::Relaxed) && crate::framework::call_sites_wanted() {
                Call { site: cost::walk(|| state.call_site(call, walk_from)), ..call }
            } else {
                call
            };
            let device = device_of(&mut state.devices, &data);
            on_call(state, &data, call, device);
            // A forked child (a multiprocessing worker) ends in _exit, with no at-exit flush: at each of its
            // synchronizations, where it is about to wait anyway, it writes what is pending, so that it loses
            // nothing recorded before its last one. Other processes leave that to the writer thread and the
            // at-exit flush: a training loop synchronizes several times a step (DDP did six), and each drain
            // cost the program's thread tens of microseconds.
            (is_synchronization(cbid) && fork::in_forked_child()).then(|| state.writer.handle())
        };
        if let Some(writer) = flush {
            drain_into(&writer);
        }
        cost::call_recorded(start, cbid);
    });
    IN_CALLBACK.with(|flag| flag.set(false));
    if outcome.is_err() {
        disable("an internal error in the capture library");
    }
}

/// CUPTI's callback data for one driver call, with the call's id. Making one vouches that the pointers in it
/// are CUPTI's for that call (the only unchecked step), so what reads them needs only say which parameter
/// block the call has.
pub struct CallData<'a> {
    cbid: u32,
    data: &'a CUpti_CallbackData,
}

impl<'a> CallData<'a> {
    /// # Safety
    /// `data` is the callback data CUPTI passed for the call `cbid`, valid for `'a`.
    unsafe fn new(cbid: u32, data: &'a CUpti_CallbackData) -> CallData<'a> {
        CallData { cbid, data }
    }

    /// The call's parameter block as `T`; None when CUPTI passed none.
    ///
    /// # Safety
    /// `T` is the layout of the parameter block of the call `self.cbid`, or a prefix of it (params.rs).
    pub(crate) unsafe fn params<T>(&self) -> Option<&'a T> {
        // Safety: `functionParams` is null or points to the call's block (`new`), which `T` describes (the
        // caller), valid for 'a.
        unsafe { (self.data.functionParams as *const T).as_ref() }
    }

    pub(crate) fn cbid(&self) -> u32 {
        self.cbid
    }

    /// Whether the call returned CUDA_SUCCESS: only known at API exit.
    pub(crate) fn succeeded(&self) -> bool {
        let result = self.data.functionReturnValue as *const i32;
        if self.data.callbackSite != CUpti_ApiCallbackSite::CUPTI_API_EXIT || result.is_null() {
            return false;
        }
        // Safety: at API exit CUPTI points `functionReturnValue` at the call's CUresult (`new`).
        unsafe { result.read() == 0 }
    }
}

/// The device of the call's context, looked up once per context (under the state lock).
fn device_of(devices: &mut HashMap<u32, Option<u32>>, data: &CallData) -> Option<u32> {
    let context = data.data.context;
    *devices.entry(data.data.contextUid).or_insert_with(|| {
        if context.is_null() {
            return None;
        }
        let mut device = 0u32;
        // Safety: the context of the call being traced (`CallData::new`); out-pointer to a local.
        unsafe { cupti::get_device_id(context, &mut device) }.ok().map(|()| device)
    })
}

/// Reads through an out-parameter of a call that succeeded; None when it is null.
///
/// # Safety
/// `out` is null or points to a `T` the driver wrote (the call returned CUDA_SUCCESS).
unsafe fn written<T: Copy>(out: *const T) -> Option<T> {
    // Safety: the caller vouches for `out`; null is checked by `as_ref`.
    unsafe { out.as_ref() }.copied()
}

fn copy_kind(cbid: u32) -> CopyKind {
    match cbid {
        CU_MEMCPY_HTOD_V2 | CU_MEMCPY_HTOD_ASYNC_V2 | CU_MEMCPY_HTOD_V2_PTDS | CU_MEMCPY_HTOD_ASYNC_V2_PTSZ => {
            CopyKind::HtoD
        }
        CU_MEMCPY_DTOH_V2 | CU_MEMCPY_DTOH_ASYNC_V2 | CU_MEMCPY_DTOH_V2_PTDS | CU_MEMCPY_DTOH_ASYNC_V2_PTSZ => {
            CopyKind::DtoH
        }
        CU_MEMCPY_DTOD_V2 | CU_MEMCPY_DTOD_ASYNC_V2 | CU_MEMCPY_DTOD_V2_PTDS | CU_MEMCPY_DTOD_ASYNC_V2_PTSZ => {
            CopyKind::DtoD
        }
        CU_MEMCPY_PEER | CU_MEMCPY_PEER_ASYNC | CU_MEMCPY_PEER_ASYNC_PTSZ => CopyKind::PtoP,
        _ => CopyKind::Default,
    }
}

/// The copies of a batch as (dst, src, bytes); none when an array is null or the count is past `MAX_BATCH` (not
/// believed: the injected library must not read far into the program's memory on a malformed call).
///
/// # Safety
/// Each array is null or holds `count` readable entries.
unsafe fn batch_copies(batch: &MemcpyBatchArrays) -> Vec<(u64, u64, u64)> {
    const MAX_BATCH: usize = 1 << 16;
    let MemcpyBatchArrays { dsts, srcs, sizes, count, .. } = *batch;
    if dsts.is_null() || srcs.is_null() || sizes.is_null() || count > MAX_BATCH {
        return Vec::new();
    }
    // Safety: `i < count` entries of each array are readable (the caller's promise).
    (0..count).map(|i| unsafe { (*dsts.add(i), *srcs.add(i), *sizes.add(i) as u64) }).collect()
}

/// Calls `found` with each event a cuLaunchKernelEx launch configuration names in its attributes (a launch
/// completion or programmatic event), and the call that records it. Past `MAX_ATTRS` attributes the count is not
/// believed: the injected library must not read far into the program's memory on a malformed call.
///
/// # Safety
/// `config.attrs` is null or holds `config.numAttrs` readable attributes.
unsafe fn for_each_launch_event(config: &LaunchConfig, mut found: impl FnMut(u64, &'static str)) {
    const MAX_ATTRS: u32 = 64;
    if config.attrs.is_null() || config.numAttrs > MAX_ATTRS {
        return;
    }
    for i in 0..config.numAttrs as usize {
        // Safety: `i < numAttrs` attributes are readable (the caller's promise).
        let attribute = unsafe { &*config.attrs.add(i) };
        let api = match attribute.id {
            LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT => "cuLaunchKernelEx launch completion event",
            LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT => "cuLaunchKernelEx programmatic event",
            _ => continue,
        };
        if attribute.value[0] != 0 {
            found(attribute.value[0], api);
        }
    }
}

/// A 2D set as its record: the rows' extent on the pitched buffer, and what memory it is.
fn set_2d(state: &ProcessState, p: &Memset2D, cbid: u32, stream: u64, synchronous: bool) -> Record {
    let bytes = pitched_extent(p.dstPitch, (p.Width as u64).saturating_mul(memset_width(cbid)), p.Height, 1, 0);
    let memory = state.memory_at(p.dstDevice);
    let api = if synchronous { "cuMemsetD2D" } else { "cuMemsetD2DAsync" };
    Record::Memset { stream, dst: p.dstDevice, bytes, synchronous, memory, api }
}

fn memset_width(cbid: u32) -> u64 {
    match cbid {
        CU_MEMSET_D16_V2
        | CU_MEMSET_D16_ASYNC
        | CU_MEMSET_D16_V2_PTDS
        | CU_MEMSET_D16_ASYNC_PTSZ
        | CU_MEMSET_D2D16_V2
        | CU_MEMSET_D2D16_ASYNC
        | CU_MEMSET_D2D16_V2_PTDS
        | CU_MEMSET_D2D16_ASYNC_PTSZ => 2,
        CU_MEMSET_D32_V2
        | CU_MEMSET_D32_ASYNC
        | CU_MEMSET_D32_V2_PTDS
        | CU_MEMSET_D32_ASYNC_PTSZ
        | CU_MEMSET_D2D32_V2
        | CU_MEMSET_D2D32_ASYNC
        | CU_MEMSET_D2D32_V2_PTDS
        | CU_MEMSET_D2D32_ASYNC_PTSZ => 4,
        _ => 1,
    }
}

/// Records one driver call. Each arm reads the parameter block of its calls (the one unsafe step: naming the
/// block's layout, params.rs) and records in safe code.
fn on_call(state: &mut ProcessState, data: &CallData, call: Call, device: Option<u32>) {
    let cbid = data.cbid;
    let enter = data.data.callbackSite == CUpti_ApiCallbackSite::CUPTI_API_ENTER;
    let context = data.data.contextUid;
    let pt = per_thread(cbid);
    match cbid {
        CU_LAUNCH_KERNEL | CU_LAUNCH_KERNEL_PTSZ if enter => {
            // Safety: cuLaunchKernel's block is LaunchKernel.
            let Some(p) = (unsafe { data.params::<LaunchKernel>() }) else { return };
            let stream = state.stream(call, context, device, p.launch.hStream, pt);
            // Safety: the launch's own argument arrays, valid while the driver is in the call.
            unsafe { state.kernel(call, stream, p.launch.f, p.launch.kernelParams, p.extra, "cuLaunchKernel") };
        }
        CU_LAUNCH_COOPERATIVE_KERNEL | CU_LAUNCH_COOPERATIVE_KERNEL_PTSZ if enter => {
            // Safety: cuLaunchCooperativeKernel's block is LaunchCooperativeKernel.
            let Some(p) = (unsafe { data.params::<LaunchCooperativeKernel>() }) else { return };
            let stream = state.stream(call, context, device, p.hStream, pt);
            // Safety: the launch's own parameter array, valid while the driver is in the call.
            unsafe {
                state.kernel(call, stream, p.f, p.kernelParams, std::ptr::null_mut(), "cuLaunchCooperativeKernel")
            };
        }
        CU_LAUNCH_KERNEL_EX | CU_LAUNCH_KERNEL_EX_PTSZ if enter => {
            // Safety: cuLaunchKernelEx's block is LaunchKernelEx.
            let Some(p) = (unsafe { data.params::<LaunchKernelEx>() }) else { return };
            // Safety: `config` is null or the launch's CUlaunchConfig, which LaunchConfig declares.
            let Some(config) = (unsafe { p.config.as_ref() }) else { return };
            let stream = state.stream(call, context, device, config.hStream, pt);
            // An event the launch fires (NCCL orders its launches with one) takes the stream's clock before the
            // kernel: it fires when the kernel's blocks have started or triggered, not when they are done.
            // Safety: the launch's own attribute array, valid while the driver is in the call.
            unsafe {
                for_each_launch_event(config, |event, api| {
                    let event = state.event(call, event);
                    state.emit(call, Record::EventRecord { event, stream, api });
                })
            };
            // Safety: the launch's own argument arrays, valid while the driver is in the call.
            unsafe { state.kernel(call, stream, p.f, p.kernelParams, p.extra, "cuLaunchKernelEx") };
        }
        CU_MEMCPY
        | CU_MEMCPY_PTDS
        | CU_MEMCPY_HTOD_V2
        | CU_MEMCPY_HTOD_V2_PTDS
        | CU_MEMCPY_DTOH_V2
        | CU_MEMCPY_DTOH_V2_PTDS
        | CU_MEMCPY_DTOD_V2
        | CU_MEMCPY_DTOD_V2_PTDS
            if enter =>
        {
            // Safety: the synchronous copies' blocks start (dst, src, ByteCount): Memcpy.
            let Some(p) = (unsafe { data.params::<Memcpy>() }) else { return };
            let stream = state.stream(call, context, device, std::ptr::null_mut(), pt);
            let memory = state.copy_memory(copy_kind(cbid), p.src, p.dst);
            state.emit(
                call,
                Record::Memcpy {
                    stream,
                    copy: copy_kind(cbid),
                    src: p.src,
                    dst: p.dst,
                    bytes: p.ByteCount as u64,
                    synchronous: true,
                    memory,
                    api: "cuMemcpy",
                },
            );
        }
        CU_MEMCPY_ASYNC
        | CU_MEMCPY_ASYNC_PTSZ
        | CU_MEMCPY_HTOD_ASYNC_V2
        | CU_MEMCPY_HTOD_ASYNC_V2_PTSZ
        | CU_MEMCPY_DTOH_ASYNC_V2
        | CU_MEMCPY_DTOH_ASYNC_V2_PTSZ
        | CU_MEMCPY_DTOD_ASYNC_V2
        | CU_MEMCPY_DTOD_ASYNC_V2_PTSZ
            if enter =>
        {
            // Safety: the asynchronous copies' blocks are (dst, src, ByteCount, hStream): MemcpyAsync.
            let Some(p) = (unsafe { data.params::<MemcpyAsync>() }) else { return };
            let stream = state.stream(call, context, device, p.hStream, pt);
            let memory = state.copy_memory(copy_kind(cbid), p.src, p.dst);
            state.emit(
                call,
                Record::Memcpy {
                    stream,
                    copy: copy_kind(cbid),
                    src: p.src,
                    dst: p.dst,
                    bytes: p.ByteCount as u64,
                    synchronous: false,
                    memory,
                    api: "cuMemcpyAsync",
                },
            );
        }
        CU_MEMCPY_PEER | CU_MEMCPY_PEER_PTDS if enter => {
            // Safety: cuMemcpyPeer's block is MemcpyPeer.
            let Some(p) = (unsafe { data.params::<MemcpyPeer>() }) else { return };
            let stream = state.stream(call, context, device, std::ptr::null_mut(), pt);
            state.emit(
                call,
                Record::Memcpy {
                    stream,
                    copy: CopyKind::PtoP,
                    src: p.srcDevice,
                    dst: p.dstDevice,
                    bytes: p.ByteCount as u64,
                    synchronous: true,
                    memory: (MemoryKind::Device, MemoryKind::Device),
                    api: "cuMemcpyPeer",
                },
            );
        }
        CU_MEMCPY_PEER_ASYNC | CU_MEMCPY_PEER_ASYNC_PTSZ if enter => {
            // Safety: cuMemcpyPeerAsync's block is MemcpyPeerAsync.
            let Some(p) = (unsafe { data.params::<MemcpyPeerAsync>() }) else { return };
            let stream = state.stream(call, context, device, p.hStream, pt);
            state.emit(
                call,
                Record::Memcpy {
                    stream,
                    copy: CopyKind::PtoP,
                    src: p.srcDevice,
                    dst: p.dstDevice,
                    bytes: p.ByteCount as u64,
                    synchronous: false,
                    memory: (MemoryKind::Device, MemoryKind::Device),
                    api: "cuMemcpyPeerAsync",
                },
            );
        }
        CU_MEMSET_D8_V2
        | CU_MEMSET_D16_V2
        | CU_MEMSET_D32_V2
        | CU_MEMSET_D8_V2_PTDS
        | CU_MEMSET_D16_V2_PTDS
        | CU_MEMSET_D32_V2_PTDS
            if enter =>
        {
            // Safety: the synchronous sets' blocks are (dstDevice, value, N), the value padded alike: Memset.
            let Some(p) = (unsafe { data.params::<Memset>() }) else { return };
            let stream = state.stream(call, context, device, std::ptr::null_mut(), pt);
            let bytes = (p.N as u64).saturating_mul(memset_width(cbid));
            let memory = state.memory_at(p.dstDevice);
            state.emit(
                call,
                Record::Memset { stream, dst: p.dstDevice, bytes, synchronous: true, memory, api: "cuMemset" },
            );
        }
        CU_MEMSET_D8_ASYNC
        | CU_MEMSET_D16_ASYNC
        | CU_MEMSET_D32_ASYNC
        | CU_MEMSET_D8_ASYNC_PTSZ
        | CU_MEMSET_D16_ASYNC_PTSZ
        | CU_MEMSET_D32_ASYNC_PTSZ
            if enter =>
        {
            // Safety: the asynchronous sets' blocks are (dstDevice, value, N, hStream): MemsetAsync.
            let Some(p) = (unsafe { data.params::<MemsetAsync>() }) else { return };
            let stream = state.stream(call, context, device, p.hStream, pt);
            let bytes = (p.N as u64).saturating_mul(memset_width(cbid));
            let memory = state.memory_at(p.dstDevice);
            state.emit(
                call,
                Record::Memset { stream, dst: p.dstDevice, bytes, synchronous: false, memory, api: "cuMemsetAsync" },
            );
        }
        CU_MEMCPY_2D_V2 | CU_MEMCPY_2D_UNALIGNED_V2 | CU_MEMCPY_2D_V2_PTDS | CU_MEMCPY_2D_UNALIGNED_V2_PTDS
            if enter =>
        {
            // Safety: the synchronous 2D copies' block is the descriptor pointer: PitchedCopy<Memcpy2D>.
            let Some(p) = (unsafe { data.params::<PitchedCopy<Memcpy2D>>() }) else { return };
            // Safety: the descriptor the program passed to the call, valid while the call runs.
            let Some(copy) = (unsafe { p.pCopy.as_ref() }) else { return };
            let stream = state.stream(call, context, device, std::ptr::null_mut(), pt);
            state.pitched_copy(call, stream, &PitchedCopyShape::of_2d(copy), true, "cuMemcpy2D");
        }
        CU_MEMCPY_2D_ASYNC_V2 | CU_MEMCPY_2D_ASYNC_V2_PTSZ if enter => {
            // Safety: cuMemcpy2DAsync's block is (pCopy, hStream): PitchedCopyAsync<Memcpy2D>.
            let Some(p) = (unsafe { data.params::<PitchedCopyAsync<Memcpy2D>>() }) else { return };
            // Safety: the descriptor the program passed to the call, valid while the call runs.
            let Some(copy) = (unsafe { p.pCopy.as_ref() }) else { return };
            let stream = state.stream(call, context, device, p.hStream, pt);
            state.pitched_copy(call, stream, &PitchedCopyShape::of_2d(copy), false, "cuMemcpy2DAsync");
        }
        CU_MEMCPY_3D_V2 | CU_MEMCPY_3D_V2_PTDS if enter => {
            // Safety: cuMemcpy3D's block is the descriptor pointer: PitchedCopy<Memcpy3D>.
            let Some(p) = (unsafe { data.params::<PitchedCopy<Memcpy3D>>() }) else { return };
            // Safety: the descriptor the program passed to the call, valid while the call runs.
            let Some(copy) = (unsafe { p.pCopy.as_ref() }) else { return };
            let stream = state.stream(call, context, device, std::ptr::null_mut(), pt);
            state.pitched_copy(call, stream, &PitchedCopyShape::of_3d(copy), true, "cuMemcpy3D");
        }
        CU_MEMCPY_3D_ASYNC_V2 | CU_MEMCPY_3D_ASYNC_V2_PTSZ if enter => {
            // Safety: cuMemcpy3DAsync's block is (pCopy, hStream): PitchedCopyAsync<Memcpy3D>.
            let Some(p) = (unsafe { data.params::<PitchedCopyAsync<Memcpy3D>>() }) else { return };
            // Safety: the descriptor the program passed to the call, valid while the call runs.
            let Some(copy) = (unsafe { p.pCopy.as_ref() }) else { return };
            let stream = state.stream(call, context, device, p.hStream, pt);
            state.pitched_copy(call, stream, &PitchedCopyShape::of_3d(copy), false, "cuMemcpy3DAsync");
        }
        CU_MEMCPY_BATCH_ASYNC | CU_MEMCPY_BATCH_ASYNC_PTSZ if enter => {
            // Safety: cuMemcpyBatchAsync's block (CUDA 12.8) is MemcpyBatch.
            let Some(p) = (unsafe { data.params::<MemcpyBatch>() }) else { return };
            let stream = state.stream(call, context, device, p.hStream, pt);
            // Safety: the program's three arrays of `count` entries, valid while the call runs.
            let copies = unsafe { batch_copies(&p.copies) };
            state.batch_copy(call, stream, &copies, "cuMemcpyBatchAsync");
        }
        CU_MEMCPY_BATCH_ASYNC_V2 | CU_MEMCPY_BATCH_ASYNC_V2_PTSZ if enter => {
            // Safety: cuMemcpyBatchAsync_v2's block (CUDA 13) is MemcpyBatchV2.
            let Some(p) = (unsafe { data.params::<MemcpyBatchV2>() }) else { return };
            let stream = state.stream(call, context, device, p.hStream, pt);
            // Safety: the program's three arrays of `count` entries, valid while the call runs.
            let copies = unsafe { batch_copies(&p.copies) };
            state.batch_copy(call, stream, &copies, "cuMemcpyBatchAsync");
        }
        CU_MEMSET_D2D8_V2
        | CU_MEMSET_D2D16_V2
        | CU_MEMSET_D2D32_V2
        | CU_MEMSET_D2D8_V2_PTDS
        | CU_MEMSET_D2D16_V2_PTDS
        | CU_MEMSET_D2D32_V2_PTDS
            if enter =>
        {
            // Safety: the synchronous 2D sets' blocks are (dstDevice, dstPitch, value padded, Width, Height): Memset2D.
            let Some(p) = (unsafe { data.params::<Memset2D>() }) else { return };
            let stream = state.stream(call, context, device, std::ptr::null_mut(), pt);
            state.emit(call, set_2d(state, p, cbid, stream, true));
        }
        CU_MEMSET_D2D8_ASYNC
        | CU_MEMSET_D2D16_ASYNC
        | CU_MEMSET_D2D32_ASYNC
        | CU_MEMSET_D2D8_ASYNC_PTSZ
        | CU_MEMSET_D2D16_ASYNC_PTSZ
        | CU_MEMSET_D2D32_ASYNC_PTSZ
            if enter =>
        {
            // Safety: the asynchronous 2D sets' blocks are Memset2D followed by the stream: Memset2DAsync.
            let Some(p) = (unsafe { data.params::<Memset2DAsync>() }) else { return };
            let stream = state.stream(call, context, device, p.hStream, pt);
            state.emit(call, set_2d(state, &p.set, cbid, stream, false));
        }
        CU_EVENT_RECORD | CU_EVENT_RECORD_PTSZ | CU_EVENT_RECORD_WITH_FLAGS | CU_EVENT_RECORD_WITH_FLAGS_PTSZ
            if enter =>
        {
            // Safety: cuEventRecord's block, and the start of cuEventRecordWithFlags's, is EventRecord.
            let Some(p) = (unsafe { data.params::<EventRecord>() }) else { return };
            let stream = state.stream(call, context, device, p.hStream, pt);
            let event = state.event(call, p.hEvent as u64);
            state.emit(call, Record::EventRecord { event, stream, api: "cuEventRecord" });
        }
        CU_STREAM_WAIT_EVENT | CU_STREAM_WAIT_EVENT_PTSZ if enter => {
            // Safety: cuStreamWaitEvent's block is StreamWaitEvent.
            let Some(p) = (unsafe { data.params::<StreamWaitEvent>() }) else { return };
            let stream = state.stream(call, context, device, p.hStream, pt);
            let event = state.event(call, p.hEvent as u64);
            state.emit(call, Record::Wait { stream, event });
        }
        CU_STREAM_SYNCHRONIZE | CU_STREAM_SYNCHRONIZE_PTSZ if enter => {
            // Safety: cuStreamSynchronize's block is its stream handle.
            let Some(p) = (unsafe { data.params::<OneHandle>() }) else { return };
            let stream = state.stream(call, context, device, p.handle, pt);
            state.emit(call, Record::Sync { target: SyncTarget::Stream(stream), api: "cuStreamSynchronize" });
        }
        CU_EVENT_SYNCHRONIZE if enter => {
            // Safety: cuEventSynchronize's block is its event handle.
            let Some(p) = (unsafe { data.params::<OneHandle>() }) else { return };
            let event = state.event(call, p.handle as u64);
            state.emit(call, Record::Sync { target: SyncTarget::Event(event), api: "cuEventSynchronize" });
        }
        CU_CTX_SYNCHRONIZE | CU_CTX_SYNCHRONIZE_V2 if enter => {
            // The legacy default stream of the context must exist for the sync to name its context.
            state.stream(call, context, device, std::ptr::null_mut(), false);
            state.emit(call, Record::Sync { target: SyncTarget::Context(context), api: "cuCtxSynchronize" });
        }
        CU_STREAM_QUERY | CU_STREAM_QUERY_PTSZ if !enter => {
            // Safety: cuStreamQuery's block is its stream handle.
            let Some(p) = (unsafe { data.params::<OneHandle>() }) else { return };
            let stream = state.stream(call, context, device, p.handle, pt);
            state.emit(
                call,
                Record::Query { target: SyncTarget::Stream(stream), ready: data.succeeded(), api: "cuStreamQuery" },
            );
        }
        CU_EVENT_QUERY if !enter => {
            // Safety: cuEventQuery's block is its event handle.
            let Some(p) = (unsafe { data.params::<OneHandle>() }) else { return };
            let event = state.event(call, p.handle as u64);
            state.emit(
                call,
                Record::Query { target: SyncTarget::Event(event), ready: data.succeeded(), api: "cuEventQuery" },
            );
        }
        CU_STREAM_CREATE | CU_STREAM_CREATE_WITH_PRIORITY if !enter && data.succeeded() => {
            // Safety: cuStreamCreate's block is StreamCreate less `priority`, read only for cuStreamCreateWithPriority.
            let Some(p) = (unsafe { data.params::<StreamCreate>() }) else { return };
            // Safety: the call succeeded, so the driver wrote the new stream through `phStream`.
            if let Some(handle) = unsafe { written(p.phStream) } {
                let priority = (cbid == CU_STREAM_CREATE_WITH_PRIORITY).then_some(p.priority);
                state.created_stream(call, context, device, handle as u64, p.Flags, priority);
            }
        }
        CU_EVENT_CREATE if !enter && data.succeeded() => {
            // Safety: cuEventCreate's block is EventCreate.
            let Some(p) = (unsafe { data.params::<EventCreate>() }) else { return };
            // Safety: the call succeeded, so the driver wrote the new event through `phEvent`.
            if let Some(handle) = unsafe { written(p.phEvent) } {
                state.created_event(call, handle as u64);
            }
        }
        CU_MEM_ALLOC_V2 | CU_MEM_ALLOC_MANAGED if !enter && data.succeeded() => {
            // Safety: cuMemAlloc's block, and the start of cuMemAllocManaged's, is MemAlloc.
            let Some(p) = (unsafe { data.params::<MemAlloc>() }) else { return };
            // Safety: the call succeeded, so the driver wrote the address through `dptr`.
            if let Some(address) = unsafe { written(p.dptr) } {
                let kind = if cbid == CU_MEM_ALLOC_MANAGED { AllocKind::Managed } else { AllocKind::Device };
                state.allocated(call, address, p.bytesize as u64, kind, None, "cuMemAlloc");
            }
        }
        CU_MEM_ALLOC_PITCH_V2 if !enter && data.succeeded() => {
            // Safety: cuMemAllocPitch's block is MemAllocPitch.
            let Some(p) = (unsafe { data.params::<MemAllocPitch>() }) else { return };
            // Safety: the call succeeded, so the driver wrote the address and the pitch through them.
            if let (Some(address), Some(pitch)) = unsafe { (written(p.dptr), written(p.pPitch)) } {
                let bytes = (pitch as u64).saturating_mul(p.Height as u64);
                state.allocated(call, address, bytes, AllocKind::Device, None, "cuMemAllocPitch");
            }
        }
        CU_MEM_ALLOC_ASYNC | CU_MEM_ALLOC_ASYNC_PTSZ if !enter && data.succeeded() => {
            // Safety: cuMemAllocAsync's block is MemAllocAsync.
            let Some(p) = (unsafe { data.params::<MemAllocAsync>() }) else { return };
            // Safety: the call succeeded, so the driver wrote the address through `dptr`.
            if let Some(address) = unsafe { written(p.dptr) } {
                let stream = state.stream(call, context, device, p.hStream, pt);
                state.allocated(
                    call,
                    address,
                    p.bytesize as u64,
                    AllocKind::StreamOrdered,
                    Some(stream),
                    "cuMemAllocAsync",
                );
            }
        }
        CU_MEM_ALLOC_FROM_POOL_ASYNC | CU_MEM_ALLOC_FROM_POOL_ASYNC_PTSZ if !enter && data.succeeded() => {
            // Safety: cuMemAllocFromPoolAsync's block is MemAllocFromPoolAsync.
            let Some(p) = (unsafe { data.params::<MemAllocFromPoolAsync>() }) else { return };
            // Safety: the call succeeded, so the driver wrote the address through `dptr`.
            if let Some(address) = unsafe { written(p.dptr) } {
                let stream = state.stream(call, context, device, p.hStream, pt);
                state.allocated(
                    call,
                    address,
                    p.bytesize as u64,
                    AllocKind::StreamOrdered,
                    Some(stream),
                    "cuMemAllocFromPoolAsync",
                );
            }
        }
        CU_MEM_HOST_ALLOC | CU_MEM_ALLOC_HOST_V2 if !enter && data.succeeded() => {
            // Safety: cuMemHostAlloc's block, and the start of cuMemAllocHost's, is MemHostAlloc.
            let Some(p) = (unsafe { data.params::<MemHostAlloc>() }) else { return };
            // Safety: the call succeeded, so the driver wrote the host address through `pp`.
            if let Some(address) = unsafe { written(p.pp) } {
                state.allocated(call, address as u64, p.bytesize as u64, AllocKind::Host, None, "cuMemHostAlloc");
            }
        }
        CU_MEM_HOST_REGISTER | CU_MEM_HOST_REGISTER_V2 if !enter && data.succeeded() => {
            // Safety: cuMemHostRegister's block (both versions) is MemHostRegister.
            let Some(p) = (unsafe { data.params::<MemHostRegister>() }) else { return };
            state.allocated(call, p.p as u64, p.bytesize as u64, AllocKind::Host, None, "cuMemHostRegister");
        }
        CU_MEM_HOST_UNREGISTER if enter => {
            // Safety: cuMemHostUnregister's block is its host pointer.
            let Some(p) = (unsafe { data.params::<OneHandle>() }) else { return };
            state.freed(call, p.handle as u64, FreeKind::Host, None, "cuMemHostUnregister");
        }
        CU_MEM_MAP if !enter && data.succeeded() => {
            // Safety: cuMemMap's block starts (ptr, size): MemMap.
            let Some(p) = (unsafe { data.params::<MemMap>() }) else { return };
            state.allocated(call, p.ptr, p.size as u64, AllocKind::VirtualMap, None, "cuMemMap");
        }
        CU_MEM_FREE_V2 if enter => {
            // Safety: cuMemFree's block is MemFree.
            let Some(p) = (unsafe { data.params::<MemFree>() }) else { return };
            state.freed(call, p.dptr, FreeKind::Synchronous, None, "cuMemFree");
        }
        CU_MEM_FREE_HOST if enter => {
            // Safety: cuMemFreeHost's block is its host pointer.
            let Some(p) = (unsafe { data.params::<OneHandle>() }) else { return };
            state.freed(call, p.handle as u64, FreeKind::Host, None, "cuMemFreeHost");
        }
        CU_MEM_FREE_ASYNC | CU_MEM_FREE_ASYNC_PTSZ if enter => {
            // Safety: cuMemFreeAsync's block is MemFreeAsync.
            let Some(p) = (unsafe { data.params::<MemFreeAsync>() }) else { return };
            let stream = state.stream(call, context, device, p.hStream, pt);
            state.freed(call, p.dptr, FreeKind::StreamOrdered, Some(stream), "cuMemFreeAsync");
        }
        CU_MEM_UNMAP if enter => {
            // Safety: cuMemUnmap's block is (ptr, size): MemMap.
            let Some(p) = (unsafe { data.params::<MemMap>() }) else { return };
            state.unmapped(call, p.ptr, p.size as u64);
        }
        CU_GRAPH_LAUNCH | CU_GRAPH_LAUNCH_PTSZ if enter => {
            // Safety: cuGraphLaunch's block is GraphLaunch.
            let Some(p) = (unsafe { data.params::<GraphLaunch>() }) else { return };
            let stream = state.stream(call, context, device, p.hStream, pt);
            state.emit(
                call,
                Record::Graph { graph: GraphRecord::Launch { exec: p.hGraph as u64, stream }, api: "cuGraphLaunch" },
            );
        }
        _ => {
            on_graph_call(state, data, call, context, device);
        }
    }
}
