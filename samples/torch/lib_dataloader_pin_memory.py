"""A DataLoader with two worker processes and `pin_memory=True`: its pin-memory thread copies each batch the
workers send into pinned memory and hands it to the main thread through a queue; the main thread uploads it
with `.to("cuda", non_blocking=True)` and trains on the same (default) stream. The caching host allocator records
an event after each upload and reuses a pinned block (on the pin-memory thread) only after that event completed.

Ground truth: clean. With the argument `side-stream-no-wait` the batch is consumed on a side stream that never
waits for the default stream's upload: race (the side stream's linear reads the batch the upload writes).
"""
import sys

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

side_no_wait = "side-stream-no-wait" in sys.argv[1:]


class Squares(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.full((256,), float(i) / 64), torch.tensor(i % 8)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Linear(256, 8).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    loader = DataLoader(Squares(), batch_size=16, num_workers=2, pin_memory=True)
    for x, y in loader:
        x = x.to("cuda", non_blocking=True)
        y = y.to("cuda", non_blocking=True)
        if side_no_wait:
            with torch.cuda.stream(side):  # no side.wait_stream(torch.cuda.current_stream())
                out = model(x)
                loss = nn.functional.cross_entropy(out, y)
            side.synchronize()
        else:
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
    torch.cuda.synchronize()
    print(f"loss {loss.item():.4f}")
    if side_no_wait:
        print("GROUND_TRUTH race: memcpy HtoD of the batch (default stream) || linear and cross_entropy (side stream)")
    else:
        print("GROUND_TRUTH clean: pinned batches uploaded and used on the default stream")
# VARIANT: side-stream-no-wait
