"""What both PyTorch observers (the native one, torch_observer.cpp, and the Python dispatch mode of
sitecustomize.py) must record of real ops, on CPU tensors standing in for CUDA ones: the test cases, shared by
bootstrap_test.py (the Python mode) and native_observer_test.py (the native observer), each of which starts its
observer so that its records (JSON texts) land in the class's `records` list. The two see ops at different levels (the
native observer the top-level op, `batch_norm`; the mode the one under autograd, `native_batch_norm`), so a case
finds its op among several names.
"""
import json

try:
    import torch
except ImportError:
    torch = None


def first_bytes(items):
    """The first bytes of the extents in a record's reads or writes."""
    return {item[0] for item in items}


class RealOpCases:
    """Mixed into a unittest.TestCase whose observer writes its records into `records`."""

    records = []

    def ends_of(self, run):
        """The op_end records of the ops run() makes, by op name."""
        del self.records[:]
        run()
        ends = [json.loads(text) for text in self.records if '"op_end"' in text]
        return {end["name"]: end for end in ends}

    def end_of(self, run, *names):
        """The one op_end of run() named one of `names` (a name ending in '.' stands for any overload)."""
        ends = self.ends_of(run)
        found = [end for name, end in ends.items()
                 if name in names or any(n.endswith(".") and name.startswith(n) for n in names)]
        self.assertEqual(len(found), 1, "%s among %s" % (names, sorted(ends)))
        return found[0]

    def test_a_factory_like_self_reads_none_of_its_bytes(self):
        x = torch.ones(4, 4)
        ends = self.ends_of(lambda: (torch.ones_like(x), x.new_zeros(2), torch.empty_like(x)))
        for name in ("ones_like.default", "new_zeros.default", "empty_like.default"):
            self.assertEqual(ends[name]["reads"], [], name)
            self.assertEqual(len(ends[name]["writes"]), 1, name)

    def test_a_like_factorys_other_tensors_are_read(self):
        x, high = torch.ones(4), torch.tensor(10)
        end = self.end_of(lambda: torch.randint_like(x, high), "randint_like.")
        self.assertEqual(first_bytes(end["reads"]), {high.data_ptr()}, "high is read, x is not")

    def test_a_backward_kernel_reads_no_byte_of_what_it_takes_a_shape_from(self):
        logits = torch.randn(8, 5, requires_grad=True)
        target = torch.randint(0, 5, (8,))
        log_probs = torch.log_softmax(logits, 1)
        loss = torch.nn.functional.nll_loss(log_probs, target)
        end = self.end_of(loss.backward, "nll_loss_backward.default")
        self.assertNotIn(log_probs.data_ptr(), first_bytes(end["reads"]), "self: its shape alone")
        self.assertIn(target.data_ptr(), first_bytes(end["reads"]), "the target is read")

    def test_other_ops_read_their_arguments(self):
        x, y = torch.ones(4), torch.ones(4)
        end = self.end_of(lambda: torch.add(x, y), "add.Tensor")
        self.assertEqual(first_bytes(end["reads"]), {x.data_ptr(), y.data_ptr()})

    def test_batch_norm_writes_its_running_stats_in_training_and_reads_them_in_eval(self):
        norm, x = torch.nn.BatchNorm1d(4), torch.ones(8, 4)
        stats = {norm.running_mean.data_ptr(), norm.running_var.data_ptr()}
        names = ("batch_norm.default", "native_batch_norm.default")
        train = self.end_of(lambda: norm(x), *names)
        norm.eval()
        evaluation = self.end_of(lambda: norm(x), *names)
        self.assertLessEqual(stats, first_bytes(train["writes"]), "written in training")
        self.assertFalse(stats & first_bytes(train["reads"]))
        self.assertLessEqual(stats, first_bytes(evaluation["reads"]), "read in eval")
        self.assertFalse(stats & first_bytes(evaluation["writes"]))

    def test_a_fused_optimizer_writes_the_gradients_only_when_it_unscales_them(self):
        for optimizer_class, name in ((torch.optim.Adam, "_fused_adam_."), (torch.optim.AdamW, "_fused_adamw_."),
                                      (torch.optim.SGD, "_fused_sgd_.")):
            parameter = torch.nn.Parameter(torch.ones(16))
            parameter.grad = torch.ones(16)
            options = {"momentum": 0.9} if optimizer_class is torch.optim.SGD else {}
            optimizer = optimizer_class([parameter], lr=0.01, fused=True, **options)
            grad = parameter.grad.data_ptr()
            end = self.end_of(optimizer.step, name)
            self.assertIn(grad, first_bytes(end["reads"]), "%s reads the gradient" % name)
            self.assertNotIn(grad, first_bytes(end["writes"]), "%s without grad_scale" % name)
            # With a scale the step unscales the gradients in place (found_inf left out: the scale decides).
            optimizer.grad_scale = torch.tensor(2.0)
            end = self.end_of(optimizer.step, name)
            self.assertIn(grad, first_bytes(end["writes"]), "%s with grad_scale" % name)
            # As GradScaler hands them over.
            optimizer.found_inf = torch.zeros(())
            end = self.end_of(optimizer.step, name)
            self.assertIn(grad, first_bytes(end["writes"]), "%s with grad_scale and found_inf" % name)
