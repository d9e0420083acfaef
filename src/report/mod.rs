//! Reports: render an [`Analysis`] for people and programs: text in the terminal, JSON, a self-contained HTML
//! timeline, a PNG picture and a Perfetto/Chrome trace (the last three draw the [`Timeline`](crate::timeline)
//! collected beside the analysis). Reports look up what the findings' ids stand for (crate::resolve) and
//! format; they never decide anything. The sentences shared by several formats live here, a race's fix in
//! `fix`.

pub mod fix;
pub mod html;
pub mod json;
pub mod perfetto;
pub mod png;
pub mod text;
mod timeline_picture;

use std::io;

use crate::analysis::Analysis;
use crate::findings::{AccessAction, OpClass, OpOccurrence, RaceFinding, Site, SiteId, Unordered, UnrecordedWait};
use crate::model::{StreamId, StreamKind};
use crate::names::short::{parameter_list, short_name, short_op_name, short_place, stream_number};
use crate::names::StreamEntry;
use crate::resolve::Lookup;

/// An output format.
pub trait Report {
    fn write(&self, analysis: &Analysis, out: &mut dyn io::Write) -> io::Result<()>;
}

/// "the 42nd", for positions in a stream.
pub fn ordinal(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// Text from the trace (names, labels, sources, paths) made safe for a terminal: every control character (C0
/// such as ESC, CR, LF and NUL, DEL, C1) and every Unicode bidirectional control (which reorders what a line
/// shows) is written as a `\u{..}` escape, so that a trace cannot move the cursor, clear the screen or fake
/// report lines. Every text output (the text report, capture's report, `stats`' tables) passes trace text
/// through it; JSON, HTML and CSV escape by their own rules.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        c.is_control()
            || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    // Printable ASCII, nearly every name, is checked a byte at a time.
    if text.bytes().all(|b| (0x20..0x7f).contains(&b)) || !text.chars().any(unsafe_char) {
        return text.into();
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            escaped.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            escaped.push(c);
        }
    }
    escaped.into()
}

/// A stream in a sentence: "stream 13" when only the handle is known, else the name with the handle last: "the
/// default stream (1)", "stream `side = torch.cuda.Stream()` at train.py:11 (0x21a9b8f0)". A host thread's lane
/// is "host thread N".
pub fn stream_phrase(stream: &StreamEntry) -> String {
    match (&stream.name.known_as, stream.kind) {
        (_, StreamKind::HostThread) => format!("host thread {}", stream.handle),
        (Some(name), _) => format!("{name} ({})", stream_number(stream.handle)),
        (None, _) => format!("stream {}", stream_number(stream.handle)),
    }
}

/// The stream `id` in a sentence ("stream ?" for one no record declared, which the engine never reports).
pub fn stream_words(look: Lookup, id: StreamId) -> String {
    look.stream(id).map_or_else(|| "stream ?".to_string(), stream_phrase)
}

/// A stream by its handle alone, "stream 0x415bdbb0" (a host thread's lane: "host thread 12"), for a report
/// that describes each stream once in a block of its own.
pub fn stream_label(stream: &StreamEntry) -> String {
    match stream.kind {
        StreamKind::HostThread => format!("host thread {}", stream.handle),
        _ => format!("stream {}", stream_number(stream.handle)),
    }
}

/// How the shared sentences (why, fix) name streams, operations and lines.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Words {
    /// Streams by their whole names, operations by their whole names, lines with their folders and function:
    /// a sentence that stands alone (JSON, HTML, Perfetto).
    Whole,
    /// Streams by their handles (the text report describes each once, in its own block), operations by their
    /// short names (`mul`, `write_kernel`), lines as `file:line`.
    Short,
}

impl Words {
    pub fn stream(self, look: Lookup, id: StreamId) -> String {
        match (self, look.stream(id)) {
            (_, None) => "stream ?".to_string(),
            (Words::Whole, Some(stream)) => stream_phrase(stream),
            (Words::Short, Some(stream)) => stream_label(stream),
        }
    }

    /// An operation's name in a sentence: its framework op, else its own name.
    pub fn op(self, site: &Site) -> std::borrow::Cow<'_, str> {
        match self {
            Words::Whole => op_label(site),
            Words::Short => short_label(site).into(),
        }
    }

    pub fn place(self, place: &crate::model::SourceLocation) -> String {
        match self {
            Words::Whole => place.to_string(),
            Words::Short => short_place(place),
        }
    }
}

/// An operation's short name: its framework op's (`mul`), else its kernel's bare function name (`write_kernel`),
/// else its own (`memcpy HtoD`).
pub fn short_label(site: &Site) -> String {
    match (&site.region, site.class) {
        (Some(region), _) => short_op_name(region).to_string(),
        (None, OpClass::HostAccess) => short_op_name(&site.name).to_string(),
        (None, _) => short_name(&site.name).into_owned(),
    }
}

