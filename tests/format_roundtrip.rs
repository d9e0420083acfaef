//! The trace format's round trip: every record the capture library can write goes through its real writer, in
//! both encodings, and back through the analyzer's JSON and binary readers, and comes out as what it recorded
//! (the same records from both); so do the op and call frames the PyTorch observers write, including a frame
//! that ends on another thread and one whose begin was lost.

use std::sync::Arc;

use streamtrace::ingest::binary::BinaryTraceReader;
use streamtrace::ingest::json::JsonTraceReader;
use streamtrace::ingest::{Counter, ImportCounters, RecordSource};
use streamtrace::model::{
    Access, AccessMode, AccessRange, AllocId, AllocKind, ContextId, CopyKind, DeviceId, EventId, EventInfo, FreeKind,
    HostSync, MemoryKind, OpKind, Operation, PointerArg, ProcessId, QueryTarget, StreamId, StreamInfo, StreamKind,
    ThreadId, ThreadInfo, TraceRecord,
};
use streamtrace::model::{Coverage, ElementDim, ExactCoverage, StridedView, Unseen, ViewBytes};
use streamtrace::model::{GraphExec, NodeKind};
use streamtrace_capture::args::PointerArg as CapturedPointer;
use streamtrace_capture::graph_record::{GraphRecord, NodeBody, NodeOwner};
use streamtrace_capture::record::{Batch, Call, KnownAccesses, Record, Seen, SyncTarget};
use streamtrace_format as format;

/// What the capture library writes for `batch` in both encodings: its header, then the batch's records.
struct Written {
    json: String,
    binary: Vec<u8>,
}

fn written(batch: &Batch) -> Written {
    written_with(batch, format::Recorded::default())
}

fn written_with(batch: &Batch, recorded: format::Recorded) -> Written {
    let write = |encoding| {
        let mut out = format::TraceWriter::new(encoding);
        out.header(Some(format::Producer::Capture), recorded, Some("recorded by streamtrace capture"));
        batch.write_records(&mut Vec::new(), &mut out, &mut String::new());
        out.bytes().to_vec()
    };
    let json = String::from_utf8(write(format::TraceEncoding::Json)).expect("text");
    Written { json, binary: write(format::TraceEncoding::Binary) }
}

fn read_all(mut reader: Box<dyn RecordSource>) -> (Vec<TraceRecord>, ImportCounters) {
    let records = reader
        .by_ref()
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("the reader refused the writer's trace: {e}"));
    (records, reader.finish())
}

/// The records and counters of the JSON reading, which the binary reading must equal.
fn read(written: Written) -> (Vec<TraceRecord>, ImportCounters) {
    let (records, counters) = read_all(Box::new(JsonTraceReader::from_text("roundtrip.json", written.json)));
    let binary = BinaryTraceReader::from_reader("roundtrip.stbin".into(), std::io::Cursor::new(written.binary))
        .expect("a reader thread");
    let (binary_records, binary_counters) = read_all(Box::new(binary));
    // Compared as printed: a native call site is equal only to itself (one interned copy per reading).
    assert_eq!(format!("{binary_records:#?}"), format!("{records:#?}"), "the binary encoding reads as the JSON one");
    let counts = |c: &ImportCounters| -> Vec<(String, u64)> {
        let rows = serde_json::to_value(c).expect("rows");
        rows.as_array()
            .into_iter()
            .flatten()
            .map(|row| (row["name"].as_str().unwrap_or("").to_string(), row["count"].as_u64().unwrap_or(0)))
            .collect()
    };
    assert_eq!(counts(&binary_counters), counts(&counters), "and counts what it counts");
    (records, counters)
}

/// A launch of kernel 0 on `stream` with no pointer arguments, as the CUPTI backend records it.
fn plain_launch(stream: u64) -> Record {
    Record::Kernel { stream, function: 0, first_pointer: 0, pointer_count: 0, api: "cuLaunchKernel", known: None }
}

fn operations(records: &[TraceRecord]) -> Vec<&Operation> {
    records.iter().filter_map(|r| if let TraceRecord::Op(op) = r { Some(op) } else { None }).collect()
}

fn range(start: u64, len: u64) -> AccessRange {
    AccessRange::new(start, len).expect("a valid range")
}

/// A call with edge values: the largest thread id, host time and correlation id the writer can be given.
const EDGE_CALL: Call = Call { tid: u64::MAX, time_ns: u64::MAX, correlation: u32::MAX, site: 0 };
const CALL: Call = Call { tid: 4242, time_ns: 1_000, correlation: 7, site: 0 };

/// Stream handles: the legacy default stream of context 3, a per-thread default stream, and two created streams
/// whose handles are pointers (one at the top of the address space).
const LEGACY: u64 = 3;
const PER_THREAD: u64 = 1 << 31;
const SIDE: u64 = 0x5600_0000_1230;
const TOP: u64 = u64::MAX;
const EVENT: u64 = 0x7f00_dead_beef;
const NAME: &str = "void k<\"q\\\\\", 2>(float const*, float*)\n\u{1b}[31m\u{e9}";

