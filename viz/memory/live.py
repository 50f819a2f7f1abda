"""Each buffer's live range over the schedule, as XLA's `HloLiveRange` computes it.

The schedule is flattened the way XLA flattens it for a module-wide analysis: the
ENTRY's instructions in order, a while loop's condition then body placed just
before the loop instruction, a conditional's branches and a call's computation just
before theirs. Position t is the t-th instruction of that sequence.

A buffer is live from its defining instruction (a computation's parameter: from the
computation's start) to its last use: the last instruction that reads it at any place
it flows to (through tuples, get-tuple-element, bitcasts, loops, calls and branches),
where a loop reading its initial value counts as the loop body's start, and a
computation's root holds its values to the computation's end. The ENTRY's
parameters live to the end of the program unless an output may overwrite them
(donation). Buffers sharing one slot (`Assignment.shared`) are made to follow one
another: each ends where the next begins. On the programs of `tests/test_memory.py`
these ranges equal XLA's own dump (`*-live-range.txt`) buffer for buffer.
No jax.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import pairwise

from viz.memory.xla import Assignment, Instruction, Module, ShapeIndex

# opcodes whose result at an index is an operand's value there (they define nothing)
FORWARDS = frozenset(("bitcast", "domain", "opt-barrier", "optimization-barrier", "add-dependency"))
CALLS = frozenset(("call", "conditional", "async-start"))  # their computations run before them
NEVER_READ = frozenset(("tuple", "domain"))  # they pass their operands on, never read them
TOP_LEVEL_ONLY = frozenset(("get-tuple-element", "copy"))  # read only a tuple's own table


@dataclass(frozen=True)
class Schedule:
    """The flattened schedule: instruction ids in order, each one's position, and each
    computation's span [start, end) of positions."""

    order: list[int]
    position: dict[int, int]
    span: dict[int, tuple[int, int]]

    @property
    def end(self) -> int:
        return len(self.order)


def flatten(module: Module) -> Schedule:
    order: list[int] = []
    span: dict[int, tuple[int, int]] = {}

    def walk(cid: int) -> None:
        if cid in span or cid not in module.schedule:
            return
        start = len(order)
        span[cid] = (start, start)  # a computation called twice is flattened once
        for iid in module.schedule[cid]:
            inst = module.instructions[iid]
            if inst.opcode in CALLS:
                for called in inst.called:
                    walk(called)
            elif inst.opcode == "while":
                body, condition = _loop(inst)
                walk(condition)
                walk(body)
            order.append(iid)
        span[cid] = (start, len(order))

    walk(module.entry)
    return Schedule(order, {iid: t for t, iid in enumerate(order)}, span)


def _loop(inst: Instruction) -> tuple[int, int]:
    """A while loop's (body, condition): XLA lists the body first."""
    return inst.called[0], inst.called[1]


Place = tuple[int, ShapeIndex]  # an instruction and a shape index of its result


def places(module: Module, schedule: Schedule, assignment: Assignment) -> dict[int, list[Place]]:
    """Every place each buffer is found at, its definition first: where it is defined
    and where it flows to (HLO's dataflow: a tuple holds its operands' values, a
    get-tuple-element its operand's element, a loop its initial and its body's values,
    a computation's parameter its caller's operand)."""
    defined = {(b.instruction, b.index): b.id for b in assignment.buffers.values()}
    found: dict[Place, frozenset[int]] = {}
    callers: dict[int, list[Instruction]] = defaultdict(list)
    for inst in module.instructions.values():
        for called in inst.called:
            callers[called].append(inst)
    roots = {cid: c.root for cid, c in module.computations.items()}

    def at(iid: int, index: ShapeIndex) -> frozenset[int]:
        return found.get((iid, index), frozenset())

    def flows(inst: Instruction, index: ShapeIndex) -> frozenset[int]:
        op, operands = inst.opcode, inst.operands
        if op == "get-tuple-element":
            return at(operands[0], (inst.tuple_index, *index))
        if op == "tuple":
            return at(operands[index[0]], index[1:]) if index else frozenset()
        if op in FORWARDS:
            return at(operands[0], index)
        if op == "while":
            return at(operands[0], index) | at(roots[_loop(inst)[0]], index)
        if op in ("call", "conditional"):
            return frozenset().union(*(at(roots[c], index) for c in inst.called))
        if op == "async-start":  # ((operands), its computation's result, context)
            return _async_start(inst, index, at, roots)
        if op == "async-done":  # the result its start holds
            return at(operands[0], (1, *index))
        if op == "copy-start" and index[:1] == (1,):  # (destination, source, context)
            return at(operands[0], index[1:])
        if op == "copy-done":  # the destination its start holds, the source read till then
            return at(operands[0], (0, *index))
        if op == "parameter" and inst.computation != module.entry:
            return _from_callers(inst, index, callers[inst.computation], at, roots)
        return frozenset()

    # a loop feeds its body's results back to its parameter: repeat until nothing moves
    loops = any(module.instructions[i].opcode == "while" for i in schedule.order)
    changed = True
    while changed:
        changed = False
        for iid in schedule.order:
            inst = module.instructions[iid]
            for index in inst.indices():
                own = defined.get((iid, index))
                value = frozenset((own,)) if own is not None else flows(inst, index)
                if value != found.get((iid, index), frozenset()):
                    found[(iid, index)] = value
                    changed = loops
    by_buffer: dict[int, list[Place]] = defaultdict(list)
    for place, held in found.items():
        for bid in held:
            by_buffer[bid].append(place)
    for bid, held in by_buffer.items():  # the definition first
        if len(held) > 1:  # most buffers are found where they are defined alone
            buffer = assignment.buffers[bid]
            held.sort(key=lambda p: p != (buffer.instruction, buffer.index))
    return by_buffer


