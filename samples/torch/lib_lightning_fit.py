"""A PyTorch Lightning `Trainer.fit` on one GPU: a LightningModule MLP, a DataLoader with `pin_memory=True`
(Lightning moves each batch to the GPU itself), AdamW, eight steps, no logger, checkpoint or progress bar.

Ground truth: clean (Lightning runs the loop, the batch transfer and the optimizer on the default stream).
"""
import os

import torch
import lightning.pytorch as pl

torch.manual_seed(0)


class Regression(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))

    def training_step(self, batch, batch_index):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


data = torch.utils.data.TensorDataset(torch.randn(256, 32), torch.randn(256, 1))
loader = torch.utils.data.DataLoader(data, batch_size=32, pin_memory=True)
trainer = pl.Trainer(accelerator="gpu", devices=1, max_steps=8, logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False,
                     default_root_dir=os.environ.get("TMPDIR", "/tmp"))
trainer.fit(Regression(), loader)
torch.cuda.synchronize()
print("steps", trainer.global_step)
print("GROUND_TRUTH clean: Lightning's loop, batch transfer and optimizer all on the default stream")
