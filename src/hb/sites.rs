//! Interned operation sites, so that shadow memory stores a 4-byte id instead of a description.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHasher};

use crate::findings::{GraphSite, OpClass, Site, StreamRef, ThreadRef};
use crate::model::{NativeSite, SourceLocation};

/// The engine's number for a [`Site`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SiteId(pub u32);

/// All sites seen so far. Grows with the program's distinct launch sites, not with the trace's length.
#[derive(Default)]
pub struct SiteTable {
    sites: Vec<Site>,
    by_hash: FxHashMap<u64, Vec<SiteId>>,
}

impl SiteTable {
    /// The id of the site described by the arguments, creating it on first sight. Allocates only then.
    #[allow(clippy::too_many_arguments)] // one per part of a site; findings as ids (#25) replace it
    pub fn intern(
        &mut self,
        class: OpClass,
        name: &str,
        stream: Option<&StreamRef>,
        thread: &ThreadRef,
        source: Option<&SourceLocation>,
        native: Option<&NativeSite>,
        region: Option<&Arc<str>>,
        graph: Option<&Arc<GraphSite>>,
    ) -> SiteId {
        let mut hasher = FxHasher::default();
        class.hash(&mut hasher);
        name.hash(&mut hasher);
        stream.map(|s| s.id).hash(&mut hasher);
        thread.id.hash(&mut hasher);
        source.hash(&mut hasher);
        native.hash(&mut hasher);
        region.hash(&mut hasher);
        graph.hash(&mut hasher);
        let hash = hasher.finish();
        let candidates = self.by_hash.entry(hash).or_default();
        for &id in candidates.iter() {
            let site = &self.sites[id.0 as usize];
            if site.class == class
                && site.name == name
                && site.stream.as_ref().map(|s| s.id) == stream.map(|s| s.id)
                && site.thread.id == thread.id
                && site.source.as_ref() == source
                && site.native.as_ref() == native
                && site.region.as_ref() == region
                && site.graph.as_ref() == graph
            {
                return id;
            }
        }
        let id = SiteId(self.sites.len() as u32);
        self.sites.push(Site {
            class,
            name: name.to_string(),
            stream: stream.cloned(),
            thread: thread.clone(),
            source: source.cloned(),
            region: region.cloned(),
            graph: graph.cloned(),
            native: native.cloned(),
        });
        candidates.push(id);
        id
    }

    pub fn get(&self, id: SiteId) -> &Site {
        &self.sites[id.0 as usize]
    }

    pub fn len(&self) -> usize {
        self.sites.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }
}
