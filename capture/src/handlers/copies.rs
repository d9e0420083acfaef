//! Copies: linear (synchronous and asynchronous, every direction), peer, 2D and 3D pitched, and batches.
//! Each records both ranges and what memory they are, which decides whether the call makes the host wait.

use streamtrace_format::{CopyKind, MemoryKind};

use crate::call_kinds::Detail;
use crate::driver_call::{CallContext, DriverCall};
use crate::params::*;
use crate::pitched::PitchedCopyShape;
use crate::process_state::ProcessState;
use crate::record::Record;

/// The direction the call names (calls.rs); `cuMemcpy`'s unified form names none.
fn named_direction(data: &DriverCall<'_>) -> CopyKind {
    match data.detail {
        Detail::Copy(kind) => kind,
        _ => CopyKind::Default,
    }
}

/// A linear copy on the default stream: cuMemcpy and cuMemcpy{HtoD,DtoH,DtoD}.
pub fn copy(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: the synchronous copies' blocks start (dst, src, ByteCount): Memcpy.
    let Some(p) = (unsafe { data.params::<Memcpy>() }) else { return };
    let stream = state.stream(cx, std::ptr::null_mut());
    linear(state, cx, stream, named_direction(data), (p.src, p.dst, p.ByteCount as u64), true, "cuMemcpy");
}

/// A linear copy on a stream: cuMemcpyAsync and cuMemcpy{HtoD,DtoH,DtoD}Async.
pub fn copy_async(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: the asynchronous copies' blocks are (dst, src, ByteCount, hStream): MemcpyAsync.
    let Some(p) = (unsafe { data.params::<MemcpyAsync>() }) else { return };
    let stream = state.stream(cx, p.hStream);
    linear(state, cx, stream, named_direction(data), (p.src, p.dst, p.ByteCount as u64), false, "cuMemcpyAsync");
}

fn linear(
    state: &mut ProcessState,
    cx: &CallContext,
    stream: u64,
    copy: CopyKind,
    (src, dst, bytes): (u64, u64, u64),
    synchronous: bool,
    api: &'static str,
) {
    let memory = state.copy_memory(copy, src, dst);
    state.emit(cx.call, Record::Memcpy { stream, copy, src, dst, bytes, synchronous, memory, api });
}

pub fn peer_copy(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemcpyPeer's block is MemcpyPeer.
    let Some(p) = (unsafe { data.params::<MemcpyPeer>() }) else { return };
    let stream = state.stream(cx, std::ptr::null_mut());
    peer(state, cx, stream, (p.srcDevice, p.dstDevice, p.ByteCount as u64), true, "cuMemcpyPeer");
}

pub fn peer_copy_async(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemcpyPeerAsync's block is MemcpyPeerAsync.
    let Some(p) = (unsafe { data.params::<MemcpyPeerAsync>() }) else { return };
    let stream = state.stream(cx, p.hStream);
    peer(state, cx, stream, (p.srcDevice, p.dstDevice, p.ByteCount as u64), false, "cuMemcpyPeerAsync");
}

fn peer(
    state: &mut ProcessState,
    cx: &CallContext,
    stream: u64,
    (src, dst, bytes): (u64, u64, u64),
    synchronous: bool,
    api: &'static str,
) {
    let memory = (MemoryKind::Device, MemoryKind::Device);
    state.emit(cx.call, Record::Memcpy { stream, copy: CopyKind::PtoP, src, dst, bytes, synchronous, memory, api });
}

pub fn copy_2d(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: the synchronous 2D copies' block is the descriptor pointer: PitchedCopy<Memcpy2D>.
    let Some(p) = (unsafe { data.params::<PitchedCopy<Memcpy2D>>() }) else { return };
    // Safety: the descriptor the program passed to the call, valid while the call runs.
    let Some(copy) = (unsafe { p.pCopy.as_ref() }) else { return };
    let stream = state.stream(cx, std::ptr::null_mut());
    state.pitched_copy(cx.call, stream, &PitchedCopyShape::of_2d(copy), true, "cuMemcpy2D");
}

pub fn copy_2d_async(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemcpy2DAsync's block is (pCopy, hStream): PitchedCopyAsync<Memcpy2D>.
    let Some(p) = (unsafe { data.params::<PitchedCopyAsync<Memcpy2D>>() }) else { return };
    // Safety: the descriptor the program passed to the call, valid while the call runs.
    let Some(copy) = (unsafe { p.pCopy.as_ref() }) else { return };
    let stream = state.stream(cx, p.hStream);
    state.pitched_copy(cx.call, stream, &PitchedCopyShape::of_2d(copy), false, "cuMemcpy2DAsync");
}

pub fn copy_3d(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemcpy3D's block is the descriptor pointer: PitchedCopy<Memcpy3D>.
    let Some(p) = (unsafe { data.params::<PitchedCopy<Memcpy3D>>() }) else { return };
    // Safety: the descriptor the program passed to the call, valid while the call runs.
    let Some(copy) = (unsafe { p.pCopy.as_ref() }) else { return };
    let stream = state.stream(cx, std::ptr::null_mut());
    state.pitched_copy(cx.call, stream, &PitchedCopyShape::of_3d(copy), true, "cuMemcpy3D");
}

