//! Interned operation sites and native call sites, so that shadow memory stores a 4-byte id instead of a
//! description and findings refer to both by id. Handed to the findings when the analysis ends.
//!
//! A program has few launch sites, but a trace may give every operation a source line of its own (a generated
//! trace, a loop a framework unrolled): sites nothing refers to any more are dropped ([`SiteTable::sweep`], run
//! by the engine each time the live sites double: `site_collection`), so that memory follows what the shadow,
//! the streams and the findings hold rather than the trace's length. A dropped site's id is handed out again;
//! the table handed to the findings is renumbered in the order the sites were first seen, as it would be had
//! nothing been dropped.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHasher};

pub use crate::findings::SiteId;
use crate::findings::{GraphSite, NativeId, OpClass, Site};
use crate::model::{NativeSite, SiteHint, SourceLocation, StreamId, ThreadId};

/// Live sites below which the table is never collected: below it, collecting costs more than it saves.
const COLLECTION_FLOOR: usize = 1 << 16;

/// Sets of two places in the table of recently interned sites ([`SiteTable::recent`]): a program's hot launch
/// sites, on every stream they run on.
const RECENT_SETS: usize = 1024;

/// The sites the engine refers to. Grows with the sites held at once, not with the trace's length.
pub struct SiteTable {
    /// Two-way sets by [`quick_key`]: the key and the id of sites interned lately, the latest first. Every
    /// operation interns its site; through this, the site of a hot launch site is found with one compare of its
    /// parts, without hashing its strings or probing the map (a hit is still compared field by field: the key
    /// only places). Two ways in 1,024 sets, because the sites of a program's hot kernels, copies, sets and
    /// waits on its streams are a few hundred: one way in 256 places lost about a third of them to neighbours.
    recent: Box<[[(u64, SiteId); 2]]>,
    /// By id; `None`: dropped, its id free.
    sites: Vec<Option<LiveSite>>,
    free: Vec<SiteId>,
    by_hash: FxHashMap<u64, Vec<SiteId>>,
    natives: Vec<NativeSite>,
    native_ids: FxHashMap<NativeSite, NativeId>,
    /// Sites interned since the start, dropped ones too.
    interned: u64,
    live: usize,
    /// Live sites at which the engine collects next.
    collect_at: usize,
    floor: usize,
    /// The site each hint the reader gave found (site_hints.rs).
    hinted: HintedSites,
}

/// A site held, with what dropping and renumbering need.
struct LiveSite {
    site: Site,
    hash: u64,
    /// How many sites were interned before it: the order of first sight, which the findings' table keeps.
    born: u64,
}

impl Default for SiteTable {
    fn default() -> SiteTable {
        SiteTable::with_floor(COLLECTION_FLOOR)
    }
}

/// A key no site has (a site's key has its class's bits set).
const NO_KEY: u64 = 0;

/// Where a site without a native call site or graph goes among the recent ones: a mix of its parts' fixed-size
/// fields and where its shared strings live. Never [`NO_KEY`]. The strings' bytes are not read: the reader
/// thread keeps the reference counts of its shared names beside their bytes, so reading them costs the engine a
/// cache line taken from the other core on every operation (a fixed name's ends are read: nobody writes there).
fn quick_key(parts: &SiteParts) -> u64 {
    let place = |text: &str| (text.as_ptr() as usize, text.len());
    let ends = |text: &str| {
        let bytes = text.as_bytes();
        let word = |part: &[u8]| part.iter().fold(0u64, |word, &byte| word << 8 | u64::from(byte));
        let head = word(&bytes[..bytes.len().min(8)]);
        let tail = word(&bytes[bytes.len().saturating_sub(8)..]);
        (head, tail, bytes.len() as u64)
    };
    let mut hasher = FxHasher::default();
    match parts.name {
        SiteName::Shared(name) => place(name).hash(&mut hasher),
        SiteName::Text(name) => ends(name).hash(&mut hasher),
    }
    (parts.class, parts.stream, parts.thread).hash(&mut hasher);
    if let Some(source) = parts.source {
        (place(&source.file), source.line, source.function.as_deref().map(place)).hash(&mut hasher);
    }
    parts.region.map(|region| place(region)).hash(&mut hasher);
    hasher.finish() | 1
}

