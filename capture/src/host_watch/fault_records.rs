//! Queued guard faults made into `host_access` records, under the state lock: each gets its native call site,
//! walked over the stack copied in the handler (faults.rs), and after the `host_acquire`s of what its thread had
//! acquired and not yet written (the handler took them out of the thread's knowledge: written at the thread's
//! next record, they would come after the access, which the analyzer would then take as unordered with what
//! they order it after). A fault of the thread itself goes into the pending records at its time; one inside a
//! wrapped host function becomes a late record, placed after that function's record (hold.rs). Touches the state's call sites and pending records, the fault queue and the hold.

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
    let unsited = Call { site: 0, ..call };
    entries.extend(fault.acquires().map(|record| Entry { call: unsited, record }));
    if through_driver && fault.host_func == 0 {
        // A driver thread (the driver's own copy, or a host function not wrapped): not the program's access.
        // Its call site's records go in anyway (the site is declared now), and what the thread acquired.
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

#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod tests {
    use std::sync::mpsc;

    use super::take;
    use crate::host_watch::{guards, signals};
    use crate::live_capture_tests::{capture_on, trace_lines_of, with_state};
    use crate::origin::thread_id;
    use crate::record::{Record, SyncTarget};

    const PAGE: usize = 4096;

    // `with_state` takes the state as a recorded call does; the faults queued since are not taken then: the
    // guards are not switched on in this binary, so `collect` leaves them to `take`.
    /// A pthread mutex locked and unlocked: the interposers of this test binary see it (Rust's are futexes).
    fn lock_and_unlock(mutex: usize) {
        let mutex = mutex as *mut libc::pthread_mutex_t;
        // Safety: an initialized mutex that outlives the test.
        unsafe {
            assert_eq!(libc::pthread_mutex_lock(mutex), 0);
            assert_eq!(libc::pthread_mutex_unlock(mutex), 0);
        }
    }

    /// The capture and the guard faults' handler on; a pthread mutex and the page of the test's pinned buffer.
    fn capture_with_a_mutex_and_a_page() -> (usize, u64) {
        capture_on();
        signals::install().expect("the handler installs");
        let mutex = Box::leak(Box::new(libc::PTHREAD_MUTEX_INITIALIZER)) as *mut libc::pthread_mutex_t as usize;
        // Safety: a fresh anonymous page.
        let page = unsafe {
            libc::mmap(std::ptr::null_mut(), PAGE, guards::UNGUARDED, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        assert_ne!(page, libc::MAP_FAILED);
        (mutex, page as u64)
    }

    #[test]
    fn a_fault_comes_after_what_its_thread_acquired_before_it() {
        let (mutex, buffer) = capture_with_a_mutex_and_a_page();
        let (go, wait) = mpsc::channel::<()>();
        let (read, was_read) = mpsc::channel::<u64>();
        let (record_now, may_record) = mpsc::channel::<()>();
        // The reader thread of the program: it takes the buffer over through the mutex, then reads it.
        let reader = std::thread::spawn(move || {
            wait.recv().unwrap();
            lock_and_unlock(mutex); // acquires the main thread's snapshot: pending until the next record
                                    // Safety: the test's page, guarded: the read faults once and goes through.
            let value = unsafe { std::ptr::read_volatile(buffer as *const u8) };
            read.send(thread_id()).unwrap();
            may_record.recv().unwrap();
            with_state(|state, call| {
                state.emit(call, Record::EventRecord { event: 9, stream: 5, api: "cuEventRecord" })
            });
            value
        });
        let main = thread_id();
        // The copy into the buffer is in flight: its pages are guarded. The main thread synchronizes, and hands
        // the buffer over with the mutex.
        let slot = guards::arm(buffer, buffer + PAGE as u64, libc::PROT_NONE).expect("armed");
        with_state(|state, call| {
            state.emit(call, Record::Sync { target: SyncTarget::Context(1), api: "cuCtxSynchronize" })
        });
        lock_and_unlock(mutex);
        go.send(()).unwrap();
        let reader_id = was_read.recv().unwrap();
        assert!(guards::lifted(slot), "the read faulted");
        // Another thread takes the state lock first and makes the queued fault a record.
        with_state(|state, _| take(state));
        record_now.send(()).unwrap();
        assert_eq!(reader.join().unwrap(), 0);
        guards::lift(slot);

        // Acquires of snapshots the harness's threads released (other tests' knowledge, handed to the threads
        // they start) are left out.
        let lines = trace_lines_of(&[main, reader_id]);
        let ours: Vec<serde_json::Value> =
            lines.iter().filter(|v| v["type"] == "host_release").map(|v| v["object"].clone()).collect();
        let lines: Vec<serde_json::Value> =
            lines.into_iter().filter(|v| v["type"] != "host_acquire" || ours.contains(&v["object"])).collect();
        let kinds: Vec<(&str, u64)> =
            lines.iter().map(|v| (v["type"].as_str().unwrap_or(""), v["thread"].as_u64().unwrap_or(0))).collect();
        let released: Vec<&serde_json::Value> = lines.iter().filter(|v| v["type"] == "host_release").collect();
        assert_eq!(
            kinds,
            [
                ("sync", main),
                ("host_release", main),
                ("host_acquire", reader_id),
                ("host_access", reader_id),
                ("record", reader_id),
                // Its read was news: its end hands it over (a_thread_whose_access_faulted_hands_it_over_...).
                ("host_release", reader_id),
            ],
            "{lines:?}"
        );
        assert_eq!(lines[2]["object"], released[0]["object"], "the reader acquires the main thread's snapshot");
        assert_eq!(lines[3]["reads"], serde_json::json!([[format!("{buffer:#x}"), 1]]), "the read of the buffer");
    }

    #[test]
    fn a_thread_whose_access_faulted_hands_it_over_at_its_next_unlock() {
        let (mutex, buffer) = capture_with_a_mutex_and_a_page();
        let slot = guards::arm(buffer, buffer + PAGE as u64, libc::PROT_NONE).expect("armed");
        // A worker reads the buffer, then unlocks: the thread that locks next (a join, in the program this test
        // stands for) is ordered after the read only if the unlock releases it.
        let worker = std::thread::spawn(move || {
            // Safety: the test's page, guarded: the read faults once and goes through.
            let value = unsafe { std::ptr::read_volatile(buffer as *const u8) };
            lock_and_unlock(mutex);
            (thread_id(), value)
        });
        let (worker_id, value) = worker.join().unwrap();
        assert_eq!(value, 0);
        assert!(guards::lifted(slot), "the read faulted");
        with_state(|state, _| take(state));
        guards::lift(slot);

        let lines = trace_lines_of(&[worker_id]);
        let kinds: Vec<&str> =
            lines.iter().map(|v| v["type"].as_str().unwrap_or("")).filter(|kind| *kind != "host_acquire").collect();
        assert_eq!(kinds, ["host_access", "host_release"], "{lines:?}");
    }
}
