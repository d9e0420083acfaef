//! Allocations and frees: device (plain, pitched, stream-ordered, from a pool), managed, pinned and registered
//! host memory, and virtual memory mappings.

use cudarc::driver::sys as cu;
use streamtrace_format::{AllocKind, FreeKind};

use crate::call_kinds::Detail;
use crate::driver_call::{CallContext, DriverCall};
use crate::params::*;
use crate::process_state::ProcessState;

use super::written;

/// cuMemAlloc and cuMemAllocManaged.
pub fn alloc(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemAlloc's block, and the start of cuMemAllocManaged's, is MemAlloc.
    let Some(p) = (unsafe { data.params::<MemAlloc>() }) else { return };
    // Safety: the call succeeded, so the driver wrote the address through `dptr`.
    if let Some(address) = unsafe { written(p.dptr) } {
        let kind = match data.detail {
            Detail::Alloc(kind) => kind,
            _ => AllocKind::Device,
        };
        state.allocated(cx.call, address, p.bytesize as u64, kind, None, "cuMemAlloc");
    }
}

pub fn alloc_pitch(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemAllocPitch's block is MemAllocPitch.
    let Some(p) = (unsafe { data.params::<MemAllocPitch>() }) else { return };
    // Safety: the call succeeded, so the driver wrote the address and the pitch through them.
    if let (Some(address), Some(pitch)) = unsafe { (written(p.dptr), written(p.pPitch)) } {
        let bytes = (pitch as u64).saturating_mul(p.Height as u64);
        state.allocated(cx.call, address, bytes, AllocKind::Device, None, "cuMemAllocPitch");
    }
}

pub fn alloc_async(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemAllocAsync's block is MemAllocAsync.
    let Some(p) = (unsafe { data.params::<MemAllocAsync>() }) else { return };
    // Safety: the call succeeded, so the driver wrote the address through `dptr`.
    if let Some(address) = unsafe { written(p.dptr) } {
        let stream = state.stream(cx, p.hStream);
        let bytes = p.bytesize as u64;
        state.allocated(cx.call, address, bytes, AllocKind::StreamOrdered, Some(stream), "cuMemAllocAsync");
    }
}

pub fn alloc_from_pool_async(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemAllocFromPoolAsync's block is MemAllocFromPoolAsync.
    let Some(p) = (unsafe { data.params::<MemAllocFromPoolAsync>() }) else { return };
    // Safety: the call succeeded, so the driver wrote the address through `dptr`.
    if let Some(address) = unsafe { written(p.dptr) } {
        let stream = state.stream(cx, p.hStream);
        let bytes = p.bytesize as u64;
        state.allocated(cx.call, address, bytes, AllocKind::StreamOrdered, Some(stream), "cuMemAllocFromPoolAsync");
    }
}

/// cuMemHostAlloc and cuMemAllocHost.
pub fn host_alloc(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemHostAlloc's block, and the start of cuMemAllocHost's, is MemHostAlloc.
    let Some(p) = (unsafe { data.params::<MemHostAlloc>() }) else { return };
    // Safety: the call succeeded, so the driver wrote the host address through `pp`.
    if let Some(address) = unsafe { written(p.pp) } {
        state.allocated(cx.call, address as u64, p.bytesize as u64, AllocKind::Host, None, "cuMemHostAlloc");
    }
}

pub fn host_register(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemHostRegister's block (both versions) is MemHostRegister.
    let Some(p) = (unsafe { data.params::<MemHostRegister>() }) else { return };
    state.allocated(cx.call, p.p as u64, p.bytesize as u64, AllocKind::Host, None, "cuMemHostRegister");
}

pub fn host_unregister(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemHostUnregister's block is its host pointer.
    let Some(p) = (unsafe { data.params::<OneHandle>() }) else { return };
    state.freed(cx.call, p.handle as u64, FreeKind::Host, None, "cuMemHostUnregister");
}

pub fn map(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemMap's block starts (ptr, size): MemMap.
    let Some(p) = (unsafe { data.params::<MemMap>() }) else { return };
    state.allocated(cx.call, p.ptr, p.size as u64, AllocKind::VirtualMap, None, "cuMemMap");
}

pub fn unmap(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemUnmap's block is (ptr, size): MemMap.
    let Some(p) = (unsafe { data.params::<MemMap>() }) else { return };
    state.unmapped(cx.call, p.ptr, p.size as u64);
}

/// cuIpcOpenMemHandle and cuMemPoolImportPointer: another process's block mapped into this one. Filed as a block
/// of this process, so that its kernels' pointer arguments fall in it (tier T1) as they do in a block of its own;
/// the call says the address alone, so the size is the driver's range of the mapping.
pub fn ipc_open(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    imported(state, cx, data, "cuIpcOpenMemHandle");
}

pub fn pool_import(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    imported(state, cx, data, "cuMemPoolImportPointer");
}

/// How findings name a block another process exported.
const IMPORTED: &str = "imported from another process";

fn imported(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>, api: &'static str) {
    // Safety: both calls' blocks start with the address's out-parameter: ImportedPointer.
    let Some(p) = (unsafe { data.params::<ImportedPointer>() }) else { return };
    // Safety: the call succeeded, so the driver wrote the address through `pdptr`.
    let Some(address) = (unsafe { written(p.pdptr) }) else { return };
    let (mut base, mut bytes) = (0, 0);
    // Safety: asks the driver for the mapping that holds a device address it just returned, into two locals; the
    // capture's re-entry guard keeps this call unrecorded.
    let known = unsafe { cu::cuMemGetAddressRange_v2(&mut base, &mut bytes, address) } == cu::CUresult::CUDA_SUCCESS;
    if known && bytes > 0 {
        state.allocated_named(cx.call, base, bytes as u64, AllocKind::Device, None, Some(IMPORTED), api);
    }
}

/// cuIpcCloseMemHandle: the mapping ends on the host, with no synchronization of the device (as an unmap).
pub fn ipc_close(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuIpcCloseMemHandle's block is MemFree (the mapped address).
    let Some(p) = (unsafe { data.params::<MemFree>() }) else { return };
    state.freed(cx.call, p.dptr, FreeKind::VirtualUnmap, None, "cuIpcCloseMemHandle");
}

pub fn free(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemFree's block is MemFree.
    let Some(p) = (unsafe { data.params::<MemFree>() }) else { return };
    state.freed(cx.call, p.dptr, FreeKind::Synchronous, None, "cuMemFree");
}

pub fn free_host(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemFreeHost's block is its host pointer.
    let Some(p) = (unsafe { data.params::<OneHandle>() }) else { return };
    state.freed(cx.call, p.handle as u64, FreeKind::Host, None, "cuMemFreeHost");
}

pub fn free_async(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuMemFreeAsync's block is MemFreeAsync.
    let Some(p) = (unsafe { data.params::<MemFreeAsync>() }) else { return };
    let stream = state.stream(cx, p.hStream);
    state.freed(cx.call, p.dptr, FreeKind::StreamOrdered, Some(stream), "cuMemFreeAsync");
}
