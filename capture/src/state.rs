//! The slot holding this process's capture state (`STATE`, one mutex: process_state.rs says what it holds),
//! what starts a process's trace (its file and writer thread) at its first recorded call or the first after a
//! fork, and the drain that hands the records to the file: the batch collected so far, with the host watch's
//! faults, the GPU times queued since, and through the hold (host_watch/hold.rs) that puts late records in
//! place. It sits above the state, the host watch and the writer, which it joins; touches the switches.

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use crate::activity;
use crate::control::{disable, DISCARD};
use crate::origin::current_pid;
use crate::process_state::ProcessState;
use crate::record::Batch;
use crate::writer::{self, Writer};

/// The state of the current process; replaced after a fork.
pub static STATE: Mutex<Option<ProcessState>> = Mutex::new(None);

/// This process's state, if its trace has started (the slot may hold the parent's state in a forked child, or
/// nothing before the first recorded call); never starts one.
pub fn started_here(slot: &mut Option<ProcessState>) -> Option<&mut ProcessState> {
    slot.as_mut().filter(|state| state.pid == current_pid())
}

/// Starts a writer for this process if none runs for it (first call, or the first after a fork).
pub fn state_for_this_process(slot: &mut Option<ProcessState>) -> Option<&mut ProcessState> {
    let pid = current_pid();
    if slot.as_ref().is_some_and(|s| s.pid == pid) {
        let state = slot.as_mut()?;
        crate::host_watch::collect(state);
        return Some(state);
    }
    // Once per process: counted as set-up, not as the cost of the call that happens to come first.
    *slot = Some(crate::cost::setup(|| start_trace(pid))?);
    slot.as_mut()
}

/// Creates this process's trace file and starts its writer thread; None (capture turned off) when either fails.
fn start_trace(pid: u32) -> Option<ProcessState> {
    let template =
        std::env::var(streamtrace_format::launch::ENV_OUTPUT).unwrap_or_else(|_| "streamtrace.%p.json".into());
    let path = writer::trace_path(&template, pid);
    match Writer::create(path.clone()) {
        Ok(writer) => {
            let drained = writer.handle();
            if let Err(e) = writer::start_thread(move || drain_into(&drained)) {
                disable(&format!("cannot start the writer thread: {e}"));
                return None;
            }
            Some(ProcessState::new(pid, writer))
        }
        Err(e) => {
            disable(&format!("cannot create {}: {e}", path.display()));
            None
        }
    }
}

/// Takes the records collected so far and writes them with `writer`. False when this process's capture has
/// ended (or the process forked and this thread belongs to the parent's state).
pub fn drain_into(writer: &Writer) -> bool {
    drain(writer, || take_pending_for(writer), keep_spare)
}

/// The records collected so far, if `writer` is this process's current writer.
fn take_pending_for(writer: &Writer) -> Option<Batch> {
    // A panic caught in a callback poisons the lock: what was recorded before it is still written.
    let mut slot = STATE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    match started_here(&mut slot) {
        Some(state) if state.writer.path == writer.path => {
            // The faults queued since become records first (host_watch/).
            crate::host_watch::collect(state);
            Some(state.take_pending())
        }
        _ => None,
    }
}

/// Gives a written, emptied batch back to this process's state, to collect the next records in.
fn keep_spare(batch: Batch) {
    let mut slot = STATE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(state) = started_here(&mut slot) {
        state.spare = Some(batch);
    }
}

/// Writes the records collected so far with `writer`, and the GPU times queued since the last drain.
/// `take_records` hands over the batch collected so far, None when `writer`'s capture has ended (or the
/// process forked and this thread belongs to the parent's state); `keep_spare` gets the emptied batch back
/// for reuse. False when nothing more is to be written with `writer`.
fn drain(writer: &Writer, take_records: impl FnOnce() -> Option<Batch>, keep_spare: impl FnOnce(Batch)) -> bool {
    // The file first, then the records: batches reach the file in the order they were taken even when the
    // writer thread and a synchronizing thread drain at once, and no thread waits for the file while holding
    // the state lock that every recorded call needs.
    let Ok(mut file) = writer.lock() else {
        disable("cannot write the trace any more");
        return false;
    };
    if crate::host_watch::managed_faults::expecting() {
        // CUPTI hands over what it has, so that managed faults reach the batches held for them in time.
        activity::flush_completed();
    }
    let Some(mut batch) = take_records() else { return false };
    activity::take_queued(&mut batch.entries);
    let batches = crate::host_watch::hold::pass(batch);
    let discard = DISCARD.load(Ordering::Relaxed);
    let written = batches.iter().all(|batch| batch.is_empty() || discard || file.write(batch).is_ok());
    drop(file);
    if !written {
        disable("cannot write the trace any more");
        return false;
    }
    if let Some(mut batch) = batches.into_iter().last() {
        batch.clear();
        keep_spare(batch);
    }
    true
}
