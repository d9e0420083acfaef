//! What each entity and operation record of the JSON trace means in the model: the fields a kind needs, its
//! enumerated values parsed through the format's vocabulary, and its references to streams, events and
//! allocations resolved to dense ids.

use streamtrace_format as format;
use streamtrace_format::{AccessFlag, Field, RecordKind};

use super::accesses::{range, read_write_accesses, read_write_items};
use super::op_fields::{OpFields, PointerItems, Text};
use super::parser::{AllocHandle, DeclaredHostFunc, JsonTraceParser, StreamHandle};
use super::problem::Problem;
use super::raw::{Address, RawPointer, RawRange, RawRecord};
use crate::ingest::background::Batch;
use crate::ingest::Counter;
use crate::model::{
    AccessMode, AllocKind, CopyKind, Coverage, Creation, Entity, EventId, EventInfo, ExactCoverage, FreeKind,
    GraphCall, GraphNode, HostSync, MemoryKind, NativeSite, NodeKind, NodeOwner, NodeParams, OpKind, PointerArg,
    ProcessId, QueryTarget, StreamId, StreamInfo, StreamKind, ThreadId, TraceRecord, Unseen,
};

impl JsonTraceParser {
    pub(super) fn stream_record(
        &mut self,
        process: ProcessId,
        thread: ThreadId,
        raw: &RawRecord,
        native: Option<NativeSite>,
        out: &mut Batch,
    ) -> Result<(), Problem> {
        let handle = raw.id.ok_or_else(|| Problem::malformed("stream record without `id`"))?;
        if self.streams.get(&StreamHandle::Declared(process, handle)).is_some() {
            return Err(Problem::inconsistent(format!("stream {handle} declared twice")));
        }
        let kind = match raw.stream_kind.as_deref() {
            None => format::StreamKind::default(),
            Some(text) => format::StreamKind::parse(text).map_err(|e| Problem::malformed(e.to_string()))?,
        };
        let kind = match kind {
            format::StreamKind::LegacyDefault => StreamKind::LegacyDefault,
            format::StreamKind::PerThreadDefault => StreamKind::PerThreadDefault,
            format::StreamKind::Blocking => StreamKind::Blocking,
            format::StreamKind::NonBlocking => StreamKind::NonBlocking,
        };
        let context_handle = raw.context.unwrap_or(0);
        if kind == StreamKind::LegacyDefault {
            if let Some(first) = self.legacy_defaults.insert((process, context_handle), handle) {
                self.legacy_defaults.insert((process, context_handle), first);
                return Err(Problem::inconsistent(format!(
                    "a second legacy default stream (id {handle}) in context {context_handle}, whose legacy default \
                     stream is stream {first}"
                )));
            }
        }
        let id = self.streams.add(StreamHandle::Declared(process, handle));
        let device = self.devices.get_or_add((process, raw.device.unwrap_or(0))).0;
        let context = self.contexts.get_or_add((process, context_handle)).0;
        let created_by = (kind != StreamKind::LegacyDefault).then_some(thread);
        let source = raw.src.as_deref().map(|text| self.source(text));
        let gpu = raw.device.unwrap_or(0) as u32;
        out.push(Ok(TraceRecord::Stream(StreamInfo {
            id,
            handle,
            kind,
            priority: raw.priority,
            process,
            device,
            gpu,
            context,
            created_by,
            source,
            native,
        })));
        Ok(())
    }

    pub(super) fn event_record(
        &mut self,
        process: ProcessId,
        raw: &RawRecord,
        native: Option<NativeSite>,
        out: &mut Batch,
    ) -> Result<(), Problem> {
        let handle = raw.id.ok_or_else(|| Problem::malformed("event record without `id`"))?;
        if self.events.get(&(process, handle)).is_some() {
            return Err(Problem::inconsistent(format!("event {handle} declared twice")));
        }
        let id = self.events.add((process, handle));
        let source = raw.src.as_deref().map(|text| self.source(text));
        out.push(Ok(TraceRecord::Event(EventInfo { id, handle, process, source, native })));
        Ok(())
    }

