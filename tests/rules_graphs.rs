//! Rule 9 of DESIGN.md, part by part, each with a racy and a race-free twin: work issued to a capturing stream
//! runs at the graph's launches and not when issued; stream order and event joins inside a capture become the
//! graph's edges; graphs built node by node keep the edges their calls named; exec updates change what a launch
//! touches; a launch is one step of its stream. Kept beside `tests/rules.rs` (same harness, same trace format).

use streamtrace::findings::{AccessExtent, Fix, RaceKind};
use streamtrace::hb::HostOrder;

use crate::util::scenario::{self, assert_one_race, rec, wait, Found};

/// Non-blocking streams 1-3, events 1-3, X at 0x1000 and Y at 0x2000.
const PRELUDE: &str = r#"{"type":"stream","id":1,"stream_kind":"non_blocking"}
{"type":"stream","id":2,"stream_kind":"non_blocking"}
{"type":"stream","id":3,"stream_kind":"non_blocking"}
{"type":"event","id":1}
{"type":"event","id":2}
{"type":"event","id":3}
{"type":"alloc","id":1,"addr":"0x1000","size":256,"label":"X"}
{"type":"alloc","id":2,"addr":"0x2000","size":256,"label":"Y"}
"#;

fn races(body: &str) -> Found {
    let body = body.replace("$X", r#"["0x1000",256]"#).replace("$Y", r#"["0x2000",256]"#);
    Found(scenario::analyze("graphs.json", PRELUDE, &body, HostOrder::Global))
}

fn kernel(stream: u32, name: &str, reads: &str, writes: &str, src: &str) -> String {
    format!("{{\"type\":\"kernel\",\"stream\":{stream},\"name\":\"{name}\",\"reads\":[{reads}],\"writes\":[{writes}],\"src\":\"{src}\"}}\n")
}

fn write(stream: u32, name: &str, range: &str) -> String {
    kernel(stream, name, "", range, &format!("app.cu:{}", name.len()))
}

fn read(stream: u32, name: &str, range: &str) -> String {
    kernel(stream, name, range, "", &format!("app.cu:{}", name.len()))
}

fn begin(stream: u32) -> String {
    format!("{{\"type\":\"capture_begin\",\"stream\":{stream},\"src\":\"app.cu:1\"}}\n")
}

/// Ends the capture on `stream` as graph 100 and instantiates it as executable graph 200.
fn end_and_instantiate(stream: u32) -> String {
    format!("{{\"type\":\"capture_end\",\"stream\":{stream},\"graph\":100}}\n{{\"type\":\"graph_instantiate\",\"graph\":100,\"exec\":200}}\n")
}

fn launch(stream: u32) -> String {
    format!("{{\"type\":\"graph_launch\",\"exec\":200,\"stream\":{stream},\"src\":\"app.cu:99\"}}\n")
}

#[test]
fn captured_work_does_not_run_when_issued() {
    // Captured and never launched: nothing ran, so the read on stream 2 races with nothing.
    let body = begin(1) + &write(1, "produce", "$X") + &end_and_instantiate(1) + &read(2, "other", "$X");
    assert!(races(&body).is_empty());
    // The same write issued outside a capture does race.
    assert_eq!(races(&(write(1, "produce", "$X") + &read(2, "other", "$X"))).len(), 1);
}

#[test]
fn a_replay_runs_in_its_stream_order_and_another_stream_must_wait_for_it() {
    let captured = begin(1) + &write(1, "produce", "$X") + &end_and_instantiate(1);
    // Replay, then a stream that waits on an event recorded after the replay: ordered.
    let joined = captured.clone() + &launch(1) + &rec(1, 1) + &wait(2, 1) + &read(2, "consume", "$X");
    assert!(races(&joined).is_empty());
    // Without the wait the reader races with the replayed node, not with the capture.
    let found = races(&(captured + &launch(1) + &read(2, "consume", "$X")));
    assert_one_race(&found, RaceKind::ReadAfterWrite, "produce", "consume");
    let (look, earlier) = (found.0.lookup(), found[0].earlier.site);
    assert!(look.site(earlier).graph.is_some(), "the earlier party is a graph node");
    assert_eq!(look.launched_at(earlier).map(ToString::to_string).as_deref(), Some("app.cu:99"));
    assert_eq!(look.source(earlier).map(ToString::to_string).as_deref(), Some("app.cu:7"), "the capture line");
    assert!(matches!(found[0].fix, Fix::RecordAndWait { .. }));
    assert_eq!(found[0].earlier.node, None, "a replay against another stream is outlined as the whole launch");
}

#[test]
fn stream_order_inside_a_capture_orders_the_nodes() {
    let body = begin(1) + &write(1, "produce", "$X") + &read(1, "consume", "$X") + &end_and_instantiate(1) + &launch(1);
    assert!(races(&body).is_empty());
}

/// A capture on stream 1 that forks stream 2 (event 1) and joins it back (event 2); `before_join` is issued on
/// stream 1 between the fork and the join.
fn fork_join(before_join: &str, after_join: &str) -> String {
    begin(1)
        + &rec(1, 1)
        + &wait(2, 1)
        + &write(2, "side", "$X")
        + before_join
        + &rec(2, 2)
        + &wait(1, 2)
        + after_join
        + &end_and_instantiate(1)
        + &launch(1)
}

#[test]
fn a_forked_stream_is_ordered_inside_the_capture_only_by_its_join() {
    assert!(races(&fork_join("", &read(1, "after_join", "$X"))).is_empty());
    let found = races(&fork_join(&read(1, "unjoined", "$X"), ""));
    assert_one_race(&found, RaceKind::ReadAfterWrite, "side", "unjoined");
    match &found[0].fix {
        Fix::CaptureJoin { record_on, wait_on, .. } => {
            let handle = |id| found.0.lookup().stream(id).map(|s| s.handle);
            assert_eq!((handle(*record_on), handle(*wait_on)), (Some(2), Some(1)))
        }
        other => panic!("expected a join inside the capture, got {other:?}"),
    }
    // Work forked before the capture began is not part of it: stream 2 joins only through the event.
    assert!(races(&(fork_join("", "") + &read(3, "late", "$Y"))).is_empty());
}

/// Graph 10 built node by node: node 1 writes X, node 2 reads it after `deps`, then `extra` calls.
fn explicit(deps: &str, extra: &str) -> String {
    format!(
        "{{\"type\":\"graph_create\",\"graph\":10}}\n\
         {{\"type\":\"graph_node\",\"graph\":10,\"node\":1,\"name\":\"fill\",\"writes\":[$X],\"src\":\"g.cu:20\"}}\n\
         {{\"type\":\"graph_node\",\"graph\":10,\"node\":2,\"name\":\"use\",\"reads\":[$X],\"deps\":{deps},\"src\":\"g.cu:21\"}}\n\
         {extra}\
         {{\"type\":\"graph_instantiate\",\"graph\":10,\"exec\":200}}\n"
    ) + &launch(1)
}

#[test]
fn explicit_edges_order_nodes_and_their_absence_is_a_race() {
    assert!(races(&explicit("[1]", "")).is_empty());
    let found = races(&explicit("[]", ""));
    assert_one_race(&found, RaceKind::ReadAfterWrite, "fill", "use");
    // Both ran in one launch: each says which of its nodes it is (timelines outline the two inside the launch).
    assert_eq!(
        (found[0].earlier.seq, found[0].earlier.node, found[0].later.node),
        (found[0].later.seq, Some(0), Some(1))
    );
    match &found[0].fix {
        Fix::GraphDependency { explicit, .. } => {
            assert!(*explicit);
            let fix = found.fix_text(0);
            assert!(
                fix.starts_with("add a dependency edge from node `fill` at g.cu:20 to node `use` at g.cu:21"),
                "{fix}"
            );
        }
        other => panic!("expected a graph edge, got {other:?}"),
    }
    let added = "{\"type\":\"graph_dep_add\",\"graph\":10,\"node\":2,\"deps\":[1]}\n";
    assert!(races(&explicit("[]", added)).is_empty());
    let removed = "{\"type\":\"graph_dep_remove\",\"graph\":10,\"node\":2,\"deps\":[1]}\n";
    assert_eq!(races(&explicit("[1]", removed)).len(), 1);
}

#[test]
fn an_exec_update_changes_what_the_next_launches_touch() {
    // The graph writes X; stream 2 reads Y without waiting: no overlap until the update points the node at Y.
    let graph = "{\"type\":\"graph_create\",\"graph\":10}\n\
                 {\"type\":\"graph_node\",\"graph\":10,\"node\":1,\"name\":\"fill\",\"writes\":[$X]}\n\
                 {\"type\":\"graph_instantiate\",\"graph\":10,\"exec\":200}\n"
        .to_string();
    let update = "{\"type\":\"graph_node_update\",\"exec\":200,\"node\":1,\"name\":\"fill\",\"writes\":[$Y]}\n";
    assert!(races(&(graph.clone() + &launch(1) + &read(2, "reader", "$Y"))).is_empty());
    let found = races(&(graph.clone() + update + &launch(1) + &read(2, "reader", "$Y")));
    assert_one_race(&found, RaceKind::ReadAfterWrite, "fill", "reader");
    // Updating the graph (not the executable graph) changes only later instantiations.
    let graph_update = update.replace("\"exec\":200", "\"graph\":10");
    assert!(races(&(graph + &graph_update + &launch(1) + &read(2, "reader", "$Y"))).is_empty());
}

#[test]
fn a_child_graph_runs_between_its_node_s_dependencies_and_dependents() {
    let body = "{\"type\":\"graph_create\",\"graph\":11}\n\
                {\"type\":\"graph_node\",\"graph\":11,\"node\":7,\"name\":\"inner\",\"writes\":[$X]}\n\
                {\"type\":\"graph_create\",\"graph\":10}\n\
                {\"type\":\"graph_node\",\"graph\":10,\"node\":1,\"node_kind\":\"child\",\"child\":11}\n\
                {\"type\":\"graph_node\",\"graph\":10,\"node\":2,\"name\":\"outer\",\"reads\":[$X],\"deps\":$DEPS}\n\
                {\"type\":\"graph_instantiate\",\"graph\":10,\"exec\":200}\n"
        .to_string()
        + &launch(1);
    assert!(races(&body.replace("$DEPS", "[1]")).is_empty());
    assert_one_race(&races(&body.replace("$DEPS", "[]")), RaceKind::ReadAfterWrite, "inner", "outer");
}

/// Graph 10: `set` writes the condition's flag in Y, conditional node 2 after it with `bodies` (their nodes added
/// after the node, as programs do), `extra` more nodes of graph 10, node 3 reads X after `deps`; `bodies` is the
/// body graphs' handles, each body one kernel writing X.
fn conditional(bodies: &[u64], deps: &str, extra: &str) -> String {
    let list = bodies.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let mut body = format!(
        "{{\"type\":\"graph_create\",\"graph\":10}}\n\
         {{\"type\":\"graph_node\",\"graph\":10,\"node\":1,\"name\":\"set\",\"writes\":[$Y]}}\n\
         {{\"type\":\"graph_node\",\"graph\":10,\"node\":2,\"node_kind\":\"conditional\",\"bodies\":[{list}],\"deps\":[1]}}\n\
         {extra}\
         {{\"type\":\"graph_node\",\"graph\":10,\"node\":3,\"name\":\"use\",\"reads\":[$X],\"deps\":{deps}}}\n"
    );
    for (i, b) in bodies.iter().enumerate() {
        body += &format!(
            "{{\"type\":\"graph_node\",\"graph\":{b},\"node\":{},\"name\":\"branch{i}\",\"reads\":[$Y],\"writes\":[$X]}}\n",
            20 + i
        );
    }
    body + "{\"type\":\"graph_instantiate\",\"graph\":10,\"exec\":200}\n" + &launch(1)
}

#[test]
fn a_conditional_node_runs_its_bodies_in_its_place() {
    // The body runs after the node's dependencies (it reads the flag `set` wrote) and before its dependents.
    assert!(races(&conditional(&[11], "[2]", "")).is_empty());
    assert_one_race(&races(&conditional(&[11], "[]", "")), RaceKind::ReadAfterWrite, "branch0", "use");
    // A node beside the conditional node, on no path to it, is unordered with what its body does.
    let beside = "{\"type\":\"graph_node\",\"graph\":10,\"node\":4,\"name\":\"beside\",\"writes\":[$X]}\n";
    assert_one_race(&races(&conditional(&[11], "[2,4]", beside)), RaceKind::WriteAfterWrite, "branch0", "beside");
    // IF with ELSE, or SWITCH: one body runs, never two at once; and each launch's bodies come after the last's.
    assert!(races(&conditional(&[11, 12, 13], "[2]", "")).is_empty());
    assert!(races(&(conditional(&[11], "[2]", "") + &launch(1))).is_empty());
    // What runs in a body is checked against the rest of the program like any node.
    assert_eq!(races(&(conditional(&[11], "[2]", "") + &read(2, "other", "$X"))).len(), 1);
}

#[test]
fn a_conditional_body_filled_by_a_capture_runs_in_its_node() {
    // cudaStreamBeginCaptureToGraph into the body, after the node was added.
    let body = "{\"type\":\"graph_create\",\"graph\":10}\n\
                {\"type\":\"graph_node\",\"graph\":10,\"node\":2,\"node_kind\":\"conditional\",\"bodies\":[11]}\n\
                {\"type\":\"graph_node\",\"graph\":10,\"node\":3,\"name\":\"use\",\"reads\":[$X],\"deps\":$DEPS}\n\
                {\"type\":\"capture_begin\",\"stream\":2,\"graph\":11}\n"
        .to_string()
        + &write(2, "captured", "$X")
        + "{\"type\":\"capture_end\",\"stream\":2,\"graph\":11}\n\
           {\"type\":\"graph_instantiate\",\"graph\":10,\"exec\":200}\n"
        + &launch(1);
    assert!(races(&body.replace("$DEPS", "[2]")).is_empty());
    assert_one_race(&races(&body.replace("$DEPS", "[]")), RaceKind::ReadAfterWrite, "captured", "use");
}

#[test]
fn event_nodes_act_like_their_stream_calls() {
    // An event record node lets another stream wait for the launch; an event wait node makes the launch wait.
    let recording = "{\"type\":\"graph_create\",\"graph\":10}\n\
                     {\"type\":\"graph_node\",\"graph\":10,\"node\":1,\"name\":\"fill\",\"writes\":[$X]}\n\
                     {\"type\":\"graph_node\",\"graph\":10,\"node\":2,\"node_kind\":\"event_record\",\"event\":1,\"deps\":[1]}\n\
                     {\"type\":\"graph_instantiate\",\"graph\":10,\"exec\":200}\n"
        .to_string()
        + &launch(1);
    assert!(races(&(recording.clone() + &wait(2, 1) + &read(2, "after", "$X"))).is_empty());
    assert_eq!(races(&(recording + &read(2, "after", "$X"))).len(), 1);
    let waiting = |wait_node: bool| {
        let node = if wait_node {
            "{\"type\":\"graph_node\",\"graph\":10,\"node\":1,\"node_kind\":\"event_wait\",\"event\":2}\n"
        } else {
            ""
        };
        let deps = if wait_node { "[1]" } else { "[]" };
        write(2, "before", "$X")
            + &rec(2, 2)
            + "{\"type\":\"graph_create\",\"graph\":10}\n"
            + node
            + &format!(
                "{{\"type\":\"graph_node\",\"graph\":10,\"node\":2,\"name\":\"use\",\"reads\":[$X],\"deps\":{deps}}}\n"
            )
            + "{\"type\":\"graph_instantiate\",\"graph\":10,\"exec\":200}\n"
            + &launch(1)
    };
    assert!(races(&waiting(true)).is_empty());
    assert_eq!(races(&waiting(false)).len(), 1);
}

#[test]
fn a_race_inside_a_graph_is_one_finding_counted_at_every_launch() {
    let body = fork_join(&read(1, "unjoined", "$X"), "") + &launch(1) + &launch(1);
    let found = races(&body);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].count, 3);
}

