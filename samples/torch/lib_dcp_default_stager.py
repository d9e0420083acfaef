"""`dcp.async_save` with `DefaultStager` staging in the background, as the async-checkpoint recipe shows for
PyTorch 2.9+: the stager's thread copies every parameter to pinned CPU memory with `non_blocking=True` on the
stager's own stream and synchronizes that stream; the loop waits for `staging_completion` before the next
`optimizer.step()` changes the parameters, and for `upload_completion` before the next save. Each save gets a
stager of its own: in torch 2.11 a DefaultStager stages once (its `_stage` ends with
`self._state_dict_stager.close()`, which clears the deep-copy dispatch table, and the next `stage` fails with
`KeyError: <class 'type'>` in `_state_dict_stager.py`).

Ground truth: race, at every save. The staging stream never waits for the default stream, so the stager's
device-to-host copies of the parameters are unordered with the `optimizer.step()` that wrote them just before
the save (nothing on the host waits for that step; DefaultStager's `_stage` only synchronizes its own stream,
after the copies). The other direction is ordered: the host waits for `staging_completion` before the next
step writes the parameters again.
"""
import os
import tempfile
import warnings

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

from lib_support import mlp

warnings.filterwarnings("ignore")
torch.manual_seed(0)
model = mlp(64, 128, 16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
root = tempfile.mkdtemp()
response = None
stagers = []
for step in range(3):
    x = torch.randn(32, 64, device="cuda")
    loss = model(x).pow(2).mean()
    loss.backward()
    if response is not None:
        response.staging_completion.result()  # the staged copy must be complete before the step changes the weights
    opt.step()
    opt.zero_grad()
    if response is not None:
        response.upload_completion.result()
    # pinned memory, no shared memory, staging in a background thread, non-blocking copies
    stagers.append(DefaultStager(StagingOptions(True, False, True, True)))
    response = dcp.async_save(
        {"model": model.state_dict()}, checkpoint_id=os.path.join(root, f"step{step}"), async_stager=stagers[-1]
    )
response.staging_completion.result()
response.upload_completion.result()
for stager in stagers:
    stager.close()
torch.cuda.synchronize()
print(f"loss {loss.item():.4f} saved {sorted(os.listdir(root))}")
print("GROUND_TRUTH race: optimizer.step (default stream) writes the parameters || the stager's memcpy DtoH (staging stream) reads them")
