"""The saved-tensor hook of saved_hook_clone_after_wait.py without its side stream's wait: the side stream clones
x and w (inside mul, which saves them for backward) while the default stream's randn kernels that wrote them may
still run.

Ground truth: race: the clone kernels (side stream, the hook's line) read x and w, which normal_ (default stream)
wrote with nothing ordering them: read-after-write, once for each tensor. Nothing else: the clones write new
tensors, not mul's output y.
"""
import torch

compute = torch.cuda.current_stream()
side = torch.cuda.Stream()


def pack(saved):
    with torch.cuda.stream(side):  # no side.wait_stream(compute): the race
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
print("GROUND_TRUTH race: clone (side, in the saved-tensor hook) reads x and w while normal_ (default stream) may still write them")
