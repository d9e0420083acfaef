//! Sets: linear and 2D, synchronous and asynchronous, of 1-, 2- or 4-byte elements.

use crate::call_kinds::Detail;
use crate::driver_call::{CallContext, DriverCall};
use crate::params::*;
use crate::pitched::pitched_extent;
use crate::process_state::ProcessState;
use crate::record::Record;

/// The element width the call sets (calls.rs).
fn width(data: &DriverCall<'_>) -> u64 {
    match data.detail {
        Detail::Width(bytes) => bytes,
        _ => 1,
    }
}

pub fn set(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: the synchronous sets' blocks are (dstDevice, value, N), the value padded alike: Memset.
    let Some(p) = (unsafe { data.params::<Memset>() }) else { return };
    let stream = state.stream(cx, std::ptr::null_mut());
    let bytes = (p.N as u64).saturating_mul(width(data));
    let memory = state.memory_at(p.dstDevice);
    state.emit(cx.call, Record::Memset { stream, dst: p.dstDevice, bytes, synchronous: true, memory, api: "cuMemset" });
}

pub fn set_async(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: the asynchronous sets' blocks are (dstDevice, value, N, hStream): MemsetAsync.
    let Some(p) = (unsafe { data.params::<MemsetAsync>() }) else { return };
    let stream = state.stream(cx, p.hStream);
    let bytes = (p.N as u64).saturating_mul(width(data));
    let memory = state.memory_at(p.dstDevice);
    let record = Record::Memset { stream, dst: p.dstDevice, bytes, synchronous: false, memory, api: "cuMemsetAsync" };
    state.emit(cx.call, record);
}

pub fn set_2d(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: the synchronous 2D sets' blocks are (dstDevice, dstPitch, value padded, Width, Height): Memset2D.
    let Some(p) = (unsafe { data.params::<Memset2D>() }) else { return };
    let stream = state.stream(cx, std::ptr::null_mut());
    let record = set_2d_record(state, p, width(data), stream, true);
    state.emit(cx.call, record);
}

pub fn set_2d_async(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: the asynchronous 2D sets' blocks are Memset2D followed by the stream: Memset2DAsync.
    let Some(p) = (unsafe { data.params::<Memset2DAsync>() }) else { return };
    let stream = state.stream(cx, p.hStream);
    let record = set_2d_record(state, &p.set, width(data), stream, false);
    state.emit(cx.call, record);
}

/// A 2D set as its record: the rows' extent on the pitched buffer, and what memory it is.
fn set_2d_record(state: &ProcessState, p: &Memset2D, width: u64, stream: u64, synchronous: bool) -> Record {
    let bytes = pitched_extent(p.dstPitch, (p.Width as u64).saturating_mul(width), p.Height, 1, 0);
    let memory = state.memory_at(p.dstDevice);
    let api = if synchronous { "cuMemsetD2D" } else { "cuMemsetD2DAsync" };
    Record::Memset { stream, dst: p.dstDevice, bytes, synchronous, memory, api }
}