#[test]
fn every_capture_record_reads_back_as_what_was_recorded() {
    let mut batch = Batch::default();
    let stream = |handle, kind, priority, device| Record::Stream { handle, kind, priority, context: 3, device };
    batch.push(CALL, stream(LEGACY, format::StreamKind::LegacyDefault, None, Some(0)));
    batch.push(CALL, stream(PER_THREAD, format::StreamKind::PerThreadDefault, None, None));
    batch.push(EDGE_CALL, stream(SIDE, format::StreamKind::NonBlocking, Some(i32::MIN), Some(u32::MAX)));
    batch.push(CALL, stream(TOP, format::StreamKind::Blocking, Some(i32::MAX), Some(0)));
    batch.push(CALL, Record::Event { handle: EVENT });
    batch.push(CALL, Record::Function { index: 0, name: Arc::from(NAME) });
    batch
        .pointers
        .extend([CapturedPointer { address: 0, writes: false }, CapturedPointer { address: u64::MAX, writes: true }]);
    batch.push(
        EDGE_CALL,
        Record::Kernel {
            stream: SIDE,
            function: 0,
            first_pointer: 0,
            pointer_count: 2,
            api: "cuLaunchKernelEx",
            known: None,
        },
    );
    batch.push(CALL, plain_launch(TOP));
    // The exact-access backend's launch: its runs (one plain, one periodic) and what it could not see.
    batch.runs.extend([
        format::ByteRuns { first: 0x7000_0000, len: 64, step: 0, count: 1 },
        format::ByteRuns { first: 0x7000_1000, len: 32, step: 64, count: 3 },
    ]);
    batch.push(
        CALL,
        Record::Kernel {
            stream: TOP,
            function: 0,
            first_pointer: 0,
            pointer_count: 1,
            api: "cuLaunchKernel",
            known: Some(KnownAccesses {
                first_run: 0,
                reads: 1,
                writes: 1,
                seen: Some(Seen {
                    coverage: format::Coverage::ExactAndArguments,
                    unseen: Some(format::Unseen::AsyncCopies),
                }),
            }),
        },
    );
    // An NCCL kernel with its call's buffers (nccl.rs): ranges beside its pointer words, no coverage.
    batch.push(
        CALL,
        Record::Kernel {
            stream: SIDE,
            function: 0,
            first_pointer: 0,
            pointer_count: 0,
            api: "cuLaunchKernelEx",
            known: Some(KnownAccesses { first_run: 0, reads: 1, writes: 0, seen: None }),
        },
    );
    use format::MemoryKind as M;
    let copies = [
        (format::CopyKind::HtoD, true, (M::Pageable, M::Device)),
        (format::CopyKind::DtoH, false, (M::Device, M::Pinned)),
        (format::CopyKind::DtoD, false, (M::Device, M::Device)),
        (format::CopyKind::HtoH, true, (M::Pinned, M::Pageable)),
        (format::CopyKind::PtoP, false, (M::Device, M::Device)),
        (format::CopyKind::Default, true, (M::Managed, M::Pinned)),
    ];
    for (copy, synchronous, memory) in copies {
        batch.push(
            CALL,
            Record::Memcpy {
                stream: LEGACY,
                copy,
                src: 0,
                dst: u64::MAX - 4096,
                bytes: 4096,
                synchronous,
                memory,
                api: "cuMemcpyAsync",
            },
        );
    }
    batch.push(
        CALL,
        Record::Memset {
            stream: PER_THREAD,
            dst: 0x7f00_0000_0000,
            bytes: 0,
            synchronous: true,
            memory: M::Managed,
            api: "cuMemsetD8",
        },
    );
    // A 2D copy from a CUDA array (no address) into pinned memory: only its destination has a range.
    batch.push(
        CALL,
        Record::PitchedMemcpy {
            stream: SIDE,
            copy: format::CopyKind::DtoH,
            from: None,
            to: Some((0x9000, 3 * 512 + 100)),
            synchronous: false,
            memory: (M::Device, M::Pinned),
            api: "cuMemcpy2DAsync",
        },
    );
    batch.push(CALL, Record::EventRecord { event: EVENT, stream: SIDE, api: "cuEventRecord" });
    batch.push(CALL, Record::Wait { stream: TOP, event: EVENT, api: "cuStreamWaitEvent" });
    batch.push(CALL, Record::Sync { target: SyncTarget::Stream(SIDE), api: "cuStreamSynchronize" });
    batch.push(CALL, Record::Sync { target: SyncTarget::Event(EVENT), api: "cuEventSynchronize" });
    batch.push(CALL, Record::Sync { target: SyncTarget::Context(3), api: "cuCtxSynchronize" });
    batch.push(CALL, Record::Query { target: SyncTarget::Stream(TOP), ready: false, api: "cuStreamQuery" });
    batch.push(CALL, Record::Query { target: SyncTarget::Event(EVENT), ready: true, api: "cuEventQuery" });
    let allocs = [
        (format::AllocKind::Device, None, format::FreeKind::Synchronous),
        (format::AllocKind::Managed, None, format::FreeKind::Synchronous),
        (format::AllocKind::StreamOrdered, Some(SIDE), format::FreeKind::StreamOrdered),
        (format::AllocKind::Host, None, format::FreeKind::Host),
        (format::AllocKind::VirtualMap, None, format::FreeKind::VirtualUnmap),
    ];
    for (id, (kind, stream, _)) in allocs.iter().enumerate() {
        let address = 0x7f00_0000_0000 + ((id as u64) << 32);
        batch.push(
            CALL,
            Record::Alloc {
                id: id as u64 + 1,
                address,
                bytes: u64::from(u32::MAX),
                kind: *kind,
                stream: *stream,
                // The first as a block imported from another process, which carries a name.
                label: (id == 0).then_some("imported from another process"),
                api: "cuMemAlloc",
            },
        );
    }
    for (id, (_, stream, kind)) in allocs.iter().enumerate() {
        batch.push(CALL, Record::Free { id: id as u64 + 1, kind: *kind, stream: *stream, api: "cuMemFree" });
    }
    push_graphs(&mut batch);
    batch.push(CALL, Record::GpuTime { correlation: u32::MAX, start: 0, end: u64::MAX });
    batch.push(CALL, Record::CaptureStats { calls: u64::MAX, callback_ns: 0, setup_ns: 1 });

    let (records, counters) = read(written(&batch));

    // Entities: streams with their kinds, priorities, devices and context; the event; the two calling threads.
    let streams: Vec<&StreamInfo> =
        records.iter().filter_map(|r| if let TraceRecord::Stream(s) = r { Some(s) } else { None }).collect();
    let expected_stream = |id, handle, kind, priority, (device, gpu), created_by| StreamInfo {
        id: StreamId(id),
        handle,
        kind,
        priority,
        process: ProcessId(0),
        device: DeviceId(device),
        gpu,
        context: ContextId(0),
        created_by,
        source: None,
        native: None,
    };
    let (thread, edge_thread) = (ThreadId(0), ThreadId(1));
    assert_eq!(
        streams,
        [
            &expected_stream(0, LEGACY, StreamKind::LegacyDefault, None, (0, 0), None),
            &expected_stream(1, PER_THREAD, StreamKind::PerThreadDefault, None, (0, 0), Some(thread)),
            &expected_stream(2, SIDE, StreamKind::NonBlocking, Some(i32::MIN), (1, u32::MAX), Some(edge_thread)),
            &expected_stream(3, TOP, StreamKind::Blocking, Some(i32::MAX), (0, 0), Some(thread)),
        ]
    );
    let event = EventInfo { id: EventId(0), handle: EVENT, process: ProcessId(0), source: None, native: None };
    assert!(records.contains(&TraceRecord::Event(event)));
    let threads: Vec<&ThreadInfo> =
        records.iter().filter_map(|r| if let TraceRecord::Thread(t) = r { Some(t) } else { None }).collect();
    assert_eq!(threads.iter().map(|t| t.tid).collect::<Vec<_>>(), [CALL.tid, u64::MAX]);

    // Operations, in the order they were recorded, each as it was recorded.
    let ops = operations(&records);
    let (side, top, legacy, per_thread) = (StreamId(2), StreamId(3), StreamId(0), StreamId(1));
    let name: Arc<str> = Arc::from(NAME);
    let mut expected = vec![
        OpKind::Kernel {
            stream: side,
            name: name.clone(),
            accesses: vec![],
            pointers: vec![
                PointerArg { address: 0, mode: AccessMode::Read },
                PointerArg { address: u64::MAX, mode: AccessMode::Write },
            ],
            exact: None,
        },
        OpKind::Kernel { stream: top, name: name.clone(), accesses: vec![], pointers: vec![], exact: None },
        OpKind::Kernel {
            stream: top,
            name: name.clone(),
            accesses: vec![
                Access::plain(AccessRange::new(0x7000_0000, 64).expect("range"), AccessMode::Read),
                periodic_write(0x7000_1000, 160),
            ],
            pointers: vec![PointerArg { address: 0, mode: AccessMode::Read }],
            exact: Some(ExactCoverage { coverage: Coverage::ExactAndArguments, unseen: Some(Unseen::AsyncCopies) }),
        },
        OpKind::Kernel {
            stream: side,
            name,
            accesses: vec![Access::plain(AccessRange::new(0x7000_0000, 64).expect("range"), AccessMode::Read)],
            pointers: vec![],
            exact: None,
        },
    ];
    use MemoryKind::{Device, Managed, Pageable, Pinned};
    let copies = [
        (CopyKind::HtoD, true, Pageable, Device),
        (CopyKind::DtoH, false, Device, Pinned),
        (CopyKind::DtoD, false, Device, Device),
        (CopyKind::HtoH, true, Pinned, Pageable),
        (CopyKind::PtoP, false, Device, Device),
        (CopyKind::Default, true, Managed, Pinned),
    ];
    for (copy, synchronous, src_memory, dst_memory) in copies {
        let (src, dst) = (Some(range(0, 4096)), Some(range(u64::MAX - 4096, 4096)));
        expected.push(OpKind::Memcpy {
            stream: legacy,
            copy,
            bytes: 4096,
            src,
            dst,
            synchronous,
            src_memory,
            dst_memory,
        });
    }
    expected.extend([
        OpKind::Memset {
            stream: per_thread,
            bytes: 0,
            dst: Some(range(0x7f00_0000_0000, 0)),
            synchronous: true,
            dst_memory: Managed,
        },
        OpKind::Memcpy {
            stream: side,
            copy: CopyKind::DtoH,
            bytes: 3 * 512 + 100,
            src: None,
            dst: Some(range(0x9000, 3 * 512 + 100)),
            synchronous: false,
            src_memory: Device,
            dst_memory: Pinned,
        },
        OpKind::EventRecord { event: EventId(0), stream: side },
        OpKind::StreamWait { stream: top, event: EventId(0) },
        OpKind::HostSync(HostSync::Stream(side)),
        OpKind::HostSync(HostSync::Event(EventId(0))),
        OpKind::HostSync(HostSync::Context(ContextId(0))),
        OpKind::Query { target: QueryTarget::Stream(top), ready: false },
        OpKind::Query { target: QueryTarget::Event(EventId(0)), ready: true },
    ]);
    let model_allocs = [
        (AllocKind::Device, None, FreeKind::Synchronous),
        (AllocKind::Managed, None, FreeKind::Synchronous),
        (AllocKind::StreamOrdered, Some(side), FreeKind::StreamOrdered),
        (AllocKind::Host, None, FreeKind::Host),
        (AllocKind::VirtualMap, None, FreeKind::VirtualUnmap),
    ];
    for (id, (alloc_kind, stream, _)) in model_allocs.iter().enumerate() {
        let start = 0x7f00_0000_0000 + ((id as u64) << 32);
        expected.push(OpKind::Alloc {
            alloc: AllocId(id as u32),
            handle: id as u64 + 1,
            range: range(start, u64::from(u32::MAX)),
            alloc_kind: *alloc_kind,
            stream: *stream,
            label: (id == 0).then(|| "imported from another process".into()),
        });
    }
    for (id, (_, stream, free_kind)) in model_allocs.iter().enumerate() {
        expected.push(OpKind::Free { alloc: AllocId(id as u32), free_kind: *free_kind, stream: *stream });
    }
    assert_eq!(ops.len(), expected.len() + 2, "the two graph launches follow");
    for (op, expected) in ops.iter().zip(&expected) {
        assert_eq!(&op.kind, expected);
    }
    check_graphs(&ops[expected.len()..], side, top);

    // Where and when each call was made.
    let launch = ops[0];
    assert_eq!(
        (launch.thread, launch.host_time_ns, launch.correlation_id),
        (edge_thread, Some(u64::MAX), Some(u64::from(u32::MAX)))
    );
    assert_eq!(launch.api.as_deref(), Some("cuLaunchKernelEx"));
    let sync =
        ops.iter().find(|op| matches!(op.kind, OpKind::HostSync(HostSync::Context(_)))).expect("the context sync");
    assert_eq!((sync.thread, sync.host_time_ns, sync.correlation_id), (thread, Some(1_000), Some(7)));
    assert_eq!(sync.api.as_deref(), Some("cuCtxSynchronize"));
    assert!(records.contains(&TraceRecord::GpuTime {
        correlation: u64::from(u32::MAX),
        start_ns: 0,
        end_ns: u64::MAX
    }));
    assert_eq!(counters.get(Counter::CaptureRecordedCalls), u64::MAX);
    assert_eq!(counters.get(Counter::CaptureSetupNs), 1);
    assert_eq!(counters.data_loss().count(), 0, "nothing skipped: {:?}", counters.data_loss().collect::<Vec<_>>());
}