    /// A framework's creation line for a stream or event declared earlier (tier T2).
    pub(super) fn creation_record(
        &mut self,
        process: ProcessId,
        raw: &RawRecord,
        out: &mut Batch,
    ) -> Result<(), Problem> {
        let entity = match (raw.stream, raw.event) {
            (Some(_), None) => Entity::Stream(self.stream(process, raw.stream)?),
            (None, Some(_)) => Entity::Event(self.event(process, raw.event)?),
            _ => return Err(Problem::malformed("a creation record names exactly one of `stream` and `event`")),
        };
        // Written by earlier captures for an object made where no line of the program was on the stack: it
        // names nothing.
        let Some(text) = raw.src.as_deref() else { return Ok(()) };
        let source = self.source(text);
        let text = raw.label.as_deref().map(|label| self.intern(label));
        out.push(Ok(TraceRecord::Created(Creation { entity, source, text })));
        Ok(())
    }

    /// A host function enqueued on a stream, with what it touches when the trace says so; its `id` names it for
    /// the accesses learned from faults inside it, which follow it.
    pub(super) fn host_func(&mut self, process: ProcessId, raw: &RawRecord) -> Result<OpKind, Problem> {
        let stream = self.stream(process, raw.stream)?;
        let mut accesses = Vec::with_capacity(raw.reads().len() + raw.writes().len());
        read_write_accesses(raw.reads(), raw.writes(), &mut accesses)?;
        let name = self.intern(raw.name.as_deref().unwrap_or("host function"));
        if let Some(id) = raw.id {
            let declared = DeclaredHostFunc { stream, name: name.clone(), graph_node: raw.node };
            self.host_funcs.insert((process, id), declared);
        }
        Ok(OpKind::HostFunc { stream, name, accesses, id: raw.id, graph_node: raw.node })
    }

    /// What the capture's host watch said at exit, as import counters.
    pub(super) fn host_watch(&mut self, raw: &RawRecord) -> Result<(), Problem> {
        let watches =
            [(&raw.guard, Counter::CaptureHostWatchGuarded), (&raw.managed, Counter::CaptureHostWatchManaged)];
        for (state, on) in watches {
            let Some(text) = state.as_deref() else { continue };
            match format::WatchState::parse(text).map_err(|e| Problem::malformed(e.to_string()))? {
                format::WatchState::On => self.counters.bump(on, 1),
                format::WatchState::Unsupported => self.counters.bump(Counter::CaptureHostWatchUnsupported, 1),
                format::WatchState::Off => {}
            }
        }
        for (count, counter) in [
            (raw.windows, Counter::CaptureHostWatchWindows),
            (raw.faults, Counter::CaptureHostWatchFaults),
            (raw.dropped, Counter::CaptureHostWatchDropped),
            (raw.ignored, Counter::CaptureHostWatchIgnored),
        ] {
            self.counters.bump(counter, count.unwrap_or(0));
        }
        Ok(())
    }

    /// The host thread's own access (tier T2, or from a fault the capture saw: `fault`), on its host-access
    /// lane, which is declared at the thread's first. One made by a host function (`host_func`) belongs to that
    /// function's step on its stream instead, and must follow its record.
    pub(super) fn host_access(
        &mut self,
        process: ProcessId,
        thread: ThreadId,
        raw: &RawRecord,
        out: &mut Batch,
    ) -> Result<OpKind, Problem> {
        let mut accesses = Vec::with_capacity(raw.reads().len() + raw.writes().len());
        read_write_accesses(raw.reads(), raw.writes(), &mut accesses)?;
        if let Some(text) = raw.fault.as_deref() {
            format::FaultKind::parse(text).map_err(|e| Problem::malformed(e.to_string()))?;
        }
        let name = raw.name.as_deref().unwrap_or("host access");
        if let Some(id) = raw.host_func {
            let Some(DeclaredHostFunc { stream, name: function, graph_node }) =
                self.host_funcs.get(&(process, id)).cloned()
            else {
                return Err(Problem::inconsistent(format!(
                    "host_access names host function {id}, which no host_func record declared"
                )));
            };
            if self.last_host_func != Some((process, id)) {
                return Err(Problem::inconsistent(format!(
                    "host_access of host function {id} does not follow its host_func record (only its other accesses may come between)"
                )));
            }
            // Named with its function: the fix waits before that function is enqueued.
            let name = self.intern(&format!("{name} in {function}"));
            return Ok(OpKind::HostFuncAccess { stream, name, accesses, graph_node });
        }
        let name = self.intern(name);
        let lane = match self.streams.get_or_add(StreamHandle::HostLane(thread)) {
            (lane, false) => lane,
            (id, true) => {
                let device = self.devices.get_or_add((process, 0)).0;
                let context = self.contexts.get_or_add((process, 0)).0;
                // The lane's handle is the thread's id, which is how reports name it.
                let info = StreamInfo {
                    id,
                    handle: raw.thread.unwrap_or(1),
                    kind: StreamKind::HostThread,
                    priority: None,
                    process,
                    device,
                    gpu: 0,
                    context,
                    created_by: Some(thread),
                    source: None,
                    native: None,
                };
                out.push(Ok(TraceRecord::Stream(info)));
                id
            }
        };
        Ok(OpKind::HostAccess { lane, name, accesses })
    }

