"""Two streams run one hand-written Triton kernel on two halves of a batch, as split-batch and overlap code does:
each launch reads the whole shared input `x` and writes its own half of one output tensor `out` (a view), the
side stream adding into its half (a constexpr switches the load of the output on). The default stream then waits
for the side stream and sums `out`. Each step first writes `x` on the default stream, which the side stream waits
for.

Variants (the argument):
- (none): as said.
- `no-wait`: the default stream sums `out` without waiting for the side stream: the sum reads the side's half
  while the side kernel may still write it.
- `overlap`: the side stream's half starts one element early, so both kernels write `out[n - 1]`.
- `autotune`: as the first, with the kernel under `triton.autotune` (its benchmark launches, on the stream the
  first launch runs on, are synchronized by Triton's benchmark; kept short).

Ground truth: clean (two reads of `x` are no race, and the halves share no byte); with `no-wait`, race (the side
kernel writes out[n:] || out.sum() reads it); with `overlap`, race (both kernels write out[n - 1]); with
`autotune`, clean.
"""
import sys

import torch
import triton
import triton.language as tl
import triton.testing


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, factor, ACCUMULATE: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    value = tl.load(x_ptr + offsets, mask=mask) * factor
    if ACCUMULATE:
        value += tl.load(out_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, value, mask=mask)


variant = sys.argv[1] if len(sys.argv) > 1 else ""
kernel, block = scale_kernel, {"BLOCK": 1024}
if variant == "autotune":
    # Triton's benchmark of each config, kept short (its launches are recorded like any other).
    short_bench = lambda call, quantiles: triton.testing.do_bench(call, warmup=1, rep=1, quantiles=quantiles)
    kernel = triton.autotune(configs=[triton.Config({"BLOCK": 512}), triton.Config({"BLOCK": 1024})], key=["n"],
                             do_bench=short_bench)(scale_kernel)
    block = {}  # chosen by the autotuner
grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)

n = 1 << 20
x = torch.randn(n, device="cuda")
out = torch.zeros(2 * n, device="cuda")
side = torch.cuda.Stream()
side_half = out[n - 1:2 * n - 1] if variant == "overlap" else out[n:]
totals = []
for step in range(3):
    x.add_(1.0)  # written on the default stream, read by both kernels below
    side.wait_stream(torch.cuda.current_stream())
    kernel[grid](x, out[:n], n, 2.0, ACCUMULATE=False, **block)  # default stream: the first half
    with torch.cuda.stream(side):
        kernel[grid](x, side_half, n, 3.0, ACCUMULATE=True, **block)  # side stream: the second half, added into
    if variant != "no-wait":
        torch.cuda.current_stream().wait_stream(side)
    totals.append(out.sum())
    # The next step's x.add_ must not overwrite x while the side kernel still reads it.
    torch.cuda.current_stream().wait_stream(side)
torch.cuda.synchronize()
print("totals", [round(t.item(), 1) for t in totals])
if variant in ("", "autotune"):
    print("GROUND_TRUTH clean: the kernels read x together and write halves of out that share no byte")
elif variant == "no-wait":
    print("GROUND_TRUTH race: scale_kernel (side) writes out[n:] || out.sum() (default stream) reads it")
else:
    print("GROUND_TRUTH race: scale_kernel (default) and scale_kernel (side) both write out[n - 1]")
# VARIANT: no-wait
# VARIANT: overlap
# VARIANT: autotune
