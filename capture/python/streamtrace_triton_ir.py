"""What a compiled Triton kernel loads from and stores to, read from its Triton IR text (the `ttir` that Triton
keeps with every compiled kernel, `CompiledKernel.asm["ttir"]`), for the recording of Triton's launches as ops
(streamtrace_launch_ops.py, beside this file).

The IR is read as MLIR prints it, one op a line: each value's name depends on the names its op was given, a
region op's results and block arguments on what flows into and out of its regions (scf.for by each carried
value's place), and the pointer operand of each load, store, atomic and descriptor op is traced back to the
kernel's arguments, matched by their place to the compiled signature's parameters. Names repeat across sibling
regions: a repeated name stands for every value it names, which can only add arguments, never lose one.
"""
import enum
import re

# Ops of Triton IR that touch memory through their first operand: what each does there.
_LOADS = frozenset(("tt.load", "tt.descriptor_load", "tt.descriptor_gather", "tt.experimental_descriptor_load"))
_STORES = frozenset(("tt.store", "tt.descriptor_store", "tt.descriptor_scatter", "tt.experimental_descriptor_store"))
_UPDATES = frozenset(("tt.atomic_rmw", "tt.atomic_cas", "tt.descriptor_reduce"))
# Ops of Triton's own dialect that only compute values (from their operands) or say something; any other op of
# it (a tensor map written in memory, an op added since) makes the reading give up, as does any dialect but these
# (and control flow, calls and opaque code, read below). (A
# descriptor made on the device, tt.make_tensor_descriptor, is written to scratch memory of Triton's own when
# lowered, which no other stream touches: a value here.)
_PURE_TT = frozenset((
    "tt.addptr", "tt.advance", "tt.make_tensor_ptr", "tt.make_tensor_descriptor", "tt.splat", "tt.unsplat",
    "tt.broadcast", "tt.expand_dims", "tt.reshape", "tt.trans", "tt.cat", "tt.join", "tt.split", "tt.gather",
    "tt.histogram", "tt.make_range", "tt.get_program_id", "tt.get_num_programs", "tt.dot", "tt.dot_scaled",
    "tt.reduce", "tt.reduce.return", "tt.scan", "tt.scan.return", "tt.map_elementwise",
    "tt.map_elementwise.return", "tt.print", "tt.assert", "tt.bitcast", "tt.ptr_to_int",
    "tt.fp_to_fp", "tt.clampf", "tt.precise_sqrt", "tt.precise_divf", "tt.mulhiui", "tt.return"))
_PURE_DIALECTS = ("arith.", "math.", "ub.", "llvm.intr.assume", "gpu.barrier", "ttg.barrier")
# Ops that make addresses no argument names.
_UNNAMED_MEMORY = frozenset(("tt.int_to_ptr",))
# Code this reading cannot see into: a value op only where it says it is pure and handles no address.
_OPAQUE = frozenset(("tt.elementwise_inline_asm", "tt.extern_elementwise"))
_SSA = re.compile(r"%([\w.$-]+(?:#\d+)?)")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_ARGUMENT = re.compile(r"%([\w.$-]+): ")
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


class Unfollowed(enum.Enum):
    """Why the IR could not say what a kernel touches: either way every tensor counts as written."""
    # What this reading does not follow (an op it does not know, a module without one public kernel). PyTorch's
    # analysis is not asked instead: it undercounts what this reading follows (pointers swapped in a loop, an
    # address loaded from memory).
    STRUCTURE = "structure"
    # The kernel reaches memory that no argument names (a pointer made from an integer or loaded from memory,
    # assembly or an external function that is impure or handles addresses): no analysis of the arguments can
    # say more.
    UNNAMED_MEMORY = "unnamed memory"


def _clean(text):
    """An op line without its string literals (a message may hold any character) and its trailing location."""
    text = _STRING.sub('""', text)
    cut = text.rfind(" loc(")
    return (text[:cut] if cut >= 0 else text).strip()


def _reaches_unnamed_memory(op, rest):
    """Whether an op (`rest`: its line after the name, strings and location dropped) makes or uses an address
    no argument names: a pointer from an integer, or assembly or an external function that is impure or handles
    values that can hold an address (a pointer, a 64-bit integer)."""
    if op in _UNNAMED_MEMORY:
        return True
    if op in _OPAQUE:
        return "pure = true" not in rest or "!tt.ptr" in rest or "i64" in rest
    return op == "tt.load" and "!tt.ptr<!tt.ptr" in rest