    /// The operation a record of one of [`OpFields::KINDS`] describes: a launch, a copy, a set, an event record
    /// or wait, a synchronization, a query, an allocation or a free.
    pub(super) fn common_operation(
        &mut self,
        kind: RecordKind,
        process: ProcessId,
        fields: &OpFields,
    ) -> Result<OpKind, Problem> {
        Ok(match kind {
            RecordKind::Kernel => {
                let stream = self.stream(process, fields.stream)?;
                let mut accesses = self.spare.accesses(fields.reads.len() + fields.writes.len());
                read_write_items(fields.reads, fields.writes, &mut accesses)?;
                let name = self.intern_text(fields.name.ok_or_else(|| Problem::malformed("kernel without `name`"))?);
                let pointers = match fields.pointers {
                    PointerItems::Decoded(items) => {
                        let mut pointers = self.spare.pointers(items.len());
                        for RawPointer(address, flag) in items {
                            pointers.push(PointerArg { address: address.0, mode: pointer_mode(flag)? });
                        }
                        pointers
                    }
                    PointerItems::Frame(items) => {
                        let mut pointers = self.spare.pointers(items.len());
                        let arg = |(address, flag)| PointerArg { address, mode: flag_mode(flag) };
                        pointers.extend(items.iter().map(arg));
                        pointers
                    }
                };
                let exact = match fields.coverage {
                    None => None,
                    Some(coverage) => Some(ExactCoverage {
                        coverage: Coverage::parse(coverage).map_err(|e| Problem::malformed(e.to_string()))?,
                        unseen: (fields.unseen.map(Unseen::parse).transpose())
                            .map_err(|e| Problem::malformed(e.to_string()))?,
                    }),
                };
                OpKind::Kernel { stream, name, accesses, pointers, exact }
            }
            RecordKind::Memcpy => {
                let stream = self.stream(process, fields.stream)?;
                let src = fields.from.map(range).transpose()?;
                let dst = fields.to.map(range).transpose()?;
                let bytes = fields.bytes.or(src.map(|r| r.len)).or(dst.map(|r| r.len)).unwrap_or(0);
                let copy = match fields.copy {
                    None => format::CopyKind::Default,
                    Some(text) => format::CopyKind::parse(text).map_err(|e| Problem::malformed(e.to_string()))?,
                };
                let copy = match copy {
                    format::CopyKind::HtoD => CopyKind::HtoD,
                    format::CopyKind::DtoH => CopyKind::DtoH,
                    format::CopyKind::DtoD => CopyKind::DtoD,
                    format::CopyKind::HtoH => CopyKind::HtoH,
                    format::CopyKind::PtoP => CopyKind::PtoP,
                    format::CopyKind::Default => CopyKind::Default,
                };
                let (default_src, default_dst) = copy.default_memory();
                let src_memory = memory_kind(fields.from_memory, default_src)?;
                let dst_memory = memory_kind(fields.to_memory, default_dst)?;
                OpKind::Memcpy {
                    stream,
                    copy,
                    bytes,
                    src,
                    dst,
                    synchronous: fields.sync.unwrap_or(false),
                    src_memory,
                    dst_memory,
                }
            }
            RecordKind::Memset => {
                let stream = self.stream(process, fields.stream)?;
                let dst = fields.to.map(range).transpose()?;
                let bytes = fields.bytes.or(dst.map(|r| r.len)).unwrap_or(0);
                // A set without a memory kind is on device memory, where nearly all are.
                let dst_memory = memory_kind(fields.to_memory, MemoryKind::Device)?;
                OpKind::Memset { stream, bytes, dst, synchronous: fields.sync.unwrap_or(false), dst_memory }
            }
            RecordKind::Record => OpKind::EventRecord {
                event: self.event(process, fields.event)?,
                stream: self.stream(process, fields.stream)?,
            },
            RecordKind::Wait => OpKind::StreamWait {
                stream: self.stream(process, fields.stream)?,
                event: self.event(process, fields.event)?,
            },
            RecordKind::Sync => OpKind::HostSync(match (fields.stream, fields.event, fields.device, fields.context) {
                (Some(_), None, None, None) => HostSync::Stream(self.stream(process, fields.stream)?),
                (None, Some(_), None, None) => HostSync::Event(self.event(process, fields.event)?),
                (None, None, Some(d), None) => HostSync::Device(
                    self.devices
                        .get(&(process, d))
                        .ok_or_else(|| Problem::inconsistent(format!("device {d} has no streams")))?,
                ),
                (None, None, None, Some(c)) => HostSync::Context(
                    self.contexts
                        .get(&(process, c))
                        .ok_or_else(|| Problem::inconsistent(format!("context {c} has no streams")))?,
                ),
                _ => {
                    return Err(Problem::malformed(
                        "a sync record names exactly one of `stream`, `event`, `device` or `context`",
                    ))
                }
            }),
            RecordKind::Query => {
                let target = match (fields.stream, fields.event) {
                    (Some(_), None) => QueryTarget::Stream(self.stream(process, fields.stream)?),
                    (None, Some(_)) => QueryTarget::Event(self.event(process, fields.event)?),
                    _ => return Err(Problem::malformed("a query record names exactly one of `stream` or `event`")),
                };
                OpKind::Query {
                    target,
                    ready: fields.ready.ok_or_else(|| {
                        Problem::malformed("query without `ready` (true when it returned cudaSuccess)")
                    })?,
                }
            }
            RecordKind::Alloc => self.alloc(process, fields)?,
            RecordKind::Free => self.free(process, fields)?,
            other => return Err(Problem::malformed(format!("{other} is not an operation record"))),
        })
    }

