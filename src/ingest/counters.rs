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
    /// Where it first happened and what was wrong there (`trace.json:88: op_end without ...`), for counters of
    /// records skipped or repaired.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first: Option<String>,
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
        self.counter(name, severity, meaning).count += by;
    }

    /// Like [`bump`](Self::bump), and keeps `first()` as the counter's first occurrence when it has none yet.
    pub fn bump_noting(
        &mut self,
        name: &'static str,
        severity: Severity,
        meaning: &'static str,
        by: u64,
        first: impl FnOnce() -> String,
    ) {
        let counter = self.counter(name, severity, meaning);
        counter.count += by;
        if counter.first.is_none() {
            counter.first = Some(first());
        }
    }

    fn counter(&mut self, name: &'static str, severity: Severity, meaning: &'static str) -> &mut ImportCounter {
        let index = match self.counters.iter().position(|c| c.name == name) {
            Some(index) => index,
            None => {
                self.counters.push(ImportCounter { name, severity, count: 0, meaning, first: None });
                self.counters.len() - 1
            }
        };
        &mut self.counters[index]
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
