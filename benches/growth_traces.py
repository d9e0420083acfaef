#!/usr/bin/env python3
"""Writes the traces of the growth benchmarks (benches/growth.sh): inputs whose cost grew faster than their size.

  growth_traces.py streams OUT DECLARED ACTIVE OPS [--threads N]
      DECLARED streams (every fourth blocking, the rest non-blocking, as PyTorch's pools), of which ACTIVE,
      spread evenly over the ids (so the last ids run work too), run OPS operations: kernels on 1,000 blocks,
      event records and waits, stream and device synchronizations, and work on the legacy default stream (whose
      barrier involves every blocking stream). With --threads N the streams are created by N host threads in
      turn, and the later half of the declared streams are created after the work began, as long jobs do (the
      active ones are then among the first half).
  growth_traces.py active OUT STREAMS [--shared]
      STREAMS non-blocking streams that each run one kernel, reading and writing a block of its own, then a
      device synchronization: nothing orders any two of them, so every stream pair has an unordered pair, and
      each stream's clock knows only itself. With --shared every kernel also reads one block all of them read.
  growth_traces.py ranges OUT RANGES
      One allocation and one kernel that reads RANGES disjoint 256-byte ranges of it and writes every tenth
      one, then a second kernel on another stream that writes the whole block (so every range is checked).
  growth_traces.py nodes OUT NODES
      One graph of NODES nodes, each after the one before it, each writing a range of its own, then a kernel on
      another stream that writes the first node's range (one race).
  growth_traces.py inplace OUT NODES
      One graph of NODES chained nodes that each read and write one buffer (a captured loop of in-place
      updates), then a kernel on another stream that writes it (one race; no two nodes race).
  growth_traces.py forkjoin OUT STEPS
      A stream capture of STEPS steps of two streams joined by events both ways, every kernel reading one buffer
      that the main stream's kernels update, replayed 5 times, then a kernel on a third stream that writes it.
  growth_traces.py nesting OUT DEPTH FAN
      Child graphs nested DEPTH levels deep, FAN child nodes per level (each after the one before it), the top
      one instantiated and launched: FAN**DEPTH leaves (which touch no memory).
  growth_traces.py lines OUT OPS
      OPS kernels on one stream, each at a source line of its own and writing what the one before it wrote,
      then a kernel on another stream that writes it too (one race).

Deterministic: the same arguments write the same file.
"""
import random
import sys

BASE = 0x7F0000000000
BLOCK = 1 << 16


