//! Interned operation sites and native call sites, so that shadow memory stores a 4-byte id instead of a
//! description and findings refer to both by id. Handed to the findings when the analysis ends.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHasher};

pub use crate::findings::SiteId;
use crate::findings::{GraphSite, NativeId, OpClass, Site};
use crate::model::{NativeSite, SourceLocation, StreamId, ThreadId};

/// All sites seen so far. Grows with the program's distinct launch sites, not with the trace's length.
#[derive(Default)]
pub struct SiteTable {
    sites: Vec<Site>,
    by_hash: FxHashMap<u64, Vec<SiteId>>,
    natives: Vec<NativeSite>,
    native_ids: FxHashMap<NativeSite, NativeId>,
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
            let site = &self.sites[id.index()];
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
        let id = SiteId(self.sites.len() as u32);
        self.sites.push(Site {
            class: parts.class,
            name: parts.name.to_string(),
            stream: parts.stream,
            thread: parts.thread,
            source: parts.source.cloned(),
            region: parts.region.cloned(),
            graph: parts.graph.cloned(),
            native,
        });
        candidates.push(id);
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

    pub fn get(&self, id: SiteId) -> &Site {
        &self.sites[id.index()]
    }

    pub fn len(&self) -> usize {
        self.sites.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }

    /// Copies of the sites and native call sites so far, for the findings of a capture range that ends while
    /// the analysis goes on.
    pub fn tables(&self) -> (Vec<Site>, Vec<NativeSite>) {
        (self.sites.clone(), self.natives.clone())
    }

    /// The sites and native call sites, by id, for the findings.
    pub fn into_tables(self) -> (Vec<Site>, Vec<NativeSite>) {
        (self.sites, self.natives)
    }
}
