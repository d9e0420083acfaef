//! Import counters: what an ingester read, skipped or could not make sense of, each with a severity, so that a
//! report can say when data was lost (a dropped synchronization can create a false race).
//!
//! Every counter is one row of [`Counter`]'s table, as Perfetto's `stats.h` gives each of its stats a name, a
//! severity and a description in one place: a reader bumps a variant and a report reads one, so a misspelled
//! counter does not compile, and its name and meaning cannot drift between the sites that count it.

use serde::{Serialize, Serializer};

/// How much a counted condition matters to the verdict.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Plain bookkeeping: rows read, records of each type.
    Info,
    /// Something was left out; findings may be missing or wrong because of it.
    DataLoss,
}

/// The table of counters: for each, its variant, its name in reports, its severity and what it counts.
macro_rules! counters {
    ($($variant:ident = $name:literal, $severity:ident, $description:literal;)+) => {
        /// An import counter (one row of the table below).
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum Counter {
            $($variant),+
        }

        impl Counter {
            /// Every counter, in the table's order.
            pub const ALL: &'static [Counter] = &[$(Counter::$variant),+];

            /// Its name in reports (`json.framework_ops`): the source that counts it, then what.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Counter::$variant => $name),+
                }
            }

            pub const fn severity(self) -> Severity {
                match self {
                    $(Counter::$variant => Severity::$severity),+
                }
            }

            /// What it counts, as reports say it.
            pub const fn description(self) -> &'static str {
                match self {
                    $(Counter::$variant => $description),+
                }
            }
        }
    };
}

