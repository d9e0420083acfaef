"""An autograd saved-tensor hook that keeps a copy of each tensor mul saves for backward, made on a side stream
once that stream waits for the compute stream (as activation-offloading libraries do); backward waits for the
side stream before it reads the copies. The hook runs inside mul (autograd saves mul's inputs while mul runs),
so each clone is an op nested in mul: its kernel reads the saved tensor and writes the copy, never mul's
output.

Ground truth: clean. (Given mul's extents, the clone's kernel on the side stream looked like a write of y that
the default stream's mul kernel and y.sum() never waited for: a false race, issue 24.)
"""
import torch

compute = torch.cuda.current_stream()
side = torch.cuda.Stream()


def pack(saved):
    side.wait_stream(compute)  # the saved tensor was written on the compute stream
    with torch.cuda.stream(side):
        return saved.clone()


def unpack(copy):
    compute.wait_stream(side)  # backward reads the copy on the compute stream
    copy.record_stream(compute)
    return copy


x = torch.randn(1 << 20, device="cuda", requires_grad=True)
w = torch.randn(1 << 20, device="cuda", requires_grad=True)
with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
    y = x * w
total = y.sum()
total.backward()
torch.cuda.synchronize()
print("GROUND_TRUTH clean: the hook's clones (side stream) wait for x and w; backward waits for the clones")
