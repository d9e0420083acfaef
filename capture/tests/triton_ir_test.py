"""How the PyTorch bootstrap reads what a compiled Triton kernel loads and stores from its Triton IR
(capture/python/streamtrace_triton_ir.py): on IR text as Triton prints it (no torch, no Triton), and, where torch
and Triton are installed, on real kernels compiled for an sm_90 target (no GPU needed) against what each kernel
does and against PyTorch's own analysis. Run by triton_ir.rs beside this file (`cargo test -p streamtrace-capture
--test triton_ir`), or alone: `python3 capture/tests/triton_ir_test.py`.
"""
import unittest

from bootstrap_modules import load

triton_ir = load("streamtrace_triton_ir")


# Triton IR of real kernels as Triton 3.9 prints it (trailing #loc definitions left out): a matmul whose
# pointers are carried through an scf.for, and a pointer walked by an scf.while.
MATMUL_TTIR = """module {
  tt.func public @mm(%a: !tt.ptr<f32> loc("a"(#loc)), %b: !tt.ptr<f32> loc("b"(#loc)), %c: !tt.ptr<f32> loc("c"(#loc)), %K: i32 loc("K"(#loc)), %stride_k: i32 loc("stride_k"(#loc))) attributes {noinline = false} {
    %c0_i32 = arith.constant 0 : i32 loc(#loc1)
    %cst_0 = arith.constant dense<0.000000e+00> : tensor<16x16xf32> loc(#loc3)
    %c16_i32 = arith.constant 16 : i32 loc(#loc3)
    %rows = tt.make_range {end = 16 : i32, start = 0 : i32} : tensor<16xi32> loc(#loc25)
    %0 = tt.expand_dims %rows {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32> loc(#loc5)
    %3 = tt.splat %a : !tt.ptr<f32> -> tensor<16x1x!tt.ptr<f32>> loc(#loc6)
    %4 = tt.addptr %3, %0 : tensor<16x1x!tt.ptr<f32>>, tensor<16x1xi32> loc(#loc6)
    %8 = tt.broadcast %4 : tensor<16x1x!tt.ptr<f32>> -> tensor<16x16x!tt.ptr<f32>> loc(#loc6)
    %9 = tt.splat %b : !tt.ptr<f32> -> tensor<16x1x!tt.ptr<f32>> loc(#loc8)
    %10 = tt.addptr %9, %0 : tensor<16x1x!tt.ptr<f32>>, tensor<16x1xi32> loc(#loc8)
    %12 = tt.broadcast %10 : tensor<16x1x!tt.ptr<f32>> -> tensor<16x16x!tt.ptr<f32>> loc(#loc8)
    %total:3 = scf.for %_ = %c0_i32 to %K step %c16_i32 iter_args(%a_ptrs = %8, %b_ptrs = %12, %total_8 = %cst_0) -> (tensor<16x16x!tt.ptr<f32>>, tensor<16x16x!tt.ptr<f32>>, tensor<16x16xf32>)  : i32 {
      %total_9 = tt.load %a_ptrs : tensor<16x16x!tt.ptr<f32>> loc(#loc27)
      %total_10 = tt.load %b_ptrs : tensor<16x16x!tt.ptr<f32>> loc(#loc28)
      %total_11 = tt.dot %total_9, %total_10, %total_8, inputPrecision = tf32 : tensor<16x16xf32> * tensor<16x16xf32> -> tensor<16x16xf32> loc(#loc29)
      %a_ptrs_12 = tt.addptr %a_ptrs, %c16_i32 : tensor<16x16x!tt.ptr<f32>>, i32 loc(#loc30)
      %b_ptrs_15 = tt.addptr %b_ptrs, %c16_i32 : tensor<16x16x!tt.ptr<f32>>, i32 loc(#loc32)
      scf.yield %a_ptrs_12, %b_ptrs_15, %total_11 : tensor<16x16x!tt.ptr<f32>>, tensor<16x16x!tt.ptr<f32>>, tensor<16x16xf32> loc(#loc1)
    } loc(#loc37)
    %cp_2 = tt.splat %c : !tt.ptr<f32> -> tensor<16x1x!tt.ptr<f32>> loc(#loc33)
    %cp_4 = tt.broadcast %cp_2 : tensor<16x1x!tt.ptr<f32>> -> tensor<16x16x!tt.ptr<f32>> loc(#loc33)
    tt.store %cp_4, %total#2 : tensor<16x16x!tt.ptr<f32>> loc(#loc18)
    tt.print " total %d: " {hex = false, isSigned = array<i32: 0>} : %K : i32 loc(#loc18)
    tt.return loc(#loc)
  } loc(#loc)
} loc(#loc)
"""