#[test]
fn host_watch_records_read_back_as_what_was_recorded() {
    let mut batch = Batch::default();
    let side = Record::Stream {
        handle: SIDE,
        kind: format::StreamKind::NonBlocking,
        priority: None,
        context: 3,
        device: None,
    };
    batch.push(CALL, side);
    batch.push(CALL, Record::HostFunc { stream: SIDE, id: 9, name: Arc::from(NAME), node: 0, api: "cuLaunchHostFunc" });
    // A fault inside the host function, recorded on the driver's thread, right after the function's record.
    let driver = Call { tid: 77, ..CALL };
    let in_function = Record::HostAccess {
        address: 0x6000_0000_0040,
        bytes: 1,
        write: true,
        fault: format::FaultKind::Guard,
        host_func: 9,
    };
    batch.push(driver, in_function);
    let managed = Record::HostAccess {
        address: u64::MAX - 4096,
        bytes: 4096,
        write: false,
        fault: format::FaultKind::Managed,
        host_func: 0,
    };
    batch.push(CALL, managed);
    let watch = Record::HostWatch {
        guard: format::WatchState::On,
        managed: format::WatchState::Unsupported,
        windows: 5,
        faults: 2,
        dropped: 1,
        ignored: u64::MAX,
    };
    batch.push(CALL, watch);

    let (records, counters) = read(written(&batch));
    let ops = operations(&records);
    let streams: Vec<&StreamInfo> =
        records.iter().filter_map(|r| if let TraceRecord::Stream(s) = r { Some(s) } else { None }).collect();
    assert_eq!(streams.len(), 2, "the side stream, and the recording thread's host-access lane");
    assert_eq!((streams[1].kind, streams[1].handle), (StreamKind::HostThread, CALL.tid));
    let (side, lane) = (streams[0].id, streams[1].id);
    let expected = [
        OpKind::HostFunc { stream: side, name: Arc::from(NAME), accesses: vec![], id: Some(9), graph_node: None },
        OpKind::HostFuncAccess {
            stream: side,
            name: Arc::from(format!("host write in {NAME}").as_str()),
            accesses: vec![Access::plain(range(0x6000_0000_0040, 1), AccessMode::Write)],
            graph_node: None,
        },
        OpKind::HostAccess {
            lane,
            name: Arc::from("host read"),
            accesses: vec![Access::plain(range(u64::MAX - 4096, 4096), AccessMode::Read)],
        },
    ];
    assert_eq!(ops.iter().map(|op| &op.kind).collect::<Vec<_>>(), expected.iter().collect::<Vec<_>>());
    assert_eq!(ops[0].api.as_deref(), Some("cuLaunchHostFunc"));
    assert_eq!(ops[1].host_time_ns, Some(CALL.time_ns));
    let threads: Vec<&ThreadInfo> =
        records.iter().filter_map(|r| if let TraceRecord::Thread(t) = r { Some(t) } else { None }).collect();
    assert_eq!(threads.iter().map(|t| t.tid).collect::<Vec<_>>(), [CALL.tid, 77], "the driver's thread appears");
    assert_eq!(
        [
            Counter::CaptureHostWatchGuarded,
            Counter::CaptureHostWatchManaged,
            Counter::CaptureHostWatchUnsupported,
            Counter::CaptureHostWatchWindows,
            Counter::CaptureHostWatchFaults,
            Counter::CaptureHostWatchDropped,
            Counter::CaptureHostWatchIgnored,
        ]
        .map(|c| counters.get(c)),
        [1, 0, 1, 5, 2, 1, u64::MAX]
    );
}