#[test]
fn graph_calls_on_unknown_handles_are_refused_in_hand_written_traces() {
    let error = scenario::try_analyze("bad.json", PRELUDE, &launch(1), HostOrder::Global)
        .expect_err("a launch of an executable graph never instantiated");
    assert!(error.to_string().contains("never instantiated"), "{error}");
}

#[test]
fn an_event_recorded_again_outside_the_capture_is_waited_on_as_recorded_there() {
    // Event 1 is recorded inside the capture on stream 1, then again on stream 3, outside it. Stream 2's wait
    // waits for stream 3's record: stream 2 does not join the capture, its read runs, and it races with the write
    // stream 3 issues after the record.
    let body = begin(1)
        + &rec(1, 1)
        + &rec(1, 3)
        + &wait(2, 1)
        + &read(2, "reader", "$X")
        + &write(3, "late", "$X")
        + &end_and_instantiate(1);
    assert_one_race(&races(&body), RaceKind::WriteAfterRead, "reader", "late");
}

/// A capture on stream 1 that allocates Z stream-ordered (`cudaMallocAsync` while capturing), writes it, forks
/// stream 2 to read it, `join` (the side stream's work joined back, or nothing), frees Z on stream 1, and ends;
/// the graph is then launched twice on stream 3.
fn graph_memory(join: &str) -> String {
    let z = r#"["0x8000",256]"#;
    begin(1)
        + "{\"type\":\"alloc\",\"id\":5,\"addr\":\"0x8000\",\"size\":256,\"alloc_kind\":\"stream_ordered\",\"stream\":1}\n"
        + &write(1, "fill", z)
        + &rec(1, 1)
        + &wait(2, 1)
        + &read(2, "side", z)
        + join
        + "{\"type\":\"free\",\"id\":5,\"free_kind\":\"stream_ordered\",\"stream\":1}\n"
        + &end_and_instantiate(1)
        + &launch(3)
        + &launch(3)
}

