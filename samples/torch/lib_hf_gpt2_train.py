"""A Hugging Face `transformers` GPT-2 (a small one built from its config: no download), trained for three
steps under bfloat16 autocast with AdamW, its token batches uploaded from pinned memory on a side copy stream
that the default stream waits for (`wait_stream`, and `record_stream` so that each batch's block outlives its
use), as an input pipeline does.

Variants (the argument):
- (none): as said.
- `no-wait`: the default stream does not wait for the copy stream.

Ground truth: clean; with `no-wait`, race (the upload of the step's tokens on the copy stream || the model's
embedding lookup reading them on the default stream).
"""
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel

variant = sys.argv[1] if len(sys.argv) > 1 else ""
torch.manual_seed(0)
config = GPT2Config(vocab_size=512, n_positions=64, n_embd=64, n_layer=2, n_head=4)
model = GPT2LMHeadModel(config).cuda().train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
copy_stream = torch.cuda.Stream()
host_batches = [torch.randint(0, config.vocab_size, (4, 64)).pin_memory() for _ in range(3)]
for step, host in enumerate(host_batches):
    with torch.cuda.stream(copy_stream):
        tokens = host.to("cuda", non_blocking=True)
    if variant != "no-wait":
        torch.cuda.current_stream().wait_stream(copy_stream)
    tokens.record_stream(torch.cuda.current_stream())
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=tokens, labels=tokens).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
print("loss", round(loss.item(), 4))
if variant == "no-wait":
    print("GROUND_TRUTH race: the tokens' upload (copy stream) || the embedding reading them (default stream)")
else:
    print("GROUND_TRUTH clean: the default stream waits for each upload; everything else runs on it")
# VARIANT: no-wait