pub fn copy_3d_async(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemcpy3DAsync's block is (pCopy, hStream): PitchedCopyAsync<Memcpy3D>.
    let Some(p) = (unsafe { data.params::<PitchedCopyAsync<Memcpy3D>>() }) else { return };
    // Safety: the descriptor the program passed to the call, valid while the call runs.
    let Some(copy) = (unsafe { p.pCopy.as_ref() }) else { return };
    let stream = state.stream(cx, p.hStream);
    state.pitched_copy(cx.call, stream, &PitchedCopyShape::of_3d(copy), false, "cuMemcpy3DAsync");
}

/// cuMemcpy3DPeer: CUDA_MEMCPY3D_PEER is laid out as CUDA_MEMCPY3D, with the two contexts where that has its
/// reserved words (params.rs checks it).
pub fn copy_3d_peer(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemcpy3DPeer's block is the descriptor pointer, whose layout is Memcpy3D's.
    let Some(p) = (unsafe { data.params::<PitchedCopy<Memcpy3D>>() }) else { return };
    // Safety: the descriptor the program passed to the call, valid while the call runs.
    let Some(copy) = (unsafe { p.pCopy.as_ref() }) else { return };
    let stream = state.stream(cx, std::ptr::null_mut());
    state.pitched_copy(cx.call, stream, &PitchedCopyShape::of_3d(copy), true, "cuMemcpy3DPeer");
}

pub fn copy_3d_peer_async(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemcpy3DPeerAsync's block is (pCopy, hStream), its descriptor laid out as Memcpy3D.
    let Some(p) = (unsafe { data.params::<PitchedCopyAsync<Memcpy3D>>() }) else { return };
    // Safety: the descriptor the program passed to the call, valid while the call runs.
    let Some(copy) = (unsafe { p.pCopy.as_ref() }) else { return };
    let stream = state.stream(cx, p.hStream);
    state.pitched_copy(cx.call, stream, &PitchedCopyShape::of_3d(copy), false, "cuMemcpy3DPeerAsync");
}

/// cuMemcpy3DBatchAsync (CUDA 12.8): each operation a pitched copy on the stream.
pub fn batch_copy_3d(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemcpy3DBatchAsync's block is Memcpy3DBatch.
    let Some(p) = (unsafe { data.params::<Memcpy3DBatch>() }) else { return };
    let stream = state.stream(cx, p.hStream);
    // Safety: the program's array of `numOps` operations, valid while the call runs.
    for shape in unsafe { batch_3d_shapes(p.opList, p.numOps) } {
        state.pitched_copy(cx.call, stream, &shape, false, "cuMemcpy3DBatchAsync");
    }
}

/// cuMemcpy3DBatchAsync_v2 (CUDA 13): the same without the failing index.
pub fn batch_copy_3d_v2(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemcpy3DBatchAsync_v2's block is Memcpy3DBatchV2.
    let Some(p) = (unsafe { data.params::<Memcpy3DBatchV2>() }) else { return };
    let stream = state.stream(cx, p.hStream);
    // Safety: the program's array of `numOps` operations, valid while the call runs.
    for shape in unsafe { batch_3d_shapes(p.opList, p.numOps) } {
        state.pitched_copy(cx.call, stream, &shape, false, "cuMemcpy3DBatchAsync");
    }
}

/// The operations of a 3D batch as pitched copies; none when the list is null or longer than `MAX_BATCH` (not
/// believed, as for linear batches).
///
/// # Safety
/// `ops` is null or holds `count` readable operations.
unsafe fn batch_3d_shapes(ops: *const Memcpy3DBatchOp, count: usize) -> Vec<PitchedCopyShape> {
    const MAX_BATCH: usize = 1 << 16;
    if ops.is_null() || count > MAX_BATCH {
        return Vec::new();
    }
    // Safety: `i < count` operations are readable (the caller's promise).
    (0..count).map(|i| PitchedCopyShape::of_3d_operation(unsafe { &*ops.add(i) })).collect()
}

pub fn batch_copy(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemcpyBatchAsync's block (CUDA 12.8) is MemcpyBatch.
    let Some(p) = (unsafe { data.params::<MemcpyBatch>() }) else { return };
    let stream = state.stream(cx, p.hStream);
    // Safety: the program's three arrays of `count` entries, valid while the call runs.
    let copies = unsafe { batch_copies(&p.copies) };
    state.batch_copy(cx.call, stream, &copies, "cuMemcpyBatchAsync");
}

pub fn batch_copy_v2(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemcpyBatchAsync_v2's block (CUDA 13) is MemcpyBatchV2.
    let Some(p) = (unsafe { data.params::<MemcpyBatchV2>() }) else { return };
    let stream = state.stream(cx, p.hStream);
    // Safety: the program's three arrays of `count` entries, valid while the call runs.
    let copies = unsafe { batch_copies(&p.copies) };
    state.batch_copy(cx.call, stream, &copies, "cuMemcpyBatchAsync");
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