#[test]
fn allocations_and_frees_in_a_capture_are_the_graphs_memory_nodes() {
    // The graph's own block, ordered by its edges: nothing ran at capture time, and each launch allocates,
    // uses and frees it in order (graphMemoryNodes in NVIDIA's samples).
    let joined = graph_memory(&(rec(2, 2) + &wait(1, 2)));
    assert!(races(&joined).is_empty(), "{:?}", races(&joined));
    // Without the join the free node does not wait for the side stream's read.
    let found = races(&graph_memory(""));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].kind, found[0].range.start), (RaceKind::WriteAfterRead, 0x8000), "{found:?}");
}

/// A capture on stream 1 of `produce` (writes X) that asks the driver for the graph being captured (100) and the
/// node the stream depends on (161: `produce`), adds node 162 to graph 100 by hand after `hand_deps`, writing
/// `hand_writes`, then `update`s the stream's dependencies, and captures `consume` reading `reads`; launched once.
/// cudaStreamGetCaptureInfo, cudaGraphAddNode and cudaStreamUpdateCaptureDependencies, as NVIDIA's
/// graphConditionalNodes and torch.cond's capture do it.
fn hand_added(hand_deps: &str, hand_writes: &str, update: &str, reads: &str) -> String {
    begin(1)
        + &write(1, "produce", "$X")
        + "{\"type\":\"capture_info\",\"stream\":1,\"graph\":100,\"deps\":[161]}\n"
        + &format!(
            "{{\"type\":\"graph_node\",\"graph\":100,\"node\":162,\"name\":\"by_hand\",\"deps\":{hand_deps},\"writes\":[{hand_writes}],\"src\":\"app.cu:40\"}}\n"
        )
        + update
        + &read(1, "consume", reads)
        + &end_and_instantiate(1)
        + &launch(1)
}

