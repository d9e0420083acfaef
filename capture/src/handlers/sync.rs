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
    state.emit(cx.call, Record::Wait { stream, event, api: "cuStreamWaitEvent" });
}

/// A stream memory operation's write of a flag word (`cuStreamWriteValue32`, NCCL's and cuBLASLt's cross-stream
/// signal) orders like an event record: the flag's address stands for the event, and a later write replaces what
/// a wait on it takes (DESIGN.md, events). A waiter that waits for a value an earlier write gave is over-ordered:
/// a missed race, never a false one.
pub fn value_write(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: every cuStreamWriteValue form's block starts with its stream and address (StreamValueOp).
    let Some(p) = (unsafe { data.params::<StreamValueOp>() }) else { return };
    let stream = state.stream(cx, p.stream);
    flag_write(state, cx, stream, p.addr, "cuStreamWriteValue");
}

/// A stream's wait on a flag word (`cuStreamWaitValue32`) orders like a wait on the event its latest write
/// recorded; one issued before any write orders nothing, as a wait on a never-recorded event.
pub fn value_wait(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: every cuStreamWaitValue form's block starts with its stream and address (StreamValueOp).
    let Some(p) = (unsafe { data.params::<StreamValueOp>() }) else { return };
    let stream = state.stream(cx, p.stream);
    flag_wait(state, cx, stream, p.addr, "cuStreamWaitValue");
}

/// `cuStreamBatchMemOp`: its waits and writes in array order, on one stream.
pub fn batch_mem_ops(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuStreamBatchMemOp's block (both versions) is StreamBatchMemOp.
    let Some(p) = (unsafe { data.params::<StreamBatchMemOp>() }) else { return };
    if p.paramArray.is_null() {
        return;
    }
    let stream = state.stream(cx, p.stream);
    // Safety: at entry the program's array holds `count` operations (the call's contract).
    let ops = unsafe { std::slice::from_raw_parts(p.paramArray, p.count as usize) };
    for op in ops {
        match op.operation {
            MEM_OP_WRITE_VALUE_32 | MEM_OP_WRITE_VALUE_64 => {
                flag_write(state, cx, stream, op.address, "cuStreamBatchMemOp")
            }
            MEM_OP_WAIT_VALUE_32 | MEM_OP_WAIT_VALUE_64 => {
                flag_wait(state, cx, stream, op.address, "cuStreamBatchMemOp")
            }
            _ => {} // flushes and barriers order nothing between streams
        }
    }
}

fn flag_write(state: &mut ProcessState, cx: &CallContext, stream: u64, flag: u64, api: &'static str) {
    if flag != 0 {
        let event = state.event(cx.call, flag);
        state.emit(cx.call, Record::EventRecord { event, stream, api });
    }
}

fn flag_wait(state: &mut ProcessState, cx: &CallContext, stream: u64, flag: u64, api: &'static str) {
    if flag != 0 {
        let event = state.event(cx.call, flag);
        state.emit(cx.call, Record::Wait { stream, event, api });
    }
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

#[cfg(test)]
mod tests {
    use std::ffi::c_void;

    use super::*;
    use crate::calls::Handler;
    use crate::live_capture_tests::{capture_on, trace_lines_of, with_state};
    use crate::origin::thread_id;

    /// Calls `handler` at the entry of a call with `block`, in context 7.
    fn entered(handler: Handler, block: *const c_void) {
        with_state(|state, call| {
            // Safety: `block` is the layout the handler reads, alive for the call.
            let data = unsafe { DriverCall::new(Detail::None, block, false, std::ptr::null()) };
            handler(state, &CallContext::new(call, 7, None, false), &data);
        });
    }

    #[test]
    fn flag_writes_and_waits_order_like_event_records_and_waits() {
        capture_on();
        let (a, b) = (0xa0usize as Handle, 0xb0usize as Handle);
        // Streams the capture has seen made (else it would ask the driver of their flags).
        with_state(|state, call| {
            for stream in [0xa0, 0xb0] {
                state.created_stream(&CallContext::new(call, 7, None, false), stream, 1, None);
            }
        });
        entered(value_write, &StreamValueOp { stream: a, addr: 0x7000 } as *const _ as *const c_void);
        entered(value_wait, &StreamValueOp { stream: b, addr: 0x7000 } as *const _ as *const c_void);
        let op = |operation, address| BatchMemOpParams { operation, address, rest: [0; 4] };
        let ops = [op(MEM_OP_WAIT_VALUE_64, 0x7100), op(3, 0), op(MEM_OP_WRITE_VALUE_32, 0x7200)];
        let batch = StreamBatchMemOp { stream: a, count: 3, paramArray: ops.as_ptr() };
        entered(batch_mem_ops, &batch as *const _ as *const c_void);

        let lines: Vec<String> = trace_lines_of(&[thread_id()])
            .into_iter()
            .filter(|v| matches!(v["type"].as_str(), Some("record" | "wait")))
            .map(|v| format!("{} stream {} event {} {}", v["type"], v["stream"], v["event"], v["api"]))
            .collect();
        assert_eq!(
            lines,
            [
                r#""record" stream 160 event 28672 "cuStreamWriteValue""#,
                r#""wait" stream 176 event 28672 "cuStreamWaitValue""#,
                r#""wait" stream 160 event 28928 "cuStreamBatchMemOp""#,
                r#""record" stream 160 event 29184 "cuStreamBatchMemOp""#,
            ]
        );
    }
}