#[test]
fn call_sites_read_back_with_their_modules() {
    let mut batch = Batch::default();
    let app = Record::Module {
        path: Arc::from("/opt/app/bin/run"),
        bias: 0x5555_0000_0000,
        start: 0x5555_0000_0000,
        size: 0x4000,
        build_id: Some(Arc::from("0badc0de")),
    };
    let libc = Record::Module {
        path: Arc::from("/lib/libc.so.6"),
        bias: 0x7f00_0000_0000,
        start: 0x7f00_0002_8000,
        size: 0x1000,
        build_id: None,
    };
    batch.push(CALL, app);
    batch.push(CALL, libc);
    let frames: Arc<[u64]> = Arc::from(&[0x5555_0000_1234u64, 0x7f00_0002_8abc, 0x9999][..]);
    batch.push(CALL, Record::Callsite { id: 1, frames: frames.clone(), python_line: None });
    batch.push(CALL, Record::Callsite { id: 2, frames: Arc::from(&[0x5555_0000_2000u64][..]), python_line: None });
    // The same frames under a Python line: a call a Python program made outside any op.
    batch.push(CALL, Record::Callsite { id: 3, frames, python_line: Some(Arc::from("dir/a \"b\".py:12")) });
    let at = |site| Call { site, ..CALL };
    batch.push(
        at(2),
        Record::Stream {
            handle: SIDE,
            kind: format::StreamKind::NonBlocking,
            priority: Some(0),
            context: 0,
            device: Some(0),
        },
    );
    batch.push(at(2), Record::Event { handle: EVENT });
    batch.push(CALL, Record::Function { index: 0, name: Arc::from("k") });
    batch.push(at(1), plain_launch(SIDE));
    batch.push(at(1), plain_launch(SIDE));
    batch.push(at(3), plain_launch(SIDE));
    batch.push(at(0), Record::EventRecord { event: EVENT, stream: SIDE, api: "cuEventRecord" });
    // A recording ends with its capture statistics; one without lost its end (a data loss).
    batch.push(CALL, Record::CaptureStats { calls: 4, callback_ns: 0, setup_ns: 1 });

    let (records, counters) = read(written(&batch));
    let stream =
        records.iter().find_map(|r| if let TraceRecord::Stream(s) = r { Some(s) } else { None }).expect("the stream");
    let created = stream.native.as_ref().expect("a creation site");
    assert_eq!(created.frames().iter().map(|f| f.address).collect::<Vec<_>>(), [0x5555_0000_2000]);
    let event =
        records.iter().find_map(|r| if let TraceRecord::Event(e) = r { Some(e) } else { None }).expect("the event");
    assert_eq!(event.native.as_ref(), Some(created), "one record, one shared site");
    let ops = operations(&records);
    let launch = ops[0].native.as_ref().expect("the launch's site");
    assert_eq!(ops[1].native.as_ref(), Some(launch), "the same site for both launches");
    assert_eq!(launch.python_line(), None);
    let from_python = ops[2].native.as_ref().expect("the Python call's site");
    assert_ne!(from_python, launch, "a site of its own");
    assert_eq!(from_python.frames(), launch.frames());
    assert_eq!(from_python.python_line().map(ToString::to_string).as_deref(), Some("dir/a \"b\".py:12"));
    assert_eq!(ops[3].native, None);
    let modules: Vec<Option<&str>> = launch.frames().iter().map(|f| f.module.as_ref().map(|m| &*m.path)).collect();
    assert_eq!(modules, [Some("/opt/app/bin/run"), Some("/lib/libc.so.6"), None], "each frame's module by its range");
    let app = launch.frames()[0].module.as_ref().expect("the app");
    assert_eq!((app.bias, app.size, app.build_id.as_deref()), (0x5555_0000_0000, 0x4000, Some("0badc0de")));
    assert_eq!(counters.get(Counter::JsonCallSites), 3);
    assert_eq!(counters.data_loss().count(), 0);
}

