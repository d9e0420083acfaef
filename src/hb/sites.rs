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
use crate::model::{NativeSite, SourceLocation, StreamId, ThreadId};

/// Live sites below which the table is never collected: below it, collecting costs more than it saves.
const COLLECTION_FLOOR: usize = 1 << 16;

/// The sites the engine refers to. Grows with the sites held at once, not with the trace's length.
pub struct SiteTable {
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

/// What a site is, as the engine knows it when an operation arrives.
pub struct SiteParts<'a> {
    pub class: OpClass,
    pub name: &'a str,
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
            sites: Vec::new(),
            free: Vec::new(),
            by_hash: FxHashMap::default(),
            natives: Vec::new(),
            native_ids: FxHashMap::default(),
            interned: 0,
            live: 0,
            collect_at: floor.max(1),
            floor: floor.max(1),
        }
    }

    /// The id of the site described by `parts`, creating it on first sight. Allocates only then.
    pub fn intern(&mut self, parts: SiteParts) -> SiteId {
        let native = parts.native.map(|site| self.native(site));
        let mut hasher = FxHasher::default();
        parts.class.hash(&mut hasher);
        parts.name.hash(&mut hasher);
        parts.stream.hash(&mut hasher);
        parts.thread.hash(&mut hasher);
        parts.source.hash(&mut hasher);
        native.hash(&mut hasher);
        parts.region.hash(&mut hasher);
        parts.graph.hash(&mut hasher);
        let hash = hasher.finish();
        let candidates = self.by_hash.entry(hash).or_default();
        for &id in candidates.iter() {
            let Some(LiveSite { site, .. }) = &self.sites[id.index()] else { continue };
            if site.class == parts.class
                && site.name == parts.name
                && site.stream == parts.stream
                && site.thread == parts.thread
                && site.source.as_ref() == parts.source
                && site.native == native
                && site.region.as_ref() == parts.region
                && site.graph.as_ref() == parts.graph
            {
                return id;
            }
        }
        let site = Site {
            class: parts.class,
            name: parts.name.to_string(),
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
        candidates.push(id);
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