def _async_start(inst: Instruction, index: ShapeIndex, at, roots) -> frozenset[int]:
    """An async-start's tuple: its operands at {0, i}, the result of the computation it
    wraps at {1} (its context, {2}, is its own)."""
    if len(index) >= 2 and index[0] == 0 and index[1] < len(inst.operands):
        return at(inst.operands[index[1]], index[2:])
    if index and index[0] == 1:
        return frozenset().union(*(at(roots[c], index[1:]) for c in inst.called))
    return frozenset()


def _from_callers(
    param: Instruction, index: ShapeIndex, callers: list[Instruction], at, roots
) -> frozenset[int]:
    """A called computation's parameter: its caller's operand (and a loop's body result)."""
    held: frozenset[int] = frozenset()
    for caller in callers:
        if caller.opcode == "while":
            held |= at(caller.operands[0], index) | at(roots[_loop(caller)[0]], index)
        elif caller.opcode in ("call", "async-start") and param.parameter < len(caller.operands):
            held |= at(caller.operands[param.parameter], index)
        elif caller.opcode == "conditional" and param.computation in caller.called:
            branch = caller.called.index(param.computation)
            held |= at(caller.operands[branch + 1], index)
    return held


def live_ranges(module: Module, assignment: Assignment, schedule: Schedule) -> dict[int, list[int]]:
    """buffer id → [start, end] (both inclusive) over the flattened schedule, for the
    buffers of the scheduled computations (a reducer's thread-local scalars have none)."""
    found = places(module, schedule, assignment)
    users: dict[int, list[int]] = defaultdict(list)
    for inst in module.instructions.values():
        for operand in dict.fromkeys(inst.operands):
            users[operand].append(inst.id)
    roots = {c.root for cid, c in module.computations.items() if cid in schedule.span}
    body_parameters = {  # computation → its parameter 0, where a loop body takes its state
        i.computation: i.id
        for i in module.instructions.values()
        if i.opcode == "parameter" and i.parameter == 0
    }
    ranges: dict[int, list[int]] = {}
    for bid, buffer in assignment.buffers.items():
        inst = module.instructions.get(buffer.instruction)
        if inst is None or buffer.allocation < 0 or inst.id not in schedule.position:
            continue
        held = found.get(bid, [(inst.id, buffer.index)])
        ranges[bid] = _range(
            inst, buffer.index, held, module, schedule, roots, users, body_parameters
        )
    _follow_one_another(ranges, assignment)
    return ranges


def _range(
    inst: Instruction,
    index: ShapeIndex,
    held: list[Place],
    module: Module,
    schedule: Schedule,
    roots: set[int],
    users: dict[int, list[int]],
    body_parameters: dict[int, int],
) -> list[int]:
    position, span = schedule.position, schedule.span
    computation = span[inst.computation]
    start = computation[0] if inst.opcode == "parameter" else position[inst.id]
    end = computation[1] if inst.id in roots else position[inst.id]
    for place, _ in held[1:]:  # a computation's root holds it to the computation's end
        where = module.instructions[place]
        if place in roots:
            end = max(end, span[where.computation][1])
        elif place in position:
            end = max(end, position[place])
    entry_parameter = inst.opcode == "parameter" and inst.computation == module.entry
    if entry_parameter and (inst.parameter, index) not in module.aliased_parameters:
        return [start, schedule.end]
    at_roots = {place for place, _ in held if place in roots}
    for place, at in held:
        for uid in users[place]:
            user = module.instructions[uid]
            end = max(end, _use_time(user, at, at_roots, schedule, body_parameters))
    return [start, end]


def _use_time(
    user: Instruction,
    index: ShapeIndex,
    at_roots: set[int],
    schedule: Schedule,
    body_parameters: dict[int, int],
) -> int:
    """When `user` reads a value found at `index` of its operand (-1: it does not)."""
    passes_on = user.opcode in NEVER_READ or (user.opcode in TOP_LEVEL_ONLY and index)
    if passes_on and user.id not in at_roots:
        return -1
    if user.opcode in ("call", "async-start"):  # its computation's instructions read it
        return -1
    if user.opcode == "while":  # read as the body takes it in: at its parameter
        return schedule.position.get(body_parameters.get(_loop(user)[0], -1), -1)
    return schedule.position.get(user.id, -1)


def _follow_one_another(ranges: dict[int, list[int]], assignment: Assignment) -> None:
    """Buffers sharing one slot, ordered by (start, end, id): each one ends where the
    next begins, and the last ends where the latest of them ended."""
    parent: dict[int, int] = {}

    def root(bid: int) -> int:
        while parent.setdefault(bid, bid) != bid:
            bid = parent[bid]
        return bid

    for a, b in assignment.shared:
        if a in ranges and b in ranges:
            parent[root(a)] = root(b)
    groups: dict[int, list[int]] = defaultdict(list)
    for bid in parent:
        groups[root(bid)].append(bid)
    for held in groups.values():
        held.sort(key=lambda b: (*ranges[b], b))
        for first, second in pairwise(held):
            ranges[second][1] = max(ranges[first][1], ranges[second][1])
            ranges[first][1] = min(ranges[first][1], ranges[second][0])