    /// The operation an operation record not of [`OpFields::KINDS`] describes (a graph launch or call, a host
    /// release or acquire).
    pub(super) fn operation(
        &mut self,
        kind: RecordKind,
        process: ProcessId,
        raw: &RawRecord,
    ) -> Result<OpKind, Problem> {
        Ok(match kind {
            RecordKind::Graph => {
                let stream = self.stream(process, raw.stream)?;
                let raw_nodes = raw.nodes.as_deref().ok_or_else(|| Problem::malformed("graph without `nodes`"))?;
                let mut nodes = Vec::with_capacity(raw_nodes.len());
                for (index, node) in raw_nodes.iter().enumerate() {
                    if let Some(&dep) = node.deps.iter().find(|&&d| d >= index) {
                        return Err(Problem::malformed(format!(
                            "graph node {index} depends on node {dep}; a node may depend only on earlier nodes"
                        )));
                    }
                    let mut accesses = Vec::new();
                    read_write_accesses(&node.reads, &node.writes, &mut accesses)?;
                    let name = node.name.as_deref().map_or_else(|| format!("node {index}"), str::to_string);
                    nodes.push(GraphNode::with_accesses(name, accesses, node.deps.clone()));
                }
                let name = raw.name.as_deref().map_or_else(|| "graph".into(), str::to_string);
                OpKind::GraphLaunch { stream, graph: self.stages.inline_graph(name, nodes), host_runs: Box::new([]) }
            }
            RecordKind::CaptureBegin => {
                graph_call(GraphCall::CaptureBegin { stream: self.stream(process, raw.stream)?, into: raw.graph })
            }
            RecordKind::CaptureEnd => {
                graph_call(GraphCall::CaptureEnd { stream: self.stream(process, raw.stream)?, graph: raw.graph })
            }
            RecordKind::CaptureInfo => graph_call(GraphCall::CaptureInfo {
                stream: self.stream(process, raw.stream)?,
                graph: raw.graph,
                deps: raw.deps.clone(),
            }),
            RecordKind::CaptureDepsSet | RecordKind::CaptureDepsAdd => {
                let stream = self.stream(process, raw.stream)?;
                let deps = raw.deps.clone().ok_or_else(|| Problem::malformed(format!("{kind} without `deps`")))?;
                graph_call(if kind == RecordKind::CaptureDepsSet {
                    GraphCall::SetCaptureDependencies { stream, deps }
                } else {
                    GraphCall::AddCaptureDependencies { stream, deps }
                })
            }
            RecordKind::GraphCreate => graph_call(GraphCall::Create { graph: handle(raw.graph, Field::Graph)? }),
            RecordKind::GraphDestroy => graph_call(GraphCall::Destroy { graph: handle(raw.graph, Field::Graph)? }),
            RecordKind::GraphExecDestroy => graph_call(GraphCall::ExecDestroy { exec: handle(raw.exec, Field::Exec)? }),
            RecordKind::GraphNode => graph_call(GraphCall::AddNode {
                graph: handle(raw.graph, Field::Graph)?,
                node: handle(raw.node, Field::Node)?,
                deps: raw.deps.clone().unwrap_or_default(),
                params: self.node_params(process, raw)?,
            }),
            RecordKind::GraphNodeUpdate => {
                let owner = match (raw.graph, raw.exec) {
                    (Some(graph), None) => NodeOwner::Graph(graph),
                    (None, Some(exec)) => NodeOwner::Exec(exec),
                    _ => return Err(Problem::malformed("a graph_node_update names exactly one of `graph` or `exec`")),
                };
                graph_call(GraphCall::UpdateNode {
                    owner,
                    node: handle(raw.node, Field::Node)?,
                    params: self.node_params(process, raw)?,
                })
            }
            RecordKind::GraphDepAdd | RecordKind::GraphDepRemove => {
                let (graph, node) = (handle(raw.graph, Field::Graph)?, handle(raw.node, Field::Node)?);
                let deps = raw.deps.clone().ok_or_else(|| Problem::malformed(format!("{kind} without `deps`")))?;
                graph_call(if kind == RecordKind::GraphDepAdd {
                    GraphCall::AddDependencies { graph, node, deps }
                } else {
                    GraphCall::RemoveDependencies { graph, node, deps }
                })
            }
            RecordKind::GraphNodeDestroy => graph_call(GraphCall::DestroyNode {
                graph: handle(raw.graph, Field::Graph)?,
                node: handle(raw.node, Field::Node)?,
            }),
            RecordKind::GraphClone => graph_call(GraphCall::Clone {
                graph: handle(raw.graph, Field::Graph)?,
                original: handle(raw.original, Field::Original)?,
            }),
            RecordKind::GraphInstantiate => graph_call(GraphCall::Instantiate {
                graph: handle(raw.graph, Field::Graph)?,
                exec: handle(raw.exec, Field::Exec)?,
            }),
            RecordKind::GraphExecUpdate => graph_call(GraphCall::ExecUpdate {
                exec: handle(raw.exec, Field::Exec)?,
                graph: handle(raw.graph, Field::Graph)?,
            }),
            RecordKind::GraphLaunch => graph_call(GraphCall::Launch {
                exec: handle(raw.exec, Field::Exec)?,
                stream: self.stream(process, raw.stream)?,
            }),
            RecordKind::HostRelease => OpKind::HostRelease { object: handle(raw.object, Field::Object)? },
            RecordKind::HostAcquire => OpKind::HostAcquire { object: handle(raw.object, Field::Object)? },
            other => return Err(Problem::malformed(format!("{other} is not an operation record"))),
        })
    }