counters! {
    // Our trace files and hand-written JSON traces (ingest/json).
    JsonRecords = "json.records", Info, "records read";
    JsonCallSites = "json.call_sites", Info, "native call sites (callsite records)";
    JsonGpuTimes = "json.gpu_times", Info, "GPU time records (placed on timelines)";
    JsonFrameworkOps = "json.framework_ops", Info, "framework operations (tier T2)";
    JsonFrameworkCalls = "json.framework_calls", Info, "framework calls that order streams or the host";
    JsonKernelsInFrameworkOps = "json.kernels_in_framework_ops", Info,
        "kernels attributed to a framework operation's read and write sets";
    JsonFramesEndedOnOtherThread = "json.frames_ended_on_other_thread", Info,
        "framework ops or calls that ended on another thread than the one they began on";
    JsonFramesWithoutEnd = "json.frames_without_end", DataLoss,
        "framework ops or calls whose end was lost inside an enclosing one (their kernels take the enclosing op's extents)";
    JsonFramesLeftOpen = "json.frames_left_open", DataLoss,
        "framework ops or calls that never ended (the program exited inside them, or their end was lost): their kernels keep their pointer arguments";
    JsonUnknownCallSites = "json.unknown_call_sites", DataLoss,
        "records naming a call site no callsite record declared (kept without it)";
    JsonDroppedUnknownFields = "json.dropped_unknown_fields", DataLoss,
        "fields this build does not know (from a newer capture?), dropped from their records";
    JsonIgnoredForeignFields = "json.ignored_foreign_fields", DataLoss,
        "fields that belong to another record kind, ignored";
    JsonSkippedMalformed = "json.skipped_malformed", DataLoss,
        "records that are not valid JSON or hold a value of the wrong type, skipped";
    JsonSkippedUnknownKind = "json.skipped_unknown_kind", DataLoss,
        "records of a kind this build does not know (from a newer capture?), skipped";
    JsonSkippedInconsistent = "json.skipped_inconsistent", DataLoss,
        "records that contradict the trace before them (an undeclared stream or event, a block not live, a second declaration), skipped";
    JsonSkippedUnmatchedFrameEnds = "json.skipped_unmatched_frame_ends", DataLoss,
        "op_end or call_end records with no open op or call to end (their begin was lost), skipped";
    JsonRecordingWithoutClosingRecord = "json.recording_without_closing_record", DataLoss,
        "recordings without the capture_stats record every recording ends with: the program's last records were lost (it was killed, or the file was cut short)";
    // What the capture library said about itself at exit.
    CaptureRecordedCalls = "capture.recorded_calls", Info, "driver calls the capture library recorded";
    CaptureCallbackNs = "capture.callback_ns", Info,
        "nanoseconds the capture library spent recording them, on the program's threads";
    CaptureSetupNs = "capture.setup_ns", Info,
        "nanoseconds of the capture's one-time set-up (CUPTI, the trace file), apart from the calls";
    // The host watch of native programs (the capture's `host_watch` record, at exit).
    CaptureHostWatchGuarded = "capture.host_watch_guarded", Info,
        "processes whose pinned and registered buffers were guarded while GPU work on them was in flight";
    CaptureHostWatchManaged = "capture.host_watch_managed", Info,
        "processes whose CPU page faults on managed memory were asked of CUPTI";
    CaptureHostWatchUnsupported = "capture.host_watch_unsupported", DataLoss,
        "host watches asked for that the system refused (the capture library not preloaded, or CUPTI gives no managed-memory faults): those host accesses were not seen";
    CaptureHostWatchWindows = "capture.host_watch_windows", Info,
        "in-flight windows in which a pinned buffer was guarded";
    CaptureHostWatchFaults = "capture.host_watch_faults", Info,
        "host accesses seen as faults (the first in each guarded window, CPU page faults on managed memory)";
    CaptureHostWatchDropped = "capture.host_watch_dropped", DataLoss,
        "host accesses seen as faults but not recorded (the fault queue was full, or a host function ran after its record was written)";
    CaptureHostWatchIgnored = "capture.host_watch_ignored", Info,
        "faults that were the driver's own (inside a CUDA call, in the driver's code or on its threads)";
    // Online capture (ingest/live): what the capture library said it could not send the analyzer.
    CaptureStreamLostRecords = "capture.stream_lost_records", DataLoss,
        "records the capture library dropped because the online analyzer fell behind (its queue was full) or its socket failed: the findings cover the run until then";
    // CUDA graphs assembled from the record stream.
    GraphsCapturedOps = "graphs.captured_ops", Info,
        "operations issued to capturing streams: graph nodes that run at each launch, not when issued";
    GraphsFailedCaptures = "graphs.failed_captures", Info,
        "stream captures that ended without a graph (failed or invalidated): their work never ran";
    // Nsight Systems exports (ingest/nsys).
    NsysKernels = "nsys.kernels", Info, "kernel rows read";
    NsysMemcpys = "nsys.memcpys", Info, "memcpy rows read";
    NsysMemsets = "nsys.memsets", Info, "memset rows read";
    NsysEventRecords = "nsys.event_records", Info, "event record rows read";
    NsysSyncs = "nsys.syncs", Info, "synchronization rows read";
    NsysMemoryEvents = "nsys.memory_events", Info, "device memory allocation and free rows read";
    NsysSyncClassifiedByType = "nsys.sync_classified_by_type", Info,
        "synchronization rows classified by syncType (no API name)";
    NsysActivityWithoutApiCall = "nsys.activity_without_api_call", Info,
        "GPU activities whose API call is outside the capture window: host thread unknown";
    NsysNoGlobalPid = "nsys.no_global_pid", Info, "activity tables without globalPid: read as one process";
    NsysSchemaVersionMissing = "nsys.schema_version_missing", Info, "export without a schema version";
    NsysNvtxUnreadable = "nsys.nvtx_unreadable", Info, "NVTX table in an unknown shape: no region labels";
    NsysSchemaUnknown = "nsys.schema_unknown", DataLoss,
        "export schema version outside 2.x-3.x: read as 3.x, columns checked one by one";
    NsysNoRuntimeTable = "nsys.no_runtime_table", DataLoss,
        "export without CUDA API calls: host threads and host order unknown";
    NsysNoStringIds = "nsys.no_string_ids", DataLoss,
        "export without a StringIds table: API and kernel names unknown, so synchronizations implied by API calls (cudaFree, cudaDeviceSynchronize without a row, synchronous copies) are missed";
    NsysNullInNotNull = "nsys.null_in_not_null", DataLoss,
        "rows with NULL in a NOT NULL column (or no correlation id), skipped";
    NsysStreamFlagsUnknown = "nsys.stream_flags_unknown", DataLoss,
        "streams missing from TARGET_INFO_CUDA_STREAM, taken as non-blocking (legacy default stream ordering may be missed)";
    NsysEventWithoutId = "nsys.event_without_id", DataLoss, "event records without an event id, skipped";
    NsysWaitRecordUnknown = "nsys.wait_record_unknown", DataLoss,
        "stream waits whose recording stream is unknown (no CUPTI_ACTIVITY_KIND_CUDA_EVENT table): they order nothing here";
    NsysEventSyncRecordUnknown = "nsys.event_sync_record_unknown", DataLoss,
        "event synchronizations whose record is not in the export: they order nothing here";
    NsysBadMemoryRange = "nsys.bad_memory_range", DataLoss, "allocations whose range overflows, skipped";
    NsysEndBeforeStart = "nsys.end_before_start", DataLoss,
        "rows whose end is before their start: their times are dropped (the operations are kept)";
    NsysSecondLegacyDefault = "nsys.second_legacy_default", DataLoss,
        "streams flagged as their context's legacy default stream when the context has one already: taken as blocking streams";
    NsysCorrelationOutOfRange = "nsys.correlation_out_of_range", DataLoss,
        "rows whose correlationId is outside CUPTI's 32-bit range: their place in host order is a guess";
    NsysCollidingCorrelationIds = "nsys.colliding_correlation_ids", DataLoss,
        "correlation ids shared by two API calls, or by more GPU work than the call makes (one kernel, copy or set outside graph launches): the rows are kept at that call's place, which may not be theirs";
    NsysUnnamedApiCalls = "nsys.unnamed_api_calls", DataLoss,
        "API calls whose nameId is NULL or names no string: synchronizations implied by the call (cudaFree, synchronous copies) are missed";
    NsysDuplicateRows = "nsys.duplicate_rows", DataLoss,
        "activity rows repeated exactly (the export is damaged): the copies are dropped";
    NsysEventSyncIdMissing = "nsys.event_sync_id_missing", DataLoss,
        "event records or waits without an eventSyncId in an export that has them: matched by event id to that event's latest record";
    NsysEventRecordHandedOn = "nsys.event_record_handed_on", DataLoss,
        "waits naming an event record older than the last 8 records of its event, whose clock is no longer kept: ordered after the oldest record kept instead";
}