const SET_TO_HAND_NODE: &str = "{\"type\":\"capture_deps_set\",\"stream\":1,\"deps\":[162]}\n";
const ADD_HAND_NODE: &str = "{\"type\":\"capture_deps_add\",\"stream\":1,\"deps\":[162]}\n";

#[test]
fn a_set_of_capture_dependencies_replaces_the_stream_order() {
    // The next captured node depends on the hand-added node alone, which depends on nothing: `consume` is no
    // longer after `produce` though the stream order would have put it there.
    let found = races(&hand_added("[]", "", SET_TO_HAND_NODE, "$X"));
    assert_one_race(&found, RaceKind::ReadAfterWrite, "produce", "consume");
    assert_eq!(found[0].count, 1);
    // The hand-added node after `produce` (the node the driver named): ordered through it.
    assert!(races(&hand_added("[161]", "", SET_TO_HAND_NODE, "$X")).is_empty());
    // Without the update the stream order stands.
    assert!(races(&hand_added("[]", "", "", "$X")).is_empty());
}

#[test]
fn added_capture_dependencies_order_the_next_node_after_a_hand_added_one() {
    // The hand-added node writes Y with no dependencies. Added to the stream's set, `consume` reads Y after it and
    // still X after `produce`.
    assert!(races(&hand_added("[]", "$Y", ADD_HAND_NODE, "$X,$Y")).is_empty());
    // Left out of the stream's set, the hand-added node runs beside `consume`.
    let found = races(&hand_added("[]", "$Y", "", "$Y"));
    assert_one_race(&found, RaceKind::ReadAfterWrite, "by_hand", "consume");
    // Set instead of added, `consume`'s read of X is no longer after `produce`.
    assert_one_race(
        &races(&hand_added("[]", "$Y", SET_TO_HAND_NODE, "$X")),
        RaceKind::ReadAfterWrite,
        "produce",
        "consume",
    );
}

