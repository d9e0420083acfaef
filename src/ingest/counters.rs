//! Import counters: what an ingester read, skipped or could not make sense of, each with a severity, so that a
//! report can say when data was lost (a dropped synchronization can create a false race).

use serde::Serialize;

/// How much a counted condition matters to the verdict.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Plain bookkeeping: rows read, records of each type.
    Info,
    /// Something was left out; findings may be missing or wrong because of it.
    DataLoss,
}

/// One named count.
#[derive(Clone, Debug, Serialize)]
pub struct ImportCounter {
    pub name: &'static str,
    pub severity: Severity,
    pub count: u64,
    pub meaning: &'static str,
}

/// All counters of one import, in the order they were first bumped.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(transparent)]
pub struct ImportCounters {
    counters: Vec<ImportCounter>,
}

impl ImportCounters {
    /// Adds `by` to the counter `name`, creating it on first use.
    pub fn bump(&mut self, name: &'static str, severity: Severity, meaning: &'static str, by: u64) {
        match self.counters.iter_mut().find(|c| c.name == name) {
            Some(counter) => counter.count += by,
            None => self.counters.push(ImportCounter { name, severity, count: by, meaning }),
        }
    }

    pub fn get(&self, name: &str) -> u64 {
        self.counters.iter().find(|c| c.name == name).map_or(0, |c| c.count)
    }

    pub fn iter(&self) -> impl Iterator<Item = &ImportCounter> {
        self.counters.iter()
    }

    /// Counters that mean findings may be incomplete or wrong.
    pub fn data_loss(&self) -> impl Iterator<Item = &ImportCounter> {
        self.counters.iter().filter(|c| c.severity == Severity::DataLoss && c.count > 0)
    }
}
