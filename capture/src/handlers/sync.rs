//! What orders streams and the host: event records and waits, stream, event and context synchronization,
//! queries (a successful one orders like a synchronization), and the creation of streams and events.

use crate::call_kinds::Detail;
use crate::driver_call::{CallContext, DriverCall};
use crate::params::*;
use crate::process_state::ProcessState;
use crate::record::{Record, SyncTarget};

use super::written;

pub fn event_record(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuEventRecord's block, and the start of cuEventRecordWithFlags's, is EventRecord.
    let Some(p) = (unsafe { data.params::<EventRecord>() }) else { return };
    let stream = state.stream(cx, p.hStream);
    let event = state.event(cx.call, p.hEvent as u64);
    state.emit(cx.call, Record::EventRecord { event, stream, api: "cuEventRecord" });
}

pub fn wait_event(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuStreamWaitEvent's block is StreamWaitEvent.
    let Some(p) = (unsafe { data.params::<StreamWaitEvent>() }) else { return };
    let stream = state.stream(cx, p.hStream);
    let event = state.event(cx.call, p.hEvent as u64);
    state.emit(cx.call, Record::Wait { stream, event });
}

pub fn stream_synchronize(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuStreamSynchronize's block is its stream handle.
    let Some(p) = (unsafe { data.params::<OneHandle>() }) else { return };
    let stream = state.stream(cx, p.handle);
    state.emit(cx.call, Record::Sync { target: SyncTarget::Stream(stream), api: "cuStreamSynchronize" });
}

pub fn event_synchronize(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuEventSynchronize's block is its event handle.
    let Some(p) = (unsafe { data.params::<OneHandle>() }) else { return };
    let event = state.event(cx.call, p.handle as u64);
    state.emit(cx.call, Record::Sync { target: SyncTarget::Event(event), api: "cuEventSynchronize" });
}

pub fn context_synchronize(state: &mut ProcessState, cx: &CallContext, _data: &DriverCall<'_>) {
    // The legacy default stream of the context must exist for the sync to name its context.
    state.stream(&CallContext { per_thread: false, ..*cx }, std::ptr::null_mut());
    state.emit(cx.call, Record::Sync { target: SyncTarget::Context(cx.context), api: "cuCtxSynchronize" });
}

pub fn stream_query(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuStreamQuery's block is its stream handle.
    let Some(p) = (unsafe { data.params::<OneHandle>() }) else { return };
    let stream = state.stream(cx, p.handle);
    let ready = data.succeeded();
    state.emit(cx.call, Record::Query { target: SyncTarget::Stream(stream), ready, api: "cuStreamQuery" });
}

pub fn event_query(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuEventQuery's block is its event handle.
    let Some(p) = (unsafe { data.params::<OneHandle>() }) else { return };
    let event = state.event(cx.call, p.handle as u64);
    let ready = data.succeeded();
    state.emit(cx.call, Record::Query { target: SyncTarget::Event(event), ready, api: "cuEventQuery" });
}

pub fn stream_create(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuStreamCreate's block is StreamCreate less `priority`, read only for cuStreamCreateWithPriority.
    let Some(p) = (unsafe { data.params::<StreamCreate>() }) else { return };
    // Safety: the call succeeded, so the driver wrote the new stream through `phStream`.
    if let Some(handle) = unsafe { written(p.phStream) } {
        let priority = (data.detail == Detail::WithPriority).then_some(p.priority);
        state.created_stream(cx, handle as u64, p.Flags, priority);
    }
}

pub fn event_create(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuEventCreate's block is EventCreate.
    let Some(p) = (unsafe { data.params::<EventCreate>() }) else { return };
    // Safety: the call succeeded, so the driver wrote the new event through `phEvent`.
    if let Some(handle) = unsafe { written(p.phEvent) } {
        state.created_event(cx.call, handle as u64);
    }
}
