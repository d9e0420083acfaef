#!/usr/bin/env python3
"""Writes the trace of the graph-replay benchmark (benches/graph_replays.sh): a decode loop's shape.

  graph_replays.py OUT NODES REPLAYS [--pointers]

One graph of NODES kernel nodes in a chain (each reads the shared weights block and the previous node's
activation, and writes its own activation), built with the graph API, instantiated once and launched REPLAYS
times on stream 1. After every launch stream 2 waits on an event recorded after it and reads the last
activation (ordered), and stream 1 waits for that read before the next launch overwrites it; every 100th launch
stream 2 also reads without waiting (a race, counted at each of those launches). With --pointers the nodes carry pointer arguments (tier T1) instead of exact ranges.

Deterministic: the same arguments write the same file.
"""
import sys

BASE = 0x7F0000000000
ACT = 1 << 16


def main():
    out, nodes, replays = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    pointers = "--pointers" in sys.argv[4:]
    weights = BASE
    act = lambda i: BASE + (1 << 30) + i * ACT
    lines = ['{"type":"streamtrace","version":1,"comment":"graph replays"}',
             '{"type":"stream","id":1,"stream_kind":"non_blocking"}',
             '{"type":"stream","id":2,"stream_kind":"non_blocking"}',
             '{"type":"event","id":1}',
             '{"type":"event","id":2}',
             f'{{"type":"alloc","id":1,"addr":"{weights:#x}","size":{1 << 30},"label":"weights"}}']
    for i in range(nodes + 1):
        lines.append(f'{{"type":"alloc","id":{i + 2},"addr":"{act(i):#x}","size":{ACT}}}')
    lines.append('{"type":"graph_create","graph":1}')
    for i in range(nodes):
        deps = f"[{i}]" if i else "[]"
        if pointers:
            body = f'"pointers":[["{weights:#x}","r"],["{act(i):#x}","r"],["{act(i + 1):#x}","w"]]'
        else:
            body = f'"reads":[["{weights + i * 4096:#x}",4096],["{act(i):#x}",{ACT}]],"writes":[["{act(i + 1):#x}",{ACT}]]'
        lines.append(f'{{"type":"graph_node","graph":1,"node":{i + 1},"name":"layer_{i % 32}","deps":{deps},{body},"src":"model.py:{100 + i % 32}"}}')
    lines.append('{"type":"graph_instantiate","graph":1,"exec":1}')
    last = f'[["{act(nodes):#x}",{ACT}]]'
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
        for r in range(replays):
            f.write('{"type":"graph_launch","exec":1,"stream":1,"src":"decode.py:40"}\n')
            if r % 100 == 99:
                f.write(f'{{"type":"kernel","stream":2,"name":"peek","reads":{last},"src":"decode.py:44"}}\n')
            f.write('{"type":"record","event":1,"stream":1}\n{"type":"wait","stream":2,"event":1}\n')
            f.write(f'{{"type":"kernel","stream":2,"name":"sample","reads":{last},"src":"decode.py:42"}}\n')
            f.write('{"type":"record","event":2,"stream":2}\n{"type":"wait","stream":1,"event":2}\n')


if __name__ == "__main__":
    main()
