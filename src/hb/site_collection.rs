//! Dropping the sites nothing refers to any more (`sites`): every place the engine keeps a site id is marked
//! here, once the live sites have doubled since the last time, and the table drops the rest. The marking is
//! whole or the table would hand out an id still in use: the shadow's stamps (segments and strided views, marked
//! on the checker's thread when the check runs there), each stream's latest site, the graph memos (their launch
//! sites, node sites and footprints), the conflicts not yet reported, and every finding collected so far.
//!
//! It touches only the site table; it reads what holds ids and changes none of it, but for the checker's
//! conflicts still in flight, which it has made findings first.

use super::state::Engine;

impl Engine {
    /// Collects the site table when it asks to be (between operations, when no id is in flight).
    pub(super) fn collect_sites_when_due(&mut self) {
        if self.sites.wants_collection() {
            self.collect_sites();
        }
    }

    /// Drops every site no id the engine holds names.
    fn collect_sites(&mut self) {
        // The checker's conflicts become findings first (the collector's sites are marked below), and its
        // shadows' stamps are marked there.
        self.drain_checker();
        let mut marks = self.sites.start_marking();
        if let Some(checker) = self.checker.as_mut() {
            marks = checker.mark_sites(marks);
        }
        for stream in &self.streams {
            if let Some(site) = stream.last_site {
                marks.mark(site);
            }
        }
        for ((_, launch), memo) in &self.graph_memos {
            marks.mark(*launch);
            memo.node_sites.iter().for_each(|&site| marks.mark(site));
            memo.footprint.iter().for_each(|(_, site)| marks.mark(*site));
        }
        for conflict in &self.conflicts {
            marks.mark(conflict.earlier.site);
        }
        for process in &self.processes {
            process.shadow.for_each_site(|site| marks.mark(site));
        }
        self.collector.for_each_site(|site| marks.mark(site));
        // A dropped id is handed out again: what was said of the dropped site must not stick to the next one.
        self.whole_block_sites.retain(|&site, _| marks.is_marked(site));
        self.sites.sweep(marks);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{Findings, OpOccurrence, SiteId};
    use crate::hb::EngineOptions;
    use crate::ingest::json::JsonTraceReader;
    use crate::synth::{write_trace, SynthSpec};

    /// The findings as their content, every site id replaced by the site it stands for: a collected table
    /// numbers its sites otherwise.
    fn described(findings: &Findings) -> String {
        let site = |id: SiteId| format!("{:?}", findings.site(id));
        let occurrence = |op: &OpOccurrence| {
            format!("{} {:?} {} {} {:?} {:?}", site(op.site), op.action, op.seq, op.origin, op.stream_position, op.node)
        };
        let mut out = String::new();
        for race in findings.races.iter().chain(&findings.timing_only_races) {
            let (earlier, later) = (occurrence(&race.earlier), occurrence(&race.later));
            out += &format!("race {:?} {earlier} / {later} {:?} x{}\n", race.kind, race.range, race.count);
        }
        let waits = [
            &findings.unrecorded_waits,
            &findings.waits_on_never_recorded_events,
            &findings.waits_with_unknown_record,
            &findings.waits_before_a_pipelines_first_record,
        ];
        for (kind, waits) in waits.into_iter().enumerate() {
            for wait in waits {
                out += &format!("wait {kind} {} {} x{}\n", occurrence(&wait.wait), wait.event, wait.count);
            }
        }
        for group in &findings.unordered_pairs {
            out +=
                &format!("pairs {} / {} {} {:?}\n", site(group.earlier), site(group.later), group.pairs, group.first);
        }
        out
    }

    /// The findings of `text`, with the site table collected after every operation or never.
    fn findings(name: &str, text: &str, collect: bool) -> Option<String> {
        let mut engine = Engine::new(EngineOptions::default());
        for record in JsonTraceReader::from_text(name, text.to_string()) {
            let record = record.ok()?;
            engine.apply(&record).ok()?;
            if collect {
                engine.collect_sites();
            }
        }
        let (findings, _) = engine.finish();
        Some(described(&findings))
    }

    fn traces_under(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("samples").flatten() {
            let path = entry.path();
            if path.is_dir() {
                traces_under(&path, out);
            } else if path.extension().is_some_and(|e| e == "json") {
                out.push(path);
            }
        }
    }

    #[test]
    fn collecting_sites_after_every_operation_changes_no_finding() {
        let mut traces = Vec::new();
        traces_under(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples"), &mut traces);
        let mut texts: Vec<(String, String)> = traces
            .iter()
            .map(|path| (path.display().to_string(), std::fs::read_to_string(path).expect("a sample")))
            .collect();
        for seed in 1..=4 {
            let spec = SynthSpec { operations: 3_000, streams: 6, live_ranges: 200, events: 8, seed };
            let mut text = Vec::new();
            write_trace(&spec, &mut text).expect("generated");
            texts.push((format!("synth {seed}"), String::from_utf8(text).expect("utf-8")));
        }
        let (mut compared, mut with_findings) = (0, 0);
        for (name, text) in &texts {
            let Some(kept) = findings(name, text, false) else { continue };
            assert_eq!(findings(name, text, true).as_deref(), Some(kept.as_str()), "{name}");
            compared += 1;
            with_findings += usize::from(!kept.is_empty());
        }
        assert!(compared > 100 && with_findings > 50, "only {compared} traces compared, {with_findings} with findings");
    }

    #[test]
    fn sites_nothing_refers_to_are_dropped_and_their_ids_reused() {
        // Every operation at a line of its own, on one stream, each writing the range the one before it wrote.
        let mut lines =
            vec![r#"{"type": "streamtrace", "version": 1}"#.to_string(), r#"{"type": "stream", "id": 1}"#.to_string()];
        lines.extend((1..=1000).map(|i| {
            format!(r#"{{"type": "kernel", "stream": 1, "name": "k", "src": "gen.py:{i}", "writes": [[4096, 64]]}}"#)
        }));
        let mut engine = Engine::new(EngineOptions::default());
        for record in JsonTraceReader::from_text("lines", lines.join("\n")) {
            engine.apply(&record.expect("read")).expect("applied");
            engine.collect_sites();
        }
        assert_eq!(engine.sites.len(), 1000, "every line a site");
        assert!(engine.sites.live() <= 2, "only the latest write's site is held: {}", engine.sites.live());
    }
}