/// One counter's count in one import.
#[derive(Clone, Debug)]
pub struct ImportCounter {
    pub counter: Counter,
    pub count: u64,
    /// Where it first happened and what was wrong there (`trace.json:88: op_end without ...`), for counters of
    /// records skipped or repaired.
    pub first: Option<String>,
}

/// A counter as reports show it: its table row with its count. Counts of later stages (the symbolizer's) are
/// shown in the same shape.
#[derive(Serialize)]
pub struct CounterRow<'a> {
    pub name: &'static str,
    pub severity: Severity,
    pub count: u64,
    pub meaning: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first: Option<&'a str>,
}

impl Serialize for ImportCounter {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let c = self.counter;
        CounterRow {
            name: c.name(),
            severity: c.severity(),
            count: self.count,
            meaning: c.description(),
            first: self.first.as_deref(),
        }
        .serialize(serializer)
    }
}

/// All counters of one import, in the order they were first bumped.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(transparent)]
pub struct ImportCounters {
    counters: Vec<ImportCounter>,
}

impl ImportCounters {
    /// Adds `by` to `counter`, listing it on first use (even by 0: a report then shows it was looked at).
    pub fn bump(&mut self, counter: Counter, by: u64) {
        self.entry(counter).count += by;
    }

    /// Like [`bump`](Self::bump), and keeps `first()` as the counter's first occurrence when it has none yet.
    pub fn bump_noting(&mut self, counter: Counter, by: u64, first: impl FnOnce() -> String) {
        let entry = self.entry(counter);
        entry.count += by;
        if entry.first.is_none() {
            entry.first = Some(first());
        }
    }

    fn entry(&mut self, counter: Counter) -> &mut ImportCounter {
        let index = match self.counters.iter().position(|c| c.counter == counter) {
            Some(index) => index,
            None => {
                self.counters.push(ImportCounter { counter, count: 0, first: None });
                self.counters.len() - 1
            }
        };
        &mut self.counters[index]
    }

    /// The count of `counter`: 0 when it was never bumped.
    pub fn get(&self, counter: Counter) -> u64 {
        self.bumped(counter).unwrap_or(0)
    }

    /// The count of `counter`, or `None` when it was never bumped.
    pub fn bumped(&self, counter: Counter) -> Option<u64> {
        self.counters.iter().find(|c| c.counter == counter).map(|c| c.count)
    }

    pub fn iter(&self) -> impl Iterator<Item = &ImportCounter> {
        self.counters.iter()
    }

    /// Counters that mean findings may be incomplete or wrong.
    pub fn data_loss(&self) -> impl Iterator<Item = &ImportCounter> {
        self.counters.iter().filter(|c| c.counter.severity() == Severity::DataLoss && c.count > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_has_its_own_name_of_a_known_source() {
        let mut names: Vec<&str> = Counter::ALL.iter().map(|c| c.name()).collect();
        for name in &names {
            let (source, what) = name.split_once('.').unwrap_or_else(|| panic!("{name}: no source"));
            assert!(["json", "capture", "graphs", "nsys"].contains(&source), "{name}");
            assert!(what.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{name}");
        }
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "two counters share a name");
    }

    #[test]
    fn a_counter_serializes_as_its_table_row() {
        let mut counters = ImportCounters::default();
        counters.bump(Counter::JsonRecords, 2);
        counters.bump_noting(Counter::JsonSkippedMalformed, 1, || "t.json:3: cut off".to_string());
        counters.bump_noting(Counter::JsonSkippedMalformed, 1, || "t.json:9: later".to_string());
        let json = serde_json::to_string(&counters).expect("serializes");
        assert_eq!(
            json,
            r#"[{"name":"json.records","severity":"info","count":2,"meaning":"records read"},{"name":"json.skipped_malformed","severity":"data_loss","count":2,"meaning":"records that are not valid JSON or hold a value of the wrong type, skipped","first":"t.json:3: cut off"}]"#
        );
        assert_eq!(counters.bumped(Counter::CaptureSetupNs), None);
        assert_eq!(counters.get(Counter::JsonSkippedMalformed), 2);
        assert_eq!(counters.data_loss().map(|c| c.counter).collect::<Vec<_>>(), [Counter::JsonSkippedMalformed]);
    }
}
