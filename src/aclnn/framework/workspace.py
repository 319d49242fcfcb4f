"""The workspace a phase-1 call reports: the intermediate tensors of the operator's l0
graph, laid out as the library's executor lays them out (SPEC §14, ledger W).

An operator describes its graph as the library's op_api builds it (`Graph`): kernel nodes
in creation order, each with its inputs, its outputs that live in the workspace and its own
scratch (a kernel's tiling workspace, where the source shows one). `Graph.size` then does
what the executor's GetWorkspaceSize does (hicann/opbase: KernelGraph::TopologicalSortDFS,
CalcLifeTimeAndSize, mem_mgr MaxAllocator): nodes in depth-first topological order, each
tensor alive from its producer to its last consumer, each rounded up to
`aligned(nbytes)`, and tensors whose lifetimes do not overlap sharing a bucket; the
workspace is the sum of the buckets.

Views of the user's tensors are not in the workspace; a final ViewCopy into a contiguous
gradInput redirects the last kernel's output to gradInput (so it takes no workspace),
while a non-contiguous gradInput needs the output in the workspace plus a copy kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ALIGN_BYTES = 512  # opbase memory_allocator.h ALIGN_SIZE_IN_BYTE
EXTRA_BYTES = 32  # EXTRA_SIZE_IN_BYTE
KERNEL_SCRATCH_950 = 16 << 20  # atvoss BroadcastBaseTiling's DEFAULT_TILING_WORKSPACE_SIZE


def aligned(nbytes: int) -> int:
    """The bytes the allocator reserves for a tensor of `nbytes`."""
    return (nbytes + EXTRA_BYTES + ALIGN_BYTES - 1) // ALIGN_BYTES * ALIGN_BYTES


@dataclass
class _Tensor:
    nbytes: int
    producer: int
    in_workspace: bool = True
    consumers: list[int] = field(default_factory=list)
    start: int = 0
    end: int = 0


@dataclass
class _Node:
    inputs: list[int]
    outputs: list[int]
    scratch: list[int]


class Graph:
    """An operator's l0 graph, as far as its workspace goes.

    A value is a workspace tensor's id (an int) or None for a user tensor (or a view of
    one), which takes no workspace.
    """

    def __init__(self) -> None:
        self._tensors: list[_Tensor] = []
        self._nodes: list[_Node] = []

    def kernel(self, inputs: list[int | None], outputs: list[int],
               scratch: int = 0) -> list[int]:
        """Add a kernel reading `inputs` and writing workspace tensors of `outputs` bytes
        (with `scratch` bytes of its own workspace); the ids of its outputs."""
        index = len(self._nodes)
        node = _Node([v for v in inputs if v is not None], [], [])
        for value in node.inputs:
            self._tensors[value].consumers.append(index)
        for nbytes in outputs:
            node.outputs.append(self._new(nbytes, index))
        if scratch:
            node.scratch.append(self._new(scratch, index))
        self._nodes.append(node)
        return node.outputs

    def redirect(self, value: int | None) -> None:
        """The kernel output `value` is written to the user's tensor instead (ViewCopy into
        a contiguous output): it takes no workspace."""
        if value is not None:
            self._tensors[value].in_workspace = False

    def _new(self, nbytes: int, producer: int) -> int:
        self._tensors.append(_Tensor(nbytes, producer))
        return len(self._tensors) - 1

    def _order(self) -> list[int]:
        """The nodes in the executor's depth-first topological order."""
        indegree = [0] * len(self._nodes)
        for node in self._nodes:
            for out in node.outputs:
                for consumer in self._tensors[out].consumers:
                    indegree[consumer] += 1
        stack = [i for i in reversed(range(len(self._nodes))) if indegree[i] == 0]
        order = []
        while stack:
            index = stack.pop()
            order.append(index)
            for out in self._nodes[index].outputs:
                for consumer in self._tensors[out].consumers:
                    indegree[consumer] -= 1
                    if indegree[consumer] == 0:
                        stack.append(consumer)
        return order

    def size(self) -> int:
        """The workspace size in bytes (0 for a graph without workspace tensors)."""
        order = self._order()
        topo = {node: position for position, node in enumerate(order)}
        sorted_tensors: list[_Tensor] = []
        for index in order:
            node = self._nodes[index]
            for value in node.scratch + node.outputs:
                tensor = self._tensors[value]
                if not tensor.in_workspace:
                    continue
                tensor.start = topo[index]
                tensor.end = max([tensor.start] + [topo[c] for c in tensor.consumers])
                sorted_tensors.append(tensor)
        buckets: list[list[_Tensor]] = []
        for tensor in sorted_tensors:
            fit = None
            for position, bucket in enumerate(buckets):
                if _reusable(bucket[-1], tensor):
                    fit = position  # the last bucket that fits, as the allocator picks it
            if fit is None:
                buckets.append([tensor])
            else:
                buckets[fit].append(tensor)
        return sum(max(aligned(t.nbytes) for t in bucket) for bucket in buckets)


def _reusable(last: _Tensor, tensor: _Tensor) -> bool:
    """Whether `tensor` may share the bucket whose latest tensor is `last`."""
    if last.start == tensor.start:
        return False  # made by one kernel: distinct memory
    if tensor.start > last.start:
        apart = last.end < tensor.start
    else:
        apart = tensor.end < last.start
    return apart and tensor.producer not in last.consumers
