"""Capture check for forked processes: the parent forks before touching CUDA, then parent and child each run
a two-stream race of their own. Each must get its own trace file with its own race."""
import os

pid = os.fork()
import torch  # noqa: E402  (after the fork: each process initializes CUDA itself)

s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
buf = torch.empty(1 << 20, device="cuda")
torch.cuda.synchronize()
with torch.cuda.stream(s1):
    buf.fill_(1.0)
with torch.cuda.stream(s2):
    buf.mul_(2.0)
torch.cuda.synchronize()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
print("parent and child done")
