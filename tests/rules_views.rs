//! Strided views (DESIGN.md, access tier T2: "the bytes a tensor view covers"), each with a racy and a race-free
//! twin: accesses are compared on the bytes their views cover, not on their extents. Kept beside
//! `tests/rules.rs` (same harness, same trace format) so that neither file grows past reading length.

use streamtrace::findings::RaceKind;
use streamtrace::hb::HostOrder;

use crate::util::scenario::{self, kernel as op, rec, wait, Found};

/// Non-blocking streams 1-3, event 1, and X: 64 floats (an 8 x 8 matrix) at 0x1000.
const PRELUDE: &str = r#"{"type":"stream","id":1,"stream_kind":"non_blocking"}
{"type":"stream","id":2,"stream_kind":"non_blocking"}
{"type":"stream","id":3,"stream_kind":"non_blocking"}
{"type":"event","id":1}
{"type":"alloc","id":1,"addr":"0x1000","size":256,"label":"X"}
"#;

/// x[0::2] and x[1::2] of X's 64 floats; x[2::2]; all of X.
const EVEN: &str = r#"["0x1000",252,4,[[32,2]]]"#;
const ODD: &str = r#"["0x1004",252,4,[[32,2]]]"#;
const SHIFTED: &str = r#"["0x1008",244,4,[[31,2]]]"#;
const WHOLE: &str = r#"["0x1000",256]"#;

/// Column `j` of X as an 8 x 8 row-major matrix (x[:, j]), and the left and right halves (x[:, 0:4], x[:, 4:8]).
fn column(j: u32) -> String {
    format!(r#"["{:#x}",228,4,[[8,8]]]"#, 0x1000 + 4 * j)
}
const LEFT: &str = r#"["0x1000",240,4,[[8,8],[4,1]]]"#;
const RIGHT: &str = r#"["0x1010",240,4,[[8,8],[4,1]]]"#;

fn races(body: &str) -> Found {
    Found(scenario::analyze("views.json", PRELUDE, body, HostOrder::Global))
}

#[test]
fn interleaved_updates_on_two_streams_are_clean() {
    let body = op(1, "even", EVEN, EVEN) + &op(2, "odd", ODD, ODD);
    assert!(races(&body).is_empty(), "{:#?}", races(&body));
}

#[test]
fn interleaved_updates_then_an_unordered_whole_read_race() {
    let body = op(1, "even", EVEN, EVEN) + &op(2, "odd", ODD, ODD) + &op(3, "sum", WHOLE, "");
    let found = races(&body);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found.iter().all(|r| r.kind == RaceKind::ReadAfterWrite && &*found.site(&r.later).name == "sum"));
    assert_eq!(found[0].earlier_view.as_deref(), Some("[32] strides (2) of 4-byte elements"));
    assert_eq!(found[0].later_view, None);
}

#[test]
fn a_shifted_view_races() {
    let found = races(&(op(1, "even", "", EVEN) + &op(2, "shifted", "", SHIFTED)));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!((found[0].kind, &*found.site(&found[0].earlier).name), (RaceKind::WriteAfterWrite, "even"));
    assert_eq!(found[0].later_view.as_deref(), Some("[31] strides (2) of 4-byte elements"));
}

#[test]
fn a_shifted_view_after_an_event_is_clean() {
    let body = op(1, "even", "", EVEN) + &rec(1, 1) + &wait(2, 1) + &op(2, "shifted", "", SHIFTED);
    assert!(races(&body).is_empty());
}

#[test]
fn different_columns_are_clean_and_the_same_column_races() {
    assert!(races(&(op(1, "col3", "", &column(3)) + &op(2, "col4", "", &column(4)))).is_empty());
    assert!(races(&(op(1, "left", "", LEFT) + &op(2, "right", RIGHT, RIGHT))).is_empty());
    let found = races(&(op(1, "col3", "", &column(3)) + &op(2, "col3 again", &column(3), "")));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].kind, RaceKind::ReadAfterWrite);
    let found = races(&(op(1, "left", "", LEFT) + &op(2, "col2", &column(2), "")));
    assert_eq!(found.len(), 1, "the left half holds column 2: {found:#?}");
}

#[test]
fn a_view_whose_length_disagrees_with_its_shape_is_refused() {
    let body = op(1, "bad", "", r#"["0x1000",256,4,[[32,2]]]"#);
    let error = scenario::try_analyze("bad.json", PRELUDE, &body, HostOrder::Global).err();
    let message = error.map(|e| format!("{e:#}")).unwrap_or_default();
    assert!(message.contains("sizes and strides span 252"), "{message}");
}

/// The left half written on stream 1 and `right` on stream 2, as two branches of one graph: a capture on stream 1
/// forks stream 2 (event 1) and joins it back (event 2), then the graph is launched once.
fn halves_in_a_graph(right: &str) -> String {
    "{\"type\":\"event\",\"id\":2}\n".to_string()
        + "{\"type\":\"capture_begin\",\"stream\":1,\"src\":\"app.cu:1\"}\n"
        + &rec(1, 1)
        + &wait(2, 1)
        + &op(1, "left", "", LEFT)
        + &op(2, "right", "", right)
        + &rec(2, 2)
        + &wait(1, 2)
        + "{\"type\":\"capture_end\",\"stream\":1,\"graph\":100}\n"
        + "{\"type\":\"graph_instantiate\",\"graph\":100,\"exec\":200}\n"
        + "{\"type\":\"graph_launch\",\"exec\":200,\"stream\":1,\"src\":\"app.cu:99\"}\n"
}

#[test]
fn a_graph_s_nodes_are_compared_on_the_bytes_their_views_cover() {
    // Two branches writing the left and right column halves: their extents overlap, their bytes do not.
    assert!(races(&halves_in_a_graph(RIGHT)).is_empty(), "{:#?}", races(&halves_in_a_graph(RIGHT)));
    // Column 1 lies in the left half.
    let found = races(&halves_in_a_graph(&column(1)));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].kind, RaceKind::WriteAfterWrite);
    assert_eq!(found[0].later_view.as_deref(), Some("[8] strides (8) of 4-byte elements"));
}