WHILE_TTIR = """module {
  tt.func public @while_walk(%x: !tt.ptr<f32> loc("x"(#loc)), %out: !tt.ptr<f32> loc("out"(#loc)), %n: i32 loc("n"(#loc))) attributes {noinline = false} {
    %c1_i32 = arith.constant 1 : i32 loc(#loc1)
    %c16_i32 = arith.constant 16 : i32 loc(#loc1)
    %i = arith.constant 0 : i32 loc(#loc15)
    %offsets = tt.make_range {end = 16 : i32, start = 0 : i32} : tensor<16xi32> loc(#loc16)
    %i_0:2 = scf.while (%ptr = %x, %i_1 = %i) : (!tt.ptr<f32>, i32) -> (!tt.ptr<f32>, i32) {
      %5 = arith.cmpi slt, %i_1, %n : i32 loc(#loc5)
      scf.condition(%5) %ptr, %i_1 : !tt.ptr<f32>, i32 loc(#loc5)
    } do {
    ^bb0(%ptr: !tt.ptr<f32> loc("ptr"(#loc12)), %i_1: i32 loc("i"(#loc15))):
      %ptr_2 = tt.addptr %ptr, %c16_i32 : !tt.ptr<f32>, i32 loc(#loc18)
      %i_3 = arith.addi %i_1, %c1_i32 : i32 loc(#loc19)
      scf.yield %ptr_2, %i_3 : !tt.ptr<f32>, i32 loc(#loc4)
    } loc(#loc20)
    %0 = tt.splat %out : !tt.ptr<f32> -> tensor<16x!tt.ptr<f32>> loc(#loc8)
    %1 = tt.addptr %0, %offsets : tensor<16x!tt.ptr<f32>>, tensor<16xi32> loc(#loc8)
    %2 = tt.splat %i_0#0 : !tt.ptr<f32> -> tensor<16x!tt.ptr<f32>> loc(#loc9)
    %3 = tt.addptr %2, %offsets : tensor<16x!tt.ptr<f32>>, tensor<16xi32> loc(#loc9)
    %4 = tt.load %3 : tensor<16x!tt.ptr<f32>> loc(#loc10)
    tt.store %1, %4 : tensor<16x!tt.ptr<f32>> loc(#loc11)
    tt.return loc(#loc)
  } loc(#loc)
} loc(#loc)
"""


def kernel_ttir(body, arguments='%x: !tt.ptr<f32> loc("x"(#loc)), %y: !tt.ptr<f32> loc("y"(#loc))'):
    """A kernel's Triton IR with this body (one op a line) and these arguments."""
    return 'module {\n  tt.func public @k(%s) attributes {noinline = false} {\n%s\n    tt.return loc(#loc)\n' \
           '  } loc(#loc)\n} loc(#loc)\n' % (arguments, "\n".join("    " + line for line in body))


