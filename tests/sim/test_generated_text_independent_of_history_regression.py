"""Regression: the generated simulator module of a kernel depended on what the process had traced before it.

Its variable and buffer names carried the IR values' process-wide ids (``s_363``, ``buf_1943``), and the kernel
cache finds a module by the digest of its text. So a kernel specialisation traced after other kernels got
another text than the same specialisation traced first: another module, compiled again, in every process whose
history differed (a process that ran a decode and then a prefill, then one that ran the prefill alone, compiled
the prefill twice). Names are now numbered per program in the order the generator names them
(``codegen._Gen.number``). Checked here in fresh processes with different histories: the FIA prefill kernel's
program-order, pipelined-order and checked modules are the same texts (nothing is compiled: generating the text
is enough).
"""

from __future__ import annotations

import json
import subprocess
import sys

_CHILD = r"""
import json, sys
import numpy as np
import cvtile
from cvtile.dsl.jit import record_launches
from cvtile.sim.checking import CheckMode

def kernel(sq):
    q = np.zeros((1, 4, sq, 64), np.float16)
    k = np.zeros((1, 4, 512, 64), np.float16)
    with record_launches(run=False) as rec:
        cvtile.npu_fused_infer_attention_score(q, k, k, num_heads=4, num_key_value_heads=4, input_layout="BNSD",
                                               scale=0.125)
    return rec.launches[0].kernel

for sq in map(int, sys.argv[1:-1]):   # the history: other kernels traced first
    kernel(sq)
ck = kernel(int(sys.argv[-1]))
print(json.dumps([ck.numba_source, ck.pipelined_source, ck.runner("numba").variant(CheckMode()).generated.text]))
"""


def _texts(*seqlens) -> list:
    out = subprocess.run([sys.executable, "-c", _CHILD, *map(str, seqlens)], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_kernel_generates_the_same_module_whatever_the_process_traced_before():
    alone = _texts(512)               # the prefill kernel first
    after = _texts(1, 16, 512)        # after a decode and a short call
    for a, b in zip(alone, after):
        assert a == b