/// A stream with its kind: "stream 13 (non-blocking)", "the default stream (1, legacy default)".
pub fn stream_with_kind(stream: &StreamEntry) -> String {
    match (&stream.name.known_as, stream.kind) {
        (_, StreamKind::HostThread) => stream_phrase(stream),
        (Some(name), kind) => format!("{name} ({}, {})", stream_number(stream.handle), kind.as_str()),
        (None, kind) => format!("stream {} ({})", stream_number(stream.handle), kind.as_str()),
    }
}

/// The event a wait waited on: "event 5", or its name with the handle: "event `ev = torch.cuda.Event()` at
/// train.py:12 (5)".
pub fn event_phrase(look: Lookup, wait: &UnrecordedWait) -> String {
    match look.event_name(wait.event_id) {
        Some(name) => format!("{name} ({})", stream_number(wait.event)),
        None => format!("event {}", wait.event),
    }
}

/// What an operation did, in a sentence: "read", "write", "free" or "allocation".
pub fn action_word(action: AccessAction) -> &'static str {
    match action {
        AccessAction::Read => "read",
        AccessAction::Write => "write",
        AccessAction::Free => "free",
        AccessAction::Alloc => "allocation",
    }
}

/// Demangled template names run to hundreds of characters: a listing line drops the return type, namespace
/// qualifiers, integer casts and the parameter list, which keeps what tells kernels apart (the functor).
pub fn shorten(name: &str) -> String {
    const MAX: usize = 140;
    let mut text = name.strip_prefix("void ").unwrap_or(name).to_string();
    for cast in ["(int)", "(unsigned long)", "(long)", "(unsigned int)", "(bool)"] {
        text = text.replace(cast, "");
    }
    if let Some(open) = parameter_list(&text) {
        text.truncate(open);
    }
    let mut short = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(pos) = rest.find("::") {
        let before = &rest[..pos];
        let keep = before
            .char_indices()
            .rev()
            .find(|(_, c)| !(c.is_alphanumeric() || *c == '_'))
            .map_or(0, |(i, c)| i + c.len_utf8());
        short.push_str(&before[..keep]);
        rest = &rest[pos + 2..];
    }
    short.push_str(rest);
    match short.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &short[..cut]),
        None => short,
    }
}

/// A kernel's name in a sentence: whole when it is short, [`shorten`]ed when it is a long template name. Reports
/// for programs (JSON) keep the whole name.
pub fn kernel_name(name: &str) -> std::borrow::Cow<'_, str> {
    if name.len() > 100 {
        shorten(name).into()
    } else {
        name.into()
    }
}

/// An operation's name for a sentence: the framework op it belongs to (`sum.default`) when it has one,
/// otherwise its own name.
fn op_label(site: &Site) -> std::borrow::Cow<'_, str> {
    match &site.region {
        Some(region) => region.as_ref().into(),
        None => kernel_name(&site.name),
    }
}

/// An operation in a title: its short op or kernel name, and its line when known ("fill_ at train.py:13").
pub fn short_op(look: Lookup, op: &OpOccurrence) -> String {
    let site = look.site(op.site);
    let name = match (&site.region, site.class) {
        (Some(region), _) => short_op_name(region).to_string(),
        // A host access is named after the framework op that made it.
        (None, OpClass::HostAccess) => short_op_name(&site.name).to_string(),
        (None, _) => short_name(&site.name).into_owned(),
    };
    match look.source(op.site) {
        Some(source) => format!("{name} at {}", short_place(source)),
        None => name,
    }
}

/// A race's title: "write-after-write race: fill_ at train.py:13 / mul_ at train.py:15".
pub fn race_title(look: Lookup, race: &RaceFinding) -> String {
    format!("{} race: {} / {}", race.kind.as_str(), short_op(look, &race.earlier), short_op(look, &race.later))
}

/// Who did it, in one phrase: "kernel `scale` on stream 13 (non-blocking), host thread 1".
pub fn describe_op(look: Lookup, op: &OpOccurrence) -> String {
    describe_site(look, op.site)
}

/// An operation site in one phrase, as [`describe_op`] says it.
pub fn describe_site(look: Lookup, id: SiteId) -> String {
    let site = look.site(id);
    let mut text = match site.class {
        OpClass::Kernel | OpClass::GraphNode | OpClass::GraphLaunch => {
            format!("{} `{}`", site.class.as_str(), kernel_name(&site.name))
        }
        _ => site.name.to_string(),
    };
    match look.stream_of(id) {
        Some(stream) if stream.kind == StreamKind::HostThread => text.push_str(" on the host"),
        Some(stream) => text.push_str(&format!(" on {}", stream_with_kind(stream))),
        None => text.push_str(" on the host"),
    }
    text.push_str(&format!(", host thread {}", look.tid(site.thread)));
    if let Some(region) = &site.region {
        text.push_str(&format!(", in region `{region}`"));
    }
    text
}