/// An `op_end` as the observers write it (sitecustomize.py, torch_observer.cpp), handed to the library.
fn op_end(name: &str, reads: &str, writes: &str, src: &str) -> String {
    format!("{{\"type\":\"op_end\",\"name\":\"{name}\",\"reads\":[{reads}],\"writes\":[{writes}],\"src\":\"{src}\"}}")
}

fn on(thread: u64) -> Call {
    Call { tid: thread, time_ns: 0, correlation: 0, site: 0 }
}

#[test]
fn framework_frames_read_back_around_the_calls_they_hold() {
    let mut batch = Batch::default();
    batch.push(
        on(1),
        Record::Stream {
            handle: SIDE,
            kind: format::StreamKind::NonBlocking,
            priority: None,
            context: 0,
            device: None,
        },
    );
    batch.push(on(1), Record::Event { handle: EVENT });
    batch.push(on(1), Record::Function { index: 0, name: Arc::from("add_kernel") });
    batch.pointers.push(CapturedPointer { address: 0x9000, writes: true });
    let launch = Record::Kernel {
        stream: SIDE,
        function: 0,
        first_pointer: 0,
        pointer_count: 1,
        api: "cuLaunchKernel",
        known: None,
    };
    // An op on thread 1, with a call bracket inside it and a block allocated for its output.
    batch.push(on(1), Record::OpBegin);
    batch.push_raw(on(1), "{\"type\":\"call_begin\",\"name\":\"Event.record\",\"src\":\"train.py:12\"}").expect("room");
    batch.push(on(1), Record::EventRecord { event: EVENT, stream: SIDE, api: "cuEventRecord" });
    batch.push_raw(on(1), "{\"type\":\"call_end\"}").expect("room");
    batch.push_raw(on(1), "{\"type\":\"alloc\",\"id\":5,\"addr\":36864,\"size\":512,\"alloc_kind\":\"pool_block\",\"stream\":94489285168,\"src\":\"train.py:9\"}").expect("room");
    batch.push(on(1), launch.clone());
    batch.push_raw(on(1), &op_end("add_", "[4096,64]", "[36864,512]", "train.py:9")).expect("room");
    // An op that begins on thread 2 and ends on thread 3 (PyTorch can run an op's end callback elsewhere).
    batch.push(on(2), Record::OpBegin);
    batch.push(on(2), launch.clone());
    batch.push_raw(on(3), &op_end("mul_", "", "[8192,8]", "train.py:20")).expect("room");
    // An op whose begin was lost: its end matches nothing and its kernel keeps its pointer arguments.
    batch.push(on(4), launch);
    batch.push_raw(on(4), &op_end("lost", "", "", "train.py:30")).expect("room");

    let (records, counters) = read(written(&batch));
    let ops = operations(&records);
    let summary: Vec<(&str, Option<&str>, Option<u32>)> = ops
        .iter()
        .map(|op| {
            let kind = match op.kind {
                OpKind::Kernel { .. } => "kernel",
                OpKind::EventRecord { .. } => "record",
                OpKind::Alloc { .. } => "alloc",
                _ => "other",
            };
            (kind, op.region.as_deref(), op.source.as_ref().and_then(|s| s.line))
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("alloc", None, Some(9)),
            ("record", Some("Event.record"), Some(12)),
            ("kernel", Some("add_"), Some(9)),
            ("kernel", Some("mul_"), Some(20)),
            ("kernel", None, None),
        ]
    );
    let accesses = |op: &Operation| match &op.kind {
        OpKind::Kernel { accesses, pointers, .. } => (accesses.clone(), pointers.len()),
        _ => (vec![], 0),
    };
    let write = |start, len| Access { range: range(start, len), mode: AccessMode::Write, view: None };
    let read = |start, len| Access { range: range(start, len), mode: AccessMode::Read, view: None };
    assert_eq!(
        accesses(ops[2]),
        (vec![read(4096, 64), write(36864, 512)], 0),
        "the op's exact extents replace the pointers"
    );
    assert_eq!(accesses(ops[3]), (vec![write(8192, 8)], 0), "ended on another thread, still the op's extents");
    assert_eq!(accesses(ops[4]), (vec![], 1), "a kernel outside any op keeps its pointer arguments (tier T1)");
    assert_eq!(counters.get(Counter::JsonFramesEndedOnOtherThread), 1);
    assert_eq!(counters.get(Counter::JsonSkippedUnmatchedFrameEnds), 1);
    assert_eq!(counters.get(Counter::JsonFramesLeftOpen), 0);
    assert_eq!(counters.get(Counter::JsonFrameworkOps), 2);
}

