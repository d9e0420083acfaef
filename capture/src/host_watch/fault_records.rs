//! Queued guard faults made into `host_access` records, under the state lock: each gets its native call site,
//! walked over the stack copied in the handler (faults.rs). A fault of the thread itself goes into the pending
//! records at its time; one inside a wrapped host function becomes a late record, placed after that function's
//! record (hold.rs). Touches the state's call sites and pending records, the fault queue and the hold.

use std::sync::atomic::Ordering;

use streamtrace_format::FaultKind;

use super::faults::{self, insert_at_time, Fault};
use super::{counters, hold};
use crate::process_state::ProcessState;
use crate::record::{Call, Entry, Record};

/// Turns the queued faults into records, under the state lock.
pub fn take(state: &mut ProcessState) {
    faults::take_queued(|fault| record(state, fault));
}

fn record(state: &mut ProcessState, fault: &Fault) {
    let mut declared = Vec::new();
    let stack = fault.stack();
    let (site, through_driver) = state.sites.site_of_fault(fault.start, &stack, |record| declared.push(record));
    let call = Call { tid: fault.tid, time_ns: fault.time, correlation: 0, site };
    let mut entries: Vec<Entry> = declared.into_iter().map(|record| Entry { call, record }).collect();
    if through_driver && fault.host_func == 0 {
        // A driver thread (the driver's own copy, or a host function not wrapped): not the program's access.
        // Its call site's records go in anyway: the site is declared now.
        counters::IGNORED.fetch_add(1, Ordering::Relaxed);
        state.pending.entries.extend(entries);
        return;
    }
    counters::FAULTS.fetch_add(1, Ordering::Relaxed);
    let access = Record::HostAccess {
        address: fault.address,
        bytes: 1,
        write: fault.write,
        fault: FaultKind::Guard,
        host_func: fault.host_func,
    };
    entries.push(Entry { call, record: access });
    if fault.host_func != 0 {
        hold::late_in_host_func(fault.host_func, entries);
    } else {
        insert_at_time(&mut state.pending, fault.time, entries);
    }
}
