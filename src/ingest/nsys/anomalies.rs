//! What no intact export holds, looked for in each group of the merge (the rows of one process and correlation
//! id) before it is mapped: rows repeated exactly, correlation ids outside CUPTI's 32-bit range or shared by rows
//! that one API call cannot have made, and API calls without a name. Each changes what the analysis says (an
//! operation doubled, work placed at another call, a synchronization missed), so each is counted with severity
//! data loss; repeated rows are dropped, the rest kept as the export has them.

use rustc_hash::FxHashSet;

use super::calls::{ApiCalls, CallName};
use super::schema::Lookups;
use super::tables::{Activity, ActivityRow};
use crate::ingest::counters::{Counter, ImportCounters};

/// Checks one group, dropping rows it holds twice.
pub(super) fn check_group(
    group: &mut Vec<Activity>,
    lookups: &Lookups,
    calls: &mut ApiCalls,
    counters: &mut ImportCounters,
) {
    let Some(first) = group.first() else { return };
    if u32::try_from(first.correlation).is_err() {
        counters.bump(Counter::NsysCorrelationOutOfRange, group.len() as u64);
    }
    let before = group.len();
    drop_repeated_rows(group);
    if group.len() < before {
        counters.bump(Counter::NsysDuplicateRows, (before - group.len()) as u64);
    }
    let mut names = group.iter().filter_map(|a| match a.row {
        ActivityRow::Api { name, .. } => Some(name),
        _ => None,
    });
    let Some(name) = names.next() else { return };
    if names.next().is_some() {
        counters.bump(Counter::NsysCollidingCorrelationIds, 1);
        return;
    }
    let api = calls.get(name, &lookups.strings);
    if !api.named {
        // Without a StringIds table every name is unknown, which is counted once as that.
        if lookups.has_strings {
            counters.bump(Counter::NsysUnnamedApiCalls, 1);
        }
        return;
    }
    if !made_by(api.says, group) {
        counters.bump(Counter::NsysCollidingCorrelationIds, 1);
    }
}

/// Groups up to this size are searched for repeated rows pairwise, which a hash set costs more than.
const PAIRWISE: usize = 16;

/// Drops every row that an earlier row of `group` equals, keeping the order.
fn drop_repeated_rows(group: &mut Vec<Activity>) {
    if group.len() <= PAIRWISE {
        // Nearly every group is a call and its one activity: no allocation for them.
        let mut kept = 0;
        for i in 0..group.len() {
            if !group[..kept].iter().any(|earlier| earlier.row == group[i].row) {
                group.swap(kept, i);
                kept += 1;
            }
        }
        group.truncate(kept);
    } else {
        let mut seen = FxHashSet::default();
        group.retain(|activity| seen.insert(activity.row.clone()));
    }
}

/// Whether the API call `api` can have made the GPU work of `group`: a launch one kernel, a copy one copy, a set
/// one set, and a graph launch any number of each.
fn made_by(api: CallName, group: &[Activity]) -> bool {
    let graph_launch = api.graph_launch;
    let mut work = 0;
    for activity in group {
        let fits = match activity.row {
            ActivityRow::Kernel { .. } => api.launch,
            ActivityRow::Memcpy { .. } => api.memcpy || graph_launch,
            ActivityRow::Memset { .. } => api.memset || graph_launch,
            _ => continue,
        };
        work += 1;
        if !fits {
            return false;
        }
    }
    work <= 1 || graph_launch
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(start: i64) -> Activity {
        let row = ActivityRow::Kernel { start, end: start + 5, device: 0, context: 1, stream: 7, name: 3 };
        Activity { pid: 1, correlation: 10, row }
    }

    fn call(name: i64) -> Activity {
        Activity { pid: 1, correlation: 10, row: ActivityRow::Api { start: 0, end: 1, global_tid: 1, name } }
    }

    fn lookups() -> Lookups {
        let mut lookups = Lookups { has_strings: true, ..Lookups::default() };
        for (id, name) in [(1, "cudaLaunchKernel_v7000"), (2, "cudaStreamSynchronize_v3020"), (4, "cudaGraphLaunch")] {
            lookups.strings.insert(id, name.into());
        }
        lookups
    }

    fn counted(group: &mut Vec<Activity>) -> Vec<(Counter, u64)> {
        let mut counters = ImportCounters::default();
        check_group(group, &lookups(), &mut ApiCalls::default(), &mut counters);
        counters.iter().map(|c| (c.counter, c.count)).collect()
    }

    #[test]
    fn an_intact_group_counts_nothing() {
        assert_eq!(counted(&mut vec![call(1), kernel(5)]), []);
        assert_eq!(counted(&mut vec![call(4), kernel(5), kernel(9)]), [], "a graph launch runs many kernels");
    }

    #[test]
    fn repeated_rows_are_dropped_in_order_in_small_and_large_groups() {
        let starts = |group: &[Activity]| -> Vec<i64> {
            group.iter().map(|a| if let ActivityRow::Kernel { start, .. } = a.row { start } else { -1 }).collect()
        };
        let mut small: Vec<Activity> = [3, 1, 3, 2, 1, 1, 4].into_iter().map(kernel).collect();
        drop_repeated_rows(&mut small);
        assert_eq!(starts(&small), [3, 1, 2, 4]);
        // Past PAIRWISE rows, a hash set finds them: the same rows stay, in the same order.
        let mut large: Vec<Activity> = (0..60).map(|i| kernel((i * 7) % 23)).collect();
        drop_repeated_rows(&mut large);
        let firsts: Vec<i64> = (0..23).map(|i| (i * 7) % 23).collect();
        assert_eq!(starts(&large), firsts);
    }

    #[test]
    fn each_anomaly_is_counted() {
        let mut doubled = vec![call(1), kernel(5), kernel(5)];
        assert_eq!(counted(&mut doubled), [(Counter::NsysDuplicateRows, 1)]);
        assert_eq!(doubled.len(), 2, "the copy is dropped");
        let colliding = [(Counter::NsysCollidingCorrelationIds, 1)];
        assert_eq!(counted(&mut vec![call(1), kernel(5), kernel(9)]), colliding, "two kernels of one launch");
        assert_eq!(counted(&mut vec![call(2), kernel(5)]), colliding, "a kernel of a synchronization");
        assert_eq!(counted(&mut vec![call(1), call(2), kernel(5)]), colliding, "two calls");
        assert_eq!(counted(&mut vec![call(-1), kernel(5)]), [(Counter::NsysUnnamedApiCalls, 1)]);
        assert_eq!(counted(&mut vec![call(99), kernel(5)]), [(Counter::NsysUnnamedApiCalls, 1)], "a dangling name");
        let mut far =
            vec![Activity { correlation: 1 << 40, ..call(1) }, Activity { correlation: 1 << 40, ..kernel(5) }];
        assert_eq!(counted(&mut far), [(Counter::NsysCorrelationOutOfRange, 2)]);
    }
}