    /// What a `graph_node` or `graph_node_update` record says the node does.
    fn node_params(&mut self, process: ProcessId, raw: &RawRecord) -> Result<NodeParams, Problem> {
        let kind = match raw.node_kind.as_deref().map(format::NodeKind::parse).transpose() {
            Ok(kind) => kind.unwrap_or(format::NodeKind::Kernel),
            Err(e) => return Err(Problem::malformed(e.to_string())),
        };
        let event = |this: &Self| this.event(process, raw.event);
        let kind = match kind {
            format::NodeKind::Kernel => NodeKind::Kernel,
            format::NodeKind::Memcpy => NodeKind::Memcpy,
            format::NodeKind::Memset => NodeKind::Memset,
            format::NodeKind::Host => NodeKind::Host,
            format::NodeKind::Child => NodeKind::Empty,
            format::NodeKind::EventRecord => NodeKind::EventRecord(event(self)?),
            format::NodeKind::EventWait => NodeKind::EventWait(event(self)?),
            format::NodeKind::MemAlloc => NodeKind::MemAlloc,
            format::NodeKind::MemFree => NodeKind::MemFree,
            format::NodeKind::Empty => NodeKind::Empty,
            format::NodeKind::Conditional => NodeKind::Conditional,
            format::NodeKind::Other => NodeKind::Other,
        };
        let child = raw.child;
        if (raw.node_kind.as_deref() == Some(format::NodeKind::Child.as_str())) != child.is_some() {
            return Err(Problem::malformed(
                "a child node names the graph it runs in `child`, and only a child node does",
            ));
        }
        let bodies = raw.bodies.clone().unwrap_or_default();
        if !bodies.is_empty() && kind != NodeKind::Conditional {
            return Err(Problem::malformed("only a conditional node names body graphs in `bodies`"));
        }
        let mut accesses = Vec::with_capacity(raw.reads().len() + raw.writes().len());
        read_write_accesses(raw.reads(), raw.writes(), &mut accesses)?;
        let raw_pointers = raw.pointers.as_deref().unwrap_or(&[]);
        let mut pointers = Vec::with_capacity(raw_pointers.len());
        for RawPointer(address, flag) in raw_pointers {
            pointers.push(PointerArg { address: address.0, mode: pointer_mode(flag)? });
        }
        let name = raw.name.as_deref().map(|n| self.intern(n));
        Ok(NodeParams { kind, name, accesses, pointers, child, bodies })
    }