/// Where the racing bytes are, as sentences: the block holding them (its kind and where it was created), and
/// for a caching-allocator block handed out again while the earlier access still used the memory, the freed
/// block it took over.
pub fn describe_location(look: Lookup, race: &RaceFinding) -> Vec<String> {
    let Some(alloc) = &race.allocation else {
        return vec![format!("Location {} is in no allocation the trace recorded", race.range)];
    };
    let label = alloc.label.as_deref().map_or(String::new(), |l| format!(" `{l}`"));
    let source = look.allocation_source(alloc).map_or(String::new(), |s| format!(", allocated at {s}"));
    let mut lines = vec![format!(
        "Location is allocation {}{label} {} ({} bytes, {}){source}",
        alloc.handle,
        alloc.range,
        alloc.range.len,
        alloc.kind.as_str()
    )];
    if let Some(old) = &alloc.reuses {
        let at = |label: &str, s: &Option<crate::model::SourceLocation>| {
            s.as_ref().map_or(String::new(), |s| format!(", {label} {s}"))
        };
        lines.push(format!(
            "It reuses the memory of allocation {} {}{}{}, which the previous access used: that block went back to the pool while its stream could still use it (in PyTorch, `tensor.record_stream(stream)` before freeing keeps it)",
            old.handle,
            old.range,
            at("allocated at", &old.source),
            at("freed at", &old.freed_at)
        ));
    }
    lines
}

/// Why nothing orders the two operations of a race, as a sentence.
pub fn describe_why(look: Lookup, race: &RaceFinding) -> String {
    describe_why_in(look, race, Words::Whole)
}

/// [`describe_why`] in the given words.
pub fn describe_why_in(look: Lookup, race: &RaceFinding, words: Words) -> String {
    let (earlier, later) = (look.site(race.earlier.site), look.site(race.later.site));
    let phrase = |stream: &StreamEntry| match words {
        Words::Whole => stream_phrase(stream),
        Words::Short => stream_label(stream),
    };
    match &race.why {
        Unordered::GraphNodes { graph } => format!(
            "`{}` and `{}` are nodes of {graph} with no dependency path between them, so they may run concurrently at every launch",
            words.op(earlier), words.op(later)
        ),
        Unordered::CrossStream { known, position } => {
            let earlier_stream = look.stream_of(race.earlier.site).map_or("stream ?".to_string(), phrase);
            let observer = match look.stream_of(race.later.site) {
                Some(s) if s.kind != StreamKind::HostThread => phrase(s),
                _ => "the host thread".to_string(),
            };
            let seen = if *known == 0 {
                format!("{observer} was never ordered after any operation of {earlier_stream}")
            } else {
                format!(
                    "{observer} was ordered after only the first {known} operation{} of {earlier_stream} (by an event wait, a host synchronization or the legacy default stream)",
                    if *known == 1 { "" } else { "s" }
                )
            };
            let what = match race.later.action {
                AccessAction::Free if later.stream.is_none() => "the memory was released",
                _ => "the later operation was issued",
            };
            format!(
                "{seen} when {what}; `{}` is the {} operation of {earlier_stream}. No event recorded after it was waited on, and no host synchronization covered it.",
                words.op(earlier),
                ordinal(*position)
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{kernel_name, printable, shorten};

    #[test]
    fn printable_escapes_what_a_terminal_would_obey() {
        assert_eq!(printable("add_kernel<float>"), "add_kernel<float>");
        assert_eq!(printable("a\u{1b}[2J\r\n\0b"), "a\\u{1b}[2J\\u{d}\\u{a}\\u{0}b");
        assert_eq!(printable("x\u{202e}y\u{85}z\u{7f}"), "x\\u{202e}y\\u{85}z\\u{7f}");
        assert_eq!(printable("été"), "été");
    }

    #[test]
    fn shorten_keeps_the_functor() {
        let name = "void at::native::vectorized_elementwise_kernel<(int)4, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float>>, std::array<char *, (unsigned long)2>>(int, T2, T3)";
        assert_eq!(
            shorten(name),
            "vectorized_elementwise_kernel<4, AUnaryFunctor<float, float, float, MulFunctor<float>>, array<char *, 2>>"
        );
        assert_eq!(shorten("add_parallel(const float *, float *, int)"), "add_parallel");
        let with_casts = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, (unsigned long)1> >(int, at::native::FillFunctor<float>, std::array<char*, (unsigned long)1>)";
        assert_eq!(shorten(with_casts), "vectorized_elementwise_kernel<4, FillFunctor<float>, array<char*, 1> >");
        assert_eq!(kernel_name(name), shorten(name), "long names are shortened in sentences");
        assert_eq!(
            kernel_name("write_kernel(float*, int, float)"),
            "write_kernel(float*, int, float)",
            "short names stay whole"
        );
    }
}
