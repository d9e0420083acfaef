"""Mixed precision as the AMP recipe has it: autocast to float16, `torch.amp.GradScaler`, and AdamW in its fused
form (one model) and its foreach form (another), three steps. The scaler unscales gradients and checks them for
inf/NaN on device (`_amp_foreach_non_finite_check_and_unscale_`), the fused optimizer takes the scale and the
found-inf flag as tensors, and `update` adjusts the scale on device; all on the default stream.

Ground truth: clean.
"""
import torch

from lib_support import mlp

torch.manual_seed(0)
fused_model = mlp(64, 128, 16)
foreach_model = mlp(64, 128, 16)
opt_fused = torch.optim.AdamW(fused_model.parameters(), lr=1e-3, fused=True)
opt_foreach = torch.optim.AdamW(foreach_model.parameters(), lr=1e-3, foreach=True)
scaler = torch.amp.GradScaler("cuda")
for step in range(3):
    x = torch.randn(32, 64, device="cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        loss = fused_model(x).float().pow(2).mean() + foreach_model(x).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt_fused)
    scaler.step(opt_foreach)
    scaler.update()
    opt_fused.zero_grad(set_to_none=True)
    opt_foreach.zero_grad(set_to_none=True)
torch.cuda.synchronize()
print(f"loss {loss.item():.4f} scale {scaler.get_scale()}")
print("GROUND_TRUTH clean: autocast, GradScaler and fused/foreach AdamW all on the default stream")