    fn alloc(&mut self, process: ProcessId, fields: &OpFields) -> Result<OpKind, Problem> {
        let handle = fields.id.ok_or_else(|| Problem::malformed("alloc record without `id`"))?;
        let start = fields.addr.ok_or_else(|| Problem::malformed("alloc without `addr`"))?;
        let size = fields.size.ok_or_else(|| Problem::malformed("alloc without `size`"))?;
        let range = range(RawRange(Address(start), Address(size)))?;
        let alloc_kind = match fields.alloc_kind {
            None => format::AllocKind::default(),
            Some(text) => format::AllocKind::parse(text).map_err(|e| Problem::malformed(e.to_string()))?,
        };
        let alloc_kind = match alloc_kind {
            format::AllocKind::Device => AllocKind::Device,
            format::AllocKind::StreamOrdered => AllocKind::StreamOrdered,
            format::AllocKind::VirtualMap => AllocKind::VirtualMap,
            format::AllocKind::Host => AllocKind::Host,
            format::AllocKind::Managed => AllocKind::Managed,
            format::AllocKind::PoolBlock => AllocKind::PoolBlock,
        };
        let stream = match alloc_kind {
            AllocKind::StreamOrdered => Some(self.stream(process, fields.stream)?),
            // The stream a block was handed out on only describes it: one not yet seen is left out.
            AllocKind::PoolBlock => fields.stream.and_then(|s| self.streams.get(&StreamHandle::Declared(process, s))),
            _ => None,
        };
        let key = match alloc_kind {
            AllocKind::PoolBlock => AllocHandle::PoolBlock(process, handle),
            _ => AllocHandle::Driver(process, handle),
        };
        if self.allocs.get(&key).is_some() {
            return Err(Problem::inconsistent(format!(
                "allocation {handle} is still live: free it before reusing its id"
            )));
        }
        let alloc = self.allocs.add(key);
        let label = fields.label.or(fields.name.map(Text::as_str)).map(str::to_string);
        Ok(OpKind::Alloc { alloc, handle, range, alloc_kind, stream, label })
    }

