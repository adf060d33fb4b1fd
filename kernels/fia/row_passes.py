"""Row passes: an FIA row task taken in passes of fewer rows when its tiles do not fit on chip.

Model
-----
op_host's tiling gives each core row tasks of up to M rows (the M base). When the kernel's tiles for M rows
exceed the on-chip budget (``BudgetError`` from the specialisation), the chip keeps a tall task's
accumulator in its GM workspace; the simulated kernel instead takes the task's rows in consecutive passes of
a smaller height on the same core (``launch_in_row_passes``): halves of M, 16-aligned, down to one cube
fractal (``MIN_ROW_PASS``). Each pass is a row of the kernels' task table (``TASK_COLUMNS`` columns) whose
last column is the pass's first row within the task's workspace slot.

Invariants
----------
* Every row's arithmetic, its S2 blocks and their order are those of the whole task; only the rows a tile
  holds change (each pass re-reads the task's K/V).
* The passes of a task stay on the task's core, in row order, so the per-core task order is unchanged.
* An empty task is one pass (``row_pass_offsets``), so the kernel still writes its empty rows.
"""

from __future__ import annotations

import numpy as np

from ...dsl.errors import BudgetError

__all__ = ["TASK_COLUMNS", "MIN_ROW_PASS", "row_pass_heights", "row_pass_offsets", "split_row_passes",
           "launch_in_row_passes"]

#: columns of the kernels' task table: b, n2, first folded row, rows, S2 block run [j0, j1), workspace slot (-1:
#: a whole row), the blocks' first KV position, end and size (``kernel.task_span``), and the task's first row
#: within its slot (a row pass, ``split_row_passes``)
TASK_COLUMNS = 11
#: the fewest rows a row pass takes (a cube fractal's height) before a call whose tiles do not fit is refused
MIN_ROW_PASS = 16


def row_pass_heights(m_cap: int):
    """The tile heights tried for a row task of up to ``m_cap`` rows: op_host's M (the whole task at once),
    then halves (16-aligned) down to ``MIN_ROW_PASS``."""
    height = m_cap
    yield height
    while height > MIN_ROW_PASS:
        height = max(MIN_ROW_PASS, -(-(height // 2) // 16) * 16)
        yield height


def row_pass_offsets(rows: int, height: int) -> range:
    """The first rows (within its task) of the row passes of at most ``height`` rows that a task of ``rows``
    rows is taken in (one pass for an empty task)."""
    return range(0, max(rows, 1), height)


def split_row_passes(tasks: np.ndarray, ptr: np.ndarray, height: int) -> tuple:
    """Each row task as consecutive passes of at most ``height`` rows on the same core, in order: the same
    batch, head, S2 run and workspace slot, its first row within the slot in the last column. Returns the new
    (tasks, ptr)."""
    passes, new_ptr = [], [0]
    for core in range(len(ptr) - 1):
        for t in range(int(ptr[core]), int(ptr[core + 1])):
            rows = int(tasks[t, 3])
            for h in row_pass_offsets(rows, height):
                part = tasks[t].copy()
                part[2], part[3], part[TASK_COLUMNS - 1] = tasks[t, 2] + h, min(height, rows - h), h
                passes.append(part)
        new_ptr.append(len(passes))
    table = np.array(passes, dtype=np.int64).reshape(-1, TASK_COLUMNS) if passes else tasks
    return table, np.array(new_ptr, dtype=np.int64)


def launch_in_row_passes(launch, tasks: np.ndarray, ptr: np.ndarray, m_cap: int) -> None:
    """``launch(tasks, ptr, height)`` with op_host's row tasks whole when the kernel's tiles fit on chip, else
    in row passes of the first height of ``row_pass_heights`` that fits (the chip keeps a tall task's
    accumulator in its GM workspace; the simulated kernel takes the task's rows in passes instead: every row's
    arithmetic, its S2 blocks and their order are unchanged, each pass re-reads the task's K/V). The last
    ``BudgetError`` propagates when none fits. A height that did not fit is not compiled again on a later call:
    the kernel cache keeps the error under the specialisation's key (``dsl.jit``)."""
    for height in row_pass_heights(m_cap):
        table, table_ptr = (tasks, ptr) if height == m_cap else split_row_passes(tasks, ptr, height)
        try:
            return launch(table, table_ptr, height)
        except BudgetError:
            if height <= MIN_ROW_PASS:
                raise