def ttir_accesses(ttir, argument_names):
    """(names read, names written): which of the kernel's arguments reach a load, and a store or an atomic, in the
    Triton IR text `ttir` of a compiled kernel (`CompiledKernel.asm["ttir"]`), whose function's arguments are, in
    order, `argument_names` (the compiled signature's parameters that are not constexprs: Triton's own names in
    the IR follow variables and cannot be trusted to name parameters). A value loaded from memory is data, not an
    address. An Unfollowed member where the IR holds what this reading cannot follow."""
    lines = ttir.splitlines()
    # Memory no argument names, anywhere in the module (a function it calls too), decides before all else.
    for line in lines:
        results, text = _results(line.strip())
        op, rest = _op_name(text)
        if _reaches_unnamed_memory(op, _clean(rest)):
            return Unfollowed.UNNAMED_MEMORY
    heads = [index for index, line in enumerate(lines) if line.lstrip().startswith("tt.func public")]
    if len(heads) != 1:
        return Unfollowed.STRUCTURE
    head = _STRING.sub('""', lines[heads[0]])
    arguments = _ARGUMENT.findall(head[head.find("(") + 1:])
    if len(arguments) != len(argument_names):
        return Unfollowed.STRUCTURE
    names = dict(zip(arguments, argument_names))
    depends, reads, writes, regions = {}, [], [], []
    # The function's own blocks past its first (an early return branches to one): their arguments, and every
    # value a branch passes on, which each of them may take.
    block_args, branched = [], []
    for line in lines[heads[0] + 1:]:
        raw = line.strip()
        if not raw:
            continue
        if raw.startswith("}"):
            if not regions:
                break  # the function's end
            if not _clean(raw).endswith("{"):  # "} else {" and "} do {" open the region op's next region
                _close(regions.pop(), depends)
            continue
        if raw.startswith("^"):  # a block's arguments, defined by the region op it belongs to
            (regions[-1].block_args if regions else block_args).extend(_SSA.findall(_clean(raw)))
            continue
        results, text = _results(raw)
        op, rest = _op_name(text)
        rest = _clean(rest)
        operands = _SSA.findall(rest)
        if op in ("scf.yield", "scf.condition") or (op.endswith(".return") and op != "tt.return"):
            if not regions:
                return Unfollowed.STRUCTURE
            regions[-1].yields.append(operands[1:] if op == "scf.condition" else operands)
            continue
        if op in ("cf.br", "cf.cond_br"):  # values passed to another block's arguments
            (regions[-1].yields.append(operands) if regions else branched.extend(operands))
            continue
        if op == "tt.call":
            # A function this reading does not enter may load and store through any of its operands.
            reads.extend(operands)
            writes.extend(operands)
            for name in results:
                depends.setdefault(name, set()).update(operands)
            continue
        if rest.endswith("{") or "({" in rest:
            carried = []
            if op in ("scf.for", "scf.while"):
                inside = rest[rest.find("(") + 1:rest.find(")")] if "(" in rest else ""
                carried = [tuple(_SSA.findall(pair)) for pair in inside.split(",") if "=" in pair]
                if any(len(pair) != 2 for pair in carried):
                    return Unfollowed.STRUCTURE
                defined = {argument for argument, _ in carried}
                if op == "scf.for" and operands:
                    defined.add(operands[0])  # the induction variable
                operands = [name for name in operands if name not in defined]
            elif op != "scf.if" and op not in _PURE_TT:
                return Unfollowed.STRUCTURE
            regions.append(_Region(op, results, operands, carried))
            continue
        if op in _LOADS or op in _STORES or op in _UPDATES:
            if not operands:
                return Unfollowed.STRUCTURE
            if op not in _STORES:
                reads.append(operands[0])
            if op not in _LOADS:
                writes.append(operands[0])
            # What it returns is data from memory, not an address: it depends on nothing here. (Printed names
            # repeat across sibling regions, so a name is never marked as data for good.)
            continue
        if not (op in _PURE_TT or op.startswith(_PURE_DIALECTS) or op in _OPAQUE):
            return Unfollowed.STRUCTURE
        for name in results:
            depends.setdefault(name, set()).update(operands)
    if regions:
        return Unfollowed.STRUCTURE
    for name in block_args:
        depends.setdefault(name, set()).update(branched)

    def parameters(sinks):
        """The names of the arguments whose values reach these operands."""
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
