//! Sites told on the reader's thread (issue 23 item 3). Every operation's site is interned by the engine, and
//! for the operations of a hot loop (kernel launches, copies, sets: most of a trace) finding one is a hash of its
//! parts and a compare of each, a twentieth of the engine's instructions. Where the reader keeps ahead of the
//! engine (a binary trace), its thread has time to spare: there a [`SiteHinter`] numbers the distinct parts it
//! sees ([`SiteHint`]), and the engine's site table keeps which site each number found (`HintedSites`, in
//! sites.rs), so that the next operation with that number takes the site by one load.
//!
//! Both ends work from [`hot_site_of`], the one statement of which parts make such an operation's site. The
//! hinter tells parts apart by where their strings live (as the site table's recent sites do) and holds a
//! reference to each, so that no address it knows can be reused by another string; two copies of one string
//! get two numbers, which the engine finds to be one site. It keeps at most [`HINTED_SITES`] numbers: past that
//! (a trace whose every operation has a line of its own) it starts over in a new round, which the numbers
//! carry, and the engine forgets the round before.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::sites::SiteName;
use crate::findings::OpClass;
use crate::ingest::{IngestError, RecordPreparer};
use crate::model::{NativeSite, OpKind, Operation, SiteHint, StreamId, ThreadId, TraceRecord};

/// Numbers a hinter gives before it starts over: a program's hot sites are some hundreds.
pub const HINTED_SITES: u32 = 1 << 16;

/// The parts of a kernel launch's, a copy's or a set's site, from the operation alone: its class, name and
/// stream (its thread, source line, native call site and region are the operation's own fields). None for every
/// other operation.
pub fn hot_site_of(op: &Operation) -> Option<(OpClass, SiteName<'_>, StreamId)> {
    match &op.kind {
        OpKind::Kernel { stream, name, .. } => Some((OpClass::Kernel, SiteName::Shared(name), *stream)),
        OpKind::Memcpy { stream, copy, .. } => Some((OpClass::Memcpy, SiteName::Text(copy.op_name()), *stream)),
        OpKind::Memset { stream, .. } => Some((OpClass::Memset, SiteName::Text("memset"), *stream)),
        _ => None,
    }
}

/// A string by where it lives.
fn place(text: &str) -> (usize, usize) {
    (text.as_ptr() as usize, text.len())
}

/// An operation's site parts by where their strings live. Equal keys are equal parts while the strings they
/// name are held ([`Held`]).
#[derive(PartialEq, Eq, Hash)]
struct PartsKey {
    class: OpClass,
    name: (usize, usize),
    stream: StreamId,
    thread: ThreadId,
    file: Option<(usize, usize)>,
    line: Option<u32>,
    function: Option<(usize, usize)>,
    native: Option<usize>,
    region: Option<(usize, usize)>,
}

/// The strings a key names, held so that their places stay theirs (a copy's or a set's name is static).
#[allow(dead_code)] // held, never read
struct Held {
    name: Option<Arc<str>>,
    file: Option<Arc<str>>,
    function: Option<Arc<str>>,
    native: Option<NativeSite>,
    region: Option<Arc<str>>,
}

/// The reader's side: numbers the hot sites of the operations it hands over.
pub struct SiteHinter {
    numbers: FxHashMap<PartsKey, (u32, Held)>,
    round: u32,
    limit: u32,
}

impl Default for SiteHinter {
    fn default() -> SiteHinter {
        SiteHinter::with_limit(HINTED_SITES)
    }
}

impl SiteHinter {
    /// A hinter that starts over past `limit` numbers (tests start over sooner).
    pub fn with_limit(limit: u32) -> SiteHinter {
        SiteHinter { numbers: FxHashMap::default(), round: 0, limit: limit.clamp(1, SiteHint::MAX_NUMBER) }
    }

