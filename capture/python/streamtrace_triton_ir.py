"""What a compiled Triton kernel loads from and stores to, read from its Triton IR text (the `ttir` that Triton
keeps with every compiled kernel, `CompiledKernel.asm["ttir"]`), for the recording of Triton's launches as ops
(streamtrace_launch_ops.py, beside this file).

The IR is read as MLIR prints it, one op a line: each value's name depends on the names its op was given, a
region op's results and block arguments on what flows into and out of its regions (scf.for by each carried
value's place), and the pointer operand of each load, store, atomic and descriptor op is traced back to the
kernel's arguments, which Triton prints under their Python names. Names repeat across sibling regions: a repeated
name stands for every value it names, which can only add arguments, never lose one.
"""
import re

# Ops of Triton IR that touch memory through their first operand: what each does there.
_LOADS = frozenset(("tt.load", "tt.descriptor_load", "tt.descriptor_gather", "tt.experimental_descriptor_load"))
_STORES = frozenset(("tt.store", "tt.descriptor_store", "tt.descriptor_scatter", "tt.experimental_descriptor_store"))
_UPDATES = frozenset(("tt.atomic_rmw", "tt.atomic_cas", "tt.descriptor_reduce"))
# Ops of Triton's own dialect that only compute values (from their operands) or say something; any other op of
# it (a call, inline assembly, a pointer made from an integer, a tensor map written in memory) makes the reading
# give up, as does any dialect but these.
_PURE_TT = frozenset((
    "tt.addptr", "tt.advance", "tt.make_tensor_ptr", "tt.make_tensor_descriptor", "tt.splat", "tt.unsplat",
    "tt.broadcast", "tt.expand_dims", "tt.reshape", "tt.trans", "tt.cat", "tt.join", "tt.split", "tt.gather",
    "tt.histogram", "tt.make_range", "tt.get_program_id", "tt.get_num_programs", "tt.dot", "tt.dot_scaled",
    "tt.reduce", "tt.reduce.return", "tt.scan", "tt.scan.return", "tt.map_elementwise",
    "tt.map_elementwise.return", "tt.extern_elementwise", "tt.print", "tt.assert", "tt.bitcast", "tt.ptr_to_int",
    "tt.fp_to_fp", "tt.clampf", "tt.precise_sqrt", "tt.precise_divf", "tt.mulhiui", "tt.return"))
_PURE_DIALECTS = ("arith.", "math.", "ub.", "llvm.intr.assume", "gpu.barrier")
_SSA = re.compile(r"%([\w.$-]+(?:#\d+)?)")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_ARGUMENT = re.compile(r"%([\w.$-]+): ")
_NAMED_ARGUMENT = re.compile(r'%([\w.$-]+): [^%]*?loc\("([^"]*)"')
_OP = re.compile(r"[\w.]+")  # an op's name, before its operands (`scf.condition(%c) ...`)
_RESULT = re.compile(r"%([\w.$-]+)(?::(\d+))?")


class _Region:
    """A region op being read (scf.for, scf.if, scf.while, tt.reduce...): its results, the values it passes in
    (loop-carried initial values) and out (yields), and the block arguments its regions define."""

    def __init__(self, name, results, operands, carried):
        self.name, self.results, self.operands = name, results, operands
        self.carried = carried  # [(block argument, initial value)] of scf.for's iter_args, scf.while's arguments
        self.block_args = []
        self.yields = []  # the operand lists of its yields


def _close(region, depends):
    """Each result and block argument of a region op depends on what flows into it: for scf.for, by position
    (the initial value and the yielded value of its place); for any other, everything that flows in or out."""
    if region.name == "scf.for" and all(len(y) == len(region.carried) == len(region.results) for y in region.yields):
        for index, (argument, initial) in enumerate(region.carried):
            sources = {initial} | {y[index] for y in region.yields}
            depends.setdefault(argument, set()).update(sources)
            depends.setdefault(region.results[index], set()).update(sources)
        return
    sources = set(region.operands) | {initial for _, initial in region.carried}
    for values in region.yields:
        sources.update(values)
    for name in region.results + [argument for argument, _ in region.carried] + region.block_args:
        depends.setdefault(name, set()).update(sources)


