//! `cuProfilerStart` and `cuProfilerStop` (`cudaProfilerStart` / `cudaProfilerStop`, which
//! `torch.cuda.profiler.start()` and `stop()` call): the trigger of `--capture-range=cudaProfilerApi`
//! (ranges.rs). They record nothing themselves: the range's edges are written before the next record.

use crate::driver_call::{CallContext, DriverCall};
use crate::process_state::ProcessState;

pub fn start(_state: &mut ProcessState, _cx: &CallContext, _data: &DriverCall<'_>) {
    crate::ranges::profiler_started();
}

pub fn stop(_state: &mut ProcessState, _cx: &CallContext, _data: &DriverCall<'_>) {
    crate::ranges::profiler_stopped();
}