    /// The hint of `op`'s site, or none for an operation whose site is not a hot one.
    pub fn hint(&mut self, op: &Operation) -> SiteHint {
        let Some((class, name, stream)) = hot_site_of(op) else { return SiteHint::NONE };
        let source = op.source.as_ref();
        let key = PartsKey {
            class,
            name: place(name.text()),
            stream,
            thread: op.thread,
            file: source.map(|s| place(&s.file)),
            line: source.and_then(|s| s.line),
            function: source.and_then(|s| s.function.as_deref().map(place)),
            native: op.native.as_ref().map(|n| n.frames().as_ptr() as usize),
            region: op.region.as_deref().map(place),
        };
        if let Some((number, _)) = self.numbers.get(&key) {
            return self.hint_of(*number);
        }
        if self.numbers.len() as u32 >= self.limit {
            self.numbers.clear();
            self.round = self.round.wrapping_add(1);
        }
        let number = self.numbers.len() as u32 + 1;
        let held = Held {
            name: match name {
                SiteName::Shared(name) => Some(Arc::clone(name)),
                SiteName::Text(_) => None,
            },
            file: source.map(|s| Arc::clone(&s.file)),
            function: source.and_then(|s| s.function.clone()),
            native: op.native.clone(),
            region: op.region.clone(),
        };
        self.numbers.insert(key, (number, held));
        self.hint_of(number)
    }

    fn hint_of(&self, number: u32) -> SiteHint {
        SiteHint::new(self.round, number)
    }
}

impl RecordPreparer for SiteHinter {
    fn prepare(&mut self, batch: &mut [Result<TraceRecord, IngestError>]) {
        for record in batch.iter_mut() {
            if let Ok(TraceRecord::Op(op)) = record {
                op.site_hint = self.hint(op);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hb::sites::{HintedSites, SiteId};
    use crate::model::{CopyKind, MemoryKind, SourceLocation};

    fn kernel(name: &Arc<str>, stream: u32, line: u32, file: &Arc<str>) -> Operation {
        Operation {
            source: Some(SourceLocation { file: Arc::clone(file), line: Some(line), function: None }),
            ..Operation::plain(OpKind::Kernel {
                stream: StreamId(stream),
                name: Arc::clone(name),
                accesses: vec![],
                pointers: vec![],
                exact: None,
            })
        }
    }

    #[test]
    fn operations_of_one_site_share_a_hint_and_other_sites_get_others() {
        let (gemm, copy_tile): (Arc<str>, Arc<str>) = ("gemm".into(), "copy_tile".into());
        let file: Arc<str> = "train.py".into();
        let mut hinter = SiteHinter::default();
        let first = hinter.hint(&kernel(&gemm, 1, 10, &file));
        assert_ne!(first, SiteHint::NONE);
        assert_eq!(hinter.hint(&kernel(&gemm, 1, 10, &file)), first);
        let others = [
            kernel(&gemm, 2, 10, &file),
            kernel(&gemm, 1, 11, &file),
            kernel(&copy_tile, 1, 10, &file),
            Operation { thread: ThreadId(3), ..kernel(&gemm, 1, 10, &file) },
            Operation { region: Some("forward".into()), ..kernel(&gemm, 1, 10, &file) },
        ];
        let mut hints: Vec<SiteHint> = others.iter().map(|op| hinter.hint(op)).collect();
        hints.push(first);
        hints.sort_by_key(|hint| hint.0);
        hints.dedup();
        assert_eq!(hints.len(), others.len() + 1, "each site its own hint");
        let copy = Operation::plain(OpKind::Memcpy {
            stream: StreamId(1),
            copy: CopyKind::DtoD,
            bytes: 0,
            src: None,
            dst: None,
            synchronous: false,
            src_memory: MemoryKind::Device,
            dst_memory: MemoryKind::Device,
        });
        assert_eq!(hinter.hint(&copy), hinter.hint(&copy.clone()));
        assert_eq!(hinter.hint(&Operation::plain(OpKind::HostRelease { object: 1 })), SiteHint::NONE);
    }

    #[test]
    fn a_full_hinter_starts_a_new_round_which_the_engine_side_follows() {
        let file: Arc<str> = "train.py".into();
        let name: Arc<str> = "k".into();
        let mut hinter = SiteHinter::with_limit(2);
        let mut learned = HintedSites::default();
        let a = hinter.hint(&kernel(&name, 1, 1, &file));
        learned.learn(a, SiteId(7));
        assert_eq!(learned.get(a), Some(SiteId(7)));
        let b = hinter.hint(&kernel(&name, 1, 2, &file));
        assert_eq!(learned.get(b), None, "not learned yet");
        // The third site starts a new round: the hint it gets may have the number `a` had, and must not find a's site.
        let c = hinter.hint(&kernel(&name, 1, 3, &file));
        assert_ne!(c, a);
        assert_eq!(learned.get(c), None);
        learned.learn(c, SiteId(9));
        assert_eq!(learned.get(c), Some(SiteId(9)));
        assert_eq!(learned.get(a), None, "the round before is forgotten");
        learned.forget();
        assert_eq!(learned.get(c), None);
    }
}