/// Graph records: an explicitly built graph with a node of every body, a child graph, an added edge and an exec
/// update, launched; and a stream capture of one kernel, launched on another stream.
fn push_graphs(batch: &mut Batch) {
    let graph = |batch: &mut Batch, graph: GraphRecord| batch.push(CALL, Record::Graph { graph, api: "cuGraph" });
    let node = |batch: &mut Batch, graph: u64, node: u64, deps: &[u64], body: NodeBody| {
        batch.push(
            CALL,
            Record::Graph { graph: GraphRecord::Node { graph, node, deps: deps.into(), body }, api: "cuGraphAdd*Node" },
        );
    };
    let (g, child, exec) = (0x5000, 0x6000, 0x7000);
    graph(batch, GraphRecord::Create { graph: child });
    node(batch, child, 0x61, &[], NodeBody::Plain(format::NodeKind::Empty));
    graph(batch, GraphRecord::Create { graph: g });
    node(batch, g, 0x51, &[], NodeBody::Kernel { function: 0, first_pointer: 0, pointer_count: 2 });
    node(batch, g, 0x52, &[0x51], NodeBody::Copy { from: Some((0x100, 64)), to: Some((0x200, 64)) });
    node(batch, g, 0x53, &[], NodeBody::Set { to: (0x300, 16) });
    node(batch, g, 0x54, &[0x52], NodeBody::Event { kind: format::NodeKind::EventRecord, event: EVENT });
    node(batch, g, 0x55, &[0x54], NodeBody::Child { graph: child });
    node(batch, g, 0x56, &[], NodeBody::Memory { kind: format::NodeKind::MemAlloc, range: (0x400, 32) });
    graph(batch, GraphRecord::Dependencies { graph: g, node: 0x53, deps: Box::new([0x51]), added: true });
    graph(batch, GraphRecord::Instantiate { graph: g, exec });
    graph(
        batch,
        GraphRecord::NodeUpdate { owner: NodeOwner::Exec(exec), node: 0x53, body: NodeBody::Set { to: (0x500, 8) } },
    );
    graph(batch, GraphRecord::Launch { exec, stream: SIDE });
    // Captured on SIDE: the kernel does not run then, only at the launch on TOP.
    graph(batch, GraphRecord::CaptureBegin { stream: SIDE, into: None });
    batch.push(CALL, plain_launch(SIDE));
    // The program asks for the graph being captured and the node the kernel became (0x81), adds a set node after
    // it by hand, and makes the next captured kernel depend on the set node only.
    graph(batch, GraphRecord::CaptureInfo { stream: SIDE, graph: Some(0x8000), deps: Some(Box::new([0x81])) });
    node(batch, 0x8000, 0x82, &[0x81], NodeBody::Set { to: (0x600, 8) });
    graph(batch, GraphRecord::CaptureDependencies { stream: SIDE, deps: Box::new([0x82]), set: true });
    batch.push(CALL, plain_launch(SIDE));
    graph(batch, GraphRecord::CaptureDependencies { stream: SIDE, deps: Box::new([0x81]), set: false });
    graph(batch, GraphRecord::CaptureEnd { stream: SIDE, graph: Some(0x8000) });
    graph(batch, GraphRecord::Instantiate { graph: 0x8000, exec: 0x9000 });
    graph(batch, GraphRecord::Launch { exec: 0x9000, stream: TOP });
    graph(batch, GraphRecord::ExecDestroy { exec: 0x9000 });
    graph(batch, GraphRecord::Destroy { graph: 0x8000 });
}