#[test]
fn capture_dependencies_the_capture_did_not_reach_are_refused_in_hand_written_traces() {
    // The stream depends on one node (`produce`); a driver set of two disagrees with the capture.
    let produce = write(1, "produce", r#"["0x1000",256]"#);
    let body = begin(1) + &produce + "{\"type\":\"capture_info\",\"stream\":1,\"deps\":[161,163]}\n";
    let error = scenario::try_analyze("bad.json", PRELUDE, &body, HostOrder::Global).expect_err("two nodes for one");
    assert!(error.to_string().contains("dependencies of a capturing stream"), "{error}");
    // An update naming a node the capture never named.
    let body = begin(1) + &produce + SET_TO_HAND_NODE;
    let error = scenario::try_analyze("bad.json", PRELUDE, &body, HostOrder::Global).expect_err("an unknown node");
    assert!(error.to_string().contains("not in its graph"), "{error}");
}

/// Rule 13 inside rule 9: a graph with host node 1 (its function refills X on the host) and a kernel node 2 that
/// reads X, depending on `deps`; launched on stream 1 after `before`, its host node's run announced by a
/// `host_func` naming the node, with the store the capture saw inside it.
fn host_node_graph(deps: &str, before: &str) -> String {
    format!(
        "{{\"type\":\"graph_create\",\"graph\":10}}\n\
         {{\"type\":\"graph_node\",\"graph\":10,\"node\":1,\"node_kind\":\"host\",\"src\":\"g.cu:30\"}}\n\
         {{\"type\":\"graph_node\",\"graph\":10,\"node\":2,\"name\":\"use\",\"reads\":[$X],\"deps\":{deps},\"src\":\"g.cu:31\"}}\n\
         {{\"type\":\"graph_instantiate\",\"graph\":10,\"exec\":200}}\n\
         {before}\
         {{\"type\":\"host_func\",\"stream\":1,\"id\":5,\"name\":\"refill\",\"node\":1,\"src\":\"app.cu:99\"}}\n\
         {{\"type\":\"host_access\",\"thread\":77,\"name\":\"host write\",\"writes\":[[\"0x1000\",1]],\"host_func\":5}}\n"
    ) + &launch(1)
}

#[test]
fn a_graph_host_node_s_run_races_with_the_nodes_no_edge_orders_it_with() {
    assert!(races(&host_node_graph("[1]", "")).is_empty(), "the edge orders the refill before the read");
    let found = races(&host_node_graph("[]", ""));
    assert_one_race(&found, RaceKind::ReadAfterWrite, "refill", "use");
    assert_eq!(found[0].earlier.seq, found[0].later.seq, "both in one launch");
    assert_eq!(found[0].extent, AccessExtent::Known, "the host's own bytes and the node's");
}

#[test]
fn a_graph_host_node_s_run_is_its_launch_s_place_in_the_stream() {
    // Stream 2 reads X; the launch on stream 1 waits for that read, or not.
    let read_on_2 = read(2, "reader", "$X");
    let ordered = format!("{read_on_2}{}{}", rec(1, 2), wait(1, 1));
    assert!(races(&host_node_graph("[1]", &ordered)).is_empty());
    let found = races(&host_node_graph("[1]", &read_on_2));
    assert_one_race(&found, RaceKind::WriteAfterRead, "reader", "refill");
}

#[test]
fn a_node_s_race_rests_on_a_whole_block_only_when_its_bytes_lie_in_a_block_its_pointers_stood_for() {
    // A library call's kernel captured on stream 2: its operand X by its bytes, and a workspace word into Y.
    let node = "{\"type\":\"kernel\",\"stream\":2,\"name\":\"gemm\",\"writes\":[$X],\"pointers\":[[\"0x2000\",\"w\"]],\"src\":\"app.cu:5\"}\n";
    let extents = |unjoined: &str| {
        let found = races(&fork_join(&(node.to_string() + unjoined), ""));
        found.iter().map(|race| race.extent).collect::<Vec<_>>()
    };
    // fork_join's side node writes X on stream 2 before the gemm; stream 1 reads X, then Y, unjoined.
    assert_eq!(extents(""), Vec::<AccessExtent>::new());
    assert_eq!(extents(&read(1, "use", "$X")), [AccessExtent::Known, AccessExtent::Known]);
    assert_eq!(extents(&read(1, "peek", "$Y")), [AccessExtent::WholeBlockArguments]);
}