    fn free(&mut self, process: ProcessId, fields: &OpFields) -> Result<OpKind, Problem> {
        let handle = fields.id.ok_or_else(|| Problem::malformed("free record without `id`"))?;
        let free_kind = match fields.free_kind {
            None => format::FreeKind::default(),
            Some(text) => format::FreeKind::parse(text).map_err(|e| Problem::malformed(e.to_string()))?,
        };
        let free_kind = match free_kind {
            format::FreeKind::Synchronous => FreeKind::Synchronous,
            format::FreeKind::StreamOrdered => FreeKind::StreamOrdered,
            format::FreeKind::VirtualUnmap => FreeKind::VirtualUnmap,
            format::FreeKind::Host => FreeKind::Host,
            format::FreeKind::PoolBlock => FreeKind::PoolBlock,
        };
        // The stream first: a record that cannot be taken leaves the block live.
        let stream = match free_kind {
            FreeKind::StreamOrdered => Some(self.stream(process, fields.stream)?),
            _ => None,
        };
        let key = match free_kind {
            FreeKind::PoolBlock => AllocHandle::PoolBlock(process, handle),
            _ => AllocHandle::Driver(process, handle),
        };
        let alloc = self
            .allocs
            .remove(&key)
            .ok_or_else(|| Problem::inconsistent(format!("free of allocation {handle}, which is not live")))?;
        Ok(OpKind::Free { alloc, free_kind, stream })
    }

    fn stream(&self, process: ProcessId, handle: Option<u64>) -> Result<StreamId, Problem> {
        let handle = handle.ok_or_else(|| Problem::malformed(format!("missing field `{}`", Field::Stream)))?;
        self.streams.get(&StreamHandle::Declared(process, handle)).ok_or_else(|| {
            Problem::inconsistent(format!("unknown stream {handle}: declare it first with {{\"type\": \"stream\", \"id\": {handle}, \"stream_kind\": ...}}"))
        })
    }

    fn event(&self, process: ProcessId, handle: Option<u64>) -> Result<EventId, Problem> {
        let handle = handle.ok_or_else(|| Problem::malformed(format!("missing field `{}`", Field::Event)))?;
        self.events.get(&(process, handle)).ok_or_else(|| {
            Problem::inconsistent(format!(
                "event {handle} used before it exists: declare it with {{\"type\": \"event\", \"id\": {handle}}}"
            ))
        })
    }
}

/// A graph API call as the operation that carries it (boxed: rare, and the largest of the operations' kinds,
/// which every operation handed over would otherwise be sized for).
fn graph_call(call: GraphCall) -> OpKind {
    OpKind::GraphCall(Box::new(call))
}

/// A copy's or set's memory kind as the trace named it, or `default` when it did not.
fn memory_kind(text: Option<&str>, default: MemoryKind) -> Result<MemoryKind, Problem> {
    let Some(text) = text else { return Ok(default) };
    Ok(match format::MemoryKind::parse(text).map_err(|e| Problem::malformed(e.to_string()))? {
        format::MemoryKind::Device => MemoryKind::Device,
        format::MemoryKind::Pageable => MemoryKind::Pageable,
        format::MemoryKind::Pinned => MemoryKind::Pinned,
        format::MemoryKind::Managed => MemoryKind::Managed,
    })
}

/// A graph API record's handle field, which it cannot do without.
fn handle(value: Option<u64>, field: Field) -> Result<u64, Problem> {
    value.ok_or_else(|| Problem::malformed(format!("missing field `{field}`")))
}

/// A pointer argument's access: `"r"` or `"w"` (`"read"` and `"write"` as the first hand-written traces had them).
fn pointer_mode(flag: &str) -> Result<AccessMode, Problem> {
    match AccessFlag::parse(flag) {
        Ok(flag) => Ok(flag_mode(flag)),
        Err(_) if flag == "read" => Ok(AccessMode::Read),
        Err(_) if flag == "write" => Ok(AccessMode::Write),
        Err(_) => Err(Problem::malformed(format!("pointer mode `{flag}` (expected \"r\" or \"w\")"))),
    }
}

fn flag_mode(flag: AccessFlag) -> AccessMode {
    match flag {
        AccessFlag::Read => AccessMode::Read,
        AccessFlag::Write => AccessMode::Write,
    }
}