/// Whether two shared strings hold the same text, telling it first by where they live (std's Arc equality does
/// not for `str`): the same string is not read.
#[inline(always)]
fn same_text(a: &Arc<str>, b: &Arc<str>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

#[inline(always)]
fn same_optional_text(a: Option<&Arc<str>>, b: Option<&Arc<str>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => same_text(a, b),
        (a, b) => a.is_none() && b.is_none(),
    }
}

/// [`SourceLocation`]'s equality through [`same_text`].
#[inline(always)]
fn same_source(a: Option<&SourceLocation>, b: Option<&SourceLocation>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => {
            a.line == b.line
                && same_text(&a.file, &b.file)
                && same_optional_text(a.function.as_ref(), b.function.as_ref())
        }
        (a, b) => a.is_none() && b.is_none(),
    }
}

/// The ids a collection found still referred to.
pub struct SiteMarks {
    marked: Vec<bool>,
}

impl SiteMarks {
    pub fn mark(&mut self, id: SiteId) {
        if let Some(mark) = self.marked.get_mut(id.index()) {
            *mark = true;
        }
    }

    pub fn is_marked(&self, id: SiteId) -> bool {
        self.marked.get(id.index()).copied().unwrap_or(false)
    }
}

/// The site each hint of the reader's current round found (site_hints.rs numbers them).
#[derive(Default)]
pub struct HintedSites {
    sites: Vec<Option<SiteId>>,
    round: u32,
}

impl HintedSites {
    /// The site `hint` found before, if it is of the current round and nothing was forgotten since.
    #[inline]
    pub fn get(&self, hint: SiteHint) -> Option<SiteId> {
        if hint.round() != self.round {
            return None;
        }
        *self.sites.get(hint.number() as usize)?
    }

    /// `hint` found `site`. A hint of a new round forgets the round before (its numbers are given anew).
    pub fn learn(&mut self, hint: SiteHint, site: SiteId) {
        if hint.round() != self.round {
            self.forget();
            self.round = hint.round();
        }
        let number = hint.number() as usize;
        if number >= self.sites.len() {
            self.sites.resize(number + 1, None);
        }
        self.sites[number] = Some(site);
    }

    /// Forgets every site learned (a collection dropped sites, whose ids may be given to others).
    pub fn forget(&mut self) {
        self.sites.clear();
    }
}

/// A site's name as the operation gives it.
#[derive(Clone, Copy)]
pub enum SiteName<'a> {
    /// Shared with the record (a kernel's name, a label): the site holds the same string, so that the next
    /// operation's name is found equal by where it lives, without reading it ([`quick_key`]).
    Shared(&'a Arc<str>),
    /// Any other text (an API's fixed name, a graph node's).
    Text(&'a str),
}

impl SiteName<'_> {
    pub(super) fn text(&self) -> &str {
        match self {
            SiteName::Shared(name) => name,
            SiteName::Text(name) => name,
        }
    }
}

impl<'a> From<&'a Arc<str>> for SiteName<'a> {
    fn from(name: &'a Arc<str>) -> SiteName<'a> {
        SiteName::Shared(name)
    }
}

impl<'a> From<&'a str> for SiteName<'a> {
    fn from(name: &'a str) -> SiteName<'a> {
        SiteName::Text(name)
    }
}

/// What a site is, as the engine knows it when an operation arrives.
pub struct SiteParts<'a> {
    pub class: OpClass,
    pub name: SiteName<'a>,
    pub stream: Option<StreamId>,
    pub thread: ThreadId,
    pub source: Option<&'a SourceLocation>,
    pub native: Option<&'a NativeSite>,
    pub region: Option<&'a Arc<str>>,
    pub graph: Option<&'a Arc<GraphSite>>,
}

impl SiteTable {
    /// A table first collected once it holds `floor` live sites (tests collect at every chance with 1).
    pub fn with_floor(floor: usize) -> SiteTable {
        SiteTable {
            recent: vec![[(NO_KEY, SiteId(0)); 2]; RECENT_SETS].into_boxed_slice(),
            sites: Vec::new(),
            free: Vec::new(),
            by_hash: FxHashMap::default(),
            natives: Vec::new(),
            native_ids: FxHashMap::default(),
            interned: 0,
            live: 0,
            collect_at: floor.max(1),
            floor: floor.max(1),
            hinted: HintedSites::default(),
        }
    }

