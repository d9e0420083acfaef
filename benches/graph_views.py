#!/usr/bin/env python3
"""Writes a trace for benches/graph_replays.sh: a graph whose branches write interleaved strided views of one block.

  graph_views.py OUT BRANCHES NODES REPLAYS

A capture on stream 1 forks BRANCHES streams (an event each way) and joins them back; each branch issues NODES
kernels, and node i of them all writes every (BRANCHES * NODES)-th float of one block from float i: every node's
extent overlaps every other's and no two share a byte, so each pair of nodes on two branches is a question for
the strided-view overlap and none is a race. The graph is launched REPLAYS times on stream 1.

Deterministic: the same arguments write the same file.
"""
import sys


def main():
    out, branches, nodes, replays = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    period = branches * nodes
    count = 64
    base = 0x100000
    lines = ['{"type":"streamtrace","version":1,"comment":"graph views"}']
    lines += ['{"type":"stream","id":%d,"stream_kind":"non_blocking"}' % s for s in range(1, branches + 2)]
    lines += ['{"type":"event","id":%d}' % e for e in range(1, branches + 2)]
    lines.append('{"type":"alloc","id":1,"addr":"%#x","size":%d,"label":"X"}' % (base, period * count * 4))
    lines.append('{"type":"capture_begin","stream":1,"src":"app.cu:1"}')
    lines.append('{"type":"record","event":1,"stream":1}')
    extent = ((count - 1) * period + 1) * 4
    for b in range(branches):
        lines.append('{"type":"wait","stream":%d,"event":1}' % (b + 2))
        for k in range(nodes):
            start = base + 4 * (b * nodes + k)
            lines.append('{"type":"kernel","stream":%d,"name":"part","writes":[["%#x",%d,4,[[%d,%d]]]],"src":"app.cu:%d"}'
                         % (b + 2, start, extent, count, period, 10 + k))
    for b in range(branches):
        lines.append('{"type":"record","event":%d,"stream":%d}' % (b + 2, b + 2))
        lines.append('{"type":"wait","stream":1,"event":%d}' % (b + 2))
    lines.append('{"type":"capture_end","stream":1,"graph":100}')
    lines.append('{"type":"graph_instantiate","graph":100,"exec":200}')
    lines += ['{"type":"graph_launch","exec":200,"stream":1,"src":"app.cu:99"}'] * replays
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