fn check_graphs(launches: &[&Operation], side: StreamId, top: StreamId) {
    let graph_of = |op: &Operation, stream: StreamId| -> GraphExec {
        match &op.kind {
            OpKind::GraphLaunch { stream: s, graph, .. } if *s == stream => GraphExec::clone(graph),
            other => panic!("expected a graph launch on {stream:?}, got {other:?}"),
        }
    };
    let explicit = graph_of(launches[0], side);
    let kinds: Vec<NodeKind> = explicit.nodes.iter().map(|n| n.kind).collect();
    assert_eq!(
        kinds,
        [
            NodeKind::Kernel,
            NodeKind::Memcpy,
            NodeKind::Memset,
            NodeKind::EventRecord(EventId(0)),
            NodeKind::Empty,
            NodeKind::MemAlloc
        ],
        "the child graph's empty node stands in for the child node"
    );
    assert_eq!(explicit.nodes[0].name, NAME);
    assert_eq!(explicit.nodes[0].pointers.len(), 2);
    assert_eq!(
        explicit.nodes[1].accesses,
        [Access::plain(range(0x100, 64), AccessMode::Read), Access::plain(range(0x200, 64), AccessMode::Write)]
    );
    assert_eq!(
        explicit.nodes[2].accesses,
        [Access::plain(range(0x500, 8), AccessMode::Write)],
        "the exec update's range"
    );
    assert_eq!(explicit.nodes[2].depends_on, [0], "the added edge");
    assert_eq!(explicit.nodes[4].depends_on, [3]);
    let captured = graph_of(launches[1], top);
    let kinds: Vec<NodeKind> = captured.nodes.iter().map(|n| n.kind).collect();
    assert_eq!(kinds, [NodeKind::Kernel, NodeKind::Memset, NodeKind::Kernel], "the hand-added node in its capture");
    assert_eq!((captured.nodes[0].kind, captured.nodes[0].name.as_str()), (NodeKind::Kernel, NAME));
    assert_eq!(captured.nodes[1].depends_on, [0], "after the node the driver named");
    assert_eq!(captured.nodes[2].depends_on, [1], "after the set node only: the stream order replaced");
}