    /// [`SiteTable::intern`] for an operation whose reader gave its site `hint` (site_hints.rs): the site the hint
    /// found before, by one load; else the site interned, learned for the hint. The parts are made only then
    /// (`parts`): a hint that finds its site, nearly every launch, needs none of them.
    #[inline]
    pub fn intern_hinted<'p>(&mut self, hint: SiteHint, parts: impl FnOnce() -> SiteParts<'p>) -> SiteId {
        if hint == SiteHint::NONE {
            return self.intern(parts());
        }
        if let Some(id) = self.hinted.get(hint) {
            debug_assert!(
                {
                    let parts = parts();
                    self.holds(id, &parts, parts.native.and_then(|site| self.native_ids.get(site).copied()))
                },
                "a hint finds the site of its parts"
            );
            return id;
        }
        let id = self.intern(parts());
        self.hinted.learn(hint, id);
        id
    }

    /// The id of the site described by `parts`, creating it on first sight. Allocates only then.
    pub fn intern(&mut self, parts: SiteParts) -> SiteId {
        // Sites with a native call site or a graph are found through the map alone: the native site's id
        // takes a lookup of its own, and graph nodes are interned once per graph.
        let quick = (parts.native.is_none() && parts.graph.is_none()).then(|| quick_key(&parts));
        // The key's low bit is always set: its high bits choose the set.
        let set = |key: u64| (key >> 32) as usize % RECENT_SETS;
        if let Some(key) = quick {
            let ways = self.recent[set(key)];
            for (way, (cached, id)) in ways.into_iter().enumerate() {
                if cached == key && self.holds(id, &parts, None) {
                    if way == 1 {
                        self.recent[set(key)].swap(0, 1);
                    }
                    return id;
                }
            }
        }
        let id = self.intern_by_hash(parts);
        if let Some(key) = quick {
            let ways = &mut self.recent[set(key)];
            ways[1] = ways[0];
            ways[0] = (key, id);
        }
        id
    }

    /// Whether `id` is live and is the site described by `parts` and the native id `native`. Inline, with the
    /// comparisons it makes: every operation's site is checked here, and out of line their calls were a third of
    /// its instructions (the engine's thread 1.8% fewer instructions inline, by callgrind).
    #[inline(always)]
    fn holds(&self, id: SiteId, parts: &SiteParts, native: Option<NativeId>) -> bool {
        let Some(Some(LiveSite { site, .. })) = self.sites.get(id.index()) else { return false };
        let same_name = match parts.name {
            SiteName::Shared(name) => same_text(&site.name, name),
            SiteName::Text(name) => *site.name == *name,
        };
        site.class == parts.class
            && site.stream == parts.stream
            && site.thread == parts.thread
            && site.native == native
            && same_name
            && same_source(site.source.as_ref(), parts.source)
            && same_optional_text(site.region.as_ref(), parts.region)
            && site.graph.as_ref() == parts.graph
    }

    /// [`SiteTable::intern`] through the map of every live site by the hash of all its parts.
    fn intern_by_hash(&mut self, parts: SiteParts) -> SiteId {
        let native = parts.native.map(|site| self.native(site));
        let mut hasher = FxHasher::default();
        parts.class.hash(&mut hasher);
        parts.name.text().hash(&mut hasher);
        parts.stream.hash(&mut hasher);
        parts.thread.hash(&mut hasher);
        parts.source.hash(&mut hasher);
        native.hash(&mut hasher);
        parts.region.hash(&mut hasher);
        parts.graph.hash(&mut hasher);
        let hash = hasher.finish();
        if let Some(candidates) = self.by_hash.get(&hash) {
            if let Some(&id) = candidates.iter().find(|&&id| self.holds(id, &parts, native)) {
                return id;
            }
        }
        let site = Site {
            class: parts.class,
            name: match parts.name {
                SiteName::Shared(name) => name.clone(),
                SiteName::Text(name) => name.into(),
            },
            stream: parts.stream,
            thread: parts.thread,
            source: parts.source.cloned(),
            region: parts.region.cloned(),
            graph: parts.graph.cloned(),
            native,
        };
        let live = Some(LiveSite { site, hash, born: self.interned });
        let id = match self.free.pop() {
            Some(id) => {
                self.sites[id.index()] = live;
                id
            }
            None => {
                self.sites.push(live);
                SiteId(self.sites.len() as u32 - 1)
            }
        };
        self.by_hash.entry(hash).or_default().push(id);
        self.interned += 1;
        self.live += 1;
        id
    }

    /// The id of a native call site (one record of the trace: its identity, not its addresses).
    pub fn native(&mut self, site: &NativeSite) -> NativeId {
        if let Some(&id) = self.native_ids.get(site) {
            return id;
        }
        let id = NativeId(self.natives.len() as u32);
        self.natives.push(site.clone());
        self.native_ids.insert(site.clone(), id);
        id
    }

    /// The site `id` stands for. An id the engine holds is live: a collection keeps every one it can reach.
    pub fn get(&self, id: SiteId) -> &Site {
        &self.sites[id.index()].as_ref().expect("a site the engine holds is never dropped").site
    }

    /// Sites interned since the start, dropped ones too.
    pub fn len(&self) -> usize {
        self.interned as usize
    }

    pub fn is_empty(&self) -> bool {
        self.interned == 0
    }

    /// Sites held now.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Whether the live sites have doubled since the last collection (and passed the floor).
    pub fn wants_collection(&self) -> bool {
        self.live >= self.collect_at
    }

    /// Starts a collection: the engine marks every id it still holds.
    pub fn start_marking(&self) -> SiteMarks {
        SiteMarks { marked: vec![false; self.sites.len()] }
    }

    /// Drops every live site that is not marked; the next collection comes at twice what is left.
    pub fn sweep(&mut self, marks: SiteMarks) {
        // Dropped ids are given to other sites: a hint must not find them.
        self.hinted.forget();
        for (index, marked) in marks.marked.into_iter().enumerate() {
            if marked {
                continue;
            }
            let Some(dropped) = self.sites[index].take() else { continue };
            let id = SiteId(index as u32);
            if let Some(bucket) = self.by_hash.get_mut(&dropped.hash) {
                bucket.retain(|&other| other != id);
                if bucket.is_empty() {
                    self.by_hash.remove(&dropped.hash);
                }
            }
            self.free.push(id);
            self.live -= 1;
        }
        self.collect_at = (2 * self.live).max(self.floor);
    }

    /// The held ids in the order their sites were first seen, and each held id's place in that order
    /// (`renumber[id]`; a dropped id has none). Without a collection that order is the ids' own.
    fn first_seen_order(&self) -> (Vec<usize>, Vec<Option<SiteId>>) {
        let mut held: Vec<(u64, usize)> = (self.sites.iter().enumerate())
            .filter_map(|(index, live)| live.as_ref().map(|live| (live.born, index)))
            .collect();
        held.sort_unstable();
        let mut renumber = vec![None; self.sites.len()];
        for (new, &(_, old)) in held.iter().enumerate() {
            renumber[old] = Some(SiteId(new as u32));
        }
        (held.into_iter().map(|(_, index)| index).collect(), renumber)
    }

    /// Copies of the sites and native call sites so far, for the findings of a capture range that ends while
    /// the analysis goes on: the sites in the order they were first seen, with the renumbering of the ids
    /// ([`SiteTable::first_seen_order`]).
    pub fn tables(&self) -> (Vec<Site>, Vec<NativeSite>, Vec<Option<SiteId>>) {
        let (order, renumber) = self.first_seen_order();
        let sites = order.into_iter().filter_map(|index| self.sites[index].as_ref().map(|l| l.site.clone())).collect();
        (sites, self.natives.clone(), renumber)
    }

    /// The sites and native call sites for the findings, as [`SiteTable::tables`] gives them.
    pub fn into_tables(mut self) -> (Vec<Site>, Vec<NativeSite>, Vec<Option<SiteId>>) {
        let (order, renumber) = self.first_seen_order();
        let sites = order.into_iter().filter_map(|index| self.sites[index].take().map(|l| l.site)).collect();
        (sites, self.natives, renumber)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts<'a>(name: impl Into<SiteName<'a>>, stream: u32, source: Option<&'a SourceLocation>) -> SiteParts<'a> {
        SiteParts {
            class: OpClass::Kernel,
            name: name.into(),
            stream: Some(StreamId(stream)),
            thread: ThreadId(0),
            source,
            native: None,
            region: None,
            graph: None,
        }
    }

    /// Names that share their first and last eight bytes and their length have one quick key: the recent
    /// sites must still tell them apart, and a site must keep its id however its place was taken meanwhile.
    #[test]
    fn recent_sites_tell_apart_sites_that_share_a_key() {
        let names = ["kernel_0A_end_001", "kernel_0B_end_001", "kernel_0C_end_001", "memset"];
        let sources = [SourceLocation::parse("train.py:10"), SourceLocation::parse("train.py:11")];
        assert_eq!(quick_key(&parts(names[0], 1, None)), quick_key(&parts(names[1], 1, None)));
        let mut table = SiteTable::default();
        let mut first: Vec<((usize, u32, usize), SiteId)> = Vec::new();
        let mut x: u64 = 3;
        for _ in 0..2_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let (n, stream, s) = ((x >> 40) as usize % names.len(), (x >> 50) as u32 % 3, (x >> 55) as usize % 3);
            let id = table.intern(parts(names[n], stream, sources.get(s)));
            match first.iter().find(|(key, _)| *key == (n, stream, s)) {
                Some(&(_, known)) => assert_eq!(id, known, "{} on stream {stream}, source {s}", names[n]),
                None => {
                    assert!(first.iter().all(|&(_, other)| other != id), "a new site has an id of its own");
                    first.push(((n, stream, s), id));
                }
            }
            let site = table.get(id);
            assert_eq!(
                (&*site.name, site.stream, site.source.as_ref()),
                (names[n], Some(StreamId(stream)), sources.get(s))
            );
        }
        assert_eq!(table.live(), first.len());
    }

    #[test]
    fn a_recent_sites_id_handed_to_another_site_is_not_taken_for_it() {
        let mut table = SiteTable::with_floor(1);
        let old = table.intern(parts("copy_kernel", 1, None));
        table.sweep(table.start_marking());
        assert_eq!(table.live(), 0);
        let other = table.intern(parts("other_kernel", 2, None));
        assert_eq!(other, old, "the dropped id is handed out again");
        let again = table.intern(parts("copy_kernel", 1, None));
        assert_ne!(again, other);
        assert_eq!(&*table.get(again).name, "copy_kernel");
        assert_eq!(&*table.get(other).name, "other_kernel");
    }

    /// A shared name is found by where it lives first: another copy of the same text, or the same text given as
    /// plain text, must still be the same site, and a different text in a place once used must not be.
    #[test]
    fn shared_names_are_one_site_however_they_come() {
        let mut table = SiteTable::default();
        let first: Arc<str> = Arc::from("gemm");
        let copy: Arc<str> = Arc::from("gemm");
        let id = table.intern(parts(&first, 1, None));
        assert_eq!(table.intern(parts(&first, 1, None)), id);
        assert_eq!(table.intern(parts(&copy, 1, None)), id, "another copy of the text");
        assert_eq!(table.intern(parts("gemm", 1, None)), id, "the text as plain text");
        assert_ne!(table.intern(parts(&first, 2, None)), id, "another stream");
        let source = SourceLocation::parse("train.py:10");
        let moved = SourceLocation::parse("train.py:10");
        let with_line = table.intern(parts(&first, 1, Some(&source)));
        assert_ne!(with_line, id);
        assert_eq!(table.intern(parts(&copy, 1, Some(&moved))), with_line, "the same line, parsed again");
        drop(copy);
        let other: Arc<str> = Arc::from("axpy");
        let other_id = table.intern(parts(&other, 1, None));
        assert_ne!(other_id, id);
        assert_eq!(&*table.get(other_id).name, "axpy");
    }
}