def _results(text):
    """The names an op's line defines (`%a = `, `%a:3 = ` as a#0..a#2, `%a, %b = `) and the rest of the line."""
    if not text.startswith("%") or " = " not in text:
        return [], text
    left, right = text.split(" = ", 1)
    names = []
    for part in left.split(", "):
        found = _RESULT.fullmatch(part)
        if not found:
            return [], text
        count = found.group(2)
        names += ["%s#%d" % (found.group(1), i) for i in range(int(count))] if count else [found.group(1)]
    return names, right


def _op_name(text):
    """An op line's op name (its generic form quotes it) and the line after it."""
    if text.startswith('"'):
        end = text.find('"', 1)
        return text[1:end], text[end + 1:]
    found = _OP.match(text)
    return (found.group(0), text[found.end():]) if found else ("", text)


def ttir_accesses(ttir):
    """(names read, names written): the kernel's parameters, by their Python names, whose pointers reach a load,
    and a store or an atomic, in the Triton IR text `ttir` of a compiled kernel (`CompiledKernel.asm["ttir"]`);
    a value loaded from memory is data, not an address. None where the text holds what this reading cannot
    follow: more than one function, a call, inline assembly, a pointer made from an integer or loaded from memory,
    an op it does not know, or arguments without their Python names (Triton before it named them)."""
    lines = ttir.splitlines()
    heads = [index for index, line in enumerate(lines) if line.lstrip().startswith("tt.func")]
    if len(heads) != 1:
        return None
    head = lines[heads[0]]
    signature = head[head.find("(") + 1:]
    names = dict(_NAMED_ARGUMENT.findall(signature))
    if len(names) != len(_ARGUMENT.findall(signature)):
        return None
    depends, reads, writes, regions = {}, [], [], []
    for line in lines[heads[0] + 1:]:
        text = line.strip()
        cut = text.rfind(" loc(")
        text = text[:cut] if cut >= 0 else text
        if not text:
            continue
        if text.startswith("}"):
            if not regions:
                break  # the function's end
            if not text.endswith("{"):  # "} else {" and "} do {" open the region op's next region
                _close(regions.pop(), depends)
            continue
        if text.startswith("^"):  # a block's arguments, defined by the region op it belongs to
            if not regions:
                return None
            regions[-1].block_args.extend(_SSA.findall(text))
            continue
        results, text = _results(text)
        op, rest = _op_name(text)
        operands = _SSA.findall(_STRING.sub("", rest))
        if op in ("scf.yield", "scf.condition") or (op.endswith(".return") and op != "tt.return"):
            if not regions:
                return None
            regions[-1].yields.append(operands[1:] if op == "scf.condition" else operands)
            continue
        if text.endswith("{") or "({" in text:
            carried = []
            if op in ("scf.for", "scf.while"):
                inside = rest[rest.find("(") + 1:rest.find(")")] if "(" in rest else ""
                carried = [tuple(_SSA.findall(pair)) for pair in inside.split(",") if "=" in pair]
                if any(len(pair) != 2 for pair in carried):
                    return None
                defined = {argument for argument, _ in carried}
                if op == "scf.for" and operands:
                    defined.add(operands[0])  # the induction variable
                operands = [name for name in operands if name not in defined]
            elif op != "scf.if" and op not in _PURE_TT:
                return None
            regions.append(_Region(op, results, operands, carried))
            continue
        if op in _LOADS or op in _STORES or op in _UPDATES:
            if not operands or (op == "tt.load" and "!tt.ptr<!tt.ptr" in rest):
                return None
            if op not in _STORES:
                reads.append(operands[0])
            if op not in _LOADS:
                writes.append(operands[0])
            # What it returns is data from memory, not an address: it depends on nothing here. (Printed names
            # repeat across sibling regions, so a name is never marked as data for good.)
            continue
        if not (op in _PURE_TT or op.startswith(_PURE_DIALECTS)
                or (op == "tt.elementwise_inline_asm" and "pure = true" in rest)):
            return None
        for name in results:
            depends.setdefault(name, set()).update(operands)
    if regions:
        return None

    def parameters(sinks):
        """The Python names of the parameters whose values reach these operands."""
        found, seen, stack = set(), set(), list(sinks)
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in names:
                found.add(names[name])
            stack.extend(depends.get(name, ()))
        return frozenset(found)

    return parameters(reads), parameters(writes)