def streams_trace(out, declared, active, ops, threads):
    rng = random.Random(1)
    early = declared if threads == 1 else declared // 2
    step = max(1, early // active)
    actives = [1 + i * step for i in range(min(active, early))]
    lines = ['{"type":"streamtrace","version":1,"comment":"growth: declared streams"}',
             '{"type":"stream","id":0,"stream_kind":"legacy_default"}']

    def stream(i):
        kind = "blocking" if i % 4 == 0 else "non_blocking"
        lines.append(f'{{"type":"stream","id":{i},"stream_kind":"{kind}","thread":{1 + i % threads}}}')

    for i in range(1, early + 1):
        stream(i)
    for e in range(64):
        lines.append(f'{{"type":"event","id":{e}}}')
    for b in range(1000):
        lines.append(f'{{"type":"alloc","id":{b},"addr":"{hex(BASE + b * BLOCK)}","size":4096}}')
    late = list(range(early + 1, declared + 1))
    late_every = max(1, ops // (len(late) + 1))
    for n in range(ops):
        if late and n % late_every == 0:
            stream(late.pop(0))
        s = rng.choice(actives)
        thread = 1 + n % threads
        roll = rng.randrange(1000)
        if roll < 700:
            a, b, w = (rng.randrange(1000) for _ in range(3))
            lines.append(f'{{"type":"kernel","stream":{s},"thread":{thread},"name":"k{roll % 8}",'
                         f'"reads":[["{hex(BASE + a * BLOCK)}",4096],["{hex(BASE + b * BLOCK)}",4096]],'
                         f'"writes":[["{hex(BASE + w * BLOCK)}",4096]]}}')
        elif roll < 720:
            w = rng.randrange(1000)
            lines.append(f'{{"type":"kernel","stream":0,"thread":{thread},"name":"legacy",'
                         f'"writes":[["{hex(BASE + w * BLOCK)}",4096]]}}')
        elif roll < 840:
            lines.append(f'{{"type":"record","stream":{s},"thread":{thread},"event":{rng.randrange(64)}}}')
        elif roll < 960:
            lines.append(f'{{"type":"wait","stream":{s},"thread":{thread},"event":{rng.randrange(64)}}}')
        elif roll < 990:
            lines.append(f'{{"type":"sync","thread":{thread},"stream":{s}}}')
        else:
            lines.append(f'{{"type":"sync","thread":{thread},"device":0}}')
    for i in late:
        stream(i)
    out.write("\n".join(lines) + "\n")


def active_trace(out, streams, shared):
    lines = ['{"type":"streamtrace","version":1,"comment":"growth: active streams"}']
    for i in range(1, streams + 1):
        lines.append(f'{{"type":"stream","id":{i},"stream_kind":"non_blocking"}}')
    for b in range(streams + 1):
        lines.append(f'{{"type":"alloc","id":{b},"addr":"{hex(BASE + b * BLOCK)}","size":4096}}')
    for i in range(1, streams + 1):
        own = f'["{hex(BASE + i * BLOCK)}",4096]'
        reads = f'["{hex(BASE)}",4096],{own}' if shared else own
        lines.append(f'{{"type":"kernel","stream":{i},"name":"k{i % 8}","reads":[{reads}],"writes":[{own}]}}')
    lines.append('{"type":"sync","device":0}')
    out.write("\n".join(lines) + "\n")


def ranges_trace(out, ranges):
    size = ranges * 512
    out.write('{"type":"streamtrace","version":1,"comment":"growth: one kernel, many ranges"}\n')
    out.write('{"type":"stream","id":1,"stream_kind":"non_blocking"}\n')
    out.write('{"type":"stream","id":2,"stream_kind":"non_blocking"}\n')
    out.write(f'{{"type":"alloc","id":0,"addr":"{hex(BASE)}","size":{size}}}\n')
    reads = ",".join(f'["{hex(BASE + i * 512)}",256]' for i in range(ranges))
    writes = ",".join(f'["{hex(BASE + i * 512)}",256]' for i in range(0, ranges, 10))
    out.write(f'{{"type":"kernel","stream":1,"name":"gather","reads":[{reads}],"writes":[{writes}]}}\n')
    out.write(f'{{"type":"kernel","stream":2,"name":"clear","writes":[["{hex(BASE)}",{size}]]}}\n')


def nodes_trace(out, nodes):
    out.write('{"type":"streamtrace","version":1,"comment":"growth: graph nodes"}\n')
    out.write('{"type":"stream","id":1,"stream_kind":"non_blocking"}\n')
    out.write('{"type":"stream","id":2,"stream_kind":"non_blocking"}\n')
    body = ",".join(f'{{"writes":[[{4096 + i * 64},64]]' + (f',"deps":[{i - 1}]}}' if i else '}')
                    for i in range(nodes))
    out.write(f'{{"type":"graph","stream":1,"name":"chain","nodes":[{body}]}}\n')
    out.write('{"type":"kernel","stream":2,"name":"late","writes":[[4096,64]]}\n')


def inplace_trace(out, nodes):
    """A graph of `nodes` chained nodes that each read and write one buffer (a captured loop of in-place
    updates), then a kernel of another stream writing it: every pair of nodes overlaps, none races."""
    out.write('{"type":"streamtrace","version":1,"comment":"growth: a chain of in-place updates"}\n')
    out.write('{"type":"stream","id":1,"stream_kind":"non_blocking"}\n')
    out.write('{"type":"stream","id":2,"stream_kind":"non_blocking"}\n')
    body = ",".join('{"reads":[[4096,64]],"writes":[[4096,64]]' + (f',"deps":[{i - 1}]}}' if i else '}')
                    for i in range(nodes))
    out.write(f'{{"type":"graph","stream":1,"name":"chain","nodes":[{body}]}}\n')
    out.write('{"type":"kernel","stream":2,"name":"late","writes":[[4096,64]]}\n')


def forkjoin_trace(out, steps):
    """A stream capture of `steps` steps of two streams joined by events both ways, every kernel reading one
    buffer that the main stream's kernels update, replayed 5 times, then a kernel of a third stream writing it."""
    out.write('{"type":"streamtrace","version":1,"comment":"growth: a captured fork-join"}\n')
    for stream in (1, 2, 3):
        out.write(f'{{"type":"stream","id":{stream},"stream_kind":"non_blocking"}}\n')
    out.write('{"type":"event","id":1}\n{"type":"event","id":2}\n')
    out.write('{"type":"capture_begin","stream":1}\n')
    for _ in range(steps):
        out.write('{"type":"kernel","stream":1,"name":"main","reads":[[4096,64]],"writes":[[4096,64]]}\n')
        out.write('{"type":"record","event":1,"stream":1}\n{"type":"wait","stream":2,"event":1}\n')
        out.write('{"type":"kernel","stream":2,"name":"side","reads":[[4096,64]],"writes":[[1048576,64]]}\n')
        out.write('{"type":"record","event":2,"stream":2}\n{"type":"wait","stream":1,"event":2}\n')
    out.write('{"type":"capture_end","stream":1,"graph":7}\n')
    out.write('{"type":"graph_instantiate","graph":7,"exec":1}\n')
    out.write('{"type":"graph_launch","exec":1,"stream":1}\n' * 5)
    out.write('{"type":"kernel","stream":3,"name":"late","writes":[[4096,64]]}\n')


def nesting_trace(out, depth, fan):
    out.write('{"type":"streamtrace","version":1,"comment":"growth: nested child graphs"}\n')
    out.write('{"type":"stream","id":1,"stream_kind":"non_blocking"}\n')
    out.write('{"type":"graph_create","graph":0}\n')
    # The leaf touches no memory: every expansion of it would share its range, and nodes sharing one range are
    # compared pairwise (a cost of the node race check, not of the nesting).
    out.write('{"type":"graph_node","graph":0,"node":1,"name":"leaf"}\n')
    for level in range(1, depth + 1):
        out.write(f'{{"type":"graph_create","graph":{level}}}\n')
        for node in range(fan):
            deps = f',"deps":[{node - 1}]' if node else ""
            out.write(f'{{"type":"graph_node","graph":{level},"node":{node},"node_kind":"child",'
                      f'"child":{level - 1}{deps}}}\n')
    out.write(f'{{"type":"graph_instantiate","graph":{depth},"exec":1}}\n')
    out.write('{"type":"graph_launch","exec":1,"stream":1}\n')


def lines_trace(out, ops):
    out.write('{"type":"streamtrace","version":1,"comment":"growth: a source line per operation"}\n')
    out.write('{"type":"stream","id":1}\n')
    out.write('{"type":"stream","id":2,"stream_kind":"non_blocking"}\n')
    for i in range(ops):
        out.write(f'{{"type":"kernel","stream":1,"name":"k","src":"gen.py:{i + 1}","writes":[[4096,64]]}}\n')
    out.write('{"type":"kernel","stream":2,"name":"late","src":"late.py:1","writes":[[4096,64]]}\n')


def main():
    args = sys.argv[1:]
    threads = 1
    shared = "--shared" in args
    if shared:
        args.remove("--shared")
    if "--threads" in args:
        i = args.index("--threads")
        threads = int(args[i + 1])
        del args[i:i + 2]
    kind, path = args[0], args[1]
    with open(path, "w") as out:
        if kind == "streams":
            streams_trace(out, int(args[2]), int(args[3]), int(args[4]), threads)
        elif kind == "active":
            active_trace(out, int(args[2]), shared)
        elif kind == "ranges":
            ranges_trace(out, int(args[2]))
        elif kind == "nodes":
            nodes_trace(out, int(args[2]))
        elif kind == "inplace":
            inplace_trace(out, int(args[2]))
        elif kind == "forkjoin":
            forkjoin_trace(out, int(args[2]))
        elif kind == "nesting":
            nesting_trace(out, int(args[2]), int(args[3]))
        elif kind == "lines":
            lines_trace(out, int(args[2]))
        else:
            sys.exit(__doc__)


if __name__ == "__main__":
    main()