class TritonIRText(unittest.TestCase):
    """ttir_accesses: what a compiled kernel's Triton IR says it loads from and stores to."""

    def test_pointers_carried_through_a_loop_by_their_place(self):
        # The accumulator (the loop's third value) is stored through c; a and b are only loaded through.
        self.assertEqual(triton_ir.ttir_accesses(MATMUL_TTIR, ["a", "b", "c", "K", "stride_k"]), ({"a", "b"}, {"c"}))

    def test_a_pointer_walked_by_a_while_loop(self):
        self.assertEqual(triton_ir.ttir_accesses(WHILE_TTIR, ["x", "out", "n"]), ({"x"}, {"out"}))

    def test_an_address_computed_from_loaded_data_names_only_its_base(self):
        text = kernel_ttir([
            "%0 = tt.load %x : !tt.ptr<i32> loc(#loc1)",
            "%1 = tt.addptr %y, %0 : !tt.ptr<f32>, i32 loc(#loc2)",
            "%2 = tt.atomic_rmw fadd, acq_rel, gpu, %1, %cst : (!tt.ptr<f32>, f32) -> f32 loc(#loc3)",
        ])
        self.assertEqual(triton_ir.ttir_accesses(text, ["x", "y"]), ({"x", "y"}, {"y"}))

    def test_results_named_apart_and_branches_of_an_if(self):
        text = kernel_ttir([
            "%lo, %hi = tt.split %v : tensor<16x2x!tt.ptr<f32>> -> tensor<16x!tt.ptr<f32>> loc(#loc1)",
            "%v = tt.splat %x : !tt.ptr<f32> -> tensor<16x2x!tt.ptr<f32>> loc(#loc1)",
            "%0 = scf.if %c -> (tensor<16x!tt.ptr<f32>>) {",
            "  scf.yield %lo : tensor<16x!tt.ptr<f32>> loc(#loc2)",
            "} else {",
            "  %w = tt.splat %y : !tt.ptr<f32> -> tensor<16x!tt.ptr<f32>> loc(#loc1)",
            "  scf.yield %w : tensor<16x!tt.ptr<f32>> loc(#loc2)",
            "} loc(#loc3)",
            "tt.store %0, %cst : tensor<16x!tt.ptr<f32>> loc(#loc4)",
        ])
        self.assertEqual(triton_ir.ttir_accesses(text, ["x", "y"]), (set(), {"x", "y"}))

    def test_a_name_printed_again_in_a_sibling_region_keeps_both_values(self):
        # MLIR prints names unique only among the values in scope: `%v` is data in one branch and an address in
        # the other.
        text = kernel_ttir([
            "scf.if %c {",
            "  %v = tt.load %x : !tt.ptr<f32> loc(#loc1)",
            "} else {",
            "  %v = tt.addptr %y, %n : !tt.ptr<f32>, i32 loc(#loc2)",
            "  tt.store %v, %cst : !tt.ptr<f32> loc(#loc3)",
            "} loc(#loc4)",
        ])
        self.assertEqual(triton_ir.ttir_accesses(text, ["x", "y"]), ({"x"}, {"y"}))

    def test_arguments_are_matched_by_place_not_by_the_names_triton_prints(self):
        # Triton names an argument after the variable a branch assigns it to: here y and z both print as `p`.
        text = kernel_ttir([
            "%0 = scf.if %c -> (!tt.ptr<f32>) {",
            "  scf.yield %p : !tt.ptr<f32> loc(#loc1)",
            "} else {",
            "  scf.yield %p_0 : !tt.ptr<f32> loc(#loc1)",
            "} loc(#loc2)",
            "%1 = tt.load %x : !tt.ptr<f32> loc(#loc3)",
            "tt.store %0, %1 : !tt.ptr<f32> loc(#loc4)",
        ], '%x: !tt.ptr<f32> loc("x"(#loc)), %p: !tt.ptr<f32> loc("p"(#loc)), %p_0: !tt.ptr<f32> loc("p"(#loc)), '
           '%flag: i32 loc("flag"(#loc))')
        self.assertEqual(triton_ir.ttir_accesses(text, ["x", "y", "z", "flag"]), ({"x"}, {"y", "z"}))
        # A signature that does not match the IR's arguments is not guessed at.
        self.assertIs(triton_ir.ttir_accesses(text, ["x", "y"]), triton_ir.Unfollowed.STRUCTURE)

    def test_a_message_holding_braces_opens_no_region(self):
        text = kernel_ttir([
            "%0 = scf.for %i = %c0 to %n step %c1 iter_args(%p = %x) -> (!tt.ptr<f32>) : i32 {",
            '  tt.print " f({ " {hex = false, isSigned = array<i32: 1>} : %i : i32 loc(#loc1)',
            '  tt.assert %ok, "bad ({ }" : tensor<16xi1> loc(#loc2)',
            "  scf.yield %y : !tt.ptr<f32> loc(#loc3)",
            "} loc(#loc4)",
            "tt.store %0, %cst : !tt.ptr<f32> loc(#loc5)",
        ])
        self.assertEqual(triton_ir.ttir_accesses(text, ["x", "y"]), (set(), {"x", "y"}))

    def test_a_call_may_load_and_store_through_each_operand(self):
        text = kernel_ttir(["%0 = tt.load %x : !tt.ptr<f32> loc(#loc1)",
                            "tt.call @helper(%y, %0) : (!tt.ptr<f32>, f32) -> () loc(#loc2)"])
        self.assertEqual(triton_ir.ttir_accesses(text, ["x", "y"]), ({"x", "y"}, {"y"}))

    def test_an_early_return_branches_to_blocks_of_the_function(self):
        # A block's argument takes any value a branch passes.
        text = kernel_ttir([
            "cf.cond_br %c, ^bb1, ^bb2(%x : !tt.ptr<f32>) loc(#loc1)",
            "^bb1:  // pred: ^bb0",
            "tt.return loc(#loc2)",
            "^bb2(%p: !tt.ptr<f32> loc(#loc3)):  // pred: ^bb0",
            "ttg.barrier local loc(#loc4)",
            "tt.store %p, %cst : !tt.ptr<f32> loc(#loc5)",
        ])
        self.assertEqual(triton_ir.ttir_accesses(text, ["x", "y"]), (set(), {"x"}))

    def test_what_it_cannot_follow_gives_up(self):
        stored = "tt.store %x, %cst : !tt.ptr<f32> loc(#loc1)"
        structure, unnamed = triton_ir.Unfollowed.STRUCTURE, triton_ir.Unfollowed.UNNAMED_MEMORY
        cannot = {
            "an op of another dialect": (["llvm.store %v, %x : f32, !llvm.ptr<1> loc(#loc1)"], structure),
            "an op it does not know": (["%0 = tt.new_memory_op %x : !tt.ptr<f32> loc(#loc1)"], structure),
            "a pointer from an integer": (["%0 = tt.int_to_ptr %n : i64 -> !tt.ptr<f32> loc(#loc1)", stored], unnamed),
            "a pointer loaded from memory": (["%0 = tt.load %x : !tt.ptr<!tt.ptr<f32>> loc(#loc1)"], unnamed),
            "impure inline assembly": (['%0 = tt.elementwise_inline_asm "st.global.f32 [$1], $2;" {pure = false} %x '
                                        ': !tt.ptr<f32> -> i32 loc(#loc1)'], unnamed),
            "impure assembly whose text says pure": (['%0 = tt.elementwise_inline_asm "// pure = true" {pure = false}'
                                                      ' %v : i32 -> i32 loc(#loc1)'], unnamed),
            "pure assembly given an address": (['%0 = tt.elementwise_inline_asm "mov.b64 $0, $1;" {pure = true} %a '
                                                ': i64 -> i64 loc(#loc1)'], unnamed),
            "an impure external function": (['%0 = tt.extern_elementwise %a {libname = "", libpath = "", pure = false,'
                                             ' symbol = "store_at"} : (i32) -> i32 loc(#loc1)'], unnamed),
            "a pure external function making an address": (['%0 = tt.extern_elementwise %a {libname = "", libpath ='
                                                            ' "", pure = true, symbol = "at"} : (i64) -> !tt.ptr<f32>'
                                                            ' loc(#loc1)'], unnamed),
        }
        for what, (body, why) in cannot.items():
            self.assertIs(triton_ir.ttir_accesses(kernel_ttir(body), ["x", "y"]), why, what)
        # A function the kernel calls that makes a pointer from an integer: decided before anything else.
        helper = kernel_ttir(["tt.call @helper(%y) : (!tt.ptr<f32>) -> () loc(#loc1)"]).replace(
            "} loc(#loc)\n}", "} loc(#loc)\n  tt.func private @helper(%arg0: !tt.ptr<f32>) {\n"
            "    %0 = tt.int_to_ptr %n : i64 -> !tt.ptr<f32> loc(#loc1)\n    tt.return loc(#loc)\n  } loc(#loc)\n}")
        self.assertIs(triton_ir.ttir_accesses(helper, ["x", "y"]), unnamed, "a called function")
        # Pure inline assembly on values that hold no address computes a value, as any other op does.
        pure = kernel_ttir(['%0 = tt.elementwise_inline_asm "mov.b32 $0, $1;" {pure = true} %y : i32 -> i32 loc(#loc1)',
                            "tt.store %x, %0 : !tt.ptr<f32> loc(#loc2)"])
        self.assertEqual(triton_ir.ttir_accesses(pure, ["x", "y"]), (set(), {"x"}))


