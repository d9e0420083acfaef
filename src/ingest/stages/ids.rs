//! Dense ids, the one place every reader draws them from: the handles a trace names things by (a pid, a
//! thread id, a stream or event handle, an allocation's id or address) mapped to the model's small indexes,
//! numbered in the order they first appear. A reader keeps one [`DenseIds`] per namespace; handles that share
//! a numbering (a JSON trace's streams and host-access lanes) share one table, told apart by their key.
//!
//! Memory grows with the live handles: a freed allocation leaves its table.

use std::collections::hash_map::Entry;
use std::hash::Hash;

use rustc_hash::FxHashMap;

use crate::model::{AllocId, ContextId, DeviceId, EventId, ProcessId, StreamId, ThreadId};

/// A model id made from its index.
pub trait DenseId: Copy {
    fn nth(index: u32) -> Self;
}

macro_rules! dense_ids {
    ($($id:ident),+) => {
        $(impl DenseId for $id {
            fn nth(index: u32) -> Self {
                $id(index)
            }
        })+
    };
}

dense_ids!(ProcessId, ThreadId, DeviceId, ContextId, StreamId, EventId, AllocId);

/// One namespace of handles and the dense ids they stand for; ids are handed out in order, and one given up
/// (`remove`) is not handed out again.
pub struct DenseIds<K, Id> {
    ids: FxHashMap<K, Id>,
    next: u32,
}

impl<K, Id> Default for DenseIds<K, Id> {
    fn default() -> Self {
        DenseIds { ids: FxHashMap::default(), next: 0 }
    }
}

impl<K: Hash + Eq, Id: DenseId> DenseIds<K, Id> {
    /// The id `key` stands for now.
    pub fn get(&self, key: &K) -> Option<Id> {
        self.ids.get(key).copied()
    }

    /// The id of `key`, a new one on first sight; and whether it is new (the reader then declares it).
    pub fn get_or_add(&mut self, key: K) -> (Id, bool) {
        match self.ids.entry(key) {
            Entry::Occupied(entry) => (*entry.get(), false),
            Entry::Vacant(entry) => {
                let id = Id::nth(self.next);
                self.next += 1;
                (*entry.insert(id), true)
            }
        }
    }

    /// A new id for `key`, which from now on stands for it (a handle reused for something new).
    pub fn add(&mut self, key: K) -> Id {
        let id = self.draw();
        self.ids.insert(key, id);
        id
    }

    /// A new id that no handle stands for (an event a wait names but no record declared).
    pub fn draw(&mut self) -> Id {
        let id = Id::nth(self.next);
        self.next += 1;
        id
    }

    /// From now on `key` stands for `id`, which an earlier key gave up (an id handed on to a new handle).
    pub fn reassign(&mut self, key: K, id: Id) {
        self.ids.insert(key, id);
    }

    /// `key` no longer stands for anything (a freed allocation); its id is not handed out again.
    pub fn remove(&mut self, key: &K) -> Option<Id> {
        self.ids.remove(key)
    }

    /// Every handle with its id, in the table's own order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, Id)> {
        self.ids.iter().map(|(key, &id)| (key, id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_first_appearance_and_are_never_handed_out_twice() {
        let mut streams: DenseIds<(u32, u64), StreamId> = DenseIds::default();
        assert_eq!(streams.get_or_add((0, 7)), (StreamId(0), true));
        assert_eq!(streams.get_or_add((1, 7)), (StreamId(1), true));
        assert_eq!(streams.get_or_add((0, 7)), (StreamId(0), false));
        assert_eq!(streams.draw(), StreamId(2));
        assert_eq!(streams.remove(&(0, 7)), Some(StreamId(0)));
        assert_eq!(streams.get(&(0, 7)), None);
        assert_eq!(streams.get_or_add((0, 7)), (StreamId(3), true));
        assert_eq!(streams.add((1, 7)), StreamId(4));
        assert_eq!(streams.get(&(1, 7)), Some(StreamId(4)));
    }
}