/// The write of three 32-byte runs 64 bytes apart from `first` (`extent` bytes in all), as the reader makes it.
fn periodic_write(first: u64, extent: u64) -> Access {
    let shape = [ElementDim { size: 3, stride: 2 }, ElementDim { size: 1, stride: 1 }];
    let Ok(ViewBytes::Strided(view)) = StridedView::new(32, &shape) else { panic!("a strided view") };
    Access {
        range: AccessRange::new(first, extent).expect("range"),
        mode: AccessMode::Write,
        view: Some(Arc::new(view)),
    }
}

#[test]
fn host_synchronization_reads_back_with_the_header_that_says_it_is_recorded() {
    let mut batch = Batch::default();
    let mark = (7u64 << 40) | 3;
    batch.push(CALL, Record::HostRelease { object: mark, api: "pthread_mutex_unlock" });
    batch.push(EDGE_CALL, Record::HostAcquire { object: mark, api: "pthread_mutex_lock" });
    batch.push(EDGE_CALL, Record::HostRelease { object: u64::MAX, api: "thread exit" });
    // A recording ends with its capture statistics; one without lost its end (a data loss).
    batch.push(CALL, Record::CaptureStats { calls: 3, callback_ns: 0, setup_ns: 1 });
    let recorded = format::Recorded { host_sync: true, ..format::Recorded::default() };
    let (records, counters) = read(written_with(&batch, recorded));
    assert_eq!(records.first(), Some(&TraceRecord::HostSyncRecorded), "the header's claim comes first");
    let ops = operations(&records);
    let kinds: Vec<&OpKind> = ops.iter().map(|op| &op.kind).collect();
    assert_eq!(
        kinds,
        [
            &OpKind::HostRelease { object: mark },
            &OpKind::HostAcquire { object: mark },
            &OpKind::HostRelease { object: u64::MAX }
        ]
    );
    let where_when: Vec<_> = ops.iter().map(|op| (op.thread, op.host_time_ns, op.api.as_deref())).collect();
    assert_eq!(
        where_when,
        [
            (ThreadId(0), Some(1_000), Some("pthread_mutex_unlock")),
            (ThreadId(1), Some(u64::MAX), Some("pthread_mutex_lock")),
            (ThreadId(1), Some(u64::MAX), Some("thread exit")),
        ]
    );
    assert_eq!(counters.data_loss().count(), 0);
    // Without the claim, the same records are read, and the header says nothing.
    let (records, _) = read(written(&batch));
    assert!(!records.contains(&TraceRecord::HostSyncRecorded));
    assert_eq!(operations(&records).len(), 3);
}