def real_triton():
    """torch and Triton, with Triton's driver replaced by one that names an sm_90 GPU (the analysis asks the
    target it compiles for), or None where either is missing."""
    try:
        import torch
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.runtime import driver
    except Exception:
        return None

    class Sm90:
        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)

        def get_active_torch_device(self):
            return torch.device("cpu")

        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

    driver.set_active(Sm90())
    return torch, triton


@unittest.skipIf(real_triton() is None, "no torch and Triton here")
class RealTritonAnalysis(unittest.TestCase):
    """Real kernels compiled by Triton (for an sm_90 target, no GPU needed): what ttir_accesses reads in their
    Triton IR, against what each kernel does and against PyTorch's own analysis, which it must never undercount."""

    @staticmethod
    def kernels():
        torch, triton = real_triton()
        import triton.language as tl

        @triton.jit
        def scale(x_ptr, y_ptr, n, ACCUMULATE: tl.constexpr, BLOCK: tl.constexpr):
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offsets < n
            value = tl.load(x_ptr + offsets, mask=mask) * 2.0
            if ACCUMULATE:
                value += tl.load(y_ptr + offsets, mask=mask)
            tl.store(y_ptr + offsets, value, mask=mask)

        @triton.jit
        def matmul(a, b, c, K, stride_k, BLOCK: tl.constexpr):
            rows = tl.arange(0, BLOCK)
            a_ptrs, b_ptrs = a + rows[:, None] * stride_k + rows[None, :], b + rows[:, None] * stride_k + rows[None, :]
            total = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
            for _ in range(0, K, BLOCK):
                total += tl.dot(tl.load(a_ptrs), tl.load(b_ptrs))
                a_ptrs += BLOCK
                b_ptrs += BLOCK * stride_k
            tl.store(c + rows[:, None] * BLOCK + rows[None, :], total)

        @triton.jit
        def gather_scatter(src, index, dst, counts, n, BLOCK: tl.constexpr):
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offsets < n
            where = tl.load(index + offsets, mask=mask, other=0)
            tl.store(dst + where, tl.load(src + offsets, mask=mask), mask=mask)
            tl.atomic_add(counts + where, 1, mask=mask)

        @triton.jit
        def swap_in_loop(p, q, out, n, BLOCK: tl.constexpr):
            offsets = tl.arange(0, BLOCK)
            first, second = p, q
            for _ in range(n):
                first, second = second, first
            tl.store(out + offsets, tl.load(first + offsets))

        @triton.jit
        def branch_store(x, a, b, flag, BLOCK: tl.constexpr):
            offsets = tl.arange(0, BLOCK)
            value = tl.load(x + offsets)
            if flag > 0:
                tl.store(a + offsets, value)
            else:
                tl.store(b + offsets, value)
            tl.device_print("value %d", tl.sum(value, axis=0))

        @triton.jit
        def while_walk(x, out, n, BLOCK: tl.constexpr):
            offsets = tl.arange(0, BLOCK)
            ptr = x
            i = 0
            while i < n:
                ptr += BLOCK
                i += 1
            tl.store(out + offsets, tl.load(ptr + offsets))

        @triton.jit
        def descriptors(x, y, n, BLOCK: tl.constexpr):
            source = tl.make_tensor_descriptor(x, shape=[n], strides=[1], block_shape=[BLOCK])
            target = tl.make_tensor_descriptor(y, shape=[n], strides=[1], block_shape=[BLOCK])
            target.store([0], source.load([0]) + 1)

        @triton.jit
        def reduce_rows(x, out, stride, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            values = tl.load(x + row * stride + offsets)
            tl.store(out + row, tl.max(values, axis=0) + tl.sum(values, axis=0))

        @triton.jit
        def select_pointer(x, a, b, BLOCK: tl.constexpr):
            offsets = tl.arange(0, BLOCK)
            value = tl.load(x + offsets)
            target = tl.where(value > 0, a + offsets, b + offsets)
            tl.store(target, value)

        @triton.jit
        def helper_store(ptr, offsets, value):
            tl.store(ptr + offsets, value)

        @triton.jit
        def inlined_helper(x, y, BLOCK: tl.constexpr):
            offsets = tl.arange(0, BLOCK)
            helper_store(y, offsets, tl.load(x + offsets))

        @triton.jit
        def nested_loops(x, y, n, m, BLOCK: tl.constexpr):
            offsets = tl.arange(0, BLOCK)
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            xp = x
            for i in range(n):
                yp = y
                for j in range(m):
                    acc += tl.load(xp + offsets) * tl.load(yp + offsets)
                    yp += BLOCK
                xp += BLOCK
            tl.store(y + offsets, acc)

        @triton.jit
        def pick(x, y, z, flag, BLOCK: tl.constexpr):
            offsets = tl.arange(0, BLOCK)
            if flag > 0:
                p = y
            else:
                p = z
            tl.store(p + offsets, tl.load(x + offsets))

        @triton.jit
        def swap_in_branches(a, b, n, BLOCK: tl.constexpr):
            offsets = tl.arange(0, BLOCK)
            if n > 0:
                a, b = b, a
            else:
                a, b = b, a
            tl.store(a + offsets, tl.load(b + offsets))

        @triton.jit
        def early_swap(p, q, x, n, BLOCK: tl.constexpr):
            offsets = tl.arange(0, BLOCK)
            if n > 100:
                return
            tl.debug_barrier()
            first, second = p, q
            for _ in range(n):
                first, second = second, first
            tl.store(first + offsets, tl.load(x + offsets))

        @triton.jit
        def grouped_early(table, x, y, n, BLOCK: tl.constexpr):
            group = tl.program_id(0)
            if group >= n:
                return
            target = tl.load(table + group).to(tl.int64).to(tl.pointer_type(tl.float32))
            tl.store(target + tl.arange(0, BLOCK), tl.load(x + tl.arange(0, BLOCK)))

        @triton.jit(noinline=True)
        def stored_by_a_call(ptr, index, value):
            tl.store(ptr + index, value)

        @triton.jit
        def calls(x, y, BLOCK: tl.constexpr):
            stored_by_a_call(y, tl.program_id(0), tl.load(x))

        return locals()

    def test_the_triton_ir_of_compiled_kernels(self):
        torch, triton = real_triton()
        from torch._higher_order_ops import triton_kernel_wrap
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        k = self.kernels()
        T, I = torch.zeros(64), torch.zeros(64, dtype=torch.int32)
        cases = [  # kernel, arguments, (tensors read, tensors written) by what the kernel does
            ("scale", dict(x_ptr=T, y_ptr=T, n=64, ACCUMULATE=False, BLOCK=16), ({"x_ptr"}, {"y_ptr"})),
            ("scale", dict(x_ptr=T, y_ptr=T, n=64, ACCUMULATE=True, BLOCK=16), ({"x_ptr", "y_ptr"}, {"y_ptr"})),
            ("matmul", dict(a=T, b=T, c=T, K=64, stride_k=16, BLOCK=16), ({"a", "b"}, {"c"})),
            ("gather_scatter", dict(src=T, index=I, dst=T, counts=I, n=64, BLOCK=16),
             ({"src", "index", "counts"}, {"dst", "counts"})),
            # After the loop either pointer may be the one loaded from (PyTorch 2.15's analysis names one).
            ("swap_in_loop", dict(p=T, q=T, out=T, n=3, BLOCK=16), ({"p", "q"}, {"out"})),
            ("branch_store", dict(x=T, a=T, b=T, flag=3, BLOCK=16), ({"x"}, {"a", "b"})),
            ("while_walk", dict(x=T, out=T, n=3, BLOCK=16), ({"x"}, {"out"})),
            ("descriptors", dict(x=T, y=T, n=64, BLOCK=16), ({"x"}, {"y"})),
            ("reduce_rows", dict(x=T, out=T, stride=16, BLOCK=16), ({"x"}, {"out"})),
            ("select_pointer", dict(x=T, a=T, b=T, BLOCK=16), ({"x"}, {"a", "b"})),
            ("inlined_helper", dict(x=T, y=T, BLOCK=16), ({"x"}, {"y"})),
            ("nested_loops", dict(x=T, y=T, n=3, m=2, BLOCK=16), ({"x", "y"}, {"y"})),
            # Triton prints y and z as `p`, and a as `b`: the IR's names are the branch's variables.
            ("pick", dict(x=T, y=T, z=T, flag=1, BLOCK=16), ({"x"}, {"y", "z"})),
            ("swap_in_branches", dict(a=T, b=T, n=3, BLOCK=16), ({"a"}, {"b"})),
            # A call to a noinline function: its operands may be loaded and stored through.
            ("calls", dict(x=T, y=T, BLOCK=16), ({"x", "y"}, {"y"})),
            # An early return (branches between blocks), a barrier, and pointers swapped in a loop after it.
            ("early_swap", dict(p=T, q=T, x=T, n=3, BLOCK=16), ({"x"}, {"p", "q"})),
            # An address loaded from a table: memory no argument names (None here: every tensor written).
            ("grouped_early", dict(table=I, x=T, y=T, n=3, BLOCK=16), None),
        ]
        launch_ops = load("streamtrace_launch_ops")
        torch_analysis = launch_ops.triton_access_analysis(torch)
        for name, arguments, expected in cases:
            kernel = k[name]
            signature = {param.name: "constexpr" if param.is_constexpr else
                         ("*i32" if arguments[param.name].dtype == torch.int32 else "*fp32")
                         if isinstance(arguments[param.name], torch.Tensor) else "i32" for param in kernel.params}
            constants = {(i,): arguments[param.name] for i, param in enumerate(kernel.params) if param.is_constexpr}
            compiled = triton.compile(ASTSource(kernel, signature, constants), target=GPUTarget("cuda", 90, 32))
            names = [key for key, kind in compiled.src.signature.items() if kind != "constexpr"]
            found = triton_ir.ttir_accesses(compiled.asm["ttir"], names)
            tensors = {key for key, value in arguments.items() if isinstance(value, torch.Tensor)}
            if expected is None:
                self.assertIs(found, triton_ir.Unfollowed.UNNAMED_MEMORY, name)
                continue
            reads, writes = (set(found[0]) & tensors, set(found[1]) & tensors)
            self.assertEqual((reads, writes), expected, name)
            theirs = torch_analysis(kernel, dict(arguments))
            self.assertTrue(set(theirs[1]) & tensors <= writes, name)
            if hasattr(triton_kernel_wrap, "identify_accessed_tensors"):
                self.assertTrue(set(theirs[0]) & tensors <= reads, name)

    def test_a_kernel_compiled_by_its_launcher(self):
        # JITFunction.run's own compile (a warm-up: no launch), as a launch under capture gets it: an int of 1 and
        # a None are compiled in as constexprs, and the IR's arguments are the signature's other parameters.
        torch, triton = real_triton()
        import triton.language as tl

        @triton.jit
        def add_scaled(x, y, n, one, maybe, BLOCK: tl.constexpr):
            offsets = tl.arange(0, BLOCK)
            tl.store(y + offsets, tl.load(x + offsets) * n + one)

        compiled = add_scaled.warmup(torch.zeros(16), torch.zeros(16), 5, 1, None, BLOCK=16, grid=(1,))
        launch_ops = load("streamtrace_launch_ops")
        ir = launch_ops._compiled_ttir(compiled, [param.name for param in add_scaled.params])
        self.assertEqual(ir[1], ["x", "y", "n"])
        self.assertEqual(triton_ir.ttir_accesses(*ir), ({"x"}, {"y"}))

    def test_pytorchs_analysis_through_the_adapter(self):
        torch, triton = real_triton()
        from torch._higher_order_ops import triton_kernel_wrap
        k = self.kernels()
        analyze = load("streamtrace_launch_ops").triton_access_analysis(torch)
        x, y = torch.zeros(64), torch.zeros(64)
        arguments = {"x_ptr": x, "y_ptr": y, "n": 64, "ACCUMULATE": False, "BLOCK": 64}
        self.assertEqual(analyze(k["scale"], arguments), ({"x_ptr"}, {"y_ptr"}))
        reads, writes = analyze(k["scale"], dict(arguments, ACCUMULATE=True))
        self.assertEqual(writes, {"y_ptr"})
        # A torch that says what is read too (identify_accessed_tensors) names the output's load; one that says
        # only what is written counts the tensors it does not write as read.
        says_reads = hasattr(triton_kernel_wrap, "identify_accessed_tensors")
        self.assertEqual(reads, {"x_ptr", "y_ptr"} if says_reads else {"x_ptr"})


if __name__ == "__main__":
    unittest.main()
