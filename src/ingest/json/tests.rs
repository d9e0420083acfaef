//! The JSON reader on small traces: what each record means, and what a strict and a tolerant reading do with a
//! record that cannot be taken.

use super::*;
use crate::ingest::counters::Counter;
use crate::model::{Access, AccessMode, AccessRange, AllocKind, OpKind, Operation, TraceRecord};

fn read_all(text: &str) -> Result<Vec<TraceRecord>, IngestError> {
    JsonTraceReader::from_text("t.json", text.to_string()).collect()
}

const HEADER: &str = "{\"type\":\"streamtrace\",\"version\":1}\n";

#[test]
fn reads_multi_line_records_and_hex_addresses() {
    let text = format!(
        "{HEADER}{{\"type\":\"stream\",\"id\":7,\"stream_kind\":\"non_blocking\"}}\n\n{{\n \"type\": \"kernel\", \"stream\": 7, \"name\": \"k\",\n \"writes\": [[\"0x1000\", 256]]\n}}\n"
    );
    let records = read_all(&text).unwrap();
    let op = records.iter().find_map(|r| match r {
        TraceRecord::Op(op) => Some(op),
        _ => None,
    });
    let op = op.expect("one operation");
    assert_eq!(op.origin, 4);
    match &op.kind {
        OpKind::Kernel { accesses, .. } => {
            assert_eq!(accesses[0].range, AccessRange { start: 0x1000, len: 256 })
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn unknown_stream_names_the_line() {
    let text = format!("{HEADER}{{\"type\":\"kernel\",\"stream\":3,\"name\":\"k\"}}\n");
    let err = read_all(&text).unwrap_err().to_string();
    assert!(err.starts_with("t.json:2: unknown stream 3"), "{err}");
}

#[test]
fn event_before_declaration_is_an_error() {
    let text = format!("{HEADER}{{\"type\":\"stream\",\"id\":1}}\n{{\"type\":\"record\",\"stream\":1,\"event\":5}}\n");
    let err = read_all(&text).unwrap_err().to_string();
    assert!(err.contains("t.json:3: event 5 used before it exists"), "{err}");
}

#[test]
fn overflowing_and_negative_ranges_are_refused() {
    let over = format!("{HEADER}{{\"type\":\"stream\",\"id\":1}}\n{{\"type\":\"kernel\",\"stream\":1,\"name\":\"k\",\"reads\":[[\"0xffffffffffffffff\",2]]}}\n");
    assert!(read_all(&over).unwrap_err().to_string().contains("runs past the end"));
    let negative = format!("{HEADER}{{\"type\":\"stream\",\"id\":1}}\n{{\"type\":\"kernel\",\"stream\":1,\"name\":\"k\",\"reads\":[[16,-2]]}}\n");
    let err = read_all(&negative).unwrap_err().to_string();
    assert!(err.contains("t.json:3") && err.contains("negative"), "{err}");
}

#[test]
fn missing_header_and_foreign_json_are_named() {
    let err = read_all("{\"hello\": 1}\n").unwrap_err().to_string();
    assert!(err.contains("not a streamtrace JSON trace"), "{err}");
    let err = read_all("").unwrap_err().to_string();
    assert!(err.contains("empty"), "{err}");
    let err = read_all("\u{0}\u{1}binary").unwrap_err().to_string();
    assert!(err.contains("not a streamtrace JSON trace"), "{err}");
}

#[test]
fn truncated_record_is_reported_not_hung() {
    let text = format!("{HEADER}{{\"type\":\"stream\",\"id\":1,");
    let err = read_all(&text).unwrap_err().to_string();
    assert!(err.contains("t.json:2: malformed record"), "{err}");
}

#[test]
fn kernels_inside_a_framework_op_take_its_exact_extents() {
    let text = format!(
        "{HEADER}{{\"type\":\"stream\",\"id\":1}}\n\
         {{\"type\":\"op_begin\",\"thread\":5,\"name\":\"mul_\",\"reads\":[[4096,64]],\"writes\":[],\"src\":\"t.py:3\"}}\n\
         {{\"type\":\"kernel\",\"thread\":5,\"stream\":1,\"name\":\"k\",\"pointers\":[[\"0x1000\",\"w\"]]}}\n\
         {{\"type\":\"op_end\",\"thread\":5,\"writes\":[[8192,32]]}}\n"
    );
    let records = read_all(&text).unwrap();
    let kernel = records
        .iter()
        .find_map(|r| match r {
            TraceRecord::Op(op) => Some(op),
            _ => None,
        })
        .expect("the kernel, released at op_end");
    match &kernel.kind {
        OpKind::Kernel { accesses, pointers, .. } => {
            assert!(pointers.is_empty(), "tier T2 replaces the pointer arguments");
            assert_eq!(accesses.len(), 2);
            assert!(accesses.contains(&Access {
                range: AccessRange { start: 4096, len: 64 },
                mode: AccessMode::Read,
                view: None
            }));
            assert!(accesses.contains(&Access {
                range: AccessRange { start: 8192, len: 32 },
                mode: AccessMode::Write,
                view: None
            }));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(kernel.region.as_deref(), Some("mul_"));
    assert_eq!(kernel.source.as_ref().map(|s| s.to_string()).as_deref(), Some("t.py:3"));
}

#[test]
fn an_exact_kernel_inside_an_op_keeps_its_own_bytes_and_takes_the_ops_line() {
    // Tier T3 inside tier T2 (`capture --exact` of a PyTorch program): the op wrote one tensor, the kernel was
    // seen writing in it and in a workspace of its own; a kernel the capture saw nothing of takes the op's
    // extents.
    let text = format!(
        "{HEADER}{{\"type\":\"stream\",\"id\":1}}\n\
         {{\"type\":\"op_begin\",\"thread\":5,\"name\":\"add_\",\"src\":\"t.py:4\"}}\n\
         {{\"type\":\"kernel\",\"thread\":5,\"stream\":1,\"name\":\"k\",\"writes\":[[4096,32],[65536,64]],\"coverage\":\"exact\"}}\n\
         {{\"type\":\"kernel\",\"thread\":5,\"stream\":1,\"name\":\"g\",\"pointers\":[[\"0x1000\",\"w\"]],\"coverage\":\"arguments\",\"unseen\":\"graph_node\"}}\n\
         {{\"type\":\"op_end\",\"thread\":5,\"writes\":[[4096,1024]]}}\n"
    );
    let records = read_all(&text).unwrap();
    let kernels: Vec<&OpKind> = ops(&records).into_iter().map(|op| &op.kind).collect();
    let OpKind::Kernel { accesses, exact: Some(exact), .. } = kernels[0] else { panic!("{:?}", kernels[0]) };
    let write = |start, len| Access::plain(AccessRange { start, len }, AccessMode::Write);
    assert_eq!(accesses, &[write(4096, 1024), write(65536, 64)], "the tensor's view, and the workspace beyond it");
    assert_eq!(exact.coverage, crate::model::Coverage::Exact);
    let OpKind::Kernel { accesses, pointers, .. } = kernels[1] else { panic!("{:?}", kernels[1]) };
    assert_eq!(accesses, &[Access::plain(AccessRange { start: 4096, len: 1024 }, AccessMode::Write)]);
    assert!(pointers.is_empty(), "the op's extents stand for the kernel the capture saw nothing of");
    assert!(ops(&records).iter().all(|op| op.source.as_ref().map(|s| s.to_string()).as_deref() == Some("t.py:4")));
}

#[test]
fn an_unknown_coverage_is_refused() {
    let text = format!(
        "{HEADER}{{\"type\":\"stream\",\"id\":1}}\n\
         {{\"type\":\"kernel\",\"stream\":1,\"name\":\"k\",\"coverage\":\"most\"}}\n"
    );
    let error = read_all(&text).unwrap_err().to_string();
    assert!(error.contains("unknown coverage `most`"), "{error}");
}

#[test]
fn op_end_without_op_begin_is_an_error() {
    let text = format!("{HEADER}{{\"type\":\"op_end\",\"thread\":5}}\n");
    assert!(read_all(&text).unwrap_err().to_string().contains("op_end without an open op_begin"));
}

fn ops(records: &[TraceRecord]) -> Vec<&Operation> {
    records.iter().filter_map(|r| if let TraceRecord::Op(op) = r { Some(op) } else { None }).collect()
}

#[test]
fn an_op_named_only_at_its_end_names_the_copies_it_held() {
    // What the capture's bootstrap writes: a bare op_begin, the op's CUDA calls, then everything at op_end.
    let text = format!(
        "{HEADER}{{\"type\":\"stream\",\"id\":1}}\n\
         {{\"type\":\"op_begin\",\"thread\":5}}\n\
         {{\"type\":\"memcpy\",\"thread\":5,\"stream\":1,\"from\":[4096,64],\"to\":[8192,64]}}\n\
         {{\"type\":\"alloc\",\"thread\":5,\"id\":1,\"addr\":8192,\"size\":64,\"alloc_kind\":\"pool_block\",\"src\":\"t.py:7\"}}\n\
         {{\"type\":\"op_end\",\"thread\":5,\"name\":\"copy_\",\"reads\":[[4096,64]],\"writes\":[[8192,64]],\"src\":\"t.py:7\"}}\n"
    );
    let records = read_all(&text).unwrap();
    let ops = ops(&records);
    assert_eq!(ops.len(), 2);
    assert!(
        matches!(ops[0].kind, OpKind::Alloc { alloc_kind: AllocKind::PoolBlock, .. }),
        "a block is not held: it names memory first"
    );
    assert!(matches!(ops[1].kind, OpKind::Memcpy { .. }), "the copy, released at op_end");
    assert_eq!(ops[1].region.as_deref(), Some("copy_"));
    assert_eq!(ops[1].source.as_ref().and_then(|s| s.line), Some(7));
}

#[test]
fn calls_name_the_cuda_calls_inside_them_as_they_pass() {
    let text = format!(
        "{HEADER}{{\"type\":\"stream\",\"id\":1}}\n{{\"type\":\"event\",\"id\":2}}\n\
         {{\"type\":\"call_begin\",\"thread\":5,\"name\":\"Stream.wait_event\",\"src\":\"t.py:12\"}}\n\
         {{\"type\":\"wait\",\"thread\":5,\"stream\":1,\"event\":2}}\n"
    );
    // Not held: the wait comes out before its call ends (here, never).
    let records = read_all(&text).unwrap();
    let wait = ops(&records)[0];
    assert_eq!(wait.region.as_deref(), Some("Stream.wait_event"));
    assert_eq!(wait.source.as_ref().and_then(|s| s.line), Some(12));
}

#[test]
fn a_call_inside_an_op_names_its_kernel_and_the_op_holds_it() {
    // A custom op written in Python that launches a Triton kernel: the launch bracket sits inside the op.
    let text = format!(
        "{HEADER}{{\"type\":\"stream\",\"id\":1}}\n\
         {{\"type\":\"op_begin\",\"thread\":5}}\n\
         {{\"type\":\"call_begin\",\"thread\":5,\"name\":\"triton k\",\"src\":\"t.py:4\"}}\n\
         {{\"type\":\"kernel\",\"thread\":5,\"stream\":1,\"name\":\"k\",\"pointers\":[[\"0x1000\",\"w\"]]}}\n\
         {{\"type\":\"call_end\",\"thread\":5}}\n\
         {{\"type\":\"op_end\",\"thread\":5,\"name\":\"my_op\",\"writes\":[[4096,64]],\"src\":\"t.py:9\"}}\n"
    );
    let records = read_all(&text).unwrap();
    let kernel = ops(&records)[0];
    assert_eq!(kernel.region.as_deref(), Some("triton k"));
    assert_eq!(kernel.source.as_ref().and_then(|s| s.line), Some(4));
    match &kernel.kind {
        OpKind::Kernel { accesses, pointers, .. } => {
            assert!(pointers.is_empty(), "held by the op, it takes the op's extents");
            assert_eq!(
                accesses,
                &[Access { range: AccessRange { start: 4096, len: 64 }, mode: AccessMode::Write, view: None }]
            );
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn frames_must_close_in_kind() {
    let text = format!("{HEADER}{{\"type\":\"op_begin\",\"thread\":5}}\n{{\"type\":\"call_end\",\"thread\":5}}\n");
    assert!(read_all(&text).unwrap_err().to_string().contains("call_end closes a frame opened by op_begin"));
    let text = format!("{HEADER}{{\"type\":\"call_begin\",\"thread\":5}}\n");
    assert!(read_all(&text).unwrap_err().to_string().contains("call_begin without `name`"));
}

#[test]
fn unknown_field_is_refused() {
    let text = format!("{HEADER}{{\"type\":\"stream\",\"id\":1,\"raeds\":[]}}\n");
    let err = read_all(&text).unwrap_err().to_string();
    assert!(err.contains("unknown field `raeds`"), "{err}");
}

const RECORDING: &str = "{\"type\":\"streamtrace\",\"version\":1,\"producer\":\"capture\"}\n";

fn read_with_counters(text: &str) -> (Result<Vec<TraceRecord>, IngestError>, crate::ingest::ImportCounters) {
    let mut reader = JsonTraceReader::from_text("t.json", text.to_string());
    let records: Result<Vec<TraceRecord>, IngestError> = reader.by_ref().collect();
    (records, crate::ingest::RecordSource::finish(Box::new(reader)))
}

#[test]
fn a_recording_skips_what_it_cannot_take_counts_it_and_reads_the_rest() {
    let text = format!(
        "{RECORDING}{{\"type\":\"stream\",\"id\":1}}\n\
         {{\"type\":\"op_end\",\"thread\":5,\"name\":\"lost\"}}\n\
         {{\"type\":\"green_context\",\"id\":3}}\n\
         {{\"type\":\"kernel\",\"stream\":9,\"name\":\"nowhere\"}}\n\
         {{\"type\":\"kernel\",\"stream\":1,\"name\":\"k\",\"shiny\":true}}\n\
         {{\"type\":\"memcpy\",\"stream\":1,\"from\":[4096,64],\"to\":[8192,64],\"reads\":[[0,1]]}}\n\
         {{\"type\":\"kernel\",\"stream\":1,\n"
    );
    let (records, counters) = read_with_counters(&text);
    let records = records.expect("a recording is read whole");
    let ops = ops(&records);
    assert_eq!(ops.len(), 2, "the kernel with an unknown field and the copy remain");
    assert!(matches!(ops[0].kind, OpKind::Kernel { .. }));
    assert_eq!(counters.get(Counter::JsonSkippedUnmatchedFrameEnds), 1);
    assert_eq!(counters.get(Counter::JsonSkippedUnknownKind), 1);
    assert_eq!(counters.get(Counter::JsonSkippedInconsistent), 1);
    assert_eq!(counters.get(Counter::JsonDroppedUnknownFields), 1);
    assert_eq!(counters.get(Counter::JsonIgnoredForeignFields), 1);
    assert_eq!(counters.get(Counter::JsonSkippedMalformed), 1, "the record cut off at the end");
    let first =
        |counter| counters.iter().find(|c| c.counter == counter).and_then(|c| c.first.clone()).unwrap_or_default();
    assert_eq!(
        first(Counter::JsonSkippedUnmatchedFrameEnds),
        "t.json:3: op_end without an open op_begin on this thread"
    );
    assert!(first(Counter::JsonSkippedInconsistent).starts_with("t.json:5: unknown stream 9"));
    assert!(counters.data_loss().count() >= 6);
}

#[test]
fn a_hand_written_trace_stops_at_the_same_records_with_their_line() {
    for (record, message) in [
        ("{\"type\":\"op_end\",\"thread\":5}", "t.json:3: op_end without an open op_begin on this thread"),
        ("{\"type\":\"green_context\"}", "t.json:3: unknown record type `green_context`"),
        ("{\"type\":\"kernel\",\"stream\":9,\"name\":\"k\"}", "t.json:3: unknown stream 9"),
        (
            "{\"type\":\"kernel\",\"stream\":1,\"name\":\"k\",\"shiny\":1}",
            "t.json:3: malformed record: unknown field `shiny`",
        ),
        ("{\"type\":\"streamtrace\",\"version\":1}", "t.json:3: a second header record"),
    ] {
        let text = format!("{HEADER}{{\"type\":\"stream\",\"id\":1}}\n{record}\n");
        let err = read_all(&text).unwrap_err().to_string();
        assert!(err.starts_with(message), "{record}: {err}");
    }
}

#[test]
fn fields_of_another_record_kind_are_refused_not_dropped() {
    // A copy given `reads`/`writes` instead of `from`/`to` would otherwise read as touching nothing.
    for (record, field) in [
        ("{\"type\":\"memcpy\",\"stream\":1,\"reads\":[[0,8]],\"writes\":[[64,8]]}", "reads"),
        ("{\"type\":\"memset\",\"stream\":1,\"writes\":[[0,8]]}", "writes"),
        ("{\"type\":\"kernel\",\"stream\":1,\"name\":\"k\",\"from\":[0,8]}", "from"),
    ] {
        let text = format!("{HEADER}{{\"type\":\"stream\",\"id\":1}}\n{record}\n");
        let err = read_all(&text).unwrap_err().to_string();
        assert!(err.contains(&format!("t.json:3: field `{field}` does not belong to a")), "{record}: {err}");
    }
}

#[test]
fn an_op_that_ends_on_another_thread_gives_its_kernels_its_extents() {
    let text = format!(
        "{RECORDING}{{\"type\":\"stream\",\"id\":1}}\n\
         {{\"type\":\"op_begin\",\"thread\":5}}\n\
         {{\"type\":\"kernel\",\"thread\":5,\"stream\":1,\"name\":\"k\",\"pointers\":[[\"0x1000\",\"w\"]]}}\n\
         {{\"type\":\"op_end\",\"thread\":6,\"name\":\"add_\",\"writes\":[[4096,64]],\"src\":\"t.py:3\"}}\n\
         {{\"type\":\"kernel\",\"thread\":5,\"stream\":1,\"name\":\"after\"}}\n"
    );
    let (records, counters) = read_with_counters(&text);
    let records = records.expect("read");
    let ops = ops(&records);
    assert_eq!(ops.len(), 2);
    match &ops[0].kind {
        OpKind::Kernel { accesses, pointers, .. } => {
            assert!(pointers.is_empty());
            assert_eq!(
                accesses,
                &[Access { range: AccessRange { start: 4096, len: 64 }, mode: AccessMode::Write, view: None }]
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(ops[0].region.as_deref(), Some("add_"));
    assert_eq!(counters.get(Counter::JsonFramesEndedOnOtherThread), 1);
    assert_eq!(counters.get(Counter::JsonFramesLeftOpen), 0);
}

#[test]
fn a_call_whose_end_was_lost_inside_an_op_ends_with_the_op() {
    let text = format!(
        "{RECORDING}{{\"type\":\"stream\",\"id\":1}}\n\
         {{\"type\":\"op_begin\",\"thread\":5}}\n\
         {{\"type\":\"call_begin\",\"thread\":5,\"name\":\"Event.record\",\"src\":\"t.py:2\"}}\n\
         {{\"type\":\"kernel\",\"thread\":5,\"stream\":1,\"name\":\"inner\"}}\n\
         {{\"type\":\"op_end\",\"thread\":5,\"name\":\"outer\",\"reads\":[[0,8]]}}\n\
         {{\"type\":\"kernel\",\"thread\":5,\"stream\":1,\"name\":\"after\"}}\n"
    );
    let (records, counters) = read_with_counters(&text);
    let ops_out = ops(records.as_ref().expect("read"));
    assert_eq!(ops_out.len(), 2, "the op's kernel is released at its end, the next one is not held");
    assert_eq!(ops_out[0].region.as_deref(), Some("Event.record"), "named by the call it was issued in");
    assert!(matches!(&ops_out[0].kind, OpKind::Kernel { accesses, .. } if accesses.len() == 1), "the op's extents");
    assert_eq!(ops_out[1].region, None, "the call ended with the op");
    assert_eq!(counters.get(Counter::JsonFramesWithoutEnd), 1);
    assert_eq!(counters.get(Counter::JsonFramesLeftOpen), 0);
}

#[test]
fn frames_open_at_the_end_are_counted_and_their_operations_kept() {
    let text = format!(
        "{HEADER}{{\"type\":\"stream\",\"id\":1}}\n\
         {{\"type\":\"op_begin\",\"thread\":5}}\n\
         {{\"type\":\"kernel\",\"thread\":5,\"stream\":1,\"name\":\"k\",\"pointers\":[[\"0x1000\",\"w\"]]}}\n"
    );
    let (records, counters) = read_with_counters(&text);
    let ops_out = ops(records.as_ref().expect("read"));
    assert!(matches!(&ops_out[0].kind, OpKind::Kernel { pointers, .. } if pointers.len() == 1), "tier T1 stays");
    assert_eq!(counters.get(Counter::JsonFramesLeftOpen), 1);
}

#[test]
fn creation_records_name_a_declared_stream_or_event_and_refuse_the_rest() {
    use crate::model::{Creation, Entity, EventId, StreamId};
    let text = format!(
        "{HEADER}{{\"type\":\"stream\",\"id\":7,\"src\":\"app.cu:40\"}}\n{{\"type\":\"event\",\"id\":3}}\n\
         {{\"type\":\"creation\",\"stream\":7,\"src\":\"t.py:11\",\"label\":\"side = torch.cuda.Stream()\"}}\n\
         {{\"type\":\"creation\",\"event\":3,\"src\":\"t.py:12\"}}\n"
    );
    let records = read_all(&text).unwrap();
    let stream =
        records.iter().find_map(|r| if let TraceRecord::Stream(s) = r { Some(s) } else { None }).expect("stream");
    assert_eq!(
        stream.source.as_ref().map(ToString::to_string).as_deref(),
        Some("app.cu:40"),
        "a declaration's src is its creation site"
    );
    let created: Vec<&Creation> =
        records.iter().filter_map(|r| if let TraceRecord::Created(c) = r { Some(c) } else { None }).collect();
    assert_eq!(created.len(), 2);
    assert_eq!(created[0].entity, Entity::Stream(StreamId(0)));
    assert_eq!(created[0].text.as_deref(), Some("side = torch.cuda.Stream()"));
    assert_eq!((created[1].entity, created[1].text.as_deref()), (Entity::Event(EventId(0)), None));
    // Earlier captures wrote `"src":null` for an object made where no line of the program was on the stack: it
    // names nothing and is no error.
    let unplaced =
        format!("{HEADER}{{\"type\":\"event\",\"id\":3}}\n{{\"type\":\"creation\",\"event\":3,\"src\":null}}\n");
    let records = read_all(&unplaced).unwrap();
    assert!(!records.iter().any(|r| matches!(r, TraceRecord::Created(_))), "{records:?}");
    for (record, problem) in [
        ("{\"type\":\"creation\",\"stream\":8,\"src\":\"t.py:1\"}", "unknown stream 8"),
        ("{\"type\":\"creation\",\"stream\":7,\"event\":3,\"src\":\"t.py:1\"}", "exactly one of"),
    ] {
        let text = format!("{HEADER}{{\"type\":\"stream\",\"id\":7}}\n{{\"type\":\"event\",\"id\":3}}\n{record}\n");
        let err = read_all(&text).unwrap_err().to_string();
        assert!(err.starts_with("t.json:4:") && err.contains(problem), "{err}");
    }
}

#[test]
fn a_collective_names_its_process_group_on_the_streams_of_its_nccl_kernels() {
    // A c10d op: a copy kernel on the current stream and NCCL's kernel on NCCL's stream, twice on that one.
    let text = format!(
        "{HEADER}{{\"type\":\"stream\",\"id\":1}}\n{{\"type\":\"stream\",\"id\":2}}\n\
         {{\"type\":\"op_begin\",\"thread\":5}}\n\
         {{\"type\":\"kernel\",\"thread\":5,\"stream\":1,\"name\":\"copy_kernel\"}}\n\
         {{\"type\":\"kernel\",\"thread\":5,\"stream\":2,\"name\":\"ncclDevKernel_AllReduce_Sum_f32_RING_LL\"}}\n\
         {{\"type\":\"kernel\",\"thread\":5,\"stream\":2,\"name\":\"ncclDevKernel_AllReduce_Sum_f32_RING_LL\"}}\n\
         {{\"type\":\"op_end\",\"thread\":5,\"name\":\"allreduce_.default\",\"writes\":[[4096,64]],\"process_group\":\"default_pg\"}}\n\
         {{\"type\":\"op_begin\",\"thread\":5}}\n\
         {{\"type\":\"kernel\",\"thread\":5,\"stream\":2,\"name\":\"ncclDevKernel_Broadcast_RING_LL\"}}\n\
         {{\"type\":\"op_end\",\"thread\":5,\"name\":\"broadcast_.default\",\"writes\":[[4096,64]]}}\n"
    );
    let records = read_all(&text).unwrap();
    let named: Vec<(u32, &str)> = records
        .iter()
        .filter_map(|r| if let TraceRecord::GroupStream(g) = r { Some((g.stream.0, &*g.group)) } else { None })
        .collect();
    assert_eq!(named, [(1, "default_pg")], "NCCL's stream once, from the op that named its group");
}

#[test]
fn only_op_end_names_a_process_group() {
    let text = format!("{HEADER}{{\"type\":\"op_begin\",\"thread\":5,\"process_group\":\"default_pg\"}}\n");
    let err = read_all(&text).unwrap_err().to_string();
    assert!(err.contains("t.json:2: field `process_group` does not belong to a op_begin record"), "{err}");
}

/// The kernel named `name` among `records`, with its read and write extents as (start, len, is write).
fn kernel_extents<'a>(records: &'a [TraceRecord], name: &str) -> (&'a Operation, Vec<(u64, u64, bool)>) {
    let op = ops(records)
        .into_iter()
        .find(|op| matches!(&op.kind, OpKind::Kernel { name: n, .. } if n.as_ref() == name))
        .unwrap_or_else(|| panic!("kernel {name}"));
    let OpKind::Kernel { accesses, pointers, .. } = &op.kind else { unreachable!() };
    assert!(pointers.is_empty(), "{name}: tier T2 replaces the pointer arguments");
    let extents = accesses.iter().map(|a| (a.range.start, a.range.len, a.mode == AccessMode::Write)).collect();
    (op, extents)
}

#[test]
fn a_kernel_inside_a_nested_op_keeps_the_inner_ops_extents() {
    // A saved-tensor hook cloning `x` inside `mul`: the clone's kernel is the clone's, never the mul's.
    let text = format!(
        "{HEADER}{{\"type\":\"stream\",\"id\":1}}\n{{\"type\":\"stream\",\"id\":2}}\n\
         {{\"type\":\"op_begin\",\"thread\":5}}\n\
         {{\"type\":\"op_begin\",\"thread\":5}}\n\
         {{\"type\":\"kernel\",\"thread\":5,\"stream\":2,\"name\":\"clone_kernel\",\"pointers\":[[\"0x1000\",\"w\"]]}}\n\
         {{\"type\":\"op_end\",\"thread\":5,\"name\":\"clone.default\",\"reads\":[[4096,64]],\"writes\":[[16384,64]],\"src\":\"hook.py:7\"}}\n\
         {{\"type\":\"kernel\",\"thread\":5,\"stream\":1,\"name\":\"mul_kernel\",\"pointers\":[[\"0x1000\",\"w\"]]}}\n\
         {{\"type\":\"op_end\",\"thread\":5,\"name\":\"mul.Tensor\",\"reads\":[[4096,64],[8192,64]],\"writes\":[[12288,64]],\"src\":\"t.py:12\"}}\n"
    );
    let records = read_all(&text).unwrap();
    let (clone, clone_extents) = kernel_extents(&records, "clone_kernel");
    assert_eq!(clone_extents, [(4096, 64, false), (16384, 64, true)]);
    assert_eq!(clone.region.as_deref(), Some("clone.default"));
    assert_eq!(clone.source.as_ref().map(|s| s.to_string()).as_deref(), Some("hook.py:7"));
    let (mul, mul_extents) = kernel_extents(&records, "mul_kernel");
    assert_eq!(mul_extents, [(4096, 64, false), (8192, 64, false), (12288, 64, true)]);
    assert_eq!(mul.region.as_deref(), Some("mul.Tensor"));
    let order: Vec<u64> = ops(&records).iter().map(|op| op.seq).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "released in issue order: {order:?}");
}

#[test]
fn ops_nested_three_deep_give_each_kernel_its_innermost_op() {
    // A __torch_dispatch__ subclass's op (outer) runs a Python kernel's op (middle) that runs `add` (inner);
    // the middle op launches a kernel of its own after the inner one, and one kernel inside the inner op is
    // issued from a call (Event.record) that names it.
    let text = format!(
        "{HEADER}{{\"type\":\"stream\",\"id\":1}}\n\
         {{\"type\":\"op_begin\",\"thread\":5}}\n\
         {{\"type\":\"kernel\",\"thread\":5,\"stream\":1,\"name\":\"outer_k\"}}\n\
         {{\"type\":\"op_begin\",\"thread\":5}}\n\
         {{\"type\":\"op_begin\",\"thread\":5}}\n\
         {{\"type\":\"call_begin\",\"thread\":5,\"name\":\"Event.record\",\"src\":\"t.py:4\"}}\n\
         {{\"type\":\"kernel\",\"thread\":5,\"stream\":1,\"name\":\"inner_k\"}}\n\
         {{\"type\":\"call_end\",\"thread\":5}}\n\
         {{\"type\":\"op_end\",\"thread\":5,\"name\":\"add.Tensor\",\"writes\":[[300,4]]}}\n\
         {{\"type\":\"kernel\",\"thread\":5,\"stream\":1,\"name\":\"middle_k\"}}\n\
         {{\"type\":\"op_end\",\"thread\":5,\"name\":\"mylib.scale\",\"writes\":[[200,4]]}}\n\
         {{\"type\":\"op_end\",\"thread\":5,\"name\":\"mul.Tensor\",\"writes\":[[100,4]],\"src\":\"t.py:9\"}}\n"
    );
    let records = read_all(&text).unwrap();
    for (kernel, start, region) in
        [("outer_k", 100, "mul.Tensor"), ("middle_k", 200, "mylib.scale"), ("inner_k", 300, "Event.record")]
    {
        let (op, extents) = kernel_extents(&records, kernel);
        assert_eq!(extents, [(start, 4, true)], "{kernel}");
        assert_eq!(op.region.as_deref(), Some(region), "{kernel}");
        assert_eq!(
            op.source.as_ref().map(|s| s.to_string()).as_deref(),
            Some(if kernel == "inner_k" { "t.py:4" } else { "t.py:9" }),
            "{kernel}: the line of the innermost frame that has one"
        );
    }
}

#[test]
fn interleaved_threads_each_get_one_id_and_one_declaration() {
    let kernel = |pid: u64, tid: u64| {
        format!("{{\"type\":\"kernel\",\"pid\":{pid},\"thread\":{tid},\"stream\":1,\"name\":\"k\"}}\n")
    };
    // Each process's stream 1 (process 1's declared by its thread 5, which then comes first in it).
    let mut text = format!("{HEADER}{{\"type\":\"stream\",\"id\":1,\"thread\":5}}\n");
    text += "{\"type\":\"stream\",\"id\":1,\"pid\":1,\"thread\":5}\n";
    for (pid, tid) in [(0, 5), (0, 5), (0, 6), (0, 5), (1, 5), (0, 6)] {
        text += &kernel(pid, tid);
    }
    let records = read_all(&text).unwrap();
    let declared: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            TraceRecord::Thread(info) => Some((info.process.0, info.tid, info.id.0)),
            _ => None,
        })
        .collect();
    assert_eq!(declared, [(0, 5, 0), (1, 5, 1), (0, 6, 2)], "each thread declared once, at its first record");
    let callers: Vec<_> = ops(&records).iter().map(|op| (op.process.0, op.thread.0)).collect();
    assert_eq!(callers, [(0, 0), (0, 0), (0, 2), (0, 0), (1, 1), (0, 2)]);
}

#[test]
fn a_name_is_shared_by_the_operations_that_give_it_and_a_region_loses_its_counters() {
    let text = format!(
        "{HEADER}{{\"type\":\"stream\",\"id\":1}}\n{}{}",
        "{\"type\":\"kernel\",\"stream\":1,\"name\":\"gemm\",\"region\":\"aten::mm, seq = 3\"}\n",
        "{\"type\":\"kernel\",\"stream\":1,\"name\":\"gemm\",\"region\":\"aten::mm, seq = 4\"}\n"
    );
    let records = read_all(&text).unwrap();
    let ops = ops(&records);
    let name = |op: &Operation| match &op.kind {
        OpKind::Kernel { name, .. } => name.clone(),
        other => panic!("{other:?}"),
    };
    assert!(std::sync::Arc::ptr_eq(&name(ops[0]), &name(ops[1])), "one copy of the name");
    let regions: Vec<_> = ops.iter().map(|op| op.region.clone().expect("a region")).collect();
    assert_eq!(&*regions[0], "aten::mm");
    assert!(std::sync::Arc::ptr_eq(&regions[0], &regions[1]));
}
